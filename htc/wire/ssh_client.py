"""The client side of the network transport: daemons on other hosts over asyncssh.

Theory of operation
-------------------
A remote daemon's address is a sinful string (``<10.200.0.3:9618?sock=schedd>``,
:mod:`htc.wire.address`). :class:`SshTransport` keeps **one SSH connection per host:port** and
opens **one session channel per** :class:`~htc.wire.transport.Connection`, requesting the daemon's
name as the SSH *subsystem*; the host's shared port (:mod:`htc.wire.ssh_server`) pipes that
channel to the daemon's Unix socket. Connections, and through
:class:`~htc.wire.peers.PeerConnections` the channels too, are reused rather than opened per
message: an SSH handshake costs several round trips and ~6 ms of CPU, a channel about two round
trips.

**Authentication.** Each new SSH connection asks the ``credentials`` callable for
``(username, token)``; the token is sent as the SSH password (after the SSH keys of
``client_keys``, if any, for an identity whose public key the shared port lists) and the shared port checks it with
the pool key (:mod:`htc.wire.tokens`). ``None`` means "prove nothing": the client logs in as
``unauthenticated`` and daemons treat it as ``unauthenticated@unmapped``. Where tokens come from
is the caller's business (daemons mint ``condor_pool@TRUST_DOMAIN`` from the pool key; users have a
token directory). **Host keys** are checked against ``known_hosts``: the pool CA for a client
holding the pool key (:func:`htc.wire.ssh_keys.pool_known_hosts`), or trust-on-first-use
(:class:`htc.wire.ssh_keys.KnownHosts`) for one without it.

**Liveness and failures.** SSH keepalives (``keepalive_interval`` x ``keepalive_count_max``,
:class:`SshOptions`) notice a cut link even on an idle connection or a writer blocked in
``drain()``: the connection is then dropped from the cache and its channels fail with
:class:`~htc.wire.errors.ConnectionClosed`. A connection attempt is bounded by ``connect_timeout``
(and the caller's timeout). When the shared port refuses or resets the TCP connection (it is
restarting), the attempt is repeated with exponential backoff (50 ms doubling to 2 s) until that
budget is spent; only one attempt per host:port is in flight, and concurrent callers share it. A
refused *login* (wrong pool key, bad token) is not retried: trying again cannot help.
A host that does not answer at all (the connect timed out, no route to it: a cut link) fails
with :class:`~htc.wire.errors.HostSilent` (code ``timeout``), not the plain
:class:`~htc.wire.errors.DaemonUnreachable` (``unreachable``) of a host where nobody listens:
the daemons of a silent host may still run, so a schedd waits the job lease for them
(:mod:`htc.daemons.schedd.claims`) instead of giving their jobs up at once.

**Flow control.** A channel has an SSH window (``window`` bytes): a sender blocked in ``drain()``
waits for the receiving side to consume, end to end through the shared port to the daemon's
socket, so a bulk payload is never held whole anywhere. Larger SSH packets (``max_pktsize``)
cut the per-packet cost of Python and the cipher.

**Per-packet work.** Neither end sends asyncssh's empty ``SSH_MSG_IGNORE`` before each packet
(:mod:`htc.wire.ssh_tuning`: a CBC countermeasure that only doubled the packets of the modes
used here), and a channel's connection (:class:`htc.wire.ssh_push.SshConnection`) can push its
messages to a callback instead of being read by a task.

**Bulk conversations travel apart.** An SSH connection is one TCP byte stream: a small request
sent while a file stream is under way waits behind every byte of it already queued (up to a
channel window plus the socket's buffer), so a standard job's relayed call, a keep-alive or an
executor call behind a checkpoint image took hundreds of milliseconds instead of a few
(benchmarks/relay_hol_bench.py). HTCondor opens a TCP connection per file transfer; here
:meth:`SshTransport.open_bulk_connection` opens its channel on a **second SSH connection to the
host**, kept for every bulk conversation with that host (file transfers, checkpoint images,
spooled files): made the first time one is needed, then reused, with the same keepalives,
connect timeout, backoff and reconnect as the first (each is cached under its host:port and
*lane*, ``small`` or ``bulk``). The shared port is unchanged: it sees two authenticated
connections from the same peer.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import asyncssh

from htc.wire.address import parse_remote
from htc.wire.errors import BadAddress, DaemonUnreachable, HostSilent
from htc.wire.ssh_keys import KnownHosts
from htc.wire.ssh_push import SshConnection
from htc.wire.ssh_tuning import skip_ignore_packets
from htc.wire.transport import DEFAULT_TIMEOUT, Connection, ConnectionHandler, PeerInfo, Server, Transport

log = logging.getLogger("htc.wire")

__all__ = ["ANONYMOUS", "BULK", "SMALL", "Credentials", "LoginRefused", "SshOptions", "SshTransport", "silent_host"]

#: the SSH user name of a client that proves nothing
ANONYMOUS = "unauthenticated"

#: ``() -> (username, token)``, or None for an unauthenticated client
Credentials = Callable[[], "tuple[str, str] | None"]

#: AES-GCM first: twice as fast as chacha20-poly1305 on CPUs with AES-NI (netns-harness.md §2)
DEFAULT_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com")

#: the lanes of connections to one host: small requests, and bulk conversations (module header)
SMALL = "small"
BULK = "bulk"

#: a cached connection's key: host, port and lane
_Key = tuple[str, int, str]

_BACKOFF_FIRST = 0.05
_BACKOFF_CEILING = 2.0

#: errors of a connect that say the host did not answer (rather than that nothing listens there)
_SILENT_ERRNOS = frozenset({errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT, errno.EHOSTDOWN})


def silent_host(exc: BaseException) -> bool:
    """Whether a failed connect means the host is silent (cut off, down or unrouted) rather than
    that it answered and nothing listens (``ECONNREFUSED``, a reset, an SSH-level refusal)."""
    if isinstance(exc, TimeoutError):
        return True
    if isinstance(exc, OSError) and exc.errno in _SILENT_ERRNOS:
        return True
    # asyncio's create_connection tries every address and raises one OSError naming them all
    return isinstance(exc, OSError) and exc.errno is None and any(
        f"[Errno {code}]" in str(exc) for code in _SILENT_ERRNOS)


class LoginRefused(DaemonUnreachable):
    """The shared port refused our credentials (a token from another pool, an expired one)."""

    code = "denied"


@dataclass(frozen=True)
class SshOptions:
    """How SSH connections are made and kept (daemons fill it from SSH_* knobs)."""

    keepalive_interval: float = 15.0
    keepalive_count_max: int = 3
    connect_timeout: float = 20.0
    ciphers: tuple[str, ...] = DEFAULT_CIPHERS
    window: int = 8 * 1024 * 1024
    max_pktsize: int = 256 * 1024
    #: where a client without the pool key records host keys (None: no trust on first use)
    known_hosts_file: str | None = None
    #: asyncssh ``known_hosts`` for clients holding the pool key (from ssh_keys.pool_known_hosts)
    trusted: tuple | None = field(default=None, compare=False)
    #: SSH private keys (paths or asyncssh keys) offered before the token, for an identity whose
    #: public key the shared port lists (SHARED_PORT_AUTHORIZED_KEYS)
    client_keys: tuple = ()


class _Client(asyncssh.SSHClient):
    """Per-connection callbacks: host keys on first use, and forgetting a lost connection."""

    def __init__(self, transport: SshTransport, key: _Key):
        self._transport = transport
        self._key = key
        self._endpoint = key[:2]

    def connection_made(self, conn) -> None:
        skip_ignore_packets(conn)

    def validate_host_public_key(self, host, addr, port, key) -> bool:
        known = self._transport._known_hosts
        if known is None:
            return False
        ok = known.check(self._endpoint[0], self._endpoint[1], key)
        if not ok:
            log.error("the host key of %s:%d differs from the one recorded in %s: refusing to connect "
                      "(if the host was reinstalled, remove its line there)", *self._endpoint, known.path)
        return ok

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport._lost(self._key, self, exc)


class _Reader:
    """An SSH channel's reading side as the Connection expects it: asyncssh's errors become
    ``ConnectionResetError`` (a lost connection is a closed connection, whatever noticed it)."""

    def __init__(self, reader: asyncssh.SSHReader):
        self._reader = reader

    async def readexactly(self, n: int) -> bytes:
        try:
            return await self._reader.readexactly(n)
        except asyncssh.Error as exc:
            raise ConnectionResetError(f"SSH connection lost: {exc.reason}") from None

    def at_eof(self) -> bool:
        return self._reader.at_eof()


class _Writer:
    """An SSH channel's writing side, with asyncssh's errors made ``ConnectionResetError``."""

    def __init__(self, writer: asyncssh.SSHWriter):
        self._writer = writer

    def write(self, data: bytes) -> None:
        try:
            self._writer.write(data)
        except (asyncssh.Error, BrokenPipeError) as exc:
            raise ConnectionResetError(f"SSH channel closed: {exc}") from None

    def write_eof(self) -> None:
        self._writer.write_eof()

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except asyncssh.Error as exc:
            raise ConnectionResetError(f"SSH connection lost: {exc.reason}") from None

    def close(self) -> None:
        self._writer.close()

    def is_closing(self) -> bool:
        return self._writer.is_closing()

    async def wait_closed(self) -> None:
        try:
            await self._writer.wait_closed()
        except asyncssh.Error as exc:
            raise ConnectionResetError(f"SSH connection lost: {exc.reason}") from None


class SshTransport(Transport):
    """Daemons on other hosts, by sinful address, over cached SSH connections (module header).

    Args:
        credentials: returns ``(username, token)`` for a new connection, or None (anonymous).
        options: keepalives, timeouts, ciphers, host key trust.
    """

    def __init__(self, credentials: Credentials, options: SshOptions | None = None):
        self.credentials = credentials
        self.options = options or SshOptions()
        self._known_hosts = KnownHosts(self.options.known_hosts_file) if self.options.known_hosts_file else None
        self._conns: dict[_Key, tuple[asyncssh.SSHClientConnection, _Client]] = {}
        self._pending: dict[_Key, asyncio.Future] = {}
        self._tasks: set[asyncio.Task] = set()
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop the cached connections belong to
        #: SSH connections made so far (statistics and tests)
        self.connections_opened = 0
        #: channels opened so far
        self.channels_opened = 0

    # --- Transport ------------------------------------------------------------------------------

    async def open_connection(self, address: str, *, timeout: float | None = DEFAULT_TIMEOUT) -> Connection:
        return await self._open_channel(address, SMALL, timeout)

    async def open_bulk_connection(self, address: str, *, timeout: float | None = DEFAULT_TIMEOUT) -> Connection:
        """A channel to ``address`` on the host's bulk SSH connection (module header), so that a
        file stream on it does not delay the small requests of :meth:`open_connection`."""
        return await self._open_channel(address, BULK, timeout)

    async def _open_channel(self, address: str, lane: str, timeout: float | None) -> Connection:
        target = parse_remote(address)
        key = (*target.endpoint, lane)
        deadline = None if timeout is None else time.monotonic() + timeout
        for attempt in (1, 2):
            conn = await self._connection(target.endpoint, deadline, lane)
            try:
                async with asyncio.timeout(_remaining(deadline)):
                    writer, reader, _ = await conn.open_session(
                        subsystem=target.name, encoding=None, window=self.options.window,
                        max_pktsize=self.options.max_pktsize)
            except asyncssh.ChannelOpenError as exc:
                if conn.is_closed() and attempt == 1:
                    continue  # the cached connection died under us: once more on a fresh one
                raise DaemonUnreachable(f"{target.host}:{target.port} has no {target.name} daemon behind its "
                                        f"shared port ({exc.reason}); is it in that host's DAEMON_LIST "
                                        "and running?") from None
            except (asyncssh.Error, OSError) as exc:
                self._forget(key, conn)
                if attempt == 1:
                    continue
                raise DaemonUnreachable(f"lost the connection to {target.host}:{target.port} while opening a "
                                        f"channel to {target.name}: {exc}") from None
            except TimeoutError:
                raise HostSilent(f"opening a channel to {address} took over {timeout:g} s") from None
            self.channels_opened += 1
            peer = PeerInfo(host=target.host, description=address)
            return SshConnection(_Reader(reader), _Writer(writer), peer=peer, label=address)
        raise AssertionError("unreachable")  # pragma: no cover

    async def start_server(self, address: str, handler: ConnectionHandler, *,
                           task_group: asyncio.TaskGroup) -> Server:
        raise BadAddress(f"cannot listen as {address!r} over SSH: daemons listen on their Unix socket and the "
                         "host's shared port forwards network peers to it")

    def connected(self, host: str, port: int, lane: str = SMALL) -> bool:
        """Whether an SSH connection to ``host:port`` for ``lane`` is open and cached now."""
        return self.cached(host, port, lane) is not None

    def cached(self, host: str, port: int, lane: str = SMALL) -> asyncssh.SSHClientConnection | None:
        """The open SSH connection to ``host:port`` for ``lane`` (statistics and tests), or None."""
        entry = self._conns.get((host, port, lane))
        return entry[0] if entry is not None and not entry[0].is_closed() else None

    async def aclose(self) -> None:
        """Close every SSH connection (their channels end with them)."""
        conns = [conn for conn, _ in self._conns.values()]
        self._conns.clear()
        for conn in conns:
            conn.close()
        await asyncio.gather(*(conn.wait_closed() for conn in conns), return_exceptions=True)

    # --- connections ----------------------------------------------------------------------------

    def _adopt_loop(self) -> None:
        """Forget connections made under another event loop: a tool runs one ``asyncio.run`` per
        request, and a connection (its transport, its futures) works only in the loop that made it."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        # (their sockets close when the dead loop's transports are collected)
        self._conns.clear()
        self._pending.clear()
        self._loop = loop

    async def _connection(self, endpoint: tuple[str, int], deadline: float | None,
                          lane: str = SMALL) -> asyncssh.SSHClientConnection:
        self._adopt_loop()
        key = (*endpoint, lane)
        entry = self._conns.get(key)
        if entry is not None and not entry[0].is_closed():
            return entry[0]
        pending = self._pending.get(key)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            # a failure nobody waits for any more (all callers timed out) is not an error to report
            pending.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._pending[key] = pending
            task = asyncio.create_task(self._connect(key, deadline), name=f"ssh connect {key}")
            self._tasks.add(task)  # held until done: the loop keeps only weak references
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(lambda t, fut=pending: self._settle(key, fut, t))
        try:
            async with asyncio.timeout(_remaining(deadline)):
                return await asyncio.shield(pending)
        except TimeoutError:
            raise HostSilent(f"connecting to the shared port at {key[0]}:{key[1]} "
                             "took too long") from None

    def _settle(self, key: _Key, future: asyncio.Future, task: asyncio.Task) -> None:
        self._pending.pop(key, None)
        if future.done():
            return
        if task.cancelled():
            future.set_exception(DaemonUnreachable(f"connecting to {key[0]}:{key[1]} was cancelled"))
        elif task.exception() is not None:
            future.set_exception(task.exception())
        else:
            future.set_result(task.result())

    async def _connect(self, key: _Key, deadline: float | None) -> asyncssh.SSHClientConnection:
        host, port, _ = key
        budget = time.monotonic() + self.options.connect_timeout
        if deadline is not None:
            budget = min(budget, deadline)
        delay, tries = _BACKOFF_FIRST, 0
        while True:
            tries += 1
            remaining = budget - time.monotonic()
            if remaining <= 0:
                raise HostSilent(f"cannot connect to the shared port at {host}:{port} within "
                                        f"{self.options.connect_timeout:g} s (SSH_CONNECT_TIMEOUT)")
            try:
                return await self._connect_once(key, remaining)
            except asyncssh.PermissionDenied as exc:
                raise LoginRefused(f"the shared port at {host}:{port} refused our credentials ({exc.reason}): "
                                   "is this host's pool key (or your token) the pool's?") from None
            except (asyncssh.HostKeyNotVerifiable, asyncssh.KeyExchangeFailed) as exc:
                raise DaemonUnreachable(f"cannot trust the host at {host}:{port}: {exc.reason}") from None
            except (TimeoutError, asyncio.TimeoutError):
                raise HostSilent(f"connecting to the shared port at {host}:{port} took over "
                                        f"{min(remaining, self.options.connect_timeout):g} s "
                                        "(SSH_CONNECT_TIMEOUT); is the host up and reachable?") from None
            except (OSError, asyncssh.Error) as exc:
                if budget - time.monotonic() <= delay:
                    error = HostSilent if silent_host(exc) else DaemonUnreachable
                    raise error(f"cannot connect to the shared port at {host}:{port} "
                                f"({tries} tries): {exc}; is htc running there?") from None
                log.debug("connecting to %s:%d failed (%s); again in %.2f s", host, port, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _BACKOFF_CEILING)

    async def _connect_once(self, key: _Key, timeout: float) -> asyncssh.SSHClientConnection:
        host, port, lane = key
        creds = self.credentials()
        username, password = (ANONYMOUS, None) if creds is None else creds
        opts = self.options
        known_hosts = opts.trusted if opts.trusted is not None else ([], [], [])
        client: _Client | None = None

        def factory() -> _Client:
            nonlocal client
            client = _Client(self, key)
            return client

        extra = {}
        if opts.trusted is None:
            extra["server_host_key_algs"] = ["ssh-ed25519"]  # TOFU pins the plain key, not the certificate
        if opts.client_keys:
            auth = ("publickey", "password") if password is not None else ("publickey",)
        else:
            auth = ("password",) if password is not None else ("none",)
        conn = await asyncssh.connect(
            host, port, client_factory=factory, username=username, password=password,
            known_hosts=known_hosts, client_keys=list(opts.client_keys) or None, agent_path=None, config=None,
            preferred_auth=",".join(auth),
            encryption_algs=list(opts.ciphers), keepalive_interval=opts.keepalive_interval,
            keepalive_count_max=opts.keepalive_count_max, connect_timeout=timeout,
            login_timeout=timeout, window=opts.window, max_pktsize=opts.max_pktsize, **extra)
        assert client is not None
        self._conns[key] = (conn, client)
        self.connections_opened += 1
        log.debug("SSH connection to %s:%d open for %s conversations (as %s)", host, port, lane, username)
        return conn

    def _lost(self, key: _Key, client: _Client, exc: Exception | None) -> None:
        entry = self._conns.get(key)
        if entry is not None and entry[1] is client:
            del self._conns[key]
            if exc is not None:
                log.info("SSH connection to %s:%d (%s) lost: %s", *key, exc)

    def _forget(self, key: _Key, conn: asyncssh.SSHClientConnection) -> None:
        entry = self._conns.get(key)
        if entry is not None and entry[0] is conn:
            del self._conns[key]
        conn.close()


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())
