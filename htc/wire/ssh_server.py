"""The server side of the network transport: one SSH port per host, channels piped to daemons.

Theory of operation
-------------------
:class:`SharedPortServer` is the asyncssh server the ``shared_port`` daemon runs on
SHARED_PORT_PORT (HTCondor's condor_shared_port plays the same part). A client logs in once per
SSH connection and then opens one session channel per conversation, naming the daemon it wants
as the channel's *subsystem* (``schedd``, ``collector``, ...).

**Login.** The SSH password is an identity token (:mod:`htc.wire.tokens`), checked by the
``verify_token`` callable the daemon gives (signature with the pool key, issuer =
TRUST_DOMAIN). The token's ``sub`` becomes the connection's identity, proved by ``"pool"`` when it
is the pool's own ``condor_pool@...`` and by ``"token"`` otherwise; the levels its ``scope`` names
(``condor:/READ``) go with it, and every daemon caps what the identity may do at them. A public
key listed for the user name in ``authorized_keys`` is the other way in (``"ssh-key"``). The user name ``unauthenticated``
logs in without proof and is forwarded with no identity (daemons give it at most READ, if their
ALLOW_READ allows). Every refused login is reported to ``on_refusal`` with the client's address
and why (the daemon logs it), and so is a connection that ends in error before it logged in (a
host of another pool gives up when this host's key is not certified by *its* pool's CA, and says
so as it disconnects); a token is never logged.

**Forwarding.** For each accepted subsystem the server connects to
``<socket_dir>/<name>.sock``, writes one :class:`~htc.wire.messages.Forwarded` frame (the
client's IP address, its identity, how it was proved and its token's scope: the daemon's Unix
server turns it into the connection's PeerInfo) and from then on copies bytes both ways without looking at them: the
daemon parses every frame itself, so garbage on an authenticated channel meets the daemon's own
checks, ends that channel only, and the shared port never buffers a frame whole. A subsystem
whose socket does not exist is refused at once (the client gets a channel-open error naming it);
one whose daemon does not accept gets an ``ErrorReply(code="unavailable")`` frame before the
channel closes.

**Flow control.** Both directions are paced by the slower side, never buffered without bound:
when the daemon's socket buffer fills, reading from the SSH channel pauses (the client's window
stops being refilled, so its ``drain()`` waits); when the client's window is exhausted, reading
from the daemon's socket pauses. Bytes a client sends before the daemon's socket is connected
are held (at most one SSH window) and reading pauses until it is.

The daemon's socket buffer pauses the channel only when it holds more than one window, and
resumes it only when it is empty. asyncssh refills the client's window in full at the first
delivery after a resume, forgetting what it still buffers; resuming at a low-water mark would
deliver one packet, pause again and grant another window each time, so a slow daemon let the
buffered bytes grow with the transfer (51 MiB queued for a 192 MiB upload). Resumed only when
drained, a whole buffered window fits the daemon's socket buffer, so every window granted has
been delivered: at most two windows per channel are held (about 16 MiB).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import asyncssh

from htc.wire import messages
from htc.wire.framing import frame
from htc.wire.ssh_client import ANONYMOUS
from htc.wire.ssh_tuning import skip_ignore_packets
from htc.wire.tokens import TokenClaims

log = logging.getLogger("htc.wire")

__all__ = ["SharedPortServer", "TokenCheck"]

#: ``token -> its claims`` (identity, scopes), or ``(claims, method)`` when the daemon tells how the
#: peer proved itself (method "pool" or "token": a daemon of another pool flocking here is "token");
#: raises (any HTCError, e.g. TokenError) when the token is refused
TokenCheck = Callable[[str], "TokenClaims | tuple[TokenClaims, str]"]
#: ``(address, username, why)``: a login the server refused
RefusalHook = Callable[[str, str, str], None]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
#: bytes read from a daemon's socket at a time (asyncio's own read size)
_RECEIVE_BUFFER = 256 * 1024


class _DaemonSide(asyncio.BufferedProtocol):
    """The Unix-socket end of one forwarded channel.

    Read into the server's one receive buffer (``recv_into``) and copied out at once, not read
    as a fresh 256 KiB bytes object per read (an mmap, an mremap and a munmap each under a fixed
    mmap threshold below it: htc.daemons.shared_port.service.keep_relay_memory_bounded).
    """

    def __init__(self, session: _ForwardSession, buffer: memoryview):
        self.session = session
        self.buffer = buffer
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.session.chan.write(bytes(self.buffer[:nbytes]))  # (copied before the next read reuses it)

    def eof_received(self) -> bool:
        self.session.daemon_eof()
        return True

    def connection_lost(self, exc) -> None:
        self.session.daemon_gone()

    def pause_writing(self) -> None:
        self.session.chan.pause_reading()

    def resume_writing(self) -> None:
        self.session.chan.resume_reading()


class _ForwardSession(asyncssh.SSHServerSession):
    """One SSH channel piped to one daemon's Unix socket (module header)."""

    def __init__(self, server: _ServerConn):
        self.server = server
        self.chan: asyncssh.SSHServerChannel | None = None
        self.name = ""
        self.daemon: _DaemonSide | None = None
        self._held: list[bytes] = []
        self._eof_held = False
        self._closed = False

    def connection_made(self, chan) -> None:
        self.chan = chan

    def subsystem_requested(self, subsystem: str) -> bool:
        owner = self.server.owner
        if not _NAME.match(subsystem) or subsystem == owner.own_name:
            log.warning("shared port: refusing subsystem %r from %s: not a daemon name", subsystem[:80],
                        self.server.address)
            return False
        if not (owner.socket_dir / f"{subsystem}.sock").exists():
            log.info("shared port: %s asked for %s, which is not running here", self.server.address, subsystem)
            return False
        self.name = subsystem
        return True

    def session_started(self) -> None:
        task = asyncio.get_running_loop().create_task(self._connect(), name=f"shared port: {self.name}")
        tasks = self.server.owner._tasks  # held until done: the loop keeps only weak references
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _connect(self) -> None:
        owner = self.server.owner
        path = owner.socket_dir / f"{self.name}.sock"
        try:
            _, daemon = await asyncio.get_running_loop().create_unix_connection(
                lambda: _DaemonSide(self, owner.receive_buffer), path)
        except OSError as exc:
            log.warning("shared port: cannot reach %s at %s for %s: %s", self.name, path, self.server.address, exc)
            if not self._closed:
                self.chan.write(frame(messages.encode(messages.ErrorReply(
                    code="unavailable", message=f"the {self.name} daemon on this host is not accepting "
                                                f"connections ({exc.strerror or exc}); try again later"))))
                self.chan.close()
            return
        if self._closed:
            daemon.transport.close()
            return
        self.daemon = daemon
        # Deliver a whole window at a time (module header, "Flow control"): the daemon's socket
        # pauses the channel only past one window and resumes it only when drained.
        daemon.transport.set_write_buffer_limits(high=self.chan.get_recv_window(), low=0)
        srv = self.server
        preamble = messages.Forwarded(host=srv.peer_ip, identity=srv.identity, authenticated_by=srv.method,
                                      scopes=srv.scopes)
        daemon.transport.write(frame(messages.encode(preamble)))
        for data in self._held:
            daemon.transport.write(data)
        self._held.clear()
        if self._eof_held:
            daemon.transport.write_eof()
        self.chan.resume_reading()
        owner.forwarded += 1

    def data_received(self, data: bytes, datatype) -> None:
        if self.daemon is None:
            self._held.append(data)
            self.chan.pause_reading()
            return
        self.daemon.transport.write(data)

    def eof_received(self) -> bool:
        if self.daemon is None:
            self._eof_held = True
        elif self.daemon.transport is not None and not self.daemon.transport.is_closing():
            self.daemon.transport.write_eof()
        return True  # keep the channel half open: the daemon's answer may still be on its way

    def pause_writing(self) -> None:
        if self.daemon is not None and self.daemon.transport is not None:
            self.daemon.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.daemon is not None and self.daemon.transport is not None:
            self.daemon.transport.resume_reading()

    def connection_lost(self, exc) -> None:
        self._closed = True
        if self.daemon is not None and self.daemon.transport is not None:
            self.daemon.transport.close()

    def daemon_eof(self) -> None:
        if not self._closed:
            self.chan.write_eof()

    def daemon_gone(self) -> None:
        if not self._closed:
            self._closed = True
            self.chan.close()


