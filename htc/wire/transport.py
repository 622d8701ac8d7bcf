"""Connections and transports: how messages reach a daemon by name.

Theory of operation
-------------------
Daemons are addressed by *name* (``"collector"``, ``"schedd"``); a :class:`Transport` maps a
name to something it can connect to.  Everything above this module sees only two calls,

* ``await transport.open_connection(address)`` -> :class:`Connection`, and
* ``await transport.start_server(address, handler, task_group=tg)`` -> :class:`Server`,

so the local :class:`UnixTransport` (one socket file per daemon under ``$HTC_HOME/sockets``) and
the SSH transport (:mod:`htc.wire.ssh_client`: one port per host, channels routed by daemon name)
are interchangeable. A connection the host's shared port forwards from another host begins with
a :class:`~htc.wire.messages.Forwarded` preamble, which the Unix server believes only from root or
the pool's own account and turns into the connection's :class:`PeerInfo` (host, identity, how
proved), so daemons see network peers without knowing about SSH.

A :class:`Connection` carries whole messages over any byte stream with ``readexactly`` /
``write`` / ``drain`` / ``close``: frames from :mod:`htc.wire.framing`, bodies from
:mod:`htc.wire.messages`.  Each call a client makes is ``request``: send one message, read one
reply, turn an :class:`~htc.wire.messages.ErrorReply` into :class:`~htc.wire.errors.RemoteError`.
A connection carries any number of requests in turn; daemons keep theirs for reuse through
:class:`htc.wire.peers.PeerConnections`, which asks :attr:`Connection.reusable` before reusing one.

A :class:`Server` runs ``handler(connection)`` for each accepted connection as a task in the
TaskGroup its owner passes in, so no task is orphaned.  Nothing one peer sends ends the
server: when a handler lets a :class:`~htc.wire.errors.WireError` escape (garbage bytes, a
frame above the limit, an invalid message), the server answers ``ErrorReply`` with the error's
code, closes *that* connection and keeps serving everyone else; any other exception (a bug met
while serving that peer) is logged with its traceback, answered ``ErrorReply(code="internal")``
and likewise ends only that connection.  (A daemon that must stop on a bug of its own work
raises from its main task: see :mod:`htc.daemons.service`.)
A peer that disappears mid-conversation just ends its connection.  :meth:`Server.stop_accepting`
closes the listening endpoint at once (a daemon that decided to exit), while :meth:`Server.aclose`
also ends the connections being served.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import os
import re
import socket
import stat
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from htc.errors import UsageError
from htc.wire import messages
from htc.wire.errors import (
    AddressInUse,
    BadAddress,
    ConnectionClosed,
    DaemonUnreachable,
    RemoteError,
    RequestTimeout,
    WireError,
)
from htc.wire.framing import DEFAULT_MAX_FRAME, frame, read_frame

log = logging.getLogger("htc.wire")

#: how long a connect or a single request may take unless the caller says otherwise
DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class PeerInfo:
    """Who is on the other end, as far as the transport can tell (None: unknown).

    ``pid``/``uid``/``gid`` are the kernel's word (SO_PEERCRED) for a peer on this host; a peer
    that came over the network (through the shared port, :mod:`htc.wire.address`) has ``host``,
    and ``identity``/``authenticated_by`` when it proved who it is. ``user`` and ``administrator``
    are filled in by the daemon's authorization step (:mod:`htc.wire.authz`) before a request
    reaches a core: the local account the uid maps to (None: unmapped) and whether the pool's
    policy grants that identity ADMINISTRATOR (None: not decided, a core fed directly).
    """

    pid: int | None = None
    uid: int | None = None
    gid: int | None = None
    description: str = ""
    user: str | None = None
    administrator: bool | None = None
    #: a peer on another host: its network address (IP), as the shared port saw it
    host: str | None = None
    #: a peer on another host: the identity it proved (``alice@pool``), None if it proved none
    identity: str | None = None
    #: how that identity was proved: ``"token"``, ``"pool"`` (the pool key), ``"ssh-key"``; "" if not
    authenticated_by: str = ""
    #: the levels the peer's token is limited to (its scope, ``("READ",)``); (): no limit
    scopes: tuple[str, ...] = ()


def checked_reply(label: str, msg: messages.Message, reply: messages.Message,
                  expect: type[messages.Message] | None = None) -> messages.Message:
    """``reply`` to ``msg`` from ``label`` when it is the answer wanted.

    Raises:
        RemoteError: the peer answered with an ErrorReply (its code and words are kept).
        WireError: the peer answered with the wrong kind of message.
    """
    if isinstance(reply, messages.ErrorReply):
        raise RemoteError(label, reply.code, reply.message)
    wanted = expect or msg.reply_type
    if wanted is not None and not isinstance(reply, wanted):
        raise WireError(f"{label} answered {type(msg).__name__} with "
                        f"{type(reply).__name__}, expected {wanted.__name__}")
    return reply


class Connection:
    """A message-level conversation with one peer.

    Args:
        reader: a stream with ``readexactly``.
        writer: a stream with ``write``, ``drain``, ``close`` and ``wait_closed``.
        peer: what the transport knows about the peer.
        label: how error messages name the other side (``"collector"``).
        max_frame: the largest frame body accepted from the peer.
    """

    def __init__(self, reader, writer, *, peer: PeerInfo | None = None, label: str = "peer",
                 max_frame: int = DEFAULT_MAX_FRAME):
        self._reader = reader
        self._writer = writer
        self.peer = peer or PeerInfo()
        self.label = label
        self.max_frame = max_frame
        self._closed = False

    async def send(self, msg: messages.Message) -> None:
        """Send one message.

        Raises:
            ConnectionClosed: the peer has gone.
            FrameTooLarge: the message is above the frame limit.
        """
        data = frame(messages.encode(msg), self.max_frame)
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            raise ConnectionClosed(f"{self.label} closed the connection while we were sending: {exc}") from None

    def send_nowait(self, msg: messages.Message) -> None:
        """Queue one message without waiting for the peer to take it (call :meth:`drain` later).

        Raises:
            ConnectionClosed: the connection is already closed.
            FrameTooLarge: the message is above the frame limit.
        """
        if self._closed:
            raise ConnectionClosed(f"cannot send {type(msg).__name__}: the connection to {self.label} is closed")
        self._writer.write(frame(messages.encode(msg), self.max_frame))

    async def drain(self) -> None:
        """Wait until queued messages are handed to the operating system.

        Raises:
            ConnectionClosed: the peer has gone.
        """
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            raise ConnectionClosed(f"{self.label} closed the connection while we were sending: {exc}") from None

    async def recv(self, timeout: float | None = None) -> messages.Message:
        """Receive one message.

        Args:
            timeout: seconds to wait (None: forever).

        Returns:
            The decoded, checked message.

        Raises:
            ConnectionClosed: the peer closed the connection between messages.
            WireError: the peer sent a malformed frame or message.
            RequestTimeout: nothing complete arrived in time.
        """
        try:
            if timeout is None:  # (a pump's endless read: no timeout context per message)
                body = await read_frame(self._reader, self.max_frame)
            else:
                async with asyncio.timeout(timeout):
                    body = await read_frame(self._reader, self.max_frame)
        except TimeoutError:
            raise RequestTimeout(f"{self.label} sent nothing for {timeout:g} s") from None
        except (ConnectionError, OSError) as exc:
            raise ConnectionClosed(f"connection to {self.label} broke: {exc}") from None
        if body is None:
            raise ConnectionClosed(f"{self.label} closed the connection")
        return messages.decode(body)

    async def request(self, msg: messages.Message, *, timeout: float | None = DEFAULT_TIMEOUT,
                      expect: type[messages.Message] | None = None) -> messages.Message:
        """Send ``msg`` and return the peer's reply.

        Args:
            msg: the request.
            timeout: seconds for the reply to arrive.
            expect: the reply class wanted (default: ``msg.reply_type``).

        Returns:
            The reply, an instance of ``expect``.

        Raises:
            RemoteError: the peer answered with an ErrorReply (its code and words are kept).
            WireError: the peer answered with the wrong kind of message.
            ConnectionClosed, RequestTimeout: the peer went away or stayed silent.
        """
        await self.send(msg)
        return await self.read_reply(msg, timeout=timeout, expect=expect)

    async def read_reply(self, msg: messages.Message, *, timeout: float | None = DEFAULT_TIMEOUT,
                         expect: type[messages.Message] | None = None) -> messages.Message:
        """Read the reply to ``msg``, already sent; the second half of :meth:`request`.

        Raises:
            As :meth:`request`, except that nothing is sent here.
        """
        try:
            reply = await self.recv(timeout)
        except ConnectionClosed:
            raise ConnectionClosed(f"{self.label} closed the connection instead of answering "
                                   f"{type(msg).__name__}; see its log") from None
        return checked_reply(self.label, msg, reply, expect)

    async def send_error(self, code: str, text: str) -> None:
        """Best effort: tell the peer why we are about to close; never raises for a dead peer."""
        try:
            async with asyncio.timeout(5):
                await self.send(messages.ErrorReply(code=code, message=text))
        except (ConnectionClosed, TimeoutError):
            pass

    async def linger(self, timeout: float = 5.0, limit: int = 64 * 1024 * 1024) -> None:
        """Read and drop what the peer still sends, until it closes (or ``timeout`` s pass, or
        ``limit`` bytes came): a refusal sent in the middle of the peer's stream then reaches it.
        Closing at once would make the peer's next write fail (EPIPE, or a reset over TCP), and
        its stream reader would drop the answer waiting in its buffer. Never raises."""
        read = getattr(self._reader, "read", None)
        if read is None:
            return
        got = 0
        try:
            async with asyncio.timeout(timeout):
                while got < limit:
                    chunk = await read(65536)
                    if not chunk:
                        return
                    got += len(chunk)
        except (TimeoutError, ConnectionError, OSError):
            return  # the peer went, or kept talking: close all the same

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass

    def close_nowait(self) -> None:
        """Start closing the connection without waiting for it (idempotent; for sync callers)."""
        if self._closed:
            return
        self._closed = True
        self._writer.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` or :meth:`close_nowait` ran."""
        return self._closed

    @property
    def reusable(self) -> bool:
        """True if an idle connection can carry another request, as far as we can tell now.

        False once it is closed, its peer has ended the stream (a peer that restarted or closed
        an idle connection: the EOF arrives while nobody reads), reading failed, or bytes nobody
        asked for are waiting (the conversation would be out of step).
        """
        if self._closed or self._writer.is_closing():
            return False
        reader = self._reader
        at_eof = getattr(reader, "at_eof", None)
        if at_eof is not None and at_eof():
            return False
        exception = getattr(reader, "exception", None)
        if exception is not None and exception() is not None:
            return False
        # asyncio's StreamReader keeps unread bytes in _buffer; other streams may not say.
        return not getattr(reader, "_buffer", b"")

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()


