"""The local backend: calls run as processes on this machine, forked from a pre-imported zygote.

For a laptop without a pool, for CI, and for trying a function before sending it to the
pool: ``HTCExecutor(backend="local")`` (or ``backend=LocalProcessBackend(slots=4)``). No
daemon is involved and nothing outlives the client: named sessions and ``attach`` need the
pool backend.

Theory of operation
-------------------
The backend is a one-machine schedd and startd in a few hundred lines, driven by the
executor's service thread:

* **Admission.** The machine offers ``slots`` cpus and ``memory`` MiB (default: all of
  them). A request bigger than the machine, or whose ``requirements`` is false for this
  machine's ad (``OpSys``, ``Arch``, ``Cpus``, ``Memory``, ``Disk``, ``Machine``, ...), is refused
  at once with :class:`ImpossibleRequest`.
* **Scheduling.** Idle calls wait in (priority, submission) order; each start takes the
  call's cpus and memory until it ends. A call that does not fit lets smaller ones behind
  it start (backfill).
* **Running.** One zygote per cpu (:mod:`htc.executors.zygote`; forking is the expensive
  part, so forks run in parallel) forks one child per run; the call's directory is its
  sandbox, its output goes to ``stdout``/``stderr`` there.
* **Limits.** Every half second the resident memory of each running call's process group is
  measured; one above its ``request_memory`` is killed (:class:`JobOutOfMemory`). The
  worker stops a call at its ``timeout``; five seconds later the backend kills it if it is
  still there.
* **Endings.** Exit 0 returns the value; exit 1 (the function raised) runs the call again
  while ``max_retries`` lasts; exit 3 (could not run) fails it. A signal, or an exit without
  a result file, fails it with :class:`JobKilled`. ``vacate`` sends SIGTERM (the worker
  saves a Checkpointable's state) and puts the call back in the idle queue with its
  checkpoint -- the next run resumes from it.
* **A zygote dying** sends its running calls back to the queue (an infrastructure
  failure, retried ``infrastructure_retries`` times) behind a fresh zygote; if a new one
  cannot start, the backend raises :class:`ScheddLost`.
"""

from __future__ import annotations

import heapq
import itertools
import os
import platform
import selectors
import signal
import socket
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from htc.wire import callfile as cf
from htc.executors.backend import CallSpec, JobUpdate, RecoveredCall
from htc.executors.errors import (
    CallTimedOut, ImpossibleRequest, JobKilled, JobOutOfMemory, OptionError, ScheddLost, SessionError,
)
from htc.executors.options import CallOptions, transparent
from htc.executors.spool import Spool, UntrustedFile
from htc.executors.status import CallEvent
from htc.executors.worker import EXIT_ERROR, EXIT_EXCEPTION, EXIT_VALUE
from htc.executors.zygote import Zygote

__all__ = ["LocalProcessBackend"]

_MEMORY_CHECK = 0.5
_TIMEOUT_GRACE = 5.0
_VACATE_GRACE = 10.0


@dataclass
class _Call:
    spec: CallSpec
    seq: int
    job_id: str
    state: str = "idle"  # idle | running | done
    pid: int | None = None
    started: float = 0.0
    #: monotonic time the process started (None: not yet)
    started_mono: float | None = None
    starts: int = 0
    evictions: int = 0
    user_retries: int = 0
    infra_retries: int = 0
    kill_reason: str = ""  # vacate | memory | timeout | remove
    kill_deadline: float | None = None
    zygote: Zygote | None = None
    usage: dict[str, Any] = field(default_factory=dict)


