"""The pool backend's watching half: the session's event log and the queue, turned into
:class:`~htc.executors.backend.JobUpdate` s (:class:`JobWatcher`, which
:class:`~htc.executors.pool.PoolBackend` opens with the session and asks in ``poll``).

Theory of operation
-------------------
Every job of a session writes the session's event log (``jobs.log`` in the spool, the ``log``
submit command); :meth:`JobWatcher.poll` follows it with :class:`~htc.eventlog.EventLogReader`
and turns each event into an update: execute -> started, evicted -> evicted or, for a
``max_retries`` requeue, requeued, terminated -> the call's result file read from the spool,
held -> a failure or an automatic release (:data:`_INFRA_HOLDS`), aborted -> removed.

Looking at the log costs a ``stat``. On Linux the poll blocks on the log's inotify watch
itself (:meth:`htc.executors.filewatch.FileWatch.wait`), so the schedd's write wakes the
thread that reads it, with no hand-off through another thread; it still looks every 200 ms
as a safety net. Without a watch it looks 2 ms after any activity, backing off to 200 ms.
:meth:`JobWatcher.wake` (a submit, a cancel, shutdown) ends a wait at once. Every few
seconds the queue itself is asked about the session's jobs (``QueryJobs``), which catches a
job that left the queue without a log event.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from htc.classad import ClassAd
from htc.eventlog import events as ev
from htc.job_codes import HoldReasonCode
from htc.runtime.checkpoint import UNSUPPORTED_EXIT
from htc.executors.backend import JobUpdate
from htc.executors.errors import CallTimedOut, JobFailed, JobHeld, JobKilled, JobOutOfMemory, JobRemoved, ScheddLost
from htc.executors.filewatch import FileWatch
from htc.executors.options import CallOptions, transparent
from htc.executors.schedd_link import ScheddLink
from htc.executors.spool import Spool, UntrustedFile
from htc.executors.status import CallEvent
from htc.executors.worker import EXIT_ERROR, EXIT_EXCEPTION, EXIT_VALUE
from htc.wire import callfile as cf
from htc.wire import messages as m

__all__ = ["Job", "JobWatcher"]

#: hold codes that mean the pool failed, not the call (retried automatically)
_INFRA_HOLDS = frozenset({
    HoldReasonCode.FailedToCreateProcess, HoldReasonCode.UnableToOpenOutput, HoldReasonCode.UnableToOpenInput,
    HoldReasonCode.UnableToOpenOutputStream, HoldReasonCode.UnableToOpenInputStream,
    HoldReasonCode.InvalidTransferAck, HoldReasonCode.TransferOutputError, HoldReasonCode.TransferInputError,
    HoldReasonCode.IwdError, HoldReasonCode.InvalidTransferGoAhead, HoldReasonCode.UnableToInitUserLog,
    HoldReasonCode.NoCompatibleShadow})
_OOM_HOLD = HoldReasonCode.JobOutOfResources
_DURATION_HOLDS = frozenset({HoldReasonCode.JobDurationExceeded, HoldReasonCode.JobExecuteExceeded})
_RECONCILE_EVERY = 5.0
_WATCHED_POLL = 0.2  # s between looks at a log the kernel watches for us (a safety net)
_PROJECTION = ("ClusterId", "ProcId", "JobStatus", "HTCCallId", "HoldReason", "HoldReasonCode")
#: the events _on_event acts on (the others, SUBMIT first, are skipped unparsed)
_WATCHED = frozenset({
    ev.EventType.EXECUTE, ev.EventType.JOB_EVICTED, ev.EventType.JOB_TERMINATED, ev.EventType.JOB_HELD,
    ev.EventType.JOB_RELEASED, ev.EventType.JOB_ABORTED, ev.EventType.SHADOW_EXCEPTION,
    ev.EventType.JOB_RECONNECT_FAILED,
})


@dataclass
class Job:
    """One call's job as the watcher follows it."""

    call_id: str
    label: str
    options: CallOptions
    state: str = "idle"  # idle | running | evicted | retrying | held | done
    evictions: int = 0
    infra_retries: int = 0
    removing: bool = False
    missing_since: float | None = None


