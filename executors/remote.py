"""The pool backend for a client on another machine: ``HTCExecutor(pool="cm")``.

Theory of operation
-------------------
On the submit host an executor's session is a directory the jobs use as their ``Iwd``: the
client writes the calls' pickles there, the schedd's shadows and lanes write results there and
the schedd appends the session's event log there (:mod:`htc.executors.spool`). A client on a
machine that shares no file system with the submit host (a laptop holding a token) cannot, so
:class:`RemoteBackend` keeps two copies:

* **the session on the submit host**, which the schedd makes and serves
  (:mod:`htc.daemons.schedd.sessions`): the job ads name its ``calls/`` as ``Iwd`` and its
  ``jobs.log`` as their log, so the jobs run exactly as a local executor's do (lanes included);
* **the client's mirror**, its ordinary local spool: what the schedd pushes (the event log,
  and each ended call's result, stdout and stderr, before the event that ends it) is written
  there, so the pool backend's watcher (:class:`~htc.executors.pool_watch.JobWatcher`) reads a
  local log and local results, woken by inotify, exactly as for a local pool.

One SSH connection to the submit host's shared port carries two channels
(:mod:`htc.client.remote`: the pool is found by its central manager, the schedd through the
collector, the user proven by the user's token): the backend's ordinary request channel
(``Submit``, ``QueryJobs``, ``ActOnJobs``) and the session's channel, which
:class:`SessionChannel` owns on the link's I/O loop. A batch of calls is one ``SubmitCalls``
on the session's channel: the schedd writes the pickles, queues the cluster (the submission id
makes a retry idempotent) and follows each job as its call before it answers (pickles beyond
one message go ahead in ``PutCallFiles``). The pickles are not written into the mirror (a named
session's are, for an attach after a crash). Results arrive without being asked for, so a
call's round trip is one request plus one push. When the session's channel breaks (the schedd restarted),
it is opened again with the offset the mirror holds and the jobs followed so far. Now and then
(every :data:`_TAKEN_FILES` files mirrored) the client says how far its mirror holds the log
(``NewsTaken``), and the schedd removes the files of the calls that ended before that from the
submit host, so a session that runs for days does not fill the schedd's spool.

On the client each call costs the I/O loop as few passes as it can: a request goes from the
backend's thread to the loop as a plain callback that writes it, and the pump, fed by the SSH
channel's data callback (:meth:`htc.wire.ssh_push.SshConnection.push`; other transports are read
with ``recv``), hands the reply straight to the waiting thread's future and writes the news into
the mirror in the same pass (``benchmarks/remote_cpu_bench.py`` prints the client's CPU per call
by thread).

``htc.executors.forget`` of a named session removes its jobs and its directory on the submit
host too (:func:`forget_remote`).

Options that name files on the client (``transfer_input_files``, ``transfer_output_files``)
or keep a directory per call (``checkpoint``) are refused: the session directory on the submit
host holds only the calls' pickles and results.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from htc.classad import quote
from htc.errors import HTCError, UsageError
from htc.executors.backend import CallSpec
from htc.executors.errors import OptionError, ScheddLost
from htc.executors.options import CallOptions
from htc.executors.pool import PoolBackend
from htc.executors.pool_ads import job_template, proc_ad, submission_id
from htc.executors.spool import Spool
from htc.wire import callfile as cf
from htc.wire import messages as m
from htc.wire.errors import RemoteError
from htc.wire.transport import Transport

__all__ = ["RemoteBackend", "SessionChannel", "forget_remote", "is_remote_pool"]

#: the most call-file bytes one PutCallFiles carries
_PUT_BYTES = 4 * 1024 * 1024
_RECONNECT_EVERY = 1.0
#: files mirrored after which the client says so (NewsTaken), and the schedd removes those calls'
#: files: the session's directory on the submit host keeps about this many of ended calls
_TAKEN_FILES = 256


def is_remote_pool(pool: Any) -> bool:
    """Whether ``pool`` names a pool on another machine (``HOST[:PORT]`` or a sinful string, and
    not an existing directory), as the tools' ``-pool`` does."""
    if not isinstance(pool, str):
        return False
    from htc.client.remote import parse_pool

    return parse_pool(pool) is not None


