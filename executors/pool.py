"""The pool backend: every call is a job in an htc schedd.

Theory of operation
-------------------
**Jobs.** Calls with the same options share one *template*: the job ad condor_submit would
build for ``universe = python`` running ``python -m htc.executors.worker``, made once per
option set by :class:`htc.submit.Submit` (so defaults, ``Requirements``, ``max_retries`` and
every other rule are condor_submit's own). Each call adds a small proc ad: its
``TransferInput`` (the call file, its parents' results, the caller's
``transfer_input_files``), ``HTCCallId``/``HTCFunction``, and where its files go. Most calls
share the session's ``calls/`` (the cluster's ``Iwd``) with files named after the call:
``Out``/``Err`` ``<id>.out``/``<id>.err`` and ``TransferOutputRemaps`` naming the result
``<id>.result``; a call with ``transfer_output_files`` or ``checkpoint=True`` has an ``Iwd`` of
its own (:mod:`htc.executors.spool`). A batch of calls with the same options is one
``Submit`` message -- one cluster, one transaction in the schedd's queue. The execute side
gets its input from the starter and sends ``htc_result.pkl`` back with the rest of the
sandbox's new files; nothing on an execute node talks to the client.

**Watching** the jobs -- the session's event log, and now and then the queue -- is the other
half of the backend, :mod:`htc.executors.pool_watch`.

**Infrastructure failures** are the pool's fault, not the function's: a shadow exception or
failed reconnect (the schedd requeues the job itself), or a hold for a file-transfer or
starter failure, which the backend releases up to ``infrastructure_retries`` times while the
future shows ``retrying``. Other holds (``htc hold``, a policy, a timeout, memory) fail the
future; the job stays held in the queue for inspection (an unnamed session removes its jobs
when it ends).

**Talking to the schedd.** A pool on this machine (a Unix socket) is asked over a blocking
socket in the calling thread (:mod:`htc.wire.blocking`, one connection, a lock); any other
transport through one connection owned by a private event loop on its own thread, so the
backend works from any thread -- including a Jupyter cell, whose thread already runs an event
loop. (Going through the loop costs two thread hand-offs per request, which on a small VM
cost more than the request.) A request that fails because the schedd is restarting is retried
for ``lost_after`` seconds, and then for as long as the pool's master says it is still
restarting the schedd (its backoff may be minutes); only a master that gave up, or is gone,
makes the executor broken (:class:`ScheddLost`). Every ``Submit`` carries a submission id
made of the session and its calls: a retry after a lost answer -- to this schedd or to the one
the master started after a crash -- gets the cluster the first try made, never a second one.

**Attach.** The session journal names every call and its job; replaying the event log from
its start brings each future to where the job is now (finished ones read their result file).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from htc.classad import ClassAd, quote
from htc.errors import HTCError, UsageError
from htc.wire import callfile as cf
from htc.executors.backend import CallSpec, RecoveredCall
from htc.executors.errors import ImpossibleRequest, OptionError, ScheddLost, SessionError
from htc.executors.filewatch import FileWatch
from htc.executors.options import CallOptions
from htc.executors.pool_watch import PoolWatching, _Job
from htc.executors.spool import Spool, options_from_json
from htc.executors.worker import EXIT_ERROR
from htc.wire import blocking
from htc.wire import messages as m
from htc.wire.blocking import BlockingConnection
from htc.wire.errors import ConnectionClosed, DaemonUnreachable, RemoteError, RequestTimeout
from htc.wire.transport import Transport, UnixTransport

__all__ = ["PoolBackend", "remove_session_jobs"]

_TRANSIENT = (DaemonUnreachable, ConnectionClosed, RequestTimeout, ConnectionError)
#: the master's states of a schedd that will answer again (htc.daemons.master.core.DState values)
_COMING_BACK = frozenset({"Starting", "Running", "Restarting", "Backoff"})
_MAX_PROCS_PER_SUBMIT = 2000
_SLOTS_FRESH = 30.0
_FIRST_SLOTS_WAIT = 10.0


def _slot_user_cannot_run(python: str, environment: dict[str, str]) -> str | None:
    """Why the slot user could not run function jobs with ``python`` (None: it can).

    A root client's jobs run as a slot account of the pool (``htc-slot<N>``: any other user, as far
    as file permissions go; ``nobody`` stands in for it here): every call would fail if that
    user cannot read the interpreter or, with no PYTHONPATH of the caller's, htc itself.
    """
    if os.geteuid() != 0:
        return None
    import pwd

    from htc.executors.execute_env import _reachable_install, _readable_by

    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        return None
    fix = ("prepare one it can read with htc.executors.shared_python(DIR) and pass its python= and "
           "environment= to HTCExecutor (see docs/executor.md, 'Running as root')")
    if python == sys.executable and not environment.get("PYTHONPATH"):
        if _reachable_install(user):
            return None
        return (f"this Python ({sys.executable}) or its packages are out of reach of the pool's slot accounts "
                f"(htc-slot<N>), who run a root client's calls (jobs never run as root); {fix}")
    if not _readable_by(Path(python), user):
        return (f"python={python!r} is out of reach of the pool's slot accounts (htc-slot<N>), who run a root "
                f"client's calls; {fix}")
    return None


class _IOThread:
    """A private event loop on a daemon thread; ``call`` runs a coroutine there from any thread."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def call(self, coro, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