class _ServerConn(asyncssh.SSHServer):
    """One client's SSH connection: who it is, and its channels."""

    def __init__(self, owner: SharedPortServer):
        self.owner = owner
        self.address = "?"
        self.peer_ip = "0.0.0.0"
        self.identity: str | None = None
        self.method = ""
        self.scopes: tuple[str, ...] = ()
        self.logged_in = False
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn) -> None:
        self._conn = conn
        skip_ignore_packets(conn)
        peer = conn.get_extra_info("peername") or ("0.0.0.0", 0)
        self.peer_ip = str(peer[0])
        self.address = f"{peer[0]}:{peer[1]}"
        self.owner.connections += 1

    def connection_lost(self, exc) -> None:
        if exc is not None and not self.logged_in:
            # before login: the client gave up on this host (its key is not certified by the CA the
            # client's pool key gives: a host of another pool) or the handshake failed
            self.owner.refused(self.address, "", f"the SSH connection ended before it logged in: {exc}")
        elif exc is not None:
            log.info("shared port: connection from %s (%s) lost: %s", self.address,
                     self.identity or ANONYMOUS, exc)

    def auth_completed(self) -> None:
        self.logged_in = True

    def begin_auth(self, username: str) -> bool:
        if username == ANONYMOUS and self.owner.allow_anonymous:
            return False  # no proof asked: forwarded without an identity
        return True

    def password_auth_supported(self) -> bool:
        return True

    def validate_password(self, username: str, password: str) -> bool:
        try:
            proved = self.owner.verify_token(password)
        except Exception as exc:  # noqa: BLE001 - any refusal is logged the same way
            self.owner.refused(self.address, username, f"bad token: {exc}")
            return False
        claims, method = proved if isinstance(proved, tuple) else (proved, None)
        identity = claims.identity
        self.identity = identity
        # at most 16 levels of at most 32 letters (as Forwarded declares): fewer can only allow less
        self.scopes = tuple(s for s in claims.scopes if len(s) <= 32)[:16] or (
            ("NONE",) if claims.scopes else ())
        self.method = method or ("pool" if identity.startswith("condor_pool@") else "token")
        return True

    def public_key_auth_supported(self) -> bool:
        return bool(self.owner.authorized_keys)

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        if any(k.public_data == key.public_data for k in self.owner.authorized_keys.get(username, ())):
            self.identity = username
            self.method = "ssh-key"
            return True
        self.owner.refused(self.address, username, "public key not listed for that identity")
        return False

    def session_requested(self):
        return _ForwardSession(self)


