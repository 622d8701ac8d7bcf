"""Our SSH connections send no empty SSH_MSG_IGNORE before each packet (htc.wire.ssh_tuning):
with AES-GCM (the default) neither the client nor the shared port sends one, while a message
still travels both ways intact; the wrapper leaves packets alone for a cipher that chains its IV.

Everything is real and in one process: the shared port's SSH server on 127.0.0.1, a daemon on its
Unix socket behind it, and an SshTransport logging in anonymously (trust on first use)."""

from __future__ import annotations

import asyncio
import collections

import asyncssh
from asyncssh.connection import SSHConnection
from asyncssh.constants import MSG_IGNORE

from htc.wire import messages as m
from htc.wire import ssh_server
from htc.wire.ssh_client import SshOptions, SshTransport
from htc.wire.ssh_tuning import skip_ignore_packets
from htc.wire.transport import UnixTransport


def test_no_ignore_packet_travels_with_the_messages(tmp_path, monkeypatch):
    received: collections.Counter = collections.Counter()
    handle_ignore = SSHConnection._packet_handlers[MSG_IGNORE]

    def counting(conn, *args):
        received["client" if conn.is_client() else "server"] += 1
        return handle_ignore(conn, *args)

    monkeypatch.setitem(SSHConnection._packet_handlers, MSG_IGNORE, counting)
    sockets = tmp_path / "sockets"
    sockets.mkdir()

    async def echo(conn) -> None:
        while True:
            msg = await conn.recv()
            await conn.send(m.Ack(detail=msg.detail))

    async def scenario() -> None:
        server = ssh_server.SharedPortServer(sockets, asyncssh.generate_private_key("ssh-ed25519"),
                                             lambda token: None)
        async with asyncio.TaskGroup() as tg:
            daemon = await UnixTransport(sockets).start_server("echo", echo, task_group=tg)
            await server.start("127.0.0.1", 0)
            transport = SshTransport(lambda: None, SshOptions(known_hosts_file=str(tmp_path / "known_hosts")))
            try:
                async with await transport.open_connection(f"<127.0.0.1:{server.port}?sock=echo>") as conn:
                    for i in range(50):
                        await conn.send(m.Ack(detail=f"call {i}"))
                        reply = await conn.recv(timeout=30)
                        assert reply == m.Ack(detail=f"call {i}")
                    cached = transport.cached("127.0.0.1", server.port)
                    assert cached.get_extra_info("send_cipher") == "aes128-gcm@openssh.com"
            finally:
                await transport.aclose()
                await server.aclose()
                await daemon.aclose()

    asyncio.run(scenario())
    assert received == {}, f"ignore packets received: {dict(received)}"


class _FakeConn:
    """What skip_ignore_packets touches of a connection: send_packet and its send cipher."""

    def __init__(self, cipher: str):
        self.cipher = cipher
        self.sent: list[int] = []

    def get_extra_info(self, name: str):
        return self.cipher if name == "send_cipher" else None

    def send_packet(self, pkttype: int, *args: bytes, handler=None) -> None:
        self.sent.append(pkttype)


def test_a_cipher_that_chains_its_iv_keeps_the_ignore_packet():
    from asyncssh.packet import String

    for cipher, expected in (("aes128-cbc", [MSG_IGNORE, 94]), ("aes128-gcm@openssh.com", [94])):
        conn = _FakeConn(cipher)
        skip_ignore_packets(conn)
        skip_ignore_packets(conn)  # idempotent
        conn.send_packet(MSG_IGNORE, String(b""))
        conn.send_packet(94, b"data")
        assert conn.sent == expected, cipher
    conn = _FakeConn("aes128-gcm@openssh.com")
    skip_ignore_packets(conn)
    conn.send_packet(MSG_IGNORE, String(b"padding"))  # one asked for on purpose still goes
    assert conn.sent == [MSG_IGNORE]
