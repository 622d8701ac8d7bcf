"""Scheduler-universe (7) and local-universe (12) jobs: the schedd runs them itself.

Theory of operation
-------------------
A job of these universes never meets the negotiator: it is not counted as idle in the
Submitter ads, never offered in GetResourceRequests and never matched (:mod:`~.ads`,
:mod:`~.matches`). Instead, whenever new work may have appeared (a submit, a release, a
requeue: just before the ads announcing it go out), when the schedd starts, and every
PERIODIC_EXPR_INTERVAL, :meth:`LocalJobs.start_idle`
looks at the idle ones and starts each that ``START_SCHEDULER_UNIVERSE`` (scheduler universe)
or ``START_LOCAL_UNIVERSE`` (local universe) allows, and, for the scheduler universe, while its
owner runs fewer than ``MAX_RUNNING_SCHEDULER_JOBS_PER_OWNER`` (200; 0 turns the universe off). Those expressions are evaluated with the
schedd's counts as MY (``TotalSchedulerJobsRunning``, ``TotalLocalJobsRunning`` ...) and the
job as TARGET, as HTCondor's schedd does.

Starting is a queue change (the job is Running, JobCurrentStartDate, NumJobStarts) followed by
a :class:`~.events.StartLocalJob` action: the executable (``Cmd``, relative to ``Iwd``), its
arguments, exactly the job's environment plus ``CONDOR_ID`` (HTCondor's scheduler universe
inherits nothing of the schedd's environment; ``getenv`` is applied by submit), ``Iwd`` (``/tmp``
if it has none) and its ``In``/``Out``/``Err`` files (relative to ``Iwd``; ``/dev/null`` when
unset). The service (:mod:`~.local_runner`) starts the process as the job's owner and answers:

* :class:`~.events.LocalJobStarted`: the Execute event is written, its host the schedd's address;
* :class:`~.events.LocalJobFailed`: the job is held with the reason (``File '...' is missing or
  not executable``, code 6 FailedToCreateProcess, or 23 when the owner's account is unusable);
* later :class:`~.events.LocalJobExited`: ExitCode / ExitBySignal / ExitSignal are recorded and
  the job's ``on_exit_remove`` / ``on_exit_hold`` / ``max_retries`` policy decides
  (:meth:`htc.jobqueue.JobQueue.exit_and_apply`): Terminated (005), or requeued (004, Idle, run
  again -- DAGMan's exit codes above 2 rely on it), or Held (012), or removed (009). A
  scheduler-universe job that exited with a non-zero code is in *cool-down* as in HTCondor: it
  is not started again before ``JobCoolDownExpiration`` (``SCHEDULER_UNIVERSE_COOL_DOWN_DURATION``
  seconds, default 300, later; none with the job attribute ``DisableCoolDown = true``).

Stopping (:meth:`LocalJobs.stop`): ``htc rm`` sends ``RemoveKillSig`` (else ``KillSig``, else
SIGTERM), ``htc hold`` ``HoldKillSig`` (else ``KillSig``, else SIGTERM), ``htc vacate_job``
``KillSig``; the signal goes to the job's process group. If the process is still there after
``KillSigTimeout`` (the job's ``kill_sig_timeout``), else ``SCHEDD_LOCAL_JOB_KILL_TIMEOUT``
seconds, it gets SIGKILL (HTCondor's schedd sends the one signal and waits; htc does not let a
job that ignores it stay forever). A removed job leaves the queue once its process is gone: then
its Evicted (004) and Aborted (009) events are written, in HTCondor's order. A held job stays held
(its Held event was written when it was held); ``htc release`` makes it idle and it runs again from
the start. A vacated one is idle again.

A schedd that dies takes its local jobs' processes with it (``PR_SET_PDEATHSIG``, see
:mod:`~.local_runner`). The next schedd finds them Running in the queue
(:meth:`LocalJobs.recover`) and makes them Idle again, so they run again from the start; one that
was being removed leaves the queue with its Aborted event.
"""

from __future__ import annotations

import os.path
import signal
from dataclasses import dataclass

from htc.classad import ClassAd
from htc.classad.ad import ExprTree
from htc.config.hostname import sinful
from htc.daemons import core as c
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.events import LocalJobExited, LocalJobFailed, LocalJobStarted, SignalLocalJob, StartLocalJob
from htc.daemons.schedd.owed import owe
from htc.errors import UsageError
from htc.eventlog import events as ev
from htc.jobqueue import Action as PolicyAction
from htc.jobqueue import ExitInfo, HoldReasonCode, JobStatus
from htc.jobqueue.ads import quote
from htc.jobqueue.expr import job_classad
from htc.jobqueue.records import JobId
from htc.submit.argsenv import Env, parse_args_v1raw, split_v2_raw