class LocalProcessBackend:
    """Runs calls as processes on this machine. See the module docstring.

    Args:
        slots: cpus to use (default: all of this machine's).
        memory: MiB (or text like ``"8GB"``) calls may use in total (default: physical memory).
        preload: modules the zygote imports once, so each call finds them already loaded.
    """

    kind = "local"

    def __init__(self, slots: int | None = None, memory: int | str | None = None, preload: Iterable[str] = ()):
        from htc.executors.options import parse_size

        self.cpus = int(slots) if slots else (os.cpu_count() or 1)
        if self.cpus < 1:
            raise ImpossibleRequest(f"slots={slots!r}: the local backend needs at least one cpu")
        total = psutil.virtual_memory().total // (1024 * 1024)
        self.memory = parse_size(memory, "memory") if memory is not None else int(total)
        self.preload = tuple(preload)
        self.spool: Spool | None = None
        self.zygotes: list[Zygote] = []
        self.calls: dict[str, _Call] = {}
        self._idle: list[tuple[int, int, str]] = []
        self._running: dict[str, _Call] = {}
        self._by_pid: dict[int, _Call] = {}
        self._updates: list[JobUpdate] = []
        self._seq = itertools.count()
        self._free_cpus = self.cpus
        self._free_memory = self.memory
        self._next_memory_check = 0.0
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self.host = socket.gethostname()
        self.machine_ad = self._machine_ad()

    def __repr__(self) -> str:
        return f"LocalProcessBackend(slots={self.cpus}, memory={self.memory})"

    def _machine_ad(self) -> dict[str, Any]:
        from htc.executors.serialize import python_version

        arch = platform.machine().upper()
        arch = {"AMD64": "X86_64", "ARM64": "AARCH64"}.get(arch, arch)
        disk = psutil.disk_usage(str(Path.home())).free // 1024
        return {"MyType": "Machine", "Name": f"local@{self.host}", "Machine": self.host,
                "OpSys": platform.system().upper(), "Arch": arch, "Cpus": self.cpus, "TotalCpus": self.cpus,
                "Memory": self.memory, "TotalMemory": self.memory, "Disk": disk, "Gpus": 0,
                "HasPython": True, "PythonVersion": python_version(), "Requirements": True}

    # --- Backend ---------------------------------------------------------------------------
    def open(self, spool: Spool, *, named: bool, create: bool) -> None:
        """Start the zygote for an anonymous session (named sessions need a pool).

        Raises:
            SessionError: a named session was asked for.
        """
        if named or not create:
            raise SessionError(f"session {spool.name!r}: the local backend runs calls as children of this "
                               "process, so nothing survives it to attach to; use the pool backend (the default) "
                               "for named sessions")
        self.spool = spool
        for _ in range(min(self.cpus, 8)):
            self._start_zygote()

    def _start_zygote(self) -> None:
        try:
            zygote = Zygote(self.preload)
        except OSError as exc:
            raise ScheddLost(f"cannot start the local worker process: {exc}") from exc
        self.zygotes.append(zygote)
        self._sel.register(zygote.fileno(), selectors.EVENT_READ, zygote)

    def check_request(self, options: CallOptions) -> None:
        """Refuse requests this machine can never satisfy.

        Raises:
            ImpossibleRequest: naming the request and what this machine offers.
            OptionError: ``checkpoint="transparent"``, which needs a pool.
        """
        if transparent(options):
            raise OptionError("checkpoint='transparent' runs each call under a pool's checkpointing runtime (a "
                              "standard-universe job), which the local backend does not have; use checkpoint=True "
                              "with htc.checkpoint here, or a pool (backend='pool')")
        problems = []
        if options.request_cpus > self.cpus:
            problems.append(f"request_cpus={options.request_cpus} but the local backend has {self.cpus} cpus")
        if options.request_memory > self.memory:
            problems.append(f"request_memory={options.request_memory} MiB but the local backend has "
                            f"{self.memory} MiB")
        if options.request_gpus > 0:
            problems.append(f"request_gpus={options.request_gpus} but the local backend has no GPUs")
        if options.python and os.path.realpath(options.python) != os.path.realpath(sys.executable):
            problems.append(f"python={options.python!r}: the local backend runs calls with this interpreter "
                            f"({sys.executable})")
        if options.requirements:
            from htc.classad import ClassAd
            from htc.classad.match import requirements_hold

            job = ClassAd(f"[ RequestCpus = {options.request_cpus}; RequestMemory = {options.request_memory}; "
                          f"Requirements = ({options.requirements}) ]")
            if not requirements_hold(job, ClassAd(self.machine_ad)):
                problems.append(f"requirements {options.requirements!r} is not true for this machine "
                                f"({self._describe_machine()})")
        if problems:
            raise ImpossibleRequest("; ".join(problems) + "; ask for less, or use a pool with bigger slots")

    def _describe_machine(self) -> str:
        ad = self.machine_ad
        return ", ".join(f"{k} = {ad[k]!r}" for k in ("OpSys", "Arch", "Cpus", "Memory", "Machine"))

    def submit_calls(self, calls: Sequence[CallSpec]) -> list[str]:
        """Queue calls and start as many as fit."""
        assert self.spool is not None
        ids = []
        for spec in calls:
            seq = next(self._seq)
            call = _Call(spec, seq, f"local.{seq}")
            where = Path(self.spool.prepare(spec.call_id, None, spec.parents)).parent
            for name in ("stdout", "stderr"):
                (where / name).touch()
            self.calls[spec.call_id] = call
            heapq.heappush(self._idle, (-spec.options.priority, seq, spec.call_id))
            ids.append(call.job_id)
        self._schedule()
        return ids

    def _schedule(self) -> None:
        if not self.zygotes:
            return
        skipped = []
        while self._idle and self._free_cpus > 0:
            item = heapq.heappop(self._idle)
            call = self.calls.get(item[2])
            if call is None or call.state != "idle":
                continue
            opts = call.spec.options
            if opts.request_cpus > self._free_cpus or opts.request_memory > self._free_memory:
                skipped.append(item)
                continue
            self._start(call)
        for item in skipped:
            heapq.heappush(self._idle, item)

    def _start(self, call: _Call) -> None:
        assert self.spool is not None and self.zygotes
        where = self.spool.call_dir(call.spec.call_id)
        (where / cf.RESULT_FILE).unlink(missing_ok=True)
        env = dict(call.spec.options.environment)
        env.update({"_CONDOR_SLOT": "local", "_CONDOR_SCRATCH_DIR": str(where), "BATCH_SYSTEM": "htc-local",
                    "OMP_NUM_THREADS": str(call.spec.options.request_cpus)})
        call.state = "running"
        call.kill_reason = ""
        call.kill_deadline = None
        call.started = time.time()
        call.started_mono = None
        call.starts += 1
        self._free_cpus -= call.spec.options.request_cpus
        self._free_memory -= call.spec.options.request_memory
        self._running[call.spec.call_id] = call
        load = {id(z): 0 for z in self.zygotes}
        for other in self._running.values():
            if other.zygote is not None and id(other.zygote) in load:
                load[id(other.zygote)] += 1
        call.zygote = min(self.zygotes, key=lambda z: load[id(z)])
        call.zygote.run(call.spec.call_id, str(where), call.spec.data, str(where / "stdout"),
                        str(where / "stderr"), env)

    def poll(self, timeout: float) -> list[JobUpdate]:
        """Wait for children to start or end (or :meth:`wake`), enforce limits, return the changes.

        Raises:
            ScheddLost: the zygote died and a new one could not be started.
        """
        ready = []
        if not self._updates:
            for key, _ in self._sel.select(self._poll_timeout(timeout)):
                if key.data == "wake":
                    try:
                        while os.read(self._wake_r, 4096):
                            continue
                    except BlockingIOError:
                        continue
                else:
                    ready.append(key.data)
        for zygote in ready:
            self._read_zygote(zygote)
        self._schedule()
        self._enforce(time.monotonic())
        updates, self._updates = self._updates, []
        return updates

    def _poll_timeout(self, timeout: float) -> float:
        now = time.monotonic()
        deadlines = [now + timeout]
        if self._running:
            deadlines.append(self._next_memory_check)
        deadlines += [c.kill_deadline for c in self._running.values() if c.kill_deadline]
        deadlines += [c.started_mono + c.spec.options.timeout + _TIMEOUT_GRACE
                      for c in self._running.values() if c.spec.options.timeout and c.started_mono]
        return max(0.0, min(deadlines) - now)

    def wake(self) -> None:
        """Interrupt a blocked :meth:`poll` (nothing once closed)."""
        fd = self._wake_w
        if fd < 0:
            return
        try:
            os.write(fd, b"x")
        except (BlockingIOError, OSError):
            return

    def _read_zygote(self, zygote: Zygote) -> None:
        try:
            answers = zygote.read()
        except ScheddLost as lost:
            self._zygote_died(zygote, lost)
            return
        for answer in answers:
            if answer[0] == "started":
                _, call_id, pid = answer
                call = self.calls.get(call_id)
                if call is None:
                    continue
                call.pid = pid
                call.started_mono = time.monotonic()
                self._by_pid[pid] = call
                if call.kill_reason:  # removed or vacated before it started
                    zygote.kill(pid, signal.SIGKILL if call.kill_reason == "remove" else signal.SIGTERM)
                else:
                    self._updates.append(JobUpdate(call_id, CallEvent.STARTED, call.job_id, host=self.host))
            elif answer[0] == "exited":
                _, call_id, pid, code, sig, ucpu, scpu, maxrss = answer
                call = self._by_pid.pop(pid, None)
                if call is not None:
                    call.usage = {"RemoteUserCpu": ucpu, "RemoteSysCpu": scpu, "ResidentSetSize": maxrss}
                    self._exited(call, code, sig)

    def _release(self, call: _Call) -> None:
        self._running.pop(call.spec.call_id, None)
        self._free_cpus += call.spec.options.request_cpus
        self._free_memory += call.spec.options.request_memory
        call.pid = None
        call.zygote = None

    def _requeue(self, call: _Call) -> None:
        call.state = "idle"
        heapq.heappush(self._idle, (-call.spec.options.priority, call.seq, call.spec.call_id))

    def _exited(self, call: _Call, code: int | None, sig: int | None) -> None:
        assert self.spool is not None
        self._release(call)
        cid, jid, label = call.spec.call_id, call.job_id, call.spec.label
        reason = call.kill_reason
        if reason == "remove":
            call.state = "done"
            return
        if reason == "vacate":
            call.evictions += 1
            self._updates.append(JobUpdate(cid, CallEvent.EVICTED, jid, detail="vacated: the slot was taken back",
                                           evictions=call.evictions))
            self._requeue(call)
            self._updates.append(JobUpdate(cid, CallEvent.REQUEUED, jid, detail=f"idle after {call.evictions} "
                                           f"eviction{'s' if call.evictions > 1 else ''}"))
            return
        call.state = "done"
        see = f"see future.stderr, or {self.spool.output_path(cid, 'stderr')}"
        if reason == "memory":
            self._updates.append(JobUpdate(cid, CallEvent.FAILED, jid, error=JobOutOfMemory(
                f"call {label} (job {jid}) used more than its request_memory of {call.spec.options.request_memory} "
                f"MiB and was killed; raise request_memory in options() ({see})", jid)))
            return
        if reason == "timeout":
            self._updates.append(JobUpdate(cid, CallEvent.FAILED, jid, error=CallTimedOut(
                f"call {label} (job {jid}) ran past its timeout of {call.spec.options.timeout:g} s and did not "
                f"stop when asked, so it was killed ({see})", jid)))
            return
        try:
            result = self.spool.read_result(cid)
        except UntrustedFile as exc:  # never unpickled: the call fails saying why
            self._updates.append(JobUpdate(cid, CallEvent.FAILED, jid, error=exc))
            return
        if result is not None and code in (EXIT_VALUE, EXIT_EXCEPTION, EXIT_ERROR):
            if code == EXIT_EXCEPTION and call.user_retries < call.spec.options.max_retries:
                call.user_retries += 1
                self._requeue(call)
                header, _ = cf.unpack_result(result)
                self._updates.append(JobUpdate(cid, CallEvent.REQUEUED, jid, detail=(
                    f"raised {header.exception_type}; retry {call.user_retries} of {call.spec.options.max_retries}")))
                return
            event = CallEvent.RETURNED if code == EXIT_VALUE else CallEvent.FAILED
            self._updates.append(JobUpdate(cid, event, jid, result=result, host=self.host))
            return
        if sig is not None:
            name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else str(sig)
            text = f"call {label} (job {jid}) was killed by signal {sig} ({name}) before it returned ({see})"
        else:
            text = f"call {label} (job {jid}) exited with status {code} without writing a result ({see})"
        self._updates.append(JobUpdate(cid, CallEvent.FAILED, jid, error=JobKilled(text, jid)))

    def _zygote_died(self, zygote: Zygote, lost: ScheddLost) -> None:
        self._sel.unregister(zygote.fileno())
        zygote.close(timeout=1.0)
        self.zygotes.remove(zygote)
        for call in [c for c in self._running.values() if c.zygote is zygote]:
            self._release(call)
            self._by_pid = {p: c for p, c in self._by_pid.items() if c is not call}
            if call.kill_reason == "remove":
                call.state = "done"
                continue
            if call.infra_retries >= call.spec.options.infrastructure_retries:
                call.state = "done"
                self._updates.append(JobUpdate(call.spec.call_id, CallEvent.FAILED, call.job_id, error=JobKilled(
                    f"call {call.spec.label} (job {call.job_id}) was lost {call.infra_retries + 1} times with the "
                    f"local worker process ({lost})", call.job_id)))
                continue
            call.infra_retries += 1
            self._updates.append(JobUpdate(call.spec.call_id, CallEvent.INFRA_FAILURE, call.job_id,
                                           detail=f"the local worker process died; retry {call.infra_retries}"))
            self._requeue(call)
            self._updates.append(JobUpdate(call.spec.call_id, CallEvent.REQUEUED, call.job_id))
        self._start_zygote()

    def _enforce(self, now: float) -> None:
        for call in list(self._running.values()):
            if call.pid is None or call.zygote is None:
                continue
            if call.kill_deadline is not None and now >= call.kill_deadline:
                call.zygote.kill(call.pid, signal.SIGKILL)
                call.kill_deadline = None
            limit = call.spec.options.timeout
            started = call.started_mono
            if limit and started and not call.kill_reason and now >= started + limit + _TIMEOUT_GRACE:
                call.kill_reason = "timeout"
                call.zygote.kill(call.pid, signal.SIGKILL)
        if now < self._next_memory_check:
            return
        self._next_memory_check = now + _MEMORY_CHECK
        for call in list(self._running.values()):
            if call.pid is None or call.kill_reason or call.zygote is None:
                continue
            rss = _group_rss(call.pid)
            call.usage["MemoryUsage"] = (rss + (1 << 20) - 1) >> 20
            if rss > call.spec.options.request_memory * 1024 * 1024:
                call.kill_reason = "memory"
                call.zygote.kill(call.pid, signal.SIGKILL)

    def remove(self, call_ids: Sequence[str], reason: str) -> None:
        """Forget idle calls; kill running ones."""
        for cid in call_ids:
            call = self.calls.get(cid)
            if call is None or call.state == "done":
                continue
            if call.state == "idle":
                call.state = "done"
                continue
            call.kill_reason = "remove"
            if call.pid is not None and call.zygote is not None:
                call.zygote.kill(call.pid, signal.SIGKILL)

    def vacate(self, call_ids: Sequence[str]) -> None:
        """Evict running calls: SIGTERM (the call checkpoints), SIGKILL after a grace period."""
        for cid in call_ids:
            call = self.calls.get(cid)
            if call is None or call.state != "running" or call.kill_reason:
                continue
            call.kill_reason = "vacate"
            call.kill_deadline = time.monotonic() + _VACATE_GRACE
            if call.pid is not None and call.zygote is not None:
                call.zygote.kill(call.pid, signal.SIGTERM)

    def output(self, call_id: str, stream: str) -> Path:
        """The call's stdout/stderr file (written live)."""
        assert self.spool is not None
        return self.spool.output_path(call_id, stream)

    def job_ad(self, call_id: str) -> Any:
        """What the backend knows of the call, as a ClassAd with job-ad attribute names."""
        from htc.classad import ClassAd

        call = self.calls.get(call_id)
        if call is None:
            raise SessionError(f"the local backend no longer knows call {call_id}")
        status = {"idle": 1, "running": 2, "done": 4}[call.state]
        opts = call.spec.options
        ad = {"GlobalJobId": f"{self.host}#{call.job_id}", "HTCCallId": call_id, "HTCFunction": call.spec.label,
              "JobStatus": status, "RequestCpus": opts.request_cpus, "RequestMemory": opts.request_memory,
              "JobPrio": opts.priority, "NumJobStarts": call.starts, "NumVacates": call.evictions,
              "Iwd": str(self.spool.call_dir(call_id)) if self.spool else "", "RemoteHost": self.host}
        if call.started:
            ad["JobCurrentStartDate"] = int(call.started)
        return ClassAd({**ad, **call.usage})

    def why(self, call_id: str) -> str:
        """Why the call waits (or what it does)."""
        call = self.calls.get(call_id)
        if call is None:
            return f"the local backend no longer knows call {call_id}"
        if call.state == "running":
            return f"job {call.job_id} is running (pid {call.pid}) on this machine"
        if call.state == "done":
            return f"job {call.job_id} has finished"
        opts = call.spec.options
        ahead = sum(1 for _, _, cid in self._idle if cid != call_id and self.calls[cid].state == "idle"
                    and (-self.calls[cid].spec.options.priority, self.calls[cid].seq) < (-opts.priority, call.seq))
        return (f"job {call.job_id} is idle: it needs {opts.request_cpus} cpu(s) and {opts.request_memory} MiB; "
                f"{self.cpus - self._free_cpus} of {self.cpus} cpus and {self.memory - self._free_memory} of "
                f"{self.memory} MiB are in use by {len(self._running)} running call(s); {ahead} idle call(s) "
                "are ahead of it")

    def recover(self) -> list[RecoveredCall]:
        """Nothing: local calls do not outlive their client."""
        return []

    def collected(self, call_ids: Sequence[str]) -> None:
        """Drop the records of finished calls."""
        for cid in call_ids:
            call = self.calls.get(cid)
            if call is not None and call.state == "done":
                del self.calls[cid]

    def close(self, *, detach: bool) -> None:
        """Kill running calls and stop the zygote (the executor deletes the session's files)."""
        for zygote in self.zygotes:
            self._sel.unregister(zygote.fileno())
            zygote.close()
        self.zygotes = []
        self._sel.close()
        fds, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
        for fd in fds:
            if fd >= 0:
                os.close(fd)


def _group_rss(pid: int) -> int:
    """Resident bytes of a process and its descendants."""
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total
