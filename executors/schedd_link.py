"""The pool backend's line to its schedd: one connection, retried while the schedd restarts.

Theory of operation
-------------------
A pool on this machine (a Unix socket) is asked over a blocking socket in the calling thread
(:mod:`htc.wire.blocking`, one connection, a lock); any other transport through one
connection owned by a private event loop on its own thread (:class:`IOThread`), so the backend
works from any thread -- including a Jupyter cell, whose thread already runs an event loop.
(Going through the loop costs two thread hand-offs per request, which on a small VM cost more
than the request.) The collector and the master are asked through that loop too.

A request that fails because the schedd is restarting is retried for ``lost_after`` seconds,
and then for as long as the pool's master says it is still restarting the schedd (its backoff
may be minutes); only a master that gave up, or is gone, makes the executor broken
(:class:`~htc.executors.errors.ScheddLost`).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

from htc.classad import ClassAd
from htc.errors import HTCError, UsageError
from htc.executors.errors import ScheddLost
from htc.wire import blocking
from htc.wire import messages as m
from htc.wire.blocking import BlockingConnection
from htc.wire.errors import ConnectionClosed, DaemonUnreachable, RequestTimeout
from htc.wire.transport import Transport, UnixTransport

__all__ = ["IOThread", "ScheddLink", "transport_for"]

_TRANSIENT = (DaemonUnreachable, ConnectionClosed, RequestTimeout, ConnectionError)
#: the master's states of a schedd that will answer again (htc.daemons.master.states.DState values)
_COMING_BACK = frozenset({"Starting", "Running", "Restarting", "Backoff"})


class IOThread:
    """A private event loop on a daemon thread; ``call`` runs a coroutine there from any thread."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def call(self, coro, timeout: float | None = None):
        """Run ``coro`` on the loop and return its result (waiting at most ``timeout`` s)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        """Stop the loop and its thread (a second call does nothing)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


def transport_for(pool: Any, *, start: bool = True) -> tuple[Transport, Path | None]:
    """The transport to the pool's daemons, and its home directory when known.

    Args:
        pool: None (the personal pool under ``$HTC_HOME``), a pool's home directory, its
            sockets directory, or a :class:`~htc.wire.transport.Transport`.
        start: start the personal pool (``pool=None``) when it is not running.

    Raises:
        ScheddLost: the personal pool could not be started.
        UsageError: ``pool`` is not a pool.
    """
    if isinstance(pool, Transport):
        return pool, None
    if pool is None:
        from htc.client import start_pool
        from htc.config import htc_home

        home = Path(htc_home())
        if start:
            try:
                start_pool()
            except HTCError as exc:
                raise ScheddLost(f"could not start the personal pool under {home}: {exc}") from exc
        return UnixTransport(home / "sockets"), home
    path = Path(os.fspath(pool)).expanduser()
    if (path / "sockets").is_dir():
        return UnixTransport(path / "sockets"), path
    if path.is_dir() and any(path.glob("*.sock")):
        return UnixTransport(path), path.parent
    raise UsageError(f"pool={pool!r} is not a pool: give a pool's home directory (with a sockets/ folder), its "
                     "sockets directory, or a Transport; None uses the personal pool under $HTC_HOME")