def _transport_for(pool: Any, *, start: bool = True) -> tuple[Transport, Path | None]:
    """The transport to the pool's daemons, and its home directory when known; ``start`` starts
    the personal pool (``pool=None``) when it is not running."""
    if isinstance(pool, Transport):
        return pool, None
    if pool is None:
        from htc.config import htc_home
        from htc.client import start_pool

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


def _environment_text(env: dict[str, str]) -> str:
    """condor_submit's quoted environment syntax: ``"A=1 B='two words'"``."""
    parts = []
    for name, value in env.items():
        if any(c in value for c in " \t'\""):
            value = "'" + value.replace("'", "''").replace('"', '""') + "'"
        parts.append(f"{name}={value}")
    return '"' + " ".join(parts) + '"'


class PoolBackend(PoolWatching):
    """Runs calls as jobs of a schedd. See the module docstring.

    Args:
        pool: None (the personal pool under ``$HTC_HOME``, started if needed), a pool's home
            directory, or a :class:`~htc.wire.transport.Transport`.
        schedd: the schedd's address on that transport.
        lost_after: seconds of failed requests before the schedd counts as lost.
    """

    kind = "pool"

    def __init__(self, pool: Any = None, *, schedd: str = "schedd", lost_after: float = 60.0):
        self.pool = pool
        self.schedd = schedd
        self.lost_after = lost_after
        self.spool: Spool | None = None
        self.home: Path | None = None
        self._transport: Transport | None = None
        self._io: _IOThread | None = None
        self._conn = None
        self._req_lock: asyncio.Lock | None = None
        self._blocking: BlockingConnection | None = None
        self._blocking_ok = True  # False: the transport has no blocking form (requests go through _io)
        self._blocking_lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}
        self._job_of: dict[str, str] = {}
        self._templates: dict[int, tuple[CallOptions, dict[str, str]]] = {}
        self._slots: tuple[float, list[ClassAd]] = (0.0, [])
        self._wake_requested = False
        self._watch: FileWatch | None = None
        self._reader = None
        self._interval = 0.002
        self._next_reconcile = 0.0
        self._failing_since: float | None = None
        self._last_master_word: str | None = None  # the schedd's state at its master's last answer
        self._named = False

    def __repr__(self) -> str:
        return f"PoolBackend(pool={self.pool!r}, schedd={self.schedd!r})"

    # --- talking to the schedd ------------------------------------------------------------------
    async def _request_async(self, msg: m.Message, timeout: float) -> m.Message:
        if self._req_lock is None:
            self._req_lock = asyncio.Lock()
        async with self._req_lock:
            if self._conn is None or self._conn.closed:
                self._conn = await self._transport.open_connection(self.schedd, timeout=timeout)
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
                    self._blocking = blocking.connect(self._transport, self.schedd, timeout=timeout)
                    self._blocking_ok = self._blocking is not None
                if self._blocking is not None:
                    return self._blocking.request(msg, timeout=timeout)
        assert self._io is not None
        return self._io.call(self._request_async(msg, timeout), timeout + 5)

    def _request(self, msg: m.Message, *, timeout: float = 30.0, retry: bool = True) -> m.Message:
        """One request to the schedd; transient failures are retried for ``lost_after`` seconds,
        and after that for as long as the pool's master is still restarting the schedd."""
        assert self._io is not None
        started = time.monotonic()
        delay = 0.05
        while True:
            try:
                reply = self._request_once(msg, timeout)
                self._failing_since = None
                return reply
            except _TRANSIENT as exc:
                waited = time.monotonic() - started
                if not retry or (waited > self.lost_after and not self._schedd_coming_back()):
                    raise ScheddLost(f"the schedd {self.schedd!r} did not answer ({type(exc).__name__}: {exc}; "
                                     f"tried for {waited:.1f} s){self._master_says() if retry else ''}; 'htc pool "
                                     "status' shows the "
                                     "daemons; the jobs stay in the queue, attach to a named session once it is "
                                     "back") from exc
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _schedd_coming_back(self) -> bool:
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

        assert self._io is not None
        try:
            reply = self._io.call(send_command_async("master", m.QueryMaster(), transport=self._transport,
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

    # --- Backend: the session -----------------------------------------------------------------
    def open(self, spool: Spool, *, named: bool, create: bool) -> None:
        """Reach the schedd (starting the personal pool if needed) for ``spool``'s session.

        Raises:
            ScheddLost: the pool has no schedd answering.
            UsageError: ``pool`` is not a pool.
        """
        from htc.eventlog import EventLogReader

        self.spool = spool
        spool.flat = True  # most calls' files share calls/ (see htc.executors.spool)
        spool.recycle = not named  # no later client reads an anonymous session's results
        self._named = named
        self._transport, self.home = _transport_for(self.pool)
        self._io = _IOThread(f"htc-pool-io-{spool.name}")
        try:
            self._request(m.Ping(), timeout=10.0, retry=False)
        except (ScheddLost, RemoteError, HTCError) as exc:
            self._io.close()
            where = self.home or self.pool
            raise ScheddLost(f"no schedd answers in the pool at {where}: {exc}; 'htc pool status' shows which daemons "
                             "run (HTCExecutor(backend='local') runs calls without a pool)") from exc
        self._reader = EventLogReader(self._log_path(), keep_open=True)
        self._watch = FileWatch(self._log_path())  # poll() waits on it: no thread hand-off

    def _log_path(self) -> Path:
        assert self.spool is not None
        return self.spool.path / "jobs.log"

    def close(self, *, detach: bool) -> None:
        """Stop watching; an unnamed session also removes whatever of its jobs is left in the queue."""
        try:
            if not detach and self._io is not None and self.spool is not None and self._jobs:
                # Held jobs of failed calls, and anything else of this session still queued:
                # nobody can collect them once the session's directory is gone.
                try:
                    self._request(m.ActOnJobs(action=m.JobAction.Remove, constraint=self._session_constraint(),
                                              reason="the executor that submitted it has shut down"),
                                  timeout=10.0, retry=False)
                except (HTCError, OSError) as exc:
                    print(f"htc executor: could not remove the jobs of session {self.spool.name}: {exc}",
                          file=sys.stderr)
        finally:
            if self._watch is not None:
                self._watch.close()
                self._watch = None
            if self._reader is not None:
                self._reader.close()
            with self._blocking_lock:
                if self._blocking is not None:
                    self._blocking.close()
                    self._blocking = None
            if self._io is not None:
                if self._conn is not None:
                    try:
                        self._io.call(self._conn.aclose(), 5)
                    except (HTCError, OSError, TimeoutError):
                        self._conn = None
                self._io.close()
                self._io = None

    def _session_constraint(self) -> str:
        assert self.spool is not None
        return f"HTCSession == {quote(self.spool.name)}"

    # --- Backend: submitting ----------------------------------------------------------------------
    def _template(self, options: CallOptions) -> dict[str, str]:
        cached = self._templates.get(id(options))
        if cached is not None:
            return cached[1]
        from htc.submit import Submit, SubmitError

        assert self.spool is not None
        problem = _slot_user_cannot_run(options.python or sys.executable, options.environment)
        if problem:
            raise OptionError(problem)
        lines = {
            "universe": "python", "executable": options.python or sys.executable, "transfer_executable": "false",
            "arguments": "-m htc.executors.worker", "initialdir": str(self.spool.calls),
            "should_transfer_files": "YES",
            "when_to_transfer_output": "ON_EXIT_OR_EVICT" if options.checkpoint else "ON_EXIT",
            "output": "stdout", "error": "stderr", "log": str(self._log_path()),
            "request_cpus": str(options.request_cpus), "request_memory": str(options.request_memory),
            "request_disk": str(options.request_disk), "priority": str(options.priority),
        }
        if options.request_gpus:
            lines["request_gpus"] = str(options.request_gpus)
        if options.requirements:
            lines["requirements"] = options.requirements
        if options.rank:
            lines["rank"] = options.rank
        if options.max_retries:
            lines["max_retries"] = str(options.max_retries)
            lines["retry_until"] = str(EXIT_ERROR)  # the call could not run: running it again cannot help
        if options.timeout:
            lines["allowed_execute_duration"] = str(math.ceil(options.timeout) + 5)  # the worker stops it first
        env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
        env.update(options.environment)
        if env:
            lines["environment"] = _environment_text(env)
        if options.stream_output:
            lines["stream_output"] = lines["stream_error"] = "true"
        if options.transfer_output_files:
            wanted = [*options.transfer_output_files, cf.RESULT_FILE]
            if options.checkpoint:
                wanted.append(cf.CHECKPOINT_FILE)
            lines["transfer_output_files"] = ",".join(wanted)
        if not (options.checkpoint or options.timeout or options.stream_output or options.transfer_output_files
                or options.submit):
            # Nothing a call lane lacks: the schedd may run it on a worker that stays up
            # (htc.daemons.schedd.lanes); it is a job all the same.
            lines["+HTCLane"] = "true"
        lines.update(options.submit)
        lines["+HTCSession"] = quote(self.spool.name)
        text = "\n".join(f"{k} = {v}" for k, v in lines.items()) + "\nqueue\n"
        try:
            cwd = os.getcwd()
        except FileNotFoundError:  # the caller's directory was removed: relative paths mean nothing now
            cwd = str(self.spool.path) if self.spool is not None else "/"
        try:
            cluster = Submit(text, cwd=cwd).cluster(1)
            ad = {**cluster.cluster_ad, **next(iter(cluster.proc_ads()))}
        except SubmitError as exc:
            raise OptionError(f"these options do not make a valid job: {exc}") from None
        for name in ("ClusterId", "ProcId", "Owner", "QDate", "EnteredCurrentStatus"):
            ad.pop(name, None)
        self._templates[id(options)] = (options, ad)
        return ad

    def check_request(self, options: CallOptions) -> None:
        """Refuse at once a request no slot of the pool could ever satisfy.

        Raises:
            ImpossibleRequest: naming what is too big or never true, and the largest slot.
            OptionError: the options do not make a valid job.
        """
        from htc.classad.match import requirements_hold

        template = self._template(options)
        slots = self._slot_ads()
        if not slots:
            return  # no startd has reported yet: nothing to judge by
        job = ClassAd("[ " + "; ".join(f"{k} = {v}" for k, v in template.items()) + " ]")
        for slot in slots:
            if requirements_hold(job, _at_most(slot)):
                return
        biggest = max(slots, key=lambda s: (_number(s, "TotalSlotCpus", "TotalCpus", "Cpus"),
                                            _number(s, "TotalSlotMemory", "TotalMemory", "Memory")))
        big = _at_most(biggest)
        what = (f"request_cpus={options.request_cpus}, request_memory={options.request_memory} MiB, "
                f"request_disk={options.request_disk} KiB"
                + (f", requirements {options.requirements!r}" if options.requirements else ""))
        raise ImpossibleRequest(
            f"no slot of the pool can ever run this call ({what}): of {len(slots)} slot(s), the biggest "
            f"({big.get('Name')}) offers Cpus = {big.get('Cpus')}, Memory = {big.get('Memory')} MiB, "
            f"Disk = {big.get('Disk')} KiB, OpSys = {big.get('OpSys')}, Arch = {big.get('Arch')}; ask for less")

    def _slot_ads(self) -> list[ClassAd]:
        fetched, ads = self._slots
        if time.monotonic() - fetched < _SLOTS_FRESH:
            return ads
        from htc.client import AdType, query_collector_async

        assert self._io is not None
        # A pool started a moment ago has no slot ads yet; give its startd a few seconds.
        deadline = time.monotonic() + (_FIRST_SLOTS_WAIT if not fetched else 0.0)
        while True:
            try:
                ads = self._io.call(query_collector_async(AdType.Startd, transport=self._transport, timeout=10.0), 15)
            except (HTCError, OSError, TimeoutError):
                ads = []
            if ads or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        self._slots = (time.monotonic(), ads)
        return ads

    def submit_calls(self, calls: Sequence[CallSpec]) -> list[str]:
        """Queue the calls: one cluster (one transaction) per option set and 2,000 calls.

        Raises:
            ScheddLost: the schedd stayed unreachable.
            RemoteError: the schedd refused the jobs (the message says why).
        """
        assert self.spool is not None
        job_ids: dict[str, str] = {}
        groups: dict[int, list[CallSpec]] = {}
        for spec in calls:
            groups.setdefault(id(spec.options), []).append(spec)
        journal = []
        for group in groups.values():
            template = self._template(group[0].options)
            cluster_ad = "[ " + "; ".join(f"{k} = {v}" for k, v in template.items()) + " ]"
            for start in range(0, len(group), _MAX_PROCS_PER_SUBMIT):
                part = group[start:start + _MAX_PROCS_PER_SUBMIT]
                procs = tuple(self._proc_ad(spec) for spec in part)
                for spec, job_id in zip(part, self._submit_cluster(cluster_ad, procs, part)):
                    job_ids[spec.call_id] = job_id
                    self._jobs[job_id] = _Job(spec.call_id, spec.label, spec.options)
                    self._job_of[spec.call_id] = job_id
                    journal.append({"op": "job", "id": spec.call_id, "job": job_id})
        if self._named:
            self.spool.record(journal)
        self._interval = 0.002
        # No Reschedule of our own: the schedd starts new calls on a claim it kept for us, and
        # otherwise asks the negotiator for a cycle itself (SCHEDD_SEND_RESCHEDULE).
        return [job_ids[spec.call_id] for spec in calls]

    def _proc_ad(self, spec: CallSpec) -> str:
        assert self.spool is not None
        where, name = os.path.split(self.spool.prepare(spec.call_id, spec.data, spec.parents, spec.options))
        inputs = [name, *(cf.parent_file(p) for p in spec.parents)]
        cid = spec.call_id
        attrs = {"HTCCallId": quote(cid), "HTCFunction": quote(spec.label)}
        if name == cf.CALL_FILE:  # a directory of its own
            if spec.options.checkpoint:
                Path(where, cf.CHECKPOINT_FILE).touch()  # empty until the call checkpoints; comes back on eviction
                inputs.append(cf.CHECKPOINT_FILE)
            attrs["Iwd"] = quote(where)
        else:  # its files in the cluster's Iwd, calls/, named after it (as the spool names them)
            result = os.path.basename(self.spool.result_file(cid))
            attrs.update(Out=quote(os.path.basename(self.spool.output_file(cid, "stdout"))),
                         Err=quote(os.path.basename(self.spool.output_file(cid, "stderr"))),
                         TransferOutputRemaps=quote(f"{cf.RESULT_FILE}={result}"))
        inputs += [os.path.abspath(f) for f in spec.options.transfer_input_files]
        attrs["TransferInput"] = quote(",".join(inputs))
        return "[ " + "; ".join(f"{k} = {v}" for k, v in attrs.items()) + " ]"

    def _submit_cluster(self, cluster_ad: str, procs: tuple[str, ...], specs: list[CallSpec]) -> list[str]:
        # The batch's submission id makes a retry after a lost reply -- to this schedd or to
        # the one the master starts after a crash -- answer the cluster the first try made.
        msg = m.Submit(cluster_ad=cluster_ad, proc_ads=procs, submission_id=self._submission_id(specs))
        reply = self._request(msg, timeout=60.0)
        return [f"{reply.cluster_id}.{reply.first_proc + i}" for i in range(reply.num_procs)]

    def _submission_id(self, specs: list[CallSpec]) -> str:
        """The batch's name for the schedd: the same calls of the same session, the same id."""
        assert self.spool is not None
        h = hashlib.blake2b(self.spool.name.encode(), digest_size=20)
        for spec in specs:
            h.update(b"\0" + spec.call_id.encode())
        return f"htcx-{h.hexdigest()}"

    # --- Backend: acting on jobs ------------------------------------------------------------------------
    def _act(self, action: m.JobAction, job_ids: list[str], reason: str) -> None:
        if job_ids:
            self._request(m.ActOnJobs(action=action, ids=tuple(job_ids), reason=reason))

    def remove(self, call_ids: Sequence[str], reason: str) -> None:
        """``htc rm`` the calls' jobs."""
        ids = []
        for cid in call_ids:
            job_id = self._job_of.get(cid)
            if job_id is not None and self._jobs[job_id].state != "done":
                self._jobs[job_id].removing = True
                ids.append(job_id)
        self._act(m.JobAction.Remove, ids, reason)

    def vacate(self, call_ids: Sequence[str]) -> None:
        """``htc vacate_job`` the calls' running jobs (they checkpoint and go back to idle)."""
        ids = [self._job_of[c] for c in call_ids if c in self._job_of]
        self._act(m.JobAction.Vacate, ids, "htc executor: future.vacate()")

    # --- Backend: introspection ---------------------------------------------------------------------------
    def output(self, call_id: str, stream: str) -> Path:
        """Where the call's output arrives (in its job's Iwd)."""
        assert self.spool is not None
        return self.spool.output_path(call_id, stream)

    def job_ad(self, call_id: str) -> ClassAd:
        """The job's ad from the queue, or from the history once it left.

        Raises:
            SessionError: the job is in neither.
        """
        job_id = self._job_of.get(call_id)
        if job_id is None:
            raise SessionError(f"call {call_id} has no job in this session")
        cluster, proc = job_id.split(".")
        reply = self._request(m.QueryJobs(constraint=f"ClusterId == {cluster} && ProcId == {proc}"))
        if reply.ads:
            return ClassAd(reply.ads[0])
        from htc.client import history

        path = self.home / "spool" / "job_queue.db" if self.pool is not None and self.home else None
        try:
            found = history(f"ClusterId == {cluster} && ProcId == {proc}", limit=1, path=path)
        except UsageError:
            found = []
        if not found:
            raise SessionError(f"job {job_id} is neither in the queue nor in the history this machine can read")
        return found[0]

    def why(self, call_id: str) -> str:
        """What the job is doing, and for an idle job the slots' view (``-better-analyze``)."""
        job_id = self._job_of.get(call_id)
        if job_id is None:
            return f"call {call_id} has no job yet"
        try:
            ad = self.job_ad(call_id)
        except SessionError as exc:
            return str(exc)
        status = ad.get("JobStatus")
        if status == 5:
            return (f"job {job_id} is held: {ad.get('HoldReason')} (HoldReasonCode {ad.get('HoldReasonCode')}); "
                    f"'htc release {job_id}' runs it again")
        if status == 2:
            return f"job {job_id} is running on {ad.get('RemoteHost', 'a slot')}"
        if status != 1:
            return f"job {job_id} has status {status}"
        from htc.client import analyze_job
        from htc.client import AdType, query_collector_async

        assert self._io is not None
        slots = self._io.call(query_collector_async(AdType.Startd, transport=self._transport, timeout=10.0), 15)
        return f"job {job_id} is idle.\n" + analyze_job(ad, slots).render()

    # --- Backend: attach -------------------------------------------------------------------------------
    def recover(self) -> list[RecoveredCall]:
        """The calls of the session's journal, with their jobs (the event log is replayed by poll)."""
        assert self.spool is not None
        calls: dict[str, dict[str, Any]] = {}
        jobs: dict[str, str] = {}
        for entry in self.spool.journal():
            if entry.get("op") == "call":
                calls[entry["id"]] = entry
            elif entry.get("op") == "job":
                jobs[entry["id"]] = entry["job"]
        if calls:
            jobs.update(self._queued_call_ids(set(calls) - set(jobs)))
        out = []
        for call_id, entry in calls.items():
            options = options_from_json(entry.get("options", {}))
            job_id = jobs.get(call_id)
            data = None
            if job_id is not None:
                self._jobs[job_id] = _Job(call_id, entry["label"], options)
                self._job_of[call_id] = job_id
            else:
                try:
                    data = self.spool.call_path(call_id).read_bytes()
                except FileNotFoundError:
                    data = None
            out.append(RecoveredCall(call_id, entry["label"], job_id, tuple(entry.get("parents", ())), options,
                                     None, data))
        self._next_reconcile = 0.0
        return out

    def _queued_call_ids(self, call_ids: set[str]) -> dict[str, str]:
        """Jobs of the session the journal does not name (the client died right after
        submitting): in the queue, or -- finished meanwhile -- in the history, so that attach
        does not submit them again."""
        if not call_ids:
            return {}
        reply = self._request(m.QueryJobs(constraint=self._session_constraint(),
                                          projection=("ClusterId", "ProcId", "HTCCallId")))
        ads = [ClassAd(text) for text in reply.ads]
        if len(ads) < len(call_ids):
            ads += self._session_history()
        found = {}
        for ad in ads:
            if ad.get("HTCCallId") in call_ids:
                found[str(ad["HTCCallId"])] = f"{ad['ClusterId']}.{ad['ProcId']}"
        return found

    def _session_history(self) -> list[ClassAd]:
        """The session's finished jobs, from the history this machine can read (none when it
        cannot: the pool is elsewhere, or its queue file is not readable)."""
        from htc.client import history

        path = self.home / "spool" / "job_queue.db" if self.pool is not None and self.home else None
        try:
            return history(self._session_constraint(), path=path)
        except (HTCError, OSError):
            return []

    def collected(self, call_ids: Sequence[str]) -> None:
        """Nothing to free: results stay in the spool until the session is forgotten or expires."""
        for cid in call_ids:
            job_id = self._job_of.get(cid)
            if job_id is not None and job_id in self._jobs:
                self._jobs[job_id].state = "done"


def _number(ad: ClassAd, *names: str) -> float:
    for name in names:
        value = ad.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return 0.0


def _at_most(slot: ClassAd) -> ClassAd:
    """A slot ad grown to everything its machine could give one job (a partitionable slot's whole)."""
    ad = ClassAd(str(slot))
    for attr, totals in (("Cpus", ("TotalSlotCpus", "TotalCpus")), ("Memory", ("TotalSlotMemory", "TotalMemory")),
                         ("Disk", ("TotalSlotDisk", "TotalDisk")), ("Gpus", ("TotalSlotGpus", "TotalGpus"))):
        best = max(_number(slot, *totals), _number(slot, attr))
        if best:
            ad[attr] = int(best)
    return ad


def remove_session_jobs(spool: Spool) -> None:
    """Remove every job of a session from its pool's queue (``htc.executors.forget``); quiet when the
    pool is not running."""
    info = spool.info()
    backend = PoolBackend(info.get("pool"))
    try:
        backend._transport, backend.home = _transport_for(backend.pool, start=False)
    except (HTCError, OSError):
        return
    backend.spool = spool
    backend._io = _IOThread(f"htc-pool-io-{spool.name}")
    try:
        backend._request(m.ActOnJobs(action=m.JobAction.Remove, constraint=backend._session_constraint(),
                                     reason="htc.executors.forget()"), timeout=10.0, retry=False)
    except (HTCError, OSError):
        return
    finally:
        backend.close(detach=True)