__all__ = ["LOCAL", "LOCAL_UNIVERSES", "SCHEDULER", "LocalJobs", "LocalRun", "is_local", "kill_signal"]

SCHEDULER, LOCAL = 7, 12
#: the universes the schedd runs itself, and their names in messages
LOCAL_UNIVERSES = {SCHEDULER: "scheduler", LOCAL: "local"}
#: the constraint selecting them
_CONSTRAINT = f"(JobUniverse == {SCHEDULER} || JobUniverse == {LOCAL})"


def universe_of(job) -> int | None:
    """The job's ``JobUniverse`` (None when it has none)."""
    value = ul.literal(job, "JobUniverse")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_local(job) -> bool:
    """True for a job the schedd runs itself (scheduler or local universe)."""
    return universe_of(job) in LOCAL_UNIVERSES


def _signal_number(value) -> int | None:
    """A signal attribute's value (``"SIGTERM"``, ``"TERM"``, ``15``) as a number; None if unusable."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value > 0 else None
    if isinstance(value, str) and value.strip():
        name = value.strip().upper()
        if name.isdigit():
            return int(name) or None
        try:
            return int(signal.Signals[name if name.startswith("SIG") else "SIG" + name])
        except KeyError:
            return None
    return None


def kill_signal(job, why: str) -> int:
    """The signal that asks a local job to stop: for ``remove`` its RemoveKillSig, for ``hold``
    its HoldKillSig, then its KillSig, then SIGTERM (HTCondor's findRmKillSig/findHoldKillSig)."""
    first = {"remove": "RemoveKillSig", "hold": "HoldKillSig"}.get(why)
    for name in (first, "KillSig"):
        number = _signal_number(ul.literal(job, name)) if name else None
        if number is not None:
            return number
    return int(signal.SIGTERM)


@dataclass
class LocalRun:
    """One run of a local job: since when, its pid once started, and a stop under way."""

    job_id: JobId
    started: float
    universe: int = SCHEDULER
    owner: str | None = None
    pid: int | None = None
    stop: str | None = None        # "remove", "hold" or "vacate" once asked to stop
    abort_due: bool = False        # its Aborted event is written when the process is gone
    reason: str = ""
    kill_at: float | None = None   # when SIGKILL follows the stop signal


class LocalJobs:
    """The scheduler- and local-universe jobs of one schedd core (see the module docstring).

    Args:
        schedd: the core it belongs to (its queue and settings).
    """

    def __init__(self, schedd):
        self.schedd = schedd
        self.runs: dict[JobId, LocalRun] = {}
        self.cooling: dict[JobId, float] = {}   # idle jobs in cool-down -> JobCoolDownExpiration

    def __contains__(self, job_id: JobId) -> bool:
        return job_id in self.runs

    def __len__(self) -> int:
        return len(self.runs)

    # -- when ---------------------------------------------------------------------------------

    def deadline(self) -> float | None:
        """The next SIGKILL due, or the end of a cool-down (just after JobCoolDownExpiration)."""
        times = [run.kill_at for run in self.runs.values() if run.kill_at is not None]
        times += [until + 1 for until in self.cooling.values()]
        return min(times) if times else None

    def timers(self, now: float, out: list) -> None:
        """SIGKILL the processes whose stop signal went unheeded; start what cooled down."""
        if any(now > until for until in self.cooling.values()):
            self.start_idle(now, out)
        for run in self.runs.values():
            if run.kill_at is not None and now >= run.kill_at:
                run.kill_at = None
                out.append(SignalLocalJob(run.job_id, int(signal.SIGKILL)))
                out.append(c.Log(f"local job {_label(run.job_id)} did not stop after its kill signal: SIGKILL"))

    # -- starting -------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """The Scheduler ad's counts of these jobs: running (here) and idle (in the queue; one
        ``GROUP BY`` over clusters, not a look at every job)."""
        running = {SCHEDULER: 0, LOCAL: 0}
        for run in self.runs.values():
            running[run.universe] += 1
        idle = {SCHEDULER: 0, LOCAL: 0}
        for values, status, n in self.schedd.queue.status_counts(["JobUniverse"]):
            universe = values.get("JobUniverse", "").strip()
            if status == JobStatus.IDLE and universe.isdigit() and int(universe) in idle:
                idle[int(universe)] += n
        return {"TotalSchedulerJobsRunning": running[SCHEDULER], "TotalSchedulerJobsIdle": idle[SCHEDULER],
                "TotalLocalJobsRunning": running[LOCAL], "TotalLocalJobsIdle": idle[LOCAL]}

    def start_idle(self, now: float, out: list) -> None:
        """Start the idle local jobs that START_SCHEDULER_UNIVERSE / START_LOCAL_UNIVERSE allow,
        best JobPrio first, then the oldest."""
        sd = self.schedd
        self.cooling = {}
        counts = self.counts()
        if not counts["TotalSchedulerJobsIdle"] and not counts["TotalLocalJobsIdle"]:
            return  # the common case, without a query of the idle jobs
        jobs = [job for job in sd.queue.query(f"JobStatus == 1 && {_CONSTRAINT}", now=now)
                if job.job_id not in self.runs]
        self.cooling = {job.job_id: until for job in jobs
                        if (until := ul.number(job, "JobCoolDownExpiration", -1.0)) >= now}
        jobs = [job for job in jobs if job.job_id not in self.cooling]
        jobs.sort(key=lambda j: (-j.prio, j.cluster_id, j.proc_id))
        for job in jobs:
            universe = universe_of(job)
            if not self._may_start(job, universe, counts, now, out):
                continue
            if self._start(job, now, out):
                key = "TotalSchedulerJobsRunning" if universe == SCHEDULER else "TotalLocalJobsRunning"
                counts[key] += 1

    def _may_start(self, job, universe: int | None, counts: dict[str, int], now: float, out: list) -> bool:
        settings = self.schedd.settings
        limit = settings.max_scheduler_jobs_per_owner
        if universe == SCHEDULER and 0 <= limit < settings.max_jobs_per_owner:
            owner = ul.owner(job)
            if sum(run.owner == owner and run.universe == SCHEDULER for run in self.runs.values()) >= limit:
                return False  # MAX_RUNNING_SCHEDULER_JOBS_PER_OWNER (0: the universe is off)
        knob, text = (("START_SCHEDULER_UNIVERSE", settings.start_scheduler_universe) if universe == SCHEDULER
                      else ("START_LOCAL_UNIVERSE", settings.start_local_universe))
        try:
            value = ExprTree(text).eval(ClassAd(counts), job_classad(job, now))
        except Exception as exc:  # a broken knob starts nothing, and says so
            out.append(c.Log(f"{knob} = {text} cannot be evaluated ({exc}); no {LOCAL_UNIVERSES[universe]} "
                             "universe job starts until it is fixed"))
            return False
        return value is True

    def _start(self, job, now: float, out: list) -> bool:
        sd, job_id = self.schedd, job.job_id
        try:
            action = start_action(job)
        except UsageError as exc:
            self._hold(job, f"Failed to read the job's arguments or environment: {exc}",
                       HoldReasonCode.FailedToCreateProcess, 0, now, out)
            return False
        with sd.queue.transaction():
            sd.queue.set_status(job_id, JobStatus.RUNNING, now=now,
                                attrs={"RemoteHost": quote(sd.settings.name), "JobStartDate": job.get(
                                    "JobStartDate", str(int(now)))})
        self.runs[job_id] = LocalRun(job_id, now, universe_of(job) or SCHEDULER, ul.owner(job))
        out.append(action)
        out.append(c.Log(f"starting {LOCAL_UNIVERSES[universe_of(job)]} universe job {_label(job_id)}: "
                         f"{' '.join(action.argv)}"))
        sd.changed()
        return True

    def _hold(self, job, reason: str, code: int, subcode: int, now: float, out: list) -> None:
        queue = self.schedd.queue
        with queue.transaction():
            queue.hold(job.job_id, reason, code=code, subcode=subcode, now=now)
            out += owe(queue, ul.write(job, ul.held_event(job, reason, code, subcode, now)))
        out.append(c.Log(f"local job {_label(job.job_id)} held: {reason}"))
        self.schedd.changed()

    # -- the service's answers -----------------------------------------------------------------

    def started(self, event: LocalJobStarted, now: float, out: list) -> None:
        """The process runs: the Execute event (its host: the schedd's address)."""
        sd = self.schedd
        run = self.runs.get(event.job_id)
        job = sd.job(event.job_id)
        if run is None or job is None:
            return
        run.pid = event.pid
        host = sinful(sd.settings.address, sd.settings.machine)
        with sd.queue.transaction():
            out += owe(sd.queue, ul.write(job, ev.ExecuteEvent(**ul.ids(job), timestamp=now, execute_host=host)))
        if run.stop is not None:  # asked to stop before it was seen running
            self._signal(run, job, now, out)

    def failed(self, event: LocalJobFailed, now: float, out: list) -> None:
        """The process could not start: the job is held with the reason."""
        self.runs.pop(event.job_id, None)
        job = self.schedd.job(event.job_id)
        if job is None:
            return
        if job.status == JobStatus.REMOVED:
            self._leave(job, None, now, out, aborted=True)
        elif job.status == JobStatus.RUNNING:
            self._hold(job, event.reason, event.code, event.errno, now, out)
        self.schedd.new_work(now)

    def exited(self, event: LocalJobExited, now: float, out: list) -> None:
        """The process ended: record how, and let the job's policy (or the stop asked) decide."""
        sd = self.schedd
        run = self.runs.pop(event.job_id, None)
        job = sd.job(event.job_id)
        if job is None:
            return
        usage = {"RemoteUserCpu": event.user_cpu, "RemoteSysCpu": event.sys_cpu}
        attrs = _usage_attrs(job, run, usage, now)
        status = JobStatus(job.status)
        queue = sd.queue
        what = f"exit code {event.exit_code}" if event.exit_signal is None else f"signal {event.exit_signal}"
        out.append(c.Log(f"local job {_label(job.job_id)} ended ({what})"))
        if status == JobStatus.REMOVED:
            self._leave(job, attrs, now, out, aborted=run is None or run.abort_due, usage=usage)
        elif status != JobStatus.RUNNING:  # held meanwhile: its Held event is written
            queue.set_attributes(job.job_id, attrs)
        elif run is not None and run.stop == "vacate":
            with queue.transaction():
                queue.set_attributes(job.job_id, attrs)
                queue.set_status(job.job_id, JobStatus.IDLE, now=now)
                out += owe(queue, ul.write(job, ul.evicted_event(job, usage, run.reason or "vacated", now)))
        else:
            self._exit(job, event, attrs, usage, now, out)
        sd.changed()
        sd.new_work(now)

    def _exit(self, job, event: LocalJobExited, attrs: dict[str, str], usage: dict, now: float, out: list) -> None:
        queue, job_id = self.schedd.queue, job.job_id
        code, sig = event.exit_code, event.exit_signal
        duration = self.schedd.settings.scheduler_cool_down
        if (code not in (None, 0) and duration > 0 and universe_of(job) == SCHEDULER
                and ul.literal(job, "DisableCoolDown") is not True):
            # As HTCondor's schedd: a job that exited non-zero is not run again for a while.
            attrs["NumJobCoolDowns"] = str(int(ul.number(job, "NumJobCoolDowns")) + 1)
            attrs["JobCoolDownExpiration"] = str(int(now + duration))
        with queue.transaction():
            decision, _ = queue.exit_and_apply(job_id, ExitInfo(code, sig, event.core_dumped), now=now, attrs=attrs)
            if decision.action is PolicyAction.COMPLETE:
                total = {k: float(attrs[k]) for k in ("CumulativeRemoteUserCpu", "CumulativeRemoteSysCpu")}
                events = [ul.terminated_event(job, code, sig, event.core_dumped, usage, total, {}, {}, now)]
            elif decision.action is PolicyAction.REQUEUE:
                events = [ul.requeued_event(job, code, sig, usage, decision.reason, now)]
            elif decision.action is PolicyAction.HOLD:
                events = [ul.held_event(job, decision.reason, decision.code, decision.subcode, now)]
            else:
                queue.retire(job_id, now=now)
                events = [ul.aborted_event(job, decision.reason, now)]
            out += owe(queue, ul.write(job, *events))

    def _leave(self, job, attrs: dict[str, str] | None, now: float, out: list, *, aborted: bool,
               usage: dict | None = None) -> None:
        """A removed job whose process is gone leaves the queue (Evicted and Aborted events)."""
        queue = self.schedd.queue
        reason = ul.literal(job, "RemoveReason", "")
        with queue.transaction():
            if attrs:
                queue.set_attributes(job.job_id, attrs)
            queue.retire(job.job_id, now=now)
            if aborted:
                events = ([ul.evicted_event(job, usage, "", now)] if usage is not None else []) + \
                    [ul.aborted_event(job, reason if isinstance(reason, str) else "", now)]
                out += owe(queue, ul.write(job, *events))
        self.schedd.changed()

    # -- stopping -------------------------------------------------------------------------------

    def stop(self, job_id: JobId, why: str, fast: bool, now: float, out: list, *, abort_due: bool = False,
             reason: str = "") -> bool:
        """Ask the running local job ``job_id`` to stop (``remove``, ``hold``, ``vacate``): its
        kill signal now (SIGKILL when ``fast``), SIGKILL after its timeout. False: it is not running
        here. ``abort_due``: its Aborted event waits for the process's end."""
        run = self.runs.get(job_id)
        job = self.schedd.job(job_id)
        if run is None or job is None:
            return False
        run.stop, run.reason = why, reason
        run.abort_due = run.abort_due or abort_due
        if fast:
            out.append(SignalLocalJob(job_id, int(signal.SIGKILL)))
        elif run.pid is not None:
            self._signal(run, job, now, out)
        return True

    def _signal(self, run: LocalRun, job, now: float, out: list) -> None:
        out.append(SignalLocalJob(run.job_id, kill_signal(job, run.stop or "")))
        timeout = ul.number(job, "KillSigTimeout", -1.0)
        grace = timeout if timeout >= 0 else self.schedd.settings.local_kill_timeout
        run.kill_at = now + grace

    # -- after a restart ------------------------------------------------------------------------

    def recover(self, job, now: float, out: list) -> bool:
        """A job the queue says was running when the schedd started: True (and dealt with) when
        it is a local job. Its process died with the old schedd: it runs again from the start; a
        removed one leaves the queue with its Aborted event."""
        if not is_local(job):
            return False
        status, queue = JobStatus(job.status), self.schedd.queue
        if status == JobStatus.REMOVED:
            self._leave(job, None, now, out, aborted=True)
        elif status in (JobStatus.RUNNING, JobStatus.SUSPENDED, JobStatus.TRANSFERRING_OUTPUT):
            queue.set_status(job.job_id, JobStatus.IDLE, now=now)
            out.append(c.Log(f"local job {_label(job.job_id)} was running when the schedd stopped; "
                             "it runs again"))
        return True


def start_action(job) -> StartLocalJob:
    """What the service needs to start ``job``'s process (see the module docstring).

    Raises:
        UsageError: its arguments or environment do not parse.
    """
    iwd = ul.literal(job, "Iwd")
    iwd = iwd if isinstance(iwd, str) and iwd else "/tmp"

    def path(name: str) -> str:
        value = ul.literal(job, name)
        if not isinstance(value, str) or not value:
            return os.devnull
        return os.path.join(iwd, value)

    cmd = ul.literal(job, "Cmd")
    executable = os.path.join(iwd, cmd) if isinstance(cmd, str) and cmd else ""
    arguments, args = ul.literal(job, "Arguments"), ul.literal(job, "Args")
    if isinstance(arguments, str):
        argv = split_v2_raw(arguments)
    elif isinstance(args, str):
        argv = parse_args_v1raw(args)
    else:
        argv = []
    env = Env()
    environment, env1 = ul.literal(job, "Environment"), ul.literal(job, "Env")
    if isinstance(environment, str):
        env.merge_v2_raw(environment)
    elif isinstance(env1, str):
        delim = ul.literal(job, "EnvDelim")
        env.merge_v1_raw(env1.replace("\n", delim if isinstance(delim, str) and delim else ";"),
                         delim if isinstance(delim, str) and delim else ";")
    cluster, proc = job.job_id
    env.vars["CONDOR_ID"] = f"{cluster}.{proc}"
    return StartLocalJob(job.job_id, (executable, *argv), tuple(env.vars.items()), iwd, path("In"), path("Out"),
                         path("Err"), ul.owner(job))


def _usage_attrs(job, run: LocalRun | None, usage: dict, now: float) -> dict[str, str]:
    ran = max(0.0, now - run.started) if run is not None else 0.0
    user, system = usage["RemoteUserCpu"], usage["RemoteSysCpu"]
    return {"RemoteWallClockTime": str(ul.number(job, "RemoteWallClockTime") + ran),
            "LastRemoteWallClockTime": str(ran),
            "CumulativeSlotTime": str(ul.number(job, "CumulativeSlotTime") + ran),
            "RemoteUserCpu": str(user), "RemoteSysCpu": str(system),
            "CumulativeRemoteUserCpu": str(ul.number(job, "CumulativeRemoteUserCpu") + user),
            "CumulativeRemoteSysCpu": str(ul.number(job, "CumulativeRemoteSysCpu") + system),
            "CommittedTime": str(ul.number(job, "CommittedTime") + ran)}


def _label(job_id: JobId) -> str:
    return f"{job_id[0]}.{job_id[1]}"