def _chunks(name: str, data: bytes) -> list[m.FileChunk]:
    size = m.MAX_SESSION_CHUNK
    parts = [data[i:i + size] for i in range(0, len(data), size)] or [b""]
    return [m.FileChunk(name=name, data=part, first=i == 0, last=i == len(parts) - 1) for i, part in enumerate(parts)]


class _RemoteSession:
    """The session's directories on the submit host."""

    def __init__(self, opened: m.SessionOpened):
        self.path = Path(opened.directory)
        self.calls = Path(opened.calls)


class SessionChannel:
    """The session's connection to the schedd, owned by the link's I/O loop (module docstring)."""

    def __init__(self, transport: Transport, io, spool: Spool, log: Path, lost_after: float):
        self.transport = transport
        self.io = io
        self.spool = spool
        self.log = log
        self.lost_after = lost_after
        self.jobs: dict[str, str] = {}
        self.opened: m.SessionOpened | None = None
        self.error: BaseException | None = None
        self._conn = None
        #: the requests sent and not answered yet, in order (asyncio futures, or _call's thread futures)
        self._waiting: collections.deque[asyncio.Future | concurrent.futures.Future] = collections.deque()
        self._pump: asyncio.Task | None = None
        self._closing = False
        self._ready: asyncio.Event | None = None
        self._tasks: set[asyncio.Task] = set()
        self._calls_dir: str | None = None  # the mirror's calls/, once asked
        self._log_fd: int | None = None  # the mirror's log, kept open for appending (on the I/O loop)
        self._untold = 0  # files mirrored since the last NewsTaken

    # --- from the backend's thread --------------------------------------------------------------
    def open(self, timeout: float = 30.0) -> m.SessionOpened:
        """Open the session on the schedd and start mirroring it.

        Raises:
            RemoteError: the schedd refused (the message says why); HTCError, OSError: unreachable.
        """
        self.opened = self.io.call(self._start(timeout), timeout + 5)
        return self.opened

    def submit(self, cluster_ad: str, procs: tuple[str, ...], specs: Sequence[CallSpec],
               submission_id: str) -> m.SubmitReply:
        """Write the calls' pickles into the session on the submit host and queue their cluster,
        in one round trip (pickles beyond one message go ahead in ``PutCallFiles``). A channel
        that breaks meanwhile is waited for and the same request sent again (its submission id
        gets the first try's cluster) for ``lost_after`` seconds.

        Raises:
            RemoteError: the schedd refused (the message says why); ScheddLost: the channel stayed down.
        """
        batch: list[m.FileChunk] = []
        size = 0
        for spec in specs:
            data = spec.data if spec.data is not None else self.spool.call_path(spec.call_id).read_bytes()
            for chunk in _chunks(f"{spec.call_id}{cf.CALL_SUFFIX}", data):
                if batch and size + len(chunk.data) > _PUT_BYTES:
                    self._call_again(m.PutCallFiles(chunks=tuple(batch)))
                    batch, size = [], 0
                batch.append(chunk)
                size += len(chunk.data)
        calls = tuple(spec.call_id for spec in specs)
        reply = self._call_again(m.SubmitCalls(chunks=tuple(batch), cluster_ad=cluster_ad, proc_ads=procs,
                                               calls=calls, submission_id=submission_id))
        self.jobs.update({f"{reply.cluster_id}.{reply.first_proc + i}": call for i, call in enumerate(calls)})
        return reply

    def _call_again(self, msg: m.Message) -> m.Message:
        """:meth:`_call`, sent again on the next channel when this one breaks (idempotent requests)."""
        started = time.monotonic()
        while True:
            try:
                return self._call(msg)
            except ScheddLost:
                if self._closing or self.error is not None or time.monotonic() - started > self.lost_after:
                    raise
                time.sleep(0.05)  # (the pump notices the break and makes the next request wait for the new channel)

    def follow(self, jobs: dict[str, str]) -> None:
        """Tell the schedd which call each job runs (their results come with their ends); not
        waited for: the loop sends it in order, and a broken channel sends all of them again
        when it reconnects."""
        self.jobs.update(jobs)
        asyncio.run_coroutine_threadsafe(self._send_quietly(m.FollowCalls(jobs=jobs)), self.io.loop)

    def close(self, *, remove: bool) -> None:
        """End the session on the schedd (``remove``: delete its directory there) and the pump."""
        self._closing = True
        with contextlib.suppress(HTCError, OSError, TimeoutError, RemoteError):
            self._call(m.CloseSession(remove=remove), timeout=10.0)
        with contextlib.suppress(HTCError, OSError, TimeoutError, RuntimeError):
            self.io.call(self._stop(), 10)

    def _call(self, msg: m.Message, timeout: float = 120.0) -> m.Message:
        # The loop sends it from a plain callback and the pump hands the reply to this thread's
        # future itself: no task, timer or future chain per request, and three passes of the
        # loop fewer than a coroutine run through run_coroutine_threadsafe.
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.io.loop.call_soon_threadsafe(self._send_request, msg, future, timeout)
        try:
            reply = future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the schedd did not answer {type(msg).__name__} within {timeout:g} s") from None
        if isinstance(reply, m.ErrorReply):
            raise RemoteError("schedd", reply.code, reply.message)
        return reply

    # --- on the I/O loop --------------------------------------------------------------------------
    async def _connect(self, timeout: float) -> m.SessionOpened:
        offset = self.log.stat().st_size if self.log.exists() else 0
        conn = await self.transport.open_connection("schedd", timeout=timeout)
        try:
            opened = await conn.request(m.OpenSession(session=self.spool.name, offset=offset), timeout=timeout)
            if self.jobs:
                await conn.send(m.FollowCalls(jobs=dict(self.jobs)))
        except BaseException:
            await conn.aclose()
            raise
        self._conn = conn
        return opened

    async def _start(self, timeout: float) -> m.SessionOpened:
        self._ready = asyncio.Event()
        opened = await self._connect(timeout)
        self._ready.set()
        self._pump = asyncio.get_running_loop().create_task(self._run())
        return opened

    async def _run(self) -> None:
        """Mirror what the schedd pushes; reconnect when the channel breaks (for ``lost_after`` s)."""
        assert self._ready is not None
        while True:
            try:
                if not await self._pushed():
                    await self._read()
            except asyncio.CancelledError:
                raise
            except (HTCError, OSError) as exc:
                self._ready.clear()
                self._fail_waiting(exc)
                if self._closing:
                    return
                with contextlib.suppress(HTCError, OSError):
                    await self._conn.aclose()
                if not await self._reconnect(exc):
                    return

    async def _pushed(self) -> bool:
        """Take the channel's messages as they arrive (htc.wire.ssh_push), until it ends (raises
        what ended it); False at once when the connection cannot push."""
        push = getattr(self._conn, "push", None)
        if push is None:
            return False
        ended = asyncio.get_running_loop().create_future()

        def end(exc: BaseException) -> None:
            if not ended.done():
                ended.set_result(exc)

        if not push(self._received, end):
            return False
        raise await ended

    async def _read(self) -> None:
        while True:
            self._received(await self._conn.recv(timeout=None))

    def _received(self, msg: m.Message) -> None:
        if isinstance(msg, m.SessionNews):
            self._mirror(msg)  # (at most a few MiB: written here, no thread hand-off)
            self._taken(msg)
        elif self._waiting:
            waiter = self._waiting.popleft()  # replies come in order: this one is its
            if not waiter.done():  # (a request that timed out drops its late reply)
                waiter.set_result(msg)  # (an asyncio future, or a thread's: _call)

    async def _reconnect(self, cause: BaseException) -> bool:
        started = time.monotonic()
        while not self._closing:
            await asyncio.sleep(_RECONNECT_EVERY)
            try:
                await self._connect(30.0)
            except (HTCError, OSError) as exc:
                if time.monotonic() - started > self.lost_after:
                    self.error = ScheddLost(f"the executor session's channel to the schedd broke ({cause}) and "
                                            f"could not be opened again for {self.lost_after:.0f} s ({exc})")
                    return False
                continue
            assert self._ready is not None
            self._ready.set()
            return True
        return False

    def _fail_waiting(self, exc: BaseException) -> None:
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_exception(ScheddLost(f"the executor session's channel to the schedd broke: {exc}"))

    async def _until_ready(self) -> None:
        assert self._ready is not None
        if not self._ready.is_set():  # (the usual case costs no task and no timer)
            await asyncio.wait_for(self._ready.wait(), 30.0)

    async def _send(self, msg: m.Message) -> None:
        await self._until_ready()
        await self._conn.send(msg)

    async def _send_quietly(self, msg: m.Message) -> None:
        with contextlib.suppress(HTCError, OSError, asyncio.TimeoutError):
            await self._send(msg)  # (lost with the channel: _connect sends every job again)

    def _send_request(self, msg: m.Message, future: concurrent.futures.Future, timeout: float) -> None:
        """On the loop, for :meth:`_call`: send ``msg`` now and queue ``future`` for its reply
        (a channel being opened again goes through :meth:`_request` once it is ready)."""
        if not future.set_running_or_notify_cancel():
            return
        if self._ready is None or not self._ready.is_set() or self._conn is None:
            task = asyncio.ensure_future(self._request_for(msg, future, timeout))
            self._tasks.add(task)  # (the loop holds tasks only weakly)
            task.add_done_callback(self._tasks.discard)
            return
        # Queued before it is sent, as in _request; a reply set on a future its caller stopped
        # waiting for (timed out) is dropped with it.
        self._waiting.append(future)
        try:
            self._conn.send_nowait(msg)
        except (HTCError, OSError) as exc:
            with contextlib.suppress(ValueError):
                self._waiting.remove(future)
            future.set_exception(ScheddLost(f"the executor session's channel to the schedd broke: {exc}"))

    async def _request_for(self, msg: m.Message, future: concurrent.futures.Future, timeout: float) -> None:
        try:
            reply = await self._request(msg, timeout)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            future.set_result(reply)

    async def _request(self, msg: m.Message, timeout: float) -> m.Message:
        future = asyncio.get_running_loop().create_future()
        await self._until_ready()
        # Waiting before it is sent: a send that yields (the SSH window is full) may see the
        # reply come in before it returns.
        self._waiting.append(future)
        try:
            await self._conn.send(msg)
        except BaseException:
            with contextlib.suppress(ValueError):
                self._waiting.remove(future)
            raise
        return await asyncio.wait_for(future, timeout)

    async def _stop(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, HTCError, OSError):
                await self._pump
        if self._conn is not None:
            with contextlib.suppress(HTCError, OSError):
                await self._conn.aclose()
        if self._log_fd is not None:
            os.close(self._log_fd)
            self._log_fd = None

    def _taken(self, news: m.SessionNews) -> None:
        """Once :data:`_TAKEN_FILES` files are mirrored, tell the schedd the mirror holds the log
        so far (``NewsTaken``, no reply): it removes those calls' files from the submit host. A
        channel that breaks before it goes loses only the clean-up, which the next one repeats."""
        self._untold += sum(1 for chunk in news.chunks if chunk.last)
        if self._untold >= _TAKEN_FILES and news.log:
            self._untold = 0
            with contextlib.suppress(HTCError, OSError):
                self._conn.send_nowait(m.NewsTaken(offset=news.offset + len(news.log)))

    # --- the mirror (on the I/O loop) --------------------------------------------------------------
    def _mirror(self, news: m.SessionNews) -> None:
        """Write the pushed files into the local ``calls/``, then append the log (the watcher
        sees a call end only once its result is here)."""
        calls = self._calls_dir
        if calls is None:
            calls = self._calls_dir = os.fspath(self.spool.calls)  # (a str: no path object per file)
        for chunk in news.chunks:
            part = f"{calls}/.{chunk.name}.part"
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_TRUNC if chunk.first else os.O_APPEND)
            fd = os.open(part, flags, 0o600)
            try:
                view = memoryview(chunk.data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            if chunk.last:
                os.rename(part, f"{calls}/{chunk.name}")
        if news.log:
            if self._log_fd is None:
                self._log_fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            held = os.fstat(self._log_fd).st_size
            if held != news.offset:
                raise OSError(f"the session's event log mirror {self.log} holds {held} bytes, the schedd "
                              f"sent bytes from {news.offset}")
            view = memoryview(news.log)
            while view:
                view = view[os.write(self._log_fd, view):]


class RemoteBackend(PoolBackend):
    """Runs calls as jobs of a schedd on another machine (see the module docstring).

    Args:
        pool: the central manager, ``HOST[:PORT]`` (the tools' ``-pool``).
        schedd: the schedd's name (the tools' ``-name``; None: the pool's only schedd).
        transport: reach the pool through this instead (tests: a pool on this machine).
    """

    def __init__(self, pool: str, *, schedd: str | None = None, lost_after: float = 60.0,
                 transport: Transport | None = None):
        super().__init__(pool, schedd="schedd", lost_after=lost_after)
        self.schedd_name = schedd
        self._given_transport = transport
        self._channel: SessionChannel | None = None
        self._remote: _RemoteSession | None = None

    def __repr__(self) -> str:
        return f"RemoteBackend(pool={self.pool!r}, schedd={self.schedd_name!r})"

    def _transport(self) -> tuple[Transport, Path | None]:
        if self._given_transport is not None:
            return self._given_transport, None
        from htc.client.remote import parse_pool, remote_pool

        collector = parse_pool(self.pool)
        if collector is None:
            raise UsageError(f"pool={self.pool!r} names no pool on another machine; give HOST[:PORT] of its "
                             "central manager")
        return remote_pool(collector, schedd_name=self.schedd_name), None

    def _watch_session(self) -> None:
        assert self.spool is not None and self._link is not None
        log = self._log_path()
        log.touch(mode=0o600)
        self._channel = SessionChannel(self._link.transport, self._link.io, self.spool, log, self.lost_after)
        try:
            opened = self._channel.open()
        except (HTCError, OSError, TimeoutError) as exc:
            self._link.close()
            raise ScheddLost(f"the schedd of the pool at {self.pool} did not open executor session "
                             f"{self.spool.name}: {exc}") from exc
        self._remote = _RemoteSession(opened)
        # No call is written into the mirror's calls/ (_proc_ad), so no result file is kept
        # there as a spare to write the next call into (htc.executors.spool).
        self.spool.recycle = False
        super()._watch_session()

    def close(self, *, detach: bool) -> None:
        """As the pool backend's; then the session ends on the submit host too (removed there
        unless it is named or detached)."""
        try:
            super_link = self._link
            if super_link is not None and self._channel is not None and not detach:
                self._remove_jobs()
        finally:
            if self._channel is not None:
                self._channel.close(remove=not (detach or self._named))
                self._channel = None
            super().close(detach=True)

    def _remove_jobs(self) -> None:
        """What of an unnamed session is left in the queue (the pool backend's close does this
        too, but must not run after the channel closed)."""
        if self._watcher is None or not self._watcher.jobs or self.spool is None:
            return
        from htc.executors.pool import _session_constraint

        with contextlib.suppress(HTCError, OSError):
            self._request(m.ActOnJobs(action=m.JobAction.Remove, constraint=_session_constraint(self.spool),
                                      reason="the executor that submitted it has shut down"),
                          timeout=10.0, retry=False)

    def check_request(self, options: CallOptions) -> None:
        """Refuse options that need the client's files on the submit host; then as the pool backend.

        Raises:
            OptionError: ``transfer_input_files``, ``transfer_output_files`` or ``checkpoint``.
            ImpossibleRequest: no slot could ever run it.
        """
        for name in ("transfer_input_files", "transfer_output_files", "checkpoint"):
            if getattr(options, name):
                raise OptionError(f"{name} is not available for a pool on another machine (pool={self.pool!r}): the "
                                  "session on the submit host holds only the calls' pickles and results; pass the "
                                  "data as arguments and return values instead")
        super().check_request(options)

    def _template(self, options: CallOptions) -> dict[str, str]:
        cached = self._templates.get(id(options))
        if cached is not None:
            return cached[1]
        assert self._remote is not None
        # The execute hosts run this interpreter path (installed alike on every host, as
        # HTCondor's Python jobs assume); the client's own environment is not mirrored there.
        python = options.python or sys.executable
        # Made with the mirror's directories (condor_submit's rules check that an initialdir
        # exists, here), then pointed at the session's directories on the submit host.
        assert self.spool is not None
        ad = job_template(options, self.spool, self._log_path(), python)
        ad["Iwd"] = quote(str(self._remote.calls))
        ad["UserLog"] = quote(str(self._remote.path / "jobs.log"))
        self._templates[id(options)] = (options, ad)
        return ad

    def _proc_ad(self, spec: CallSpec) -> str:
        """As the pool backend's, but the pickle goes only to the submit host (:meth:`_submit_cluster`):
        a named session still keeps it in the mirror too, for an attach after a crash before the submit."""
        assert self.spool is not None
        return proc_ad(spec if self._named else dataclasses.replace(spec, data=None), self.spool)

    def _submit_cluster(self, cluster_ad: str, procs: tuple[str, ...], specs: list[CallSpec]) -> list[str]:
        """The calls' pickles and their cluster in one ``SubmitCalls`` on the session's channel."""
        assert self._channel is not None and self.spool is not None
        reply = self._channel.submit(cluster_ad, procs, specs, submission_id(self.spool.name, specs))
        return [f"{reply.cluster_id}.{reply.first_proc + i}" for i in range(reply.num_procs)]

    def recover(self):
        """As the pool backend's; the session's channel follows the recovered jobs too."""
        recovered = super().recover()
        jobs = {call.job_id: call.call_id for call in recovered if call.job_id}
        if jobs and self._channel is not None:
            self._channel.follow(jobs)
        return recovered

    def poll(self, timeout: float):
        """As the pool backend's; a session channel that could not be opened again breaks the executor."""
        if self._channel is not None and self._channel.error is not None:
            raise self._channel.error
        return super().poll(timeout)


def forget_remote(spool: Spool, pool: str, schedd: str | None) -> None:
    """Remove a session's jobs from the queue of the pool on another machine and its directory
    from the submit host (``htc.executors.forget``); quiet when the pool cannot be reached."""
    from htc.executors.pool import _session_constraint
    from htc.executors.schedd_link import ScheddLink

    backend = RemoteBackend(pool, schedd=schedd)
    try:
        transport, _ = backend._transport()
    except (HTCError, OSError):
        return
    link = ScheddLink(transport, "schedd", 10.0, f"htc-pool-io-{spool.name}")
    try:
        link.request(m.ActOnJobs(action=m.JobAction.Remove, constraint=_session_constraint(spool),
                                 reason="htc.executors.forget()"), timeout=10.0, retry=False)
        channel = SessionChannel(transport, link.io, spool, spool.path / "jobs.log", 10.0)
        channel.open(timeout=10.0)
        channel.close(remove=True)
    except (HTCError, OSError, TimeoutError):
        return
    finally:
        link.close()
