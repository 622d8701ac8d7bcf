"""The shadows: the schedd's side of its running jobs, as state machines inside the schedd core.

Theory of operation
-------------------
HTCondor runs one ``condor_shadow`` process per running job. htc has no uid to switch, so a
shadow is a small record the schedd core keeps per running job,
:class:`~htc.daemons.schedd.shadow.Shadow`, moved by the table
:data:`~htc.daemons.schedd.states.SHADOW`; the schedd's event loop multiplexes all of them (no
thread, no process, no coroutine of its own: a shadow waits for messages and deadlines like the
rest of the core). The shadows of the core are a :class:`Shadows` (job id -> shadow), which
also holds what the core does with them.

A job is marked Running in the queue, with the claim it runs on (``ClaimId``,
``StartdIpAddr``, ``RemoteHost``), *before* ActivateClaim is sent: if the schedd dies in
between, the restarted schedd finds the job Running and asks the startd again, instead of
matching it anew and running it twice. The startd's confirmation is recorded too
(``JobCurrentStartExecutingDate``). After a restart every Running job gets a shadow in
RECONNECTING: a confirmed run is reconnected with a ClaimKeepAlive (a live claim means the job
runs or its exit report is coming -- starters retry it -- while a second ActivateClaim could
start a finished job again); an unconfirmed one is activated again, and a startd that answers
that the claim is already busy is running it. A startd that does not answer is asked again
every ``reconnect_retry`` seconds until the job lease runs out; one that no longer holds the
claim (``not_found``) sends the job back to Idle (JOB_RECONNECT_FAILED). Once reconnected (or
activated), the claim is *watched* (:mod:`htc.daemons.schedd.claims`): a startd killed under the
job closes the watch's connection, and the shadow's run ends at once (JOB_DISCONNECTED, then
JOB_RECONNECT_FAILED; the job is Idle again) instead of at the next keep-alive -- HTCondor's
shadow likewise sees its connection to the starter drop.

How a run ends is decided once, in :func:`htc.daemons.schedd.ends.record_end`, from the job's
state in the queue and how the starter ended: a job removed or held meanwhile stays so; an exit
goes through the job's ``on_exit_*`` / ``max_retries`` policy (``JobQueue.on_exit``); an
eviction makes it Idle again. The queue change commits before the user log is written and
before the starter's JobExited is acknowledged, so a starter that reports twice (it retries
until acknowledged) finds the job no longer running on that claim and changes nothing.

Starter conventions (carried by the existing wire messages): ``StarterUpdate.update_ad``
holds usage (``RemoteUserCpu``, ``ImageSize``, ``MemoryUsage``...) and ``JobState``
(``"Running"``/``"Suspended"``, with ``NumPids`` and ``JobStateSequence``, the startd's count of
state changes, which its Suspend/Continue answers carry too: a state older than one already
seen is ignored, so an update overtaken by a continue's answer does not suspend the job again in
the user log); a ``JobExited`` whose ``usage_ad`` has
``StarterError`` means the job could not be started (it is held with ``HoldReasonCode``,
default 6 FailedToCreateProcess); a ``JobExited`` with ``hold_code`` is a job the execute side
killed for breaking a limit of its own (47 JobExecuteExceeded, its AllowedExecuteDuration): it
is held with that code, subcode and reason, and its claim stays for the next job.

Streamed output. A job with ``StreamOut``/``StreamErr`` true has its startd send new bytes of
its stdout/stderr as ``JobOutput`` while it runs (the last before ``JobExited``); a shadow of
that claim and job answers each with a :class:`~htc.daemons.schedd.events.WriteJobOutput` of
the job's ``Out``/``Err`` file at the chunk's offset, which the service performs before the
Ack, and a run of a streaming job starts by truncating those files
(:mod:`htc.daemons.schedd.output`). Output for a run the schedd does not follow is refused
with ``not_found``, and the startd stops sending it.

Time limits. A job with ``AllowedJobDuration`` (seconds, or an expression that evaluates to a
number in the job's scope; anything else, zero or less means no limit) is held with
HoldReasonCode 46 (JobDurationExceeded) once its run has lasted that long since the shadow
started it (``started``; after a schedd restart, the run's ``JobCurrentStartDate``), suspension
included: the hold is recorded and logged at once and the startd is asked to vacate the job,
like ``htc hold``. ``AllowedExecuteDuration`` is the startd's to enforce
(:mod:`htc.daemons.startd.core`). A released job runs again from scratch with a fresh allowance.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from htc.daemons import core as c
from htc.daemons.calls import Call, CallDone, CallFailed
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.ends import CLAIM_ENDING, USAGE_ATTRS, claim_after, keep_claim_idle, record_end
from htc.daemons.schedd.events import Answer
from htc.daemons.schedd.output import job_output, streamed_paths, truncations
from htc.daemons.schedd.owed import owe
from htc.daemons.schedd.shadow import Shadow, ad_text, ad_values, job_duration_limit, parse_job_id
from htc.daemons.schedd.states import ClaimEvent, ShadowEvent, ShadowState
from htc.daemons.timefmt import format_time_short
from htc.jobqueue import HoldReasonCode, JobStatus
from htc.jobqueue.ads import quote
from htc.jobqueue.records import JobId
from htc.jobqueue.states import ACTIVE_STATES
from htc.wire import messages as m

__all__ = ["Shadows"]


class Shadows(Mapping):
    """The schedd's shadows (job id -> :class:`Shadow`) and what it does with them: activation,
    starter reports, stops, the end of a run.

    Args:
        schedd: the core it belongs to (its queue, settings, claims and lanes).
    """

    def __init__(self, schedd):
        self.schedd = schedd
        self._runs: dict[JobId, Shadow] = {}

    def __getitem__(self, job_id: JobId) -> Shadow:
        return self._runs[job_id]

    def __iter__(self) -> Iterator[JobId]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    # (the dict's own look-ups: these are on every message's path)
    def __contains__(self, job_id) -> bool:
        return job_id in self._runs

    def get(self, job_id, default=None):
        return self._runs.get(job_id, default)

    def values(self):
        return self._runs.values()

    def add(self, shadow: Shadow) -> None:
        """Follow ``shadow`` (a run that starts, or one found after a restart)."""
        self._runs[shadow.job_id] = shadow

    def forget(self, job_id: JobId) -> None:
        """Follow the run of ``job_id`` no more (its end, or htc rm -forcex)."""
        self._runs.pop(job_id, None)

    # -- starting and reconnecting ----------------------------------------------------------

    def start_job(self, claim, job_id: JobId, now: float, out: list) -> bool:
        """Run idle job ``job_id`` on ``claim``; False when the job is no longer idle."""
        sd = self.schedd
        job = sd.job(job_id)
        sd.reserved.discard(job_id)
        if job is None or job.status != JobStatus.IDLE:
            return False
        key = sd.lanes.wants_lane(job, now)
        if key is not None:
            return sd.lanes.start(claim, job, key, now, out)
        with sd.queue.transaction():
            sd.queue.set_attributes(job_id, {"ClaimId": quote(claim.id), "StartdIpAddr": quote(claim.startd),
                                             "RemoteHost": quote(claim.slot_name), "HTCLaneRun": None,
                                             **sd.flocking.run_attributes(claim.pool)})
            sd.queue.set_status(job_id, JobStatus.RUNNING, now=now)
        shadow = Shadow(job_id, claim.id, ShadowState.ACTIVATING, started=now, duration_limit=job_duration_limit(job))
        self.add(shadow)
        out += truncations(job)  # a streaming job's run writes its output from the start
        claim.job = job_id
        sd.claims.step(claim, ClaimEvent.ACTIVATE)
        self.send_activation(shadow, claim, now, out)
        sd.changed()
        return True

    def send_activation(self, shadow: Shadow, claim, now: float, out: list) -> None:
        """Ask the startd to run the job on ``claim`` (or, for a run it confirmed before a restart,
        whether the claim still lives)."""
        job = self.schedd.job(shadow.job_id)
        if job is None:
            return
        shadow.call_pending = True
        shadow.retry_at = None
        cookie = (Answer.ACTIVATE, shadow.job_id, claim.id)
        if shadow.acknowledged:
            # The startd confirmed this run before the schedd went away: asking it to activate the
            # claim again could start the job a second time. A live claim means the job runs or its
            # exit report is on its way (starters retry it), so a keep-alive is the whole reconnect.
            out.append(Call(claim.startd, m.ClaimKeepAlive(claim_id=claim.id), cookie=cookie))
            return
        visible = {k: v for k, v in job.items() if k != "ClaimId"}
        domain = self.schedd.settings.filesystem_domain
        if domain and "FileSystemDomain" not in job:
            # the starter compares it with its machine's to choose how files move
            # (htc.daemons.job_files.over_wire), as HTCondor's shadow tells its starter
            visible["FileSystemDomain"] = quote(domain)
        out.append(Call(claim.startd, m.ActivateClaim(claim_id=claim.id, job_ad=ad_text(visible),
                                                      shadow_address=self.schedd.settings.address), cookie=cookie))

    def answered(self, event: CallDone | CallFailed, now: float, out: list) -> None:
        """The startd answered (or did not) an activation, vacate, suspend or continue of a run."""
        kind, job_id, claim_id = event.cookie
        shadow, claim = self._runs.get(job_id), self.schedd.claims.get(claim_id)
        if shadow is None or claim is None or shadow.claim_id != claim_id:
            return  # the run ended meanwhile (its exit report overtook this answer)
        _ON_ANSWER[kind](self, shadow, claim, kind, event, now, out)

    def _activation_outcome(self, shadow: Shadow, claim, kind: Answer, event, now: float, out: list) -> None:
        if isinstance(event, CallDone):
            self._activation_answered(shadow, claim, now, out)
        else:
            self._activation_failed(shadow, claim, event, now, out)

    def _vacate_outcome(self, shadow: Shadow, claim, kind: Answer, event, now: float, out: list) -> None:
        if isinstance(event, CallFailed) and event.refused:
            self.end_run(shadow, "lost", now, out, reason=f"the startd no longer holds the claim ({event.error})")

    def _activation_answered(self, shadow: Shadow, claim, now: float, out: list) -> None:
        sd = self.schedd
        shadow.call_pending = False
        claim.last_alive = now
        if not claim.watching:
            sd.claims.watch(claim, out)  # a reconnected claim is watched again at once
        job = sd.job(shadow.job_id)
        if job is None:
            return
        if shadow.state is ShadowState.RECONNECTING:
            out += ul.write(job, ul.reconnected_event(job, claim.slot_name, claim.startd, now))
        if not shadow.acknowledged:
            shadow.acknowledged = True
            # Bookkeeping nobody is told about: the next durable commit (or sync) covers it.
            with sd.queue.transaction(durable=False):
                sd.queue.set_attributes(shadow.job_id, {"JobCurrentStartExecutingDate": str(int(now))})
        self._note_executed(shadow, claim, job, now, out)
        shadow.step(ShadowEvent.ACTIVATED)
        if shadow.stop is not None:
            self.send_vacate(shadow, claim, shadow.stop == "remove", out)

    def _activation_failed(self, shadow: Shadow, claim, event, now: float, out: list) -> None:
        shadow.call_pending = False
        if event.refused and shadow.state is ShadowState.RECONNECTING and event.code != "not_found":
            # The startd still holds the claim and will not start another job on it: it is busy
            # with ours (a startd that does not recognise reconnects says so this way). Follow it.
            out.append(c.Log(f"{shadow.label}: {claim.startd} keeps the claim busy ({event.error}); following the job"))
            self._activation_answered(shadow, claim, now, out)
            return
        if event.refused:
            if shadow.state is ShadowState.RECONNECTING:
                self.end_run(shadow, "lost", now, out, reason=f"the startd no longer runs the job: {event.error}")
            else:
                self.end_run(shadow, "refused", now, out, reason=event.error)
            return
        shadow.step(ShadowEvent.UNANSWERED)
        shadow.retry_at = now + self.schedd.settings.reconnect_retry
        out.append(c.Log(f"{shadow.label}: {claim.startd} did not answer ActivateClaim ({event.error}); "
                         f"retrying within the job lease"))

    @staticmethod
    def _note_executed(shadow: Shadow, claim, job, now: float, out: list) -> None:
        if not shadow.executed:
            shadow.executed = True
            out += ul.write(job, ul.execute_event(job, claim.startd, claim.slot_name, claim.slot_values, now))

    # -- while it runs ----------------------------------------------------------------------

    def starter_update(self, event: c.Received, msg: m.StarterUpdate, now: float, out: list) -> None:
        """A starter's report of a running job (usage, suspended or running)."""
        sd = self.schedd
        shadow = self._runs.get(parse_job_id(msg.job_id))
        claim = sd.claims.get(msg.claim_id)
        if msg.claim_id in sd.lanes and claim is not None:
            claim.last_alive = now  # a call lane's worker: its calls report their own usage
            out.append(c.Reply(event.conn_id, m.Ack()))
            return
        if shadow is None or claim is None or shadow.claim_id != msg.claim_id:
            out.append(c.Reply(event.conn_id, m.ErrorReply(
                code="not_found", message=f"{sd.settings.name} runs no job {msg.job_id} on that claim; "
                "stop reporting it")))
            return
        claim.last_alive = now
        values = ad_values(msg.update_ad)
        shadow.usage.update({k: v for k, v in values.items() if k in USAGE_ATTRS})
        job = sd.job(shadow.job_id)
        if job is not None:
            self._note_executed(shadow, claim, job, now, out)
            self._follow_job_state(shadow, job, values, now, out)
            size = shadow.usage.get("ImageSize")
            if isinstance(size, int) and size > shadow.logged_image_size:
                shadow.logged_image_size = size
                out += ul.write(job, ul.image_size_event(job, shadow.usage, now))
        out.append(c.Reply(event.conn_id, m.Ack()))

    def job_output(self, event: c.Received, msg: m.JobOutput, now: float, out: list) -> None:
        """New bytes of a streamed stdout/stderr: the service writes them at their offset, then acks."""
        sd = self.schedd
        shadow = self._runs.get(parse_job_id(msg.job_id))
        claim = sd.claims.get(msg.claim_id)
        if shadow is None or claim is None or shadow.claim_id != msg.claim_id:
            out.append(c.Reply(event.conn_id, m.ErrorReply(
                code="not_found", message=f"{sd.settings.name} runs no job {msg.job_id} on that claim; "
                "stop streaming its output")))
            return
        job = sd.job(shadow.job_id)
        path = streamed_paths(job).get(msg.stream) if job is not None else None
        if path is None:
            out.append(c.bad_request(event, f"job {msg.job_id} does not stream its {msg.stream} "
                                            f"(stream_{'output' if msg.stream == 'stdout' else 'error'} is not true)"))
            return
        claim.last_alive = now
        out.append(job_output(job, path, msg.offset, msg.data))
        out.append(c.Reply(event.conn_id, m.Ack()))

    def _follow_job_state(self, shadow: Shadow, job, values: dict, now: float, out: list) -> None:
        # Updates and Suspend/Continue answers travel on different connections: an update sent
        # before a continue can arrive after its answer. The startd numbers its job state
        # changes (JobStateSequence); an older number than one seen is a stale state.
        queue = self.schedd.queue
        sequence = values.get("JobStateSequence")
        if isinstance(sequence, int) and not isinstance(sequence, bool):
            if sequence < shadow.state_sequence:
                return
            shadow.state_sequence = sequence
        state = values.get("JobState")
        if state == "Suspended" and shadow.state is not ShadowState.SUSPENDED:
            shadow.step(ShadowEvent.SUSPENDED)
            if job.status == JobStatus.RUNNING:
                queue.set_status(shadow.job_id, JobStatus.SUSPENDED, now=now)
                pids = values.get("NumPids", 1)
                out += ul.write(job, ul.suspended_event(job, pids if isinstance(pids, int) else 1, now))
        elif state == "Running" and shadow.state is ShadowState.SUSPENDED:
            shadow.step(ShadowEvent.UNSUSPENDED)
            if job.status == JobStatus.SUSPENDED:
                queue.set_status(shadow.job_id, JobStatus.RUNNING, now=now)
                out += ul.write(job, ul.unsuspended_event(job, now))

    def _suspension_answered(self, shadow: Shadow, claim, kind: Answer, event, now: float, out: list) -> None:
        """The startd did (or refused) a condor_suspend / condor_continue of the job."""
        job = self.schedd.job(shadow.job_id)
        if job is None or not hasattr(event, "reply"):
            out.append(c.Log(f"{shadow.label}: {kind.value} failed: {getattr(event, 'error', '')}"))
            return
        state = "Suspended" if kind is Answer.SUSPEND else "Running"
        sequence = getattr(event.reply, "sequence", None)
        self._follow_job_state(shadow, job, {"JobState": state, "NumPids": 1, "JobStateSequence": sequence},
                               now, out)
        self.schedd.changed()

    def stop(self, job_id: JobId, why: str, fast: bool, now: float, out: list) -> bool:
        """Ask the startd to take ``job_id`` off its slot (``why``: remove, hold or vacate);
        False when no shadow nor lane runs it."""
        shadow = self._runs.get(job_id)
        if shadow is None:
            return self.schedd.lanes.stop_call(job_id, why, out)
        claim = self.schedd.claims.get(shadow.claim_id)
        # A later remove outranks a hold or vacate asked for before it.
        shadow.stop = why if shadow.stop in (None, "vacate") or why == "remove" else shadow.stop
        shadow.step(ShadowEvent.STOP)
        if claim is not None:
            self.send_vacate(shadow, claim, fast, out)
        return True

    @staticmethod
    def send_vacate(shadow: Shadow, claim, fast: bool, out: list) -> None:
        """Ask the startd to take the shadow's job off ``claim``."""
        out.append(Call(claim.startd, m.Vacate(claim_id=claim.id, fast=fast, reason=f"job {shadow.stop}"),
                        cookie=(Answer.VACATE, shadow.job_id, claim.id)))

    # -- the end of a run -------------------------------------------------------------------

    def job_exited(self, event: c.Received, msg: m.JobExited, now: float, out: list) -> None:
        """A starter's exit report (a call lane's worker's goes to the lanes)."""
        if msg.claim_id in self.schedd.lanes:
            self.schedd.lanes.exited(event, msg, now, out)
            return
        job_id = parse_job_id(msg.job_id)
        shadow = self._runs.get(job_id)
        if shadow is None or shadow.claim_id != msg.claim_id:
            # A starter repeating a report we already acted on: acknowledge, change nothing.
            out.append(c.Log(f"job {msg.job_id}: exit report for a run already finished; ignored"))
            out.append(c.Reply(event.conn_id, m.Ack(detail="already recorded")))
            return
        usage = ad_values(msg.usage_ad)
        shadow.usage.update({k: v for k, v in usage.items()
                             if k in USAGE_ATTRS or k in ul.VACATE_CHECKPOINT_ATTRS or k == CLAIM_ENDING})
        error = usage.get("StarterError")
        if isinstance(error, str) and error:
            code = usage.get("HoldReasonCode", HoldReasonCode.FailedToCreateProcess)
            sub = usage.get("HoldReasonSubCode", 0)
            self.end_run(shadow, "failed", now, out, reason=error,
                         code=code if isinstance(code, int) else HoldReasonCode.FailedToCreateProcess,
                         subcode=sub if isinstance(sub, int) else 0)
        elif msg.hold_code is not None:
            self.end_run(shadow, "held", now, out, reason=msg.hold_reason, code=msg.hold_code,
                         subcode=msg.hold_subcode)
        elif msg.vacated:
            reason = usage.get("VacateReason")
            self.end_run(shadow, "vacated", now, out,
                         reason=reason if isinstance(reason, str) and reason else "the job was vacated from its slot")
        else:
            self.end_run(shadow, "exited", now, out, exit_code=msg.exit_code, exit_signal=msg.exit_signal,
                         core_dumped=msg.core_dumped)
        out.append(c.Reply(event.conn_id, m.Ack()))

    def end_run(self, shadow: Shadow, kind: str, now: float, out: list, *, reason: str = "",
                exit_code: int | None = None, exit_signal: int | None = None, core_dumped: bool = False,
                code: int = 0, subcode: int = 0) -> None:
        """Finish ``shadow``: record the outcome in the queue and the log, then free its claim
        (``kind``: see :mod:`htc.daemons.schedd.ends`)."""
        sd = self.schedd
        shadow.step(ShadowEvent.ENDED)
        self.forget(shadow.job_id)
        claim = sd.claims.get(shadow.claim_id)
        job = sd.job(shadow.job_id)
        keep_idle = keep_claim_idle(job) if job is not None else 0.0
        if job is not None:
            # Not fsynced on its own: the next job started on the claim commits durably at once
            # (one fsync for both), and the sync below covers the other cases -- either way
            # before the service acknowledges the exit or writes the user log.
            # Its events (TERMINATED, EVICTED, HELD...) go into the queue's outbox with the end
            # they announce (htc.daemons.schedd.owed): a schedd killed before it writes them
            # writes them when it starts again.
            with sd.queue.transaction(durable=False):
                events = record_end(sd.queue, shadow, claim, job, kind, now, reason, exit_code, exit_signal,
                                    core_dumped, code, subcode)
                out += owe(sd.queue, ul.write(job, *events))
            again = None if shadow.left_queue else sd.job(shadow.job_id)
            if again is not None and again.status == JobStatus.IDLE:
                sd.matches.forget_reuse_order(sd.submitter(again))  # idle again: a reuse candidate
                sd.lanes.enqueue(again)
                sd.adverts.reschedule_due = True  # the next ad update asks the negotiator to place it
        out.append(c.Log(f"{shadow.label}: run ended ({kind}{': ' + reason if reason else ''})"))
        sd.changed()
        if claim is not None:
            sd.claims.done(claim, *claim_after(kind, code, shadow.stop is not None, shadow.usage), now=now, out=out,
                           keep_idle=keep_idle)
        sd.queue.sync()

    # -- timers -----------------------------------------------------------------------------

    def deadline(self) -> float | None:
        """The next reconnect attempt or AllowedJobDuration to enforce."""
        times = [s.retry_at for s in self._runs.values() if s.retry_at is not None and not s.call_pending]
        times += [t for s in self._runs.values() if (t := s.duration_deadline) is not None]
        return min(times, default=None)

    def timers(self, now: float, out: list) -> None:
        """Enforce AllowedJobDuration; ask silent startds again."""
        sd = self.schedd
        for shadow in list(self._runs.values()):
            deadline = shadow.duration_deadline
            if deadline is not None and now >= deadline:
                self._hold_for_duration(shadow, now, out)
            if shadow.retry_at is None or shadow.retry_at > now or shadow.call_pending:
                continue
            shadow.retry_at = None
            claim = sd.claims.get(shadow.claim_id)
            if claim is None or sd.job(shadow.job_id) is None:
                self.end_run(shadow, "lost", now, out, reason="its claim is gone")
            else:
                self.send_activation(shadow, claim, now, out)

    def _hold_for_duration(self, shadow: Shadow, now: float, out: list) -> None:
        """The run outlived its AllowedJobDuration: hold it (46) and have the startd vacate it."""
        sd = self.schedd
        limit, shadow.duration_limit = shadow.duration_limit, None
        job = sd.job(shadow.job_id)
        if job is None or limit is None or JobStatus(job.status) not in ACTIVE_STATES:
            return
        reason = f"The job exceeded allowed job duration of {format_time_short(limit)}"
        code = HoldReasonCode.JobDurationExceeded
        with sd.queue.transaction():
            sd.queue.hold(shadow.job_id, reason, code=code, subcode=0, now=now)
            out += owe(sd.queue, ul.write(job, ul.held_event(job, reason, code, 0, now)))
        out.append(c.Log(f"{shadow.label}: {reason}; holding it"))
        self.stop(shadow.job_id, "hold", False, now, out)
        sd.changed()


#: what a call's answer is for -> the shadow's handler of it
_ON_ANSWER = {
    Answer.ACTIVATE: Shadows._activation_outcome,
    Answer.VACATE: Shadows._vacate_outcome,
    Answer.SUSPEND: Shadows._suspension_answered,
    Answer.CONTINUE: Shadows._suspension_answered,
}