ConnectionHandler = Callable[[Connection], Awaitable[None]]


class Server:
    """A listening endpoint; connection tasks live in the owner's TaskGroup.

    Built by :meth:`Transport.start_server`; call :meth:`aclose` (or use ``async with``) to stop.
    """

    def __init__(self, address: str, handler: ConnectionHandler, task_group: asyncio.TaskGroup):
        self.address = address
        self._handler = handler
        self._task_group = task_group
        self._tasks: set[asyncio.Task] = set()
        self._closing = False
        self._closed = False

    def _accept(self, conn: Connection) -> None:
        """Start serving one accepted connection (called by the transport)."""
        if self._closing:
            conn._writer.close()
            return
        task = self._task_group.create_task(self._serve(conn), name=f"{self.address}: {conn.label}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: Connection) -> None:
        try:
            await self._handler(conn)
        except WireError as exc:
            # The peer broke the protocol: say why, drop this connection, keep serving others.
            log.warning("%s: closing connection from %s: %s", self.address, conn.label, exc)
            await conn.send_error(exc.code, str(exc))
        except (ConnectionClosed, RequestTimeout):
            pass
        except Exception as exc:  # noqa: BLE001 - one connection's failure must not end the server
            # A bug while serving this peer: log it with its traceback, tell the peer, close
            # this connection; every other connection (and the daemon) goes on.
            log.error("%s: serving %s failed, closing that connection: %s: %s", self.address,
                      conn.label, type(exc).__name__, exc, exc_info=exc)
            await conn.send_error("internal", f"{self.address} failed while serving this connection: "
                                              f"{type(exc).__name__}: {str(exc)[:300]}")
        finally:
            await conn.aclose()

    @property
    def active_connections(self) -> int:
        """How many connections are being served now."""
        return len(self._tasks)

    def _stop_listening(self) -> None:  # pragma: no cover - overridden by transports
        raise TypeError(f"{type(self).__name__} must implement _stop_listening")

    def stop_accepting(self) -> None:
        """Stop listening now (idempotent): new clients find nobody there; current ones are served on."""
        if self._closing:
            return
        self._closing = True
        self._stop_listening()

    async def aclose(self) -> None:
        """Stop accepting, cancel the connections being served and wait for them to end."""
        if self._closed:
            return
        self._closed = True
        self.stop_accepting()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> Server:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()


class Transport(abc.ABC):
    """How daemons reach each other by name; see the module header."""

    @abc.abstractmethod
    async def open_connection(self, address: str, *, timeout: float | None = DEFAULT_TIMEOUT) -> Connection:
        """Connect to the daemon called ``address``.

        Raises:
            DaemonUnreachable: nobody is listening there (is the pool running?).
            BadAddress: ``address`` is not a valid daemon name.
        """

    async def open_bulk_connection(self, address: str, *, timeout: float | None = DEFAULT_TIMEOUT) -> Connection:
        """Connect to ``address`` for a bulk conversation (a file stream, a checkpoint image).

        The same as :meth:`open_connection` here; a network transport carries it apart from small
        requests so that they do not wait behind it (:mod:`htc.wire.ssh_client`).
        """
        return await self.open_connection(address, timeout=timeout)

    @abc.abstractmethod
    async def start_server(self, address: str, handler: ConnectionHandler, *,
                           task_group: asyncio.TaskGroup) -> Server:
        """Listen as ``address``; run ``handler(conn)`` per connection inside ``task_group``.

        Raises:
            AddressInUse: another live daemon already listens as ``address``.
            BadAddress: ``address`` is not a valid daemon name.
        """


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")
#: mode of the socket directory: only its owner adds or removes sockets, everyone reaches them
SOCKET_DIR_MODE = 0o755
#: mode of each socket file: every local user may connect; the daemon authorizes each message
#: (htc.wire.authz), as HTCondor's shared-port socket is open to all and its daemons decide
SOCKET_MODE = 0o666
#: Linux sun_path holds 108 bytes including the terminating NUL
_MAX_SOCKET_PATH = 107
_PEERCRED = struct.Struct("3i")


def _peer_credentials(sock: socket.socket | None) -> PeerInfo:
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return PeerInfo(description="local")
    try:
        pid, uid, gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    except OSError:
        return PeerInfo(description="local")
    return PeerInfo(pid=pid, uid=uid, gid=gid, description=f"pid {pid} uid {uid}")


class _AcceptedConnection(Connection):
    """A connection a Unix server accepted; its first frame may be the shared port's preamble.

    A :class:`~htc.wire.messages.Forwarded` first frame, from a peer whose uid is root or the
    pool's own (``trusted_uids``: the shared port runs as one of them), replaces what SO_PEERCRED
    said with the network peer's address and proved identity. From anyone else, or anywhere but
    first, it is refused as a :class:`~htc.wire.errors.WireError` (answered and the connection
    closed, like any protocol breach).
    """

    def __init__(self, reader, writer, *, trusted_uids: frozenset[int], **kwargs):
        super().__init__(reader, writer, **kwargs)
        self._trusted_uids = trusted_uids
        self._first = True

    async def recv(self, timeout: float | None = None) -> messages.Message:
        msg = await super().recv(timeout)
        first, self._first = self._first, False
        if not isinstance(msg, messages.Forwarded):
            return msg
        if not first:
            raise WireError("a Forwarded preamble may only open a connection, not come in the middle of one")
        if self.peer.uid not in self._trusted_uids:
            raise WireError(f"refusing a Forwarded preamble from {self.peer.description}: only the shared "
                            "port, running as root or the pool's account, may vouch for a network peer")
        who = msg.identity or "an unauthenticated peer"
        self.peer = PeerInfo(host=msg.host, identity=msg.identity, authenticated_by=msg.authenticated_by,
                             scopes=tuple(msg.scopes), description=f"{who} at {msg.host} (through the shared port)")
        self.label = f"client ({self.peer.description})"
        return await super().recv(timeout)


class _UnixServer(Server):
    def __init__(self, address, handler, task_group, path: Path):
        super().__init__(address, handler, task_group)
        self.path = path
        self._server: asyncio.AbstractServer | None = None
        self._inode: int | None = None

    def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
        try:
            # Remove the socket file only if it is still ours (a successor may have replaced it).
            if self._inode is not None and self.path.stat().st_ino == self._inode:
                self.path.unlink()
        except FileNotFoundError:
            pass


def unreachable(address: str, path: Path, exc: OSError, timeout: float | None) -> DaemonUnreachable:
    """The error for a failed connect to the Unix socket ``path`` of daemon ``address``."""
    if isinstance(exc, FileNotFoundError):
        return DaemonUnreachable(f"no {address} daemon is listening: {path} does not exist; "
                                 "is the pool running? (start it with 'htc pool start')")
    if isinstance(exc, ConnectionRefusedError):
        return DaemonUnreachable(f"the {address} daemon is not accepting connections at {path}; "
                                 "it may have died (see its log, or 'htc pool status')")
    if isinstance(exc, TimeoutError):
        return DaemonUnreachable(f"connecting to {address} at {path} took over {timeout:g} s")
    return DaemonUnreachable(f"cannot connect to {address} at {path}: {exc}")


class UnixTransport(Transport):
    """Daemons on this machine: ``address`` ``"collector"`` is ``<socket_dir>/collector.sock``.

    Args:
        socket_dir: directory of the socket files (``$HTC_HOME/sockets``); created on demand.
        max_frame: the largest frame body accepted.
    """

    def __init__(self, socket_dir: str | os.PathLike, *, max_frame: int = DEFAULT_MAX_FRAME):
        self.socket_dir = Path(socket_dir)
        self.max_frame = max_frame

    def path_of(self, address: str) -> Path:
        """Return the socket file of ``address``.

        Raises:
            BadAddress: the name has characters a file name cannot safely hold, or the path is
                too long for a Unix socket.
        """
        if not _NAME.match(address):
            raise BadAddress(f"{address!r} is not a daemon name: use letters, digits, '_', '.', '@', '-'")
        path = self.socket_dir / f"{address}.sock"
        if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
            raise BadAddress(f"socket path {path} is longer than the {_MAX_SOCKET_PATH} bytes a Unix "
                             "socket allows; choose a shorter HTC_HOME")
        return path

    async def open_connection(self, address: str, *, timeout: float | None = DEFAULT_TIMEOUT) -> Connection:
        path = self.path_of(address)
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(path, limit=2 ** 20)
        except OSError as exc:
            raise unreachable(address, path, exc, timeout) from None
        return Connection(reader, writer, peer=PeerInfo(description=str(path)), label=address,
                          max_frame=self.max_frame)

    async def start_server(self, address: str, handler: ConnectionHandler, *,
                           task_group: asyncio.TaskGroup) -> Server:
        path = self.path_of(address)
        self._check_socket_dir()
        await self._clear_stale(address, path)
        server = _UnixServer(address, handler, task_group, path)

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = _peer_credentials(writer.get_extra_info("socket"))
            label = f"client ({peer.description})"
            server._accept(_AcceptedConnection(reader, writer, peer=peer, label=label, max_frame=self.max_frame,
                                               trusted_uids=trusted_uids))

        trusted_uids = frozenset({0, os.geteuid()})

        server._server = await asyncio.start_unix_server(accepted, path, limit=2 ** 20)
        # bind() gave the socket the umask's mode; set it explicitly (a narrower umask only made
        # it unreachable for a moment, never reachable by more)
        os.chmod(path, SOCKET_MODE)
        server._inode = path.stat().st_ino
        return server

    def _check_socket_dir(self) -> None:
        """Create the socket directory with :data:`SOCKET_DIR_MODE`, whatever the umask; refuse
        one that others may write to (another user could replace a daemon's socket).

        Raises:
            UsageError: the directory is writable by group or others, or owned by another user.
        """
        self.socket_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.socket_dir.mkdir(mode=SOCKET_DIR_MODE)
        except FileExistsError:
            pass
        else:
            os.chmod(self.socket_dir, SOCKET_DIR_MODE)
        st = self.socket_dir.stat()
        if st.st_mode & 0o022 or st.st_uid not in (0, os.geteuid()):
            raise UsageError(f"{self.socket_dir} (mode {stat.S_IMODE(st.st_mode):04o}, uid {st.st_uid}) can be "
                               "changed by other users, who could put their own socket in a daemon's place; "
                               f"chmod go-w {self.socket_dir} (and chown it to the pool's account)")

    async def _clear_stale(self, address: str, path: Path) -> None:
        """Remove a socket file left by a dead daemon; refuse if a live one answers there."""
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(mode):
            raise AddressInUse(f"{path} exists and is not a socket; move it away so {address} can listen")
        try:
            async with asyncio.timeout(2):
                _, writer = await asyncio.open_unix_connection(path)
        except (ConnectionRefusedError, FileNotFoundError, TimeoutError):
            path.unlink(missing_ok=True)
            return
        writer.close()
        raise AddressInUse(f"another {address} daemon is already listening at {path}; stop it first "
                           "('htc pool stop') or use a different HTC_HOME")