class ScheddLink:
    """Requests to one schedd (and its pool's master and collector) from any thread.

    Args:
        transport: how to reach the pool's daemons.
        schedd: the schedd's address on that transport.
        lost_after: seconds of failed requests before the schedd counts as lost.
        name: names the I/O thread.
    """

    def __init__(self, transport: Transport, schedd: str, lost_after: float, name: str):
        self.transport = transport
        self.schedd = schedd
        self.lost_after = lost_after
        self.io = IOThread(name)
        #: when requests started failing (``time.monotonic()``; None: the last one was answered)
        self.failing_since: float | None = None
        self._conn = None
        self._req_lock: asyncio.Lock | None = None
        self._blocking: BlockingConnection | None = None
        self._blocking_ok = True  # False: the transport has no blocking form (requests go through io)
        self._blocking_lock = threading.Lock()
        self._last_master_word: str | None = None  # the schedd's state at its master's last answer

    async def _request_async(self, msg: m.Message, timeout: float) -> m.Message:
        if self._req_lock is None:
            self._req_lock = asyncio.Lock()
        async with self._req_lock:
            if self._conn is None or self._conn.closed:
                self._conn = await self.transport.open_connection(self.schedd, timeout=timeout)
            try:
                return await self._conn.request(msg, timeout=timeout)
            except BaseException:
                conn, self._conn = self._conn, None
                await conn.aclose()
                raise

    def _request_once(self, msg: m.Message, timeout: float) -> m.Message:
        # A blocking socket in the calling thread where the transport has one (a Unix socket):
        # going through the I/O thread's loop costs two thread hand-offs per request.
        if self._blocking_ok:
            with self._blocking_lock:
                if self._blocking is None or self._blocking.closed:
                    self._blocking = blocking.connect(self.transport, self.schedd, timeout=timeout)
                    self._blocking_ok = self._blocking is not None
                if self._blocking is not None:
                    return self._blocking.request(msg, timeout=timeout)
        return self.io.call(self._request_async(msg, timeout), timeout + 5)

    def request(self, msg: m.Message, *, timeout: float = 30.0, retry: bool = True) -> m.Message:
        """One request to the schedd; transient failures are retried for ``lost_after`` seconds,
        and after that for as long as the pool's master is still restarting the schedd.

        Raises:
            ScheddLost: the schedd stayed unreachable (at once with ``retry=False``).
            RemoteError: the schedd refused the request.
        """
        started = time.monotonic()
        delay = 0.05
        while True:
            try:
                reply = self._request_once(msg, timeout)
                self.failing_since = None
                return reply
            except _TRANSIENT as exc:
                waited = time.monotonic() - started
                if not retry or (waited > self.lost_after and not self.schedd_coming_back()):
                    raise ScheddLost(f"the schedd {self.schedd!r} did not answer ({type(exc).__name__}: {exc}; "
                                     f"tried for {waited:.1f} s){self._master_says() if retry else ''}; 'htc pool "
                                     "status' shows the "
                                     "daemons; the jobs stay in the queue, attach to a named session once it is "
                                     "back") from exc
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def given_up(self, now: float) -> bool:
        """After a failed request at ``now`` (``time.monotonic()``): whether the schedd has failed
        for more than ``lost_after`` seconds and its master is not bringing it back."""
        if self.failing_since is None:
            self.failing_since = now
        return now - self.failing_since > self.lost_after and not self.schedd_coming_back()

    def schedd_coming_back(self) -> bool:
        """Whether the pool's master still runs, or is restarting, our schedd (its restart
        backoff can outlast ``lost_after``): False when it has given up on it, turned it off,
        does not run it, or is gone itself."""
        state = self._schedd_state()
        self._last_master_word = state
        return state in _COMING_BACK

    def _schedd_state(self) -> str | None:
        """The schedd's state as its master sees it (None: the master does not answer or does
        not run a daemon of that name)."""
        from htc.client import send_command_async

        try:
            reply = self.io.call(send_command_async("master", m.QueryMaster(), transport=self.transport,
                                                    timeout=5.0), 10)
        except (HTCError, OSError, TimeoutError):
            return None
        if not isinstance(reply, m.MasterStatus) or reply.shutting_down:
            return None
        return next((d.state for d in reply.daemons if d.name.lower() == self.schedd.lower()), None)

    def _master_says(self) -> str:
        state = self._last_master_word
        if state is None:
            return "; the pool's master does not answer (or does not run it)"
        return f"; its master has it in state {state}"

    def startd_ads(self, timeout: float = 10.0) -> list[ClassAd]:
        """The slot ads in the pool's collector.

        Raises:
            HTCError, OSError, TimeoutError: the collector did not answer.
        """
        from htc.client import AdType, query_collector_async

        return self.io.call(query_collector_async(AdType.Startd, transport=self.transport, timeout=timeout),
                            timeout + 5)

    def close(self) -> None:
        """Close the connections and stop the I/O thread."""
        with self._blocking_lock:
            if self._blocking is not None:
                self._blocking.close()
                self._blocking = None
        if self._conn is not None:
            try:
                self.io.call(self._conn.aclose(), 5)
            except (HTCError, OSError, TimeoutError):
                self._conn = None
        self.io.close()
