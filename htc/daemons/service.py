"""The thin asyncio shell around a daemon's sans-IO core.

Theory of operation
-------------------
:class:`DaemonService` owns every piece of I/O a daemon does; the core (see
:mod:`htc.daemons.core`) owns every decision.  One ``asyncio.TaskGroup`` holds all tasks: the
server's connection handlers, outgoing sends, and whatever a subclass starts (the master's child
watchers).  The main coroutine sleeps until the core's ``next_deadline()``, or until an event fed
in moves that deadline earlier (or ends the daemon), whichever comes first.

Feeding is synchronous and ordered.  :meth:`DaemonService.feed` queues an event; the first caller
drains the queue, calling ``core.handle(event, clock.time())`` and executing each action before
the next event.  Actions that need I/O either complete without awaiting (a :class:`Reply` is
written into the connection's buffer; a signal is sent) or start a task whose outcome comes back
as another event (:class:`Send` -> ``SendDone``/``SendFailed``).  So the core never runs
concurrently with itself and sees the world one event at a time, as in its tests.

Requests to other daemons go through :attr:`DaemonService.peers`, a
:class:`~htc.wire.peers.PeerConnections` that keeps connections open for reuse (its header says
when a request is sent again and when not; in network mode, other hosts' over SSH: network.py).
The other way round, a connection a peer opened is served request after request until the peer
closes it or stays silent for ``idle_timeout`` (300 s, longer than the 60 s a peer keeps an
idle connection, so the client side closes first).

Two messages every daemon answers the same way are handled here, not in cores: ``Ping`` (who am
I, since when) and ``Reconfig`` (re-read the configuration, then feed ``Reconfigured``; SIGHUP
does the same).  SIGTERM/SIGINT feed ``StopRequested()``, SIGQUIT ``StopRequested(fast=True)``;
the core answers with :class:`Exit` when it is done.  A daemon started by a master also stops
(fast) when that master dies, which it learns from a pidfd, without polling.

Every request is authorized here, in one place, before it reaches the core (or Ping/Reconfig):
the peer's uid (SO_PEERCRED) is mapped to an identity and the level the message needs
(:data:`htc.wire.authz.REQUIRED`) is checked against the ALLOW/DENY lists of the daemon's
configuration (re-read with it). A refused request is answered ``ErrorReply(code="denied")``
naming the identity, the level and the list that decided, and logged as ``PERMISSION DENIED``
with the peer's uid and pid; the connection stays open. An accepted request reaches the core
with the peer's account name and whether it is an administrator filled in
(:class:`~htc.wire.transport.PeerInfo`), which is what the schedd's ownership checks use.

Errors
------
One request must not end a daemon.  When the core raises while handling a ``Received`` event
(a bug, or an input no check foresaw: a constraint nobody could evaluate, a number too big to
convert), :meth:`DaemonService.feed` logs the exception with its traceback in the daemon log,
answers the request with ``ErrorReply(code="internal")`` naming the message and the error,
and goes on with the next event: every other client is still served.  The core did not get to
return actions for that event, so nothing of its answer was sent; what it had changed in its
memory before raising stays changed (the job queue's sqlite transactions roll back on the
exception, so what is on disk stays whole), which is why the log line says so loudly.

When the core raises on any other event (a ``Tick``, a send's outcome, a child's exit, a
signal), that is a bug in the daemon's own work, not in what a client sent: it ends the
TaskGroup and the process with a traceback in the daemon log (raised from the main task, even
when a connection's task was the one feeding), and the master restarts the daemon, so that a
core whose internal state may be broken starts afresh.  Whatever else raises while a
connection is served (an executor of actions, say) closes that connection with an
``internal`` error and is logged (:class:`~htc.wire.transport.Server`); the daemon serves on.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import signal
import subprocess
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

from htc import __version__
from htc.errors import HTCError, UsageError
from htc.daemons import core as c
from htc.daemons.clock import REAL, Clock
from htc.daemons.paths import LOG_FILE_NAMES, DaemonPaths, home_dir, load_daemon_config  # noqa: F401 (the daemons' import path)
from htc.wire import authz
from htc.wire import messages as m
from htc.wire.errors import ConnectionClosed, RequestTimeout
from htc.wire.identity import host_names_of
from htc.wire.peers import PeerConnections
from htc.wire.transport import Connection, PeerInfo, Server, Transport

#: environment variable a master sets for its children so they can follow it out
PARENT_PID_ENV = "HTC_MASTER_PID"

_FORMAT = logging.Formatter("%(asctime)s %(message)s", datefmt="%m/%d/%y %H:%M:%S")


class DaemonService:
    """Drive ``core`` with real sockets, timers and signals.

    Args:
        daemon: the daemon's name (``"collector"``), used in logs and Pong.
        core: the sans-IO core.
        transport: how to listen and reach other daemons.
        address: the name to listen as (default: ``daemon``).
        log_file: the daemon log (None: log only through the caller's logging setup).
        reload_settings: returns fresh settings for the core after SIGHUP/Reconfig; raises
            :class:`~htc.errors.UsageError` for a broken configuration (old settings stay).
        idle_timeout: seconds a client connection may stay silent before it is closed.
        flush_timeout: seconds pending sends may take after :class:`Exit` before being cancelled.
        authorizer: who may send what (default: built from the daemon's configuration when it
            starts, and again at each reconfiguration).
        clock: where the time comes from and how the service waits (:mod:`htc.daemons.clock`;
            a test or the simulator passes a FakeClock).
    """

    def __init__(self, daemon: str, core: c.Core, transport: Transport, *, address: str | None = None,
                 log_file: Path | None = None, reload_settings: Callable[[], Any] | None = None,
                 idle_timeout: float = 300.0, flush_timeout: float = 2.0,
                 authorizer: authz.Authorizer | None = None, clock: Clock = REAL):
        self.daemon = daemon
        self.clock = clock
        self.core = core
        self.transport = transport
        #: connections to other daemons, kept for reuse (requests from cores go through it)
        self.peers = PeerConnections(transport)
        self.address = address or daemon
        self.log_file = log_file
        self.reload_settings = reload_settings
        self.idle_timeout = idle_timeout
        self.flush_timeout = flush_timeout
        self.authorizer = authorizer
        self._own_authorizer = authorizer is None
        self.log = logging.getLogger(f"htc.daemons.{daemon}")
        self.started_at = clock.time()
        self._queue: collections.deque[c.Event] = collections.deque()
        self._draining = False
        self._wakeup = asyncio.Event()
        #: the core's deadline the main task sleeps until (None: until woken)
        self._sleeping_until: float | None = None
        self._exit_status: int | None = None
        #: an exception the core raised on an event that was not a request (see the header)
        self._failure: Exception | None = None
        self._conns: dict[int, Connection] = {}
        self._conn_ids = itertools.count(1)
        self._tg: asyncio.TaskGroup | None = None
        self._server: Server | None = None
        self._sends: set[asyncio.Task] = set()
        self._tasks: set[asyncio.Task] = set()
        self._conversations: dict[type, Callable[[Connection, m.Message, PeerInfo], Coroutine]] = {}
        self._executors: dict[type, Callable[[Any], None]] = {
            c.Reply: self._do_reply,
            c.Send: self._do_send,
            c.Log: self._do_log,
            c.Exit: self._do_exit,
        }

    # --- for subclasses ------------------------------------------------------------------

    def register_action(self, action_type: type, executor: Callable[[Any], None]) -> None:
        """Teach the service a daemon-specific action (executors must not block)."""
        self._executors[action_type] = executor

    def execute(self, actions) -> None:
        """Execute ``actions`` a conversation made outside a turn of the core (its own queue
        change's writes, say), as a turn's actions are executed."""
        for action in actions:
            executor = self._executors.get(type(action))
            if executor is None:
                raise TypeError(f"{self.daemon}: the service cannot execute {action!r}")
            executor(action)

    def register_conversation(self, msg_type: type, handler: Callable[..., Coroutine]) -> None:
        """Serve ``msg_type`` with ``await handler(conn, msg, peer)``, which owns the connection (a file transfer)."""
        self._conversations[msg_type] = handler

    def ask_core(self, msg: m.Message, peer: PeerInfo) -> asyncio.Future:
        """Feed ``msg`` to the core as a request of ``peer`` (already authorized: a request
        inside a conversation) and return a future of the core's reply message."""
        reply: asyncio.Future = asyncio.get_running_loop().create_future()
        conn_id = next(self._conn_ids)
        self._conns[conn_id] = _ReplySink(reply, lambda: self._conns.pop(conn_id, None))  # type: ignore[assignment]
        self.feed(c.Received(msg=msg, conn_id=conn_id, peer=peer))
        return reply

    def start_task(self, coro: Coroutine, name: str) -> asyncio.Task:
        """Run ``coro`` in the service's TaskGroup; it is cancelled when the service exits."""
        if self._tg is None:
            coro.close()
            raise RuntimeError(f"{self.daemon}: start_task({name!r}) before the service runs")
        task = self._tg.create_task(coro, name=f"{self.daemon}: {name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def feed(self, event: c.Event) -> None:
        """Hand ``event`` to the core and execute the actions it returns (see the module header)."""
        self._queue.append(event)
        if self._draining:
            return
        self._draining = True
        try:
            while self._queue:
                event = self._queue.popleft()
                try:
                    actions = self.core.handle(event, self.clock.time())
                except Exception as exc:
                    if not isinstance(event, c.Received):
                        # the daemon's own work: end it from the main task, whoever fed this
                        if self._failure is None:
                            self._failure = exc
                        raise
                    self._request_failed(event, exc)
                    continue
                for action in actions:
                    executor = self._executors.get(type(action))
                    if executor is None:
                        raise TypeError(f"{self.daemon}: the service cannot execute {action!r}")
                    executor(action)
        finally:
            self._draining = False
            if not self._wakeup.is_set() and self._must_wake():
                self._wakeup.set()

    def _must_wake(self) -> bool:
        """Whether the main task must look again now: the daemon is to exit or failed, or the
        core wants a Tick before the deadline the main task sleeps until (any later deadline is
        found when it wakes then; a wake per event cost a task step and a timer each)."""
        if self._exit_status is not None or self._failure is not None:
            return True
        try:
            deadline = self.core.next_deadline()
        except Exception:  # noqa: BLE001 - the main task asks again and fails the daemon with it
            return True
        return deadline is not None and (self._sleeping_until is None or deadline < self._sleeping_until)

    def _request_failed(self, event: c.Received, exc: Exception) -> None:
        """The core raised on one request: log it, answer ``internal``, keep serving (module header)."""
        name = type(event.msg).__name__
        peer = event.peer
        who = peer.description or (f"pid {peer.pid} (uid {peer.uid})" if peer.pid else "a client")
        self.log.error("%s (pid %d): handling %s from %s failed; answered with an error and "
                       "serving on (this request's changes to memory may be partial): %s: %s",
                       self.daemon, os.getpid(), name, who, type(exc).__name__,
                       exc, exc_info=exc)
        if getattr(event.msg, "reply_type", None) is None:
            return  # the sender waits for no answer
        text = str(exc)
        if len(text) > 300:
            text = text[:300] + "..."
        where = f"; see {self.log_file}" if self.log_file is not None else ""
        self._do_reply(c.Reply(event.conn_id, m.ErrorReply(
            code="internal",
            message=f"the {self.daemon} failed while handling {name}: {type(exc).__name__}: {text}{where}")))

    def spawn(self, argv: list[str], *, exited: Callable[[int, int], c.Event],
              env: dict[str, str] | None = None, stderr_path: Path | None = None) -> int:
        """Start a child process; feed ``exited(pid, returncode)`` when it ends.

        The child gets its own session (a terminal's Ctrl-C reaches only the parent, which stops
        its children in order) and is reaped through a pidfd, without polling or threads.

        Args:
            argv: the command.
            exited: builds the event to feed; ``returncode`` < 0 means killed by that signal.
            env: its environment (default: ours).
            stderr_path: file its standard error is appended to (default: discarded).

        Returns:
            The child's pid.

        Raises:
            OSError: the command could not be started.
        """
        stderr = open(stderr_path, "ab") if stderr_path is not None else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                    env=env, start_new_session=True, close_fds=True)
        finally:
            if stderr_path is not None:
                stderr.close()
        self.start_task(self._reap(proc, exited), f"reap pid {proc.pid}")
        return proc.pid

    async def _reap(self, proc: subprocess.Popen, exited: Callable[[int, int], c.Event]) -> None:
        await process_gone(proc.pid)
        self.feed(exited(proc.pid, proc.wait()))

    async def run_command(self, argv: list[str] | tuple[str, ...], stdin_text: str, timeout: float = 60.0) -> None:
        """Run a helper command (a mail program) to completion, logging how it went."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except OSError as exc:
            self.log.error("cannot run %s: %s", argv[0], exc)
            return
        try:
            async with asyncio.timeout(timeout):
                _, err = await proc.communicate(stdin_text.encode())
        except TimeoutError:
            proc.kill()
            await proc.wait()
            self.log.error("%s took over %g s and was killed", argv[0], timeout)
            return
        if proc.returncode:
            self.log.error("%s failed with status %d: %s", argv[0], proc.returncode,
                           err.decode(errors="replace").strip())
        else:
            self.log.info("ran %s", " ".join(argv))

    # --- running -----------------------------------------------------------------------------

    async def run(self) -> int:
        """Serve until the core exits; return the exit status.

        Raises:
            AddressInUse: another daemon already serves this address.
        """
        handler = self._open_log()
        loop = asyncio.get_running_loop()
        try:
            if self._own_authorizer:
                self.authorizer = self._load_authorizer()
                from htc.daemons.network import daemon_transport  # here: asyncssh only in network mode
                transport = daemon_transport(self.transport, load_daemon_config(self.daemon.upper()))
                if transport is not self.transport:
                    self.peers = PeerConnections(transport)
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                server = self._server = await self.transport.start_server(self.address, self._serve, task_group=tg)
                self._install_signals(loop)
                parent_fd = self._watch_parent(loop)
                self.log.info("%s (pid %d) serving as %r", self.daemon, os.getpid(), self.address)
                try:
                    self.feed(c.Started())
                    await self._wait_for_exit()
                finally:
                    await server.aclose()
                    await self._finish_tasks()
                    await self.peers.aclose()
                    if parent_fd is not None:
                        loop.remove_reader(parent_fd)
                        os.close(parent_fd)
            self.log.info("%s (pid %d) exiting with status %d", self.daemon, os.getpid(), self._exit_status)
            return self._exit_status or 0
        except BaseExceptionGroup as group:
            # A lone HTCError (another daemon already serves our address) is a message, not a crash.
            if len(group.exceptions) == 1 and isinstance(group.exceptions[0], HTCError):
                self.log.error("%s (pid %d) cannot run: %s", self.daemon, os.getpid(), group.exceptions[0])
                raise group.exceptions[0] from None
            self.log.exception("%s (pid %d) failed", self.daemon, os.getpid())
            raise
        except BaseException:
            self.log.exception("%s (pid %d) failed", self.daemon, os.getpid())
            raise
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            if handler is not None:
                logging.getLogger("htc").removeHandler(handler)
                handler.close()

    async def _wait_for_exit(self) -> None:
        while self._exit_status is None:
            if self._failure is not None:
                raise self._failure
            deadline = self.core.next_deadline()
            self._wakeup.clear()
            delay = None if deadline is None else deadline - self.clock.time()
            if delay is not None and delay <= 0:
                now = self.clock.time()
                self.feed(c.Tick())
                after = self.core.next_deadline()
                if self._exit_status is None and after is not None and after <= now:
                    raise RuntimeError(f"{self.daemon}: core kept deadline {after} after a Tick at {now}")
                continue
            self._sleeping_until = deadline
            await self.clock.wait_for(self._wakeup, delay)

    async def _finish_tasks(self) -> None:
        """Give pending sends a moment (an ad invalidation on the way out), then cancel the rest."""
        if self._sends:
            await asyncio.wait(list(self._sends), timeout=self.flush_timeout)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _open_log(self) -> logging.Handler | None:
        if self.log_file is None:
            return None
        self.log_file.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        handler = logging.FileHandler(self.log_file)
        handler.setFormatter(_FORMAT)
        root = logging.getLogger("htc")
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        return handler

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        def stop(fast: bool, signame: str) -> None:
            self.log.info("got %s: %s shutdown", signame, "fast" if fast else "graceful")
            self.feed(c.StopRequested(fast=fast))

        loop.add_signal_handler(signal.SIGTERM, stop, False, "SIGTERM")
        loop.add_signal_handler(signal.SIGINT, stop, False, "SIGINT")
        loop.add_signal_handler(signal.SIGQUIT, stop, True, "SIGQUIT")
        loop.add_signal_handler(signal.SIGHUP, self._reconfigure, "SIGHUP")

    def _watch_parent(self, loop: asyncio.AbstractEventLoop) -> int | None:
        """If a master started us, stop (fast) when it exits; a pidfd says when, without polling."""
        expected = os.environ.get(PARENT_PID_ENV)
        if not expected or not expected.isdigit() or int(expected) != os.getppid():
            return None
        try:
            fd = os.pidfd_open(int(expected))
        except (AttributeError, OSError) as exc:
            self.log.warning("cannot watch the master (pid %s): %s", expected, exc)
            return None

        def parent_gone() -> None:
            loop.remove_reader(fd)
            self.log.warning("the master (pid %s) exited; shutting down", expected)
            self.feed(c.StopRequested(fast=True))

        loop.add_reader(fd, parent_gone)
        return fd

    def _load_authorizer(self) -> authz.Authorizer:
        """The ALLOW/DENY policy of this daemon's configuration (warnings go to the log).

        Raises:
            UsageError: the configuration is broken.
        """
        config = load_daemon_config(self.daemon.upper())
        authorizer = authz.authorizer_from_config(self.daemon, config, pool_uid=os.geteuid(),
                                                  user_of_uid=authz.user_of_uid, host_names=host_names_of)
        for warning in authorizer.warnings():
            self.log.warning("%s", warning)
        return authorizer

    def _reconfigure(self, why: str) -> str | None:
        """Re-read settings and feed Reconfigured; return an error text if the config is broken."""
        if self._own_authorizer:
            try:
                self.authorizer = self._load_authorizer()
            except HTCError as exc:
                self.log.error("%s: keeping the old configuration: %s", why, exc)
                return str(exc)
        if self.reload_settings is None:
            self.log.info("%s: nothing to reconfigure", why)
            self.feed(c.Reconfigured(None))
            return None
        try:
            settings = self.reload_settings()
        except HTCError as exc:
            self.log.error("%s: keeping the old configuration: %s", why, exc)
            return str(exc)
        self.log.info("%s: configuration re-read", why)
        self.feed(c.Reconfigured(settings))
        return None

    # --- connections -------------------------------------------------------------------------

    def _authorize(self, conn: Connection, msg: m.Message, who: authz.Identity | None) -> authz.Identity | None:
        """The peer's identity if it may send ``msg`` (None when refused: answered and logged here)."""
        if self.authorizer is None:
            raise RuntimeError(f"{self.daemon}: serving a request before the authorization policy was loaded")
        if who is None:
            who = self.authorizer.identify_peer(conn.peer)
        decision = self.authorizer.check(msg, who)
        if decision.allowed:
            return who
        self.log.warning("PERMISSION DENIED to %s for %s, access level %s: %s", who.describe(),
                         type(msg).__name__, decision.level.value, decision.reason)
        conn.send_nowait(m.ErrorReply(code="denied", message=self.authorizer.refusal(msg, who, decision)))
        return None

    async def _serve(self, conn: Connection) -> None:
        conn_id = next(self._conn_ids)
        self._conns[conn_id] = conn
        who: authz.Identity | None = None
        peer: PeerInfo | None = None
        made_from: tuple = ()  # (identity, connection's peer, policy) the peer record was made from
        try:
            while self._exit_status is None:
                try:
                    msg = await conn.recv(timeout=self.idle_timeout)
                except RequestTimeout:
                    return
                who = self._authorize(conn, msg, who)
                if who is None:  # refused: answered and logged
                    await conn.drain()
                    continue
                # The request's peer record depends only on these three, which stay the same
                # request after request (the policy changes with a reconfiguration): made once.
                if (peer is None or made_from[0] is not who or made_from[1] is not conn.peer
                        or made_from[2] is not self.authorizer):
                    made_from = (who, conn.peer, self.authorizer)
                    peer = replace(conn.peer, user=who.user, administrator=self.authorizer.is_administrator(who),
                                   identity=who.name if who.remote else conn.peer.identity)
                if (talk := self._conversations.get(type(msg))) is not None:  # one per connection, to its end
                    return await talk(conn, msg, peer)
                if isinstance(msg, m.Ping):
                    conn.send_nowait(m.Pong(daemon=self.daemon, pid=os.getpid(),
                                            started_at=self.started_at, version=__version__))
                elif isinstance(msg, m.Reconfig):
                    error = self._reconfigure("Reconfig request")
                    conn.send_nowait(m.Ack(detail="configuration re-read") if error is None
                                     else m.ErrorReply(code="bad_request", message=error))
                else:
                    self.feed(c.Received(msg=msg, conn_id=conn_id, peer=peer))
                await conn.drain()
        finally:
            del self._conns[conn_id]

    # --- generic actions ---------------------------------------------------------------------

    def _do_reply(self, action: c.Reply) -> None:
        conn = self._conns.get(action.conn_id)
        if conn is None:
            self.log.info("dropping %s: its connection is gone", type(action.msg).__name__)
            return
        try:
            conn.send_nowait(action.msg)
        except ConnectionClosed:
            self.log.info("dropping %s: %s", type(action.msg).__name__, conn.label)

    def _do_send(self, action: c.Send) -> None:
        task = self.start_task(self._send(action), f"send {type(action.msg).__name__} to {action.to}")
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send(self, action: c.Send) -> None:
        try:
            if action.msg.reply_type is None:
                await self.peers.send(action.to, action.msg, timeout=action.timeout)
                reply = None
            else:
                reply = await self.peers.request(action.to, action.msg, timeout=action.timeout)
        except HTCError as exc:
            self.feed(c.SendFailed(action.to, action.msg, str(exc), action.cookie))
        else:
            self.feed(c.SendDone(action.to, action.msg, reply, action.cookie))

    def _do_log(self, action: c.Log) -> None:
        self.log.log(action.level, "%s", action.text)

    def _do_exit(self, action: c.Exit) -> None:
        if self._exit_status is None:
            self._exit_status = action.status
        if self._server is not None:
            # At once, not when the main task next runs: a client connecting now should find
            # nobody listening rather than a connection closed unanswered.
            self._server.stop_accepting()
        self._wakeup.set()


class _ReplySink:
    """Stands for a connection in ``_conns`` while the core answers :meth:`DaemonService.ask_core`:
    the first reply resolves the future and the sink leaves."""

    label = "a request inside a conversation"

    def __init__(self, reply: asyncio.Future, leave: Callable[[], Any]):
        self.reply = reply
        self.leave = leave

    def send_nowait(self, msg: m.Message) -> None:
        self.leave()
        if not self.reply.done():
            self.reply.set_result(msg)


async def process_gone(pid: int) -> None:
    """Wait, on the event loop and without a thread, until child ``pid`` has ended (not reaped).

    A pidfd becomes readable when the process exits; the caller then reaps it (``wait4``), so
    it still learns the exit status and the usage.
    """
    loop = asyncio.get_running_loop()
    fd = os.pidfd_open(pid)
    gone = loop.create_future()
    loop.add_reader(fd, lambda: gone.done() or gone.set_result(None))
    try:
        await gone
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def run_service(service: DaemonService) -> int:
    """Run ``service`` on a fresh event loop; return its exit status."""
    return asyncio.run(service.run())


__all__ = ["DaemonPaths", "DaemonService", "LOG_FILE_NAMES", "PARENT_PID_ENV", "home_dir", "load_daemon_config",
           "run_service"]