class JobWatcher:
    """Follows the jobs of one session: its event log, and now and then the queue.

    Args:
        spool: the session (its result files are read when a job ends).
        link: the line to the schedd (queue checks, releases for an infrastructure retry).
        log: the session's event log.
        constraint: selects the session's jobs in the queue.
    """

    def __init__(self, spool: Spool, link: ScheddLink, log: Path, constraint: str):
        from htc.eventlog import EventLogReader

        self.spool = spool
        self.link = link
        self.log = log
        self.constraint = constraint
        #: job id -> the job followed
        self.jobs: dict[str, Job] = {}
        self._reader = EventLogReader(log, keep_open=True)
        self._watch: FileWatch | None = FileWatch(log)  # poll() waits on it: no thread hand-off
        self._interval = 0.002
        self._next_reconcile = 0.0
        self._wake_requested = False

    def follow(self, job_id: str, job: Job) -> None:
        """Watch ``job`` from now on."""
        self.jobs[job_id] = job

    def expect_news(self) -> None:
        """Jobs were just submitted: look again soon even without a working log watch."""
        self._interval = 0.002

    def reconcile_soon(self) -> None:
        """Ask the queue about the session's jobs at the next poll."""
        self._next_reconcile = 0.0

    def close(self) -> None:
        """Stop watching the log."""
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self._reader.close()

    def wake(self) -> None:
        """Make a blocked :meth:`poll` return soon."""
        self._wake_requested = True
        watch = self._watch
        if watch is not None:
            watch.wake()

    def poll(self, timeout: float) -> list[JobUpdate]:
        """Follow the session's event log (and, now and then, the queue) for up to ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            updates = self._read_log()
            now = time.monotonic()
            if now >= self._next_reconcile and self.jobs:
                self._next_reconcile = now + _RECONCILE_EVERY
                updates += self._reconcile(now)
            if updates:
                self._interval = 0.002
                return updates
            watch = self._watch  # None only before open() and after close(): nothing to wait for
            if self._wake_requested or now >= deadline or watch is None:
                self._wake_requested = False
                return updates
            # The log watch ends the wait the moment the schedd writes the log (or wake() is
            # called); the timeout is the fallback where the kernel cannot tell us (and catches
            # the queue checks). With a working watch there is nothing to look for in between:
            # no 2 ms polls.
            watch.wait(max(0.0, min(_WATCHED_POLL if watch.active else self._interval, deadline - now)))
            self._interval = min(self._interval * 2, 0.2)

    def _read_log(self) -> list[JobUpdate]:
        # (The reader keeps the log open: a look that finds nothing new costs one stat.)
        updates: list[JobUpdate] = []
        for event in self._reader.read_nowait(types=_WATCHED):
            updates += self._on_event(event)
        return updates

    def _on_event(self, event) -> list[JobUpdate]:
        job_id = f"{event.cluster}.{event.proc}"
        job = self.jobs.get(job_id)
        if job is None or job.state == "done":
            return []
        cid = job.call_id
        if isinstance(event, ev.ExecuteEvent):
            job.state = "running"
            return [JobUpdate(cid, CallEvent.STARTED, job_id, host=event.slot_name or event.execute_host)]
        if isinstance(event, ev.JobEvictedEvent):
            if event.terminated_and_requeued:
                job.state = "idle"
                return [JobUpdate(cid, CallEvent.REQUEUED, job_id,
                                  detail=f"raised (exit {event.return_value}); max_retries runs it again")]
            job.state = "evicted"
            job.evictions += 1
            reason = f": {event.reason}" if event.reason else ""
            return [JobUpdate(cid, CallEvent.EVICTED, job_id, detail=f"evicted{reason}", evictions=job.evictions)]
        if isinstance(event, ev.JobTerminatedEvent):
            job.state = "done"
            return [self._ended(job_id, job, event.return_value if event.terminated_normally else None,
                                None if event.terminated_normally else event.signal)]
        if isinstance(event, ev.JobHeldEvent):
            return self._held(job_id, job, event.reason or "", event.code)
        if isinstance(event, ev.JobReleasedEvent):
            if job.state in ("retrying", "held"):
                job.state = "idle"
                return [JobUpdate(cid, CallEvent.REQUEUED, job_id, detail="released")]
            return []
        if isinstance(event, ev.JobAbortedEvent):
            job.state = "done"
            if job.removing:
                return []
            return [JobUpdate(cid, CallEvent.FAILED, job_id, error=JobRemoved(
                f"job {job_id} (call {job.label}) was removed from the queue before it finished"
                f"{': ' + event.reason if event.reason else ''}; 'htc history {job_id}' shows who removed it",
                job_id))]
        if isinstance(event, (ev.ShadowExceptionEvent, ev.JobReconnectFailedEvent)):
            job.state = "retrying"
            job.infra_retries += 1
            text = getattr(event, "message", "") or getattr(event, "reason", "")
            return [JobUpdate(cid, CallEvent.INFRA_FAILURE, job_id, detail=f"the pool failed the job ({text}); "
                              "the schedd runs it again")]
        return []

    def _held(self, job_id: str, job: Job, reason: str, code: int | None) -> list[JobUpdate]:
        cid, label = job.call_id, job.label
        if code in _INFRA_HOLDS and job.infra_retries < job.options.infrastructure_retries:
            job.infra_retries += 1
            job.state = "retrying"
            self.link.request(m.ActOnJobs(action=m.JobAction.Release, ids=(job_id,),
                                          reason=f"htc executor: infrastructure retry {job.infra_retries}"))
            return [JobUpdate(cid, CallEvent.INFRA_FAILURE, job_id, detail=(
                f"held by the pool ({reason}, code {code}); released for retry {job.infra_retries} of "
                f"{job.options.infrastructure_retries}"))]
        job.state = "done"
        see = f"'htc q -hold {job_id}' and 'htc q -l {job_id}' show it; the job's stderr is in future.stderr"
        if code == _OOM_HOLD:
            error: JobFailed = JobOutOfMemory(f"job {job_id} (call {label}) used more memory than its request_memory "
                                              f"of {job.options.request_memory} MiB: {reason}; raise request_memory "
                                              f"in options() ({see})", job_id)
        elif code in _DURATION_HOLDS:
            error = CallTimedOut(f"job {job_id} (call {label}) ran past its timeout and was held: {reason} ({see})",
                                 job_id)
        else:
            error = JobHeld(f"job {job_id} (call {label}) was held: {reason} (HoldReasonCode {code}). It stays in the "
                            f"queue: {see}; 'htc release {job_id}' runs it again (attach to the session to get its "
                            "result), 'htc rm' removes it", job_id, reason, code)
        return [JobUpdate(cid, CallEvent.FAILED, job_id, detail=f"held: {reason}", error=error)]

    def _ended(self, job_id: str, job: Job, code: int | None, sig: int | None) -> JobUpdate:
        cid, label = job.call_id, job.label
        try:
            result = self.spool.read_result(cid)
        except UntrustedFile as exc:  # never unpickled: the call fails saying why
            return JobUpdate(cid, CallEvent.FAILED, job_id, error=exc)
        if result is not None and code in (EXIT_VALUE, EXIT_EXCEPTION, EXIT_ERROR):
            event = CallEvent.RETURNED if code == EXIT_VALUE else CallEvent.FAILED
            self.spool.consumed(cid, result)
            return JobUpdate(cid, event, job_id, result=result)
        see = f"see future.stderr or {self.spool.output_path(cid, 'stderr')}, and 'htc history -l {job_id}'"
        if sig is not None:
            text = f"job {job_id} (call {label}) was killed by signal {sig} before it returned ({see})"
        elif code == UNSUPPORTED_EXIT and transparent(job.options):
            text = self._unsupported(job_id, job, see)
        else:
            text = f"job {job_id} (call {label}) exited with status {code} without sending a result back ({see})"
        return JobUpdate(cid, CallEvent.FAILED, job_id, error=JobKilled(text, job_id))

    def _unsupported(self, job_id: str, job: Job, see: str) -> str:
        """Why the runtime stopped a ``checkpoint="transparent"`` call, in the runtime's words."""
        try:
            lines = self.spool.output_path(job.call_id, "stderr").read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        said = next((line.split(" ", 2)[-1] for line in reversed(lines) if line.startswith("jobrt: ")),
                    "did something the runtime cannot checkpoint")
        return (f"job {job_id} (call {job.label}) cannot run with checkpoint='transparent': the checkpointing runtime "
                f"stopped it because the Python process {said.split(';')[0]}; it checkpoints single-threaded Python "
                "without subprocesses, sockets or shared memory. Use checkpoint=True and save progress with "
                "htc.checkpoint(state) for this function instead, or let it run on without checkpoints with "
                f"submit={{'+CheckpointUnsupported': '\"allow\"'}} ({see})")

    def _reconcile(self, now: float) -> list[JobUpdate]:
        """Compare with the queue: catch jobs that left it, or moved, without a log event."""
        try:
            reply = self.link.request(m.QueryJobs(constraint=self.constraint, projection=_PROJECTION),
                                      timeout=10.0, retry=False)
        except ScheddLost as exc:
            if self.link.given_up(now):
                raise exc
            return []
        in_queue: dict[str, ClassAd] = {}
        for text in reply.ads:
            ad = ClassAd(text)
            in_queue[f"{ad['ClusterId']}.{ad['ProcId']}"] = ad
        updates: list[JobUpdate] = []
        for job_id, job in self.jobs.items():
            if job.state == "done":
                continue
            ad = in_queue.get(job_id)
            if ad is None:
                if job.missing_since is None:
                    job.missing_since = now
                    continue
                self._read_log()  # the event may have landed since
                if job.state == "done":
                    continue
                updates += self._vanished(job_id, job)
                continue
            job.missing_since = None
            status = ad.get("JobStatus")
            if status in (2, 6, 7) and job.state == "idle":
                job.state = "running"
                updates.append(JobUpdate(job.call_id, CallEvent.STARTED, job_id))
            elif status == 5 and job.state not in ("held", "retrying"):
                code = ad.get("HoldReasonCode")
                code = code if isinstance(code, int) else None
                updates += self._held(job_id, job, str(ad.get("HoldReason") or ""), code)
        return updates

    def _vanished(self, job_id: str, job: Job) -> list[JobUpdate]:
        job.state = "done"
        path = self.spool.result_path(job.call_id)
        try:
            result = self.spool.read_result(job.call_id)
        except UntrustedFile as exc:  # never unpickled: the call fails saying why
            return [JobUpdate(job.call_id, CallEvent.FAILED, job_id, error=exc)]
        if result is not None:
            header, _ = cf.unpack_result(result, str(path))
            event = CallEvent.RETURNED if header.outcome == "value" else CallEvent.FAILED
            return [JobUpdate(job.call_id, event, job_id, result=result)]
        if job.removing:
            return []
        return [JobUpdate(job.call_id, CallEvent.FAILED, job_id, error=JobFailed(
            f"job {job_id} (call {job.label}) left the queue without a result and without an event in "
            f"{self.log}; 'htc history -l {job_id}' shows how it ended", job_id))]