class SharedPortServer:
    """An asyncssh server forwarding channels to this host's daemons (module header).

    Args:
        socket_dir: the daemons' Unix sockets (``$HTC_HOME/sockets``).
        host_keys: what asyncssh's ``server_host_keys`` takes (a key, or ``(key, certificate)``).
        verify_token: checks a token, returns its claims (identity and scopes).
        on_refusal: told of every refused login.
        authorized_keys: identity -> public keys accepted for it.
        allow_anonymous: whether ``unauthenticated`` may log in without proof.
        own_name: the shared port's own socket name, never a forwarding target.
    """

    def __init__(self, socket_dir: str | Path, host_keys, verify_token: TokenCheck, *,
                 on_refusal: RefusalHook | None = None,
                 authorized_keys: Mapping[str, list[asyncssh.SSHKey]] | None = None,
                 allow_anonymous: bool = True, own_name: str = "shared_port"):
        self.socket_dir = Path(socket_dir)
        self.host_keys = host_keys
        self.verify_token = verify_token
        self.on_refusal = on_refusal
        self.authorized_keys = dict(authorized_keys or {})
        self.allow_anonymous = allow_anonymous
        self.own_name = own_name
        self._server: asyncssh.SSHAcceptor | None = None
        self._tasks: set[asyncio.Task] = set()
        #: what every channel's daemon socket is read into (one loop: each read is copied out
        #: before the next begins), as large as asyncio's own reads
        self.receive_buffer = memoryview(bytearray(_RECEIVE_BUFFER))
        #: SSH connections accepted, and channels forwarded to a daemon (statistics and tests)
        self.connections = 0
        self.forwarded = 0

    def refused(self, address: str, username: str, why: str) -> None:
        """Report a refused login (the daemon logs it with the address)."""
        if self.on_refusal is not None:
            self.on_refusal(address, username, why)

    async def start(self, host: str, port: int, *, keepalive_interval: float = 15.0,
                    keepalive_count_max: int = 3, ciphers: tuple[str, ...] | None = None,
                    login_timeout: float = 20.0, window: int = 8 * 1024 * 1024,
                    max_pktsize: int = 256 * 1024) -> None:
        """Listen on ``host:port`` (``""``: every interface).

        Raises:
            OSError: the port cannot be bound (in use, no permission).
        """
        extra = {"encryption_algs": list(ciphers)} if ciphers else {}
        self._server = await asyncssh.create_server(
            lambda: _ServerConn(self), host or None, port, server_host_keys=[self.host_keys],
            encoding=None, keepalive_interval=keepalive_interval, keepalive_count_max=keepalive_count_max,
            login_timeout=login_timeout, window=window, max_pktsize=max_pktsize, allow_scp=False,
            agent_forwarding=False, x11_forwarding=False, allow_pty=False, line_editor=False,
            reuse_address=True, **extra)

    @property
    def port(self) -> int:
        """The port actually bound (useful when started on port 0)."""
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        """Stop listening and end every SSH connection."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
