"""Per-packet work asyncssh does that our SSH connections do not need, turned off per connection.

Theory of operation
-------------------
Before every channel or request packet it sends on an encrypted connection, asyncssh sends an
empty ``SSH_MSG_IGNORE`` packet (``SSHConnection.send_packet``): the 2002 countermeasure to the
chosen-plaintext attack on SSH's CBC mode, whose next IV is the last ciphertext block. The
modes htc negotiates (:data:`htc.wire.ssh_client.DEFAULT_CIPHERS`: AES-GCM, chacha20-poly1305)
take a fresh nonce per packet and have no such IV; OpenSSH sends no such packet with them. The
ignore packet is encrypted, written to the socket (its own ``send`` system call and TCP segment),
decrypted and dispatched at the other end: per small message it doubled the packets on the
wire and the socket writes of both the client and the shared port, which relays every executor
call (benchmarks/remote_cpu_bench.py).

:func:`skip_ignore_packets` wraps one connection's ``send_packet`` (the instance attribute,
which asyncssh's own recursive call goes through) so that the empty ignore packet is dropped
while the negotiated send cipher is one of :data:`NO_IV_CHAINING`; with any other cipher (a
CBC mode configured through ``SSH_CIPHERS``) every packet goes out as asyncssh made it.
Nothing else changes: the sequence numbers count only packets sent, so the peer sees an
ordinary stream; received packets are checked exactly as before.
"""

from __future__ import annotations

from asyncssh.constants import MSG_IGNORE
from asyncssh.packet import String

__all__ = ["NO_IV_CHAINING", "skip_ignore_packets"]

#: ciphers with a fresh nonce or counter per packet: the CBC countermeasure does nothing for them
NO_IV_CHAINING = frozenset({
    "aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
    "aes128-ctr", "aes192-ctr", "aes256-ctr",
})

_EMPTY = String(b"")


def skip_ignore_packets(conn) -> None:
    """Drop the empty ``SSH_MSG_IGNORE`` asyncssh puts before each packet of ``conn`` (an
    ``asyncssh.SSHClientConnection`` or ``SSHServerConnection``) while its send cipher chains
    no IV (module docstring). Idempotent."""
    if getattr(conn, "_htc_ignore_skipped", False):
        return
    send_packet = conn.send_packet  # the class's, bound

    def send(pkttype: int, *args: bytes, handler=None) -> None:
        if pkttype == MSG_IGNORE and args == (_EMPTY,) and conn.get_extra_info("send_cipher") in NO_IV_CHAINING:
            return
        send_packet(pkttype, *args, handler=handler)

    conn.send_packet = send
    conn._htc_ignore_skipped = True
