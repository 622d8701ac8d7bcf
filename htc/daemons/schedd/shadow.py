"""The shadow: the schedd's side of one running job, as a state machine inside the schedd core.

Theory of operation
-------------------
HTCondor runs one ``condor_shadow`` process per running job. htc has no uid to switch, so a
shadow is a small record the schedd core keeps per running job, :class:`Shadow`, moved by the
table :data:`SHADOW`; the schedd's event loop multiplexes all of them (no thread, no process,
no coroutine of its own: a shadow waits for messages and deadlines like the rest of the core).

::

    ACTIVATING --ActivateClaim acked--> RUNNING <--starter says--> SUSPENDED
        |  no answer                        |
        v                                   | hold / remove / vacate: Vacate sent to the startd
    RECONNECTING --acked--> RUNNING ...     v
                                         STOPPING
    any state --JobExited / claim lost / activation refused--> DONE (the record is dropped)

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

How a run ends is decided once, in :meth:`ShadowHandling._record_end`, from the job's state
in the queue and how the starter ended: a job removed or held meanwhile stays so; an exit
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
that claim and job answers each with a :class:`~htc.daemons.schedd.output.WriteJobOutput` of
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

import enum
from dataclasses import dataclass, field
from typing import Any

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.output import job_output, streamed_paths, truncations
from htc.daemons.schedd.owed import owe
from htc.daemons.calls import Call
from htc.daemons.startd.events import format_time_short
from htc.jobqueue import Action as PolicyAction
from htc.jobqueue import ExitInfo, HoldReasonCode, JobStatus
from htc.jobqueue.ads import parse_literal, quote
from htc.jobqueue.expr import job_classad
from htc.jobqueue.records import JobId
from htc.jobqueue.states import ACTIVE_STATES
from htc.wire import messages as m


class ShadowState(enum.Enum):
    """Where a shadow stands."""

    ACTIVATING = "Activating"      # ActivateClaim sent for a fresh start
    RECONNECTING = "Reconnecting"  # the startd did not answer, or the schedd restarted
    RUNNING = "Running"
    SUSPENDED = "Suspended"
    STOPPING = "Stopping"          # Vacate sent (condor_rm, condor_hold, condor_vacate_job, policy)
    DONE = "Done"


class ShadowEvent(enum.Enum):
    """What can happen to a shadow."""

    ACTIVATED = "activation acknowledged"
    UNANSWERED = "startd did not answer"
    SUSPENDED = "starter reports the job suspended"
    UNSUSPENDED = "starter reports the job running"
    STOP = "stop requested"
    ENDED = "job ended, claim lost or activation refused"


_S, _E = ShadowState, ShadowEvent

#: The shadow's legal steps. ENDED is legal from every live state.
SHADOW: dict[tuple[ShadowState, ShadowEvent], ShadowState] = {
    (_S.ACTIVATING, _E.ACTIVATED): _S.RUNNING,
    (_S.ACTIVATING, _E.UNANSWERED): _S.RECONNECTING,
    (_S.ACTIVATING, _E.SUSPENDED): _S.SUSPENDED,  # an update can overtake the activation's answer
    (_S.ACTIVATING, _E.UNSUSPENDED): _S.RUNNING,
    (_S.ACTIVATING, _E.STOP): _S.STOPPING,
    (_S.RECONNECTING, _E.ACTIVATED): _S.RUNNING,
    (_S.RECONNECTING, _E.UNANSWERED): _S.RECONNECTING,
    (_S.RECONNECTING, _E.SUSPENDED): _S.SUSPENDED,
    (_S.RECONNECTING, _E.UNSUSPENDED): _S.RUNNING,
    (_S.RECONNECTING, _E.STOP): _S.STOPPING,
    (_S.RUNNING, _E.ACTIVATED): _S.RUNNING,
    (_S.RUNNING, _E.UNSUSPENDED): _S.RUNNING,
    (_S.RUNNING, _E.SUSPENDED): _S.SUSPENDED,
    (_S.RUNNING, _E.STOP): _S.STOPPING,
    (_S.SUSPENDED, _E.SUSPENDED): _S.SUSPENDED,
    (_S.SUSPENDED, _E.UNSUSPENDED): _S.RUNNING,
    (_S.SUSPENDED, _E.STOP): _S.STOPPING,
    (_S.STOPPING, _E.ACTIVATED): _S.STOPPING,
    (_S.STOPPING, _E.UNANSWERED): _S.STOPPING,
    (_S.STOPPING, _E.SUSPENDED): _S.STOPPING,
    (_S.STOPPING, _E.UNSUSPENDED): _S.STOPPING,
    (_S.STOPPING, _E.STOP): _S.STOPPING,
    **{(state, _E.ENDED): _S.DONE for state in ShadowState if state is not _S.DONE},
}

#: refused activations in a row after which a job is held rather than matched again
MAX_REFUSALS = 3

#: usage attributes a starter reports and the queue records at the end of a run
USAGE_ATTRS = ("RemoteUserCpu", "RemoteSysCpu", "ImageSize", "ResidentSetSize", "MemoryUsage", "DiskUsage")


@dataclass(eq=False)
class Shadow:
    """One running job, as the schedd follows it."""

    job_id: JobId
    claim_id: str
    state: ShadowState
    started: float
    stop: str | None = None  # "remove", "hold" or "vacate" once a stop was asked for
    executed: bool = False  # the EXECUTE event is written
    call_pending: bool = False  # an ActivateClaim (or reconnecting keep-alive) is on its way
    acknowledged: bool = False  # the startd confirmed the activation (recorded in the job ad)
    retry_at: float | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    logged_image_size: int = 0
    state_sequence: int = -1  # the newest JobStateSequence the startd reported (updates or answers)
    duration_limit: float | None = None  # AllowedJobDuration (s) while it is still to be enforced
    left_queue: bool = False  # its end moved the job to the history (nothing to look up after)

    @property
    def duration_deadline(self) -> float | None:
        """When the run breaks its AllowedJobDuration (None: no limit, or already acted on)."""
        if self.duration_limit is None or self.stop is not None:
            return None
        return self.started + self.duration_limit

    @property
    def label(self) -> str:
        """``shadow 12.3`` -- for errors and logs."""
        return f"shadow {self.job_id[0]}.{self.job_id[1]}"


def job_duration_limit(job) -> float | None:
    """A stored job's ``AllowedJobDuration`` in seconds, evaluated in the job's scope; None
    (no limit) unless it is a positive number."""
    if "AllowedJobDuration" not in job:  # case-insensitive, as JobAd lookups are
        return None
    try:
        value = job_classad(job).eval("AllowedJobDuration")
    except Exception:  # noqa: BLE001 -- a broken expression is no limit, as HTCondor reads it
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 < value < float("inf") else None


def machine_table() -> str:
    """The shadow and claim tables as Markdown (docs/pool.md embeds it; a test keeps it current)."""
    from htc.daemons.schedd.claims import CLAIM

    lines = ["| machine | from | on | to |", "|---|---|---|---|"]
    lines += [f"| shadow | {old.value} | {event.value} | {new.value} |" for (old, event), new in SHADOW.items()]
    lines += [f"| claim | {old.value} | {trigger} | {new.value} |" for (old, trigger), new in CLAIM.items()]
    return "\n".join(lines)


def ad_text(attrs) -> str:
    """A stored ad (attribute -> expression text) as new-syntax ClassAd text for the wire."""
    return "[ " + "; ".join(f"{name} = {text}" for name, text in attrs.items()) + " ]"


def parse_job_id(text: str) -> JobId:
    """``"12.3"`` as ``(12, 3)`` (a bare cluster is proc 0)."""
    cluster, _, proc = text.partition(".")
    return int(cluster), int(proc or 0)


def ad_values(text: str) -> dict[str, Any]:
    """A ClassAd text's attributes as Python values (expressions left as ExprTree)."""
    if not text:
        return {}
    ad = ClassAd(text)
    return {key: ad[key] for key in ad}


#: hold codes of a start that failed because of the job's own files: the slot is fine
JOB_FILE_FAILURES = frozenset({HoldReasonCode.TransferInputError, HoldReasonCode.TransferOutputError})


def _claim_after(kind: str, code: int, stopped: bool) -> tuple[bool, bool]:
    """What becomes of the claim a run ended on: ``(reusable, release)``.

    A job that ended by itself leaves a claim for the next idle job (claim reuse). So does a
    job whose starter failed on the job's own files (its input is missing): the startd holds
    the claim Claimed/Idle, and dropping it silently would leave the slot claimed by nobody
    until its lease ran out. Any other failed start, or a refused activation, may be the
    slot's fault (EXECUTE unreachable, a broken slot user): the claim is released, and the
    negotiator finds the next job a slot. A run the startd ended (vacate, lost claim) or that
    the schedd stopped (the Vacate it sent ends the claim) leaves no claim to reuse or release.
    """
    if kind == "refused":
        return False, True  # the startd still holds the claim, idle
    if stopped or kind in ("vacated", "lost"):
        return False, False
    if kind in ("exited", "held") or (kind == "failed" and code in JOB_FILE_FAILURES):
        return True, False
    return False, True  # failed for another reason


class ShadowHandling:
    """The schedd core's shadows: activation, starter reports, stops and the end of a run.

    A mixin of :class:`htc.daemons.schedd.core.Schedd`; it uses the core's ``queue``, ``claims``,
    ``shadows``, ``settings`` and its helpers ``_job``, ``_changed`` and ``_claim_done``.
    """

    def _step(self, shadow: Shadow, event: ShadowEvent) -> None:
        shadow.state = c.transition(SHADOW, shadow.label, shadow.state, event)

    # -- starting and reconnecting ----------------------------------------------------------

    def _start_job(self, claim, job_id: JobId, now: float, out: list) -> bool:
        """Run idle job ``job_id`` on ``claim``; False when the job is no longer idle."""
        job = self._job(job_id)
        self.reserved.discard(job_id)
        if job is None or job.status != JobStatus.IDLE:
            return False
        key = self._wants_lane(job, now)
        if key is not None:
            return self._start_lane(claim, job, key, now, out)
        with self.queue.transaction():
            self.queue.set_attributes(job_id, {"ClaimId": quote(claim.id), "StartdIpAddr": quote(claim.startd),
                                               "RemoteHost": quote(claim.slot_name), "HTCLaneRun": None})
            self.queue.set_status(job_id, JobStatus.RUNNING, now=now)
        shadow = Shadow(job_id, claim.id, ShadowState.ACTIVATING, started=now, duration_limit=job_duration_limit(job))
        self.shadows[job_id] = shadow
        out += truncations(job)  # a streaming job's run writes its output from the start
        claim.job = job_id
        self._claim_step(claim, "activate")
        self._send_activation(shadow, claim, now, out)
        self._changed()
        return True

    def _send_activation(self, shadow: Shadow, claim, now: float, out: list) -> None:
        job = self._job(shadow.job_id)
        if job is None:
            return
        shadow.call_pending = True
        shadow.retry_at = None
        cookie = ("activate", shadow.job_id, claim.id)
        if shadow.acknowledged:
            # The startd confirmed this run before the schedd went away: asking it to activate the
            # claim again could start the job a second time. A live claim means the job runs or its
            # exit report is on its way (starters retry it), so a keep-alive is the whole reconnect.
            out.append(Call(claim.startd, m.ClaimKeepAlive(claim_id=claim.id), cookie=cookie))
            return
        visible = {k: v for k, v in job.items() if k != "ClaimId"}
        out.append(Call(claim.startd, m.ActivateClaim(claim_id=claim.id, job_ad=ad_text(visible),
                                                      shadow_address=self.settings.address), cookie=cookie))

    def _activation_answered(self, shadow: Shadow, claim, now: float, out: list) -> None:
        shadow.call_pending = False
        claim.last_alive = now
        if not claim.watching:
            self._watch_claim(claim, out)  # a reconnected claim is watched again at once
        job = self._job(shadow.job_id)
        if job is None:
            return
        if shadow.state is ShadowState.RECONNECTING:
            out += ul.write(job, ul.reconnected_event(job, claim.slot_name, claim.startd, now))
        if not shadow.acknowledged:
            shadow.acknowledged = True
            # Bookkeeping nobody is told about: the next durable commit (or sync) covers it.
            with self.queue.transaction(durable=False):
                self.queue.set_attributes(shadow.job_id, {"JobCurrentStartExecutingDate": str(int(now))})
        self._note_executed(shadow, claim, job, now, out)
        self._step(shadow, ShadowEvent.ACTIVATED)
        if shadow.stop is not None:
            self._send_vacate(shadow, claim, shadow.stop == "remove", out)

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
                self._end_run(shadow, "lost", now, out, reason=f"the startd no longer runs the job: {event.error}")
            else:
                self._end_run(shadow, "refused", now, out, reason=event.error)
            return
        self._step(shadow, ShadowEvent.UNANSWERED)
        shadow.retry_at = now + self.settings.reconnect_retry
        out.append(c.Log(f"{shadow.label}: {claim.startd} did not answer ActivateClaim ({event.error}); "
                         f"retrying within the job lease"))

    def _note_executed(self, shadow: Shadow, claim, job, now: float, out: list) -> None:
        if not shadow.executed:
            shadow.executed = True
            out += ul.write(job, ul.execute_event(job, claim.startd, claim.slot_name, claim.slot_values, now))

    # -- while it runs ----------------------------------------------------------------------

    def _starter_update(self, event: c.Received, msg: m.StarterUpdate, now: float, out: list) -> None:
        shadow = self.shadows.get(parse_job_id(msg.job_id))
        claim = self.claims.get(msg.claim_id)
        if msg.claim_id in self.lanes and claim is not None:
            claim.last_alive = now  # a call lane's worker: its calls report their own usage
            out.append(c.Reply(event.conn_id, m.Ack()))
            return
        if shadow is None or claim is None or shadow.claim_id != msg.claim_id:
            out.append(c.Reply(event.conn_id, m.ErrorReply(
                code="not_found", message=f"{self.settings.name} runs no job {msg.job_id} on that claim; "
                "stop reporting it")))
            return
        claim.last_alive = now
        values = ad_values(msg.update_ad)
        shadow.usage.update({k: v for k, v in values.items() if k in USAGE_ATTRS})
        job = self._job(shadow.job_id)
        if job is not None:
            self._note_executed(shadow, claim, job, now, out)
            self._follow_job_state(shadow, job, values, now, out)
            size = shadow.usage.get("ImageSize")
            if isinstance(size, int) and size > shadow.logged_image_size:
                shadow.logged_image_size = size
                out += ul.write(job, ul.image_size_event(job, shadow.usage, now))
        out.append(c.Reply(event.conn_id, m.Ack()))

    def _job_output(self, event: c.Received, msg: m.JobOutput, now: float, out: list) -> None:
        """New bytes of a streamed stdout/stderr: the service writes them at their offset, then acks."""
        shadow = self.shadows.get(parse_job_id(msg.job_id))
        claim = self.claims.get(msg.claim_id)
        if shadow is None or claim is None or shadow.claim_id != msg.claim_id:
            out.append(c.Reply(event.conn_id, m.ErrorReply(
                code="not_found", message=f"{self.settings.name} runs no job {msg.job_id} on that claim; "
                "stop streaming its output")))
            return
        job = self._job(shadow.job_id)
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
        sequence = values.get("JobStateSequence")
        if isinstance(sequence, int) and not isinstance(sequence, bool):
            if sequence < shadow.state_sequence:
                return
            shadow.state_sequence = sequence
        state = values.get("JobState")
        if state == "Suspended" and shadow.state is not ShadowState.SUSPENDED:
            self._step(shadow, ShadowEvent.SUSPENDED)
            if job.status == JobStatus.RUNNING:
                self.queue.set_status(shadow.job_id, JobStatus.SUSPENDED, now=now)
                pids = values.get("NumPids", 1)
                out += ul.write(job, ul.suspended_event(job, pids if isinstance(pids, int) else 1, now))
        elif state == "Running" and shadow.state is ShadowState.SUSPENDED:
            self._step(shadow, ShadowEvent.UNSUSPENDED)
            if job.status == JobStatus.SUSPENDED:
                self.queue.set_status(shadow.job_id, JobStatus.RUNNING, now=now)
                out += ul.write(job, ul.unsuspended_event(job, now))

    def _suspension_answered(self, shadow: Shadow, kind: str, event, now: float, out: list) -> None:
        """The startd did (or refused) a condor_suspend / condor_continue of the job."""
        job = self._job(shadow.job_id)
        if job is None or not hasattr(event, "reply"):
            out.append(c.Log(f"{shadow.label}: {kind} failed: {getattr(event, 'error', '')}"))
            return
        state = "Suspended" if kind == "suspend" else "Running"
        sequence = getattr(event.reply, "sequence", None)
        self._follow_job_state(shadow, job, {"JobState": state, "NumPids": 1, "JobStateSequence": sequence},
                               now, out)
        self._changed()

    def _stop_shadow(self, job_id: JobId, why: str, fast: bool, now: float, out: list) -> bool:
        """Ask the startd to take ``job_id`` off its slot (``why``: remove, hold or vacate)."""
        shadow = self.shadows.get(job_id)
        if shadow is None:
            return self._stop_lane_call(job_id, why, out)
        claim = self.claims.get(shadow.claim_id)
        # A later remove outranks a hold or vacate asked for before it.
        shadow.stop = why if shadow.stop in (None, "vacate") or why == "remove" else shadow.stop
        self._step(shadow, ShadowEvent.STOP)
        if claim is not None:
            self._send_vacate(shadow, claim, fast, out)
        return True

    def _send_vacate(self, shadow: Shadow, claim, fast: bool, out: list) -> None:
        out.append(Call(claim.startd, m.Vacate(claim_id=claim.id, fast=fast, reason=f"job {shadow.stop}"),
                        cookie=("vacate", shadow.job_id, claim.id)))

    # -- the end of a run -------------------------------------------------------------------

    def _job_exited(self, event: c.Received, msg: m.JobExited, now: float, out: list) -> None:
        if msg.claim_id in self.lanes:
            self._lane_exited(event, msg, now, out)
            return
        job_id = parse_job_id(msg.job_id)
        shadow = self.shadows.get(job_id)
        if shadow is None or shadow.claim_id != msg.claim_id:
            # A starter repeating a report we already acted on: acknowledge, change nothing.
            out.append(c.Log(f"job {msg.job_id}: exit report for a run already finished; ignored"))
            out.append(c.Reply(event.conn_id, m.Ack(detail="already recorded")))
            return
        usage = ad_values(msg.usage_ad)
        shadow.usage.update({k: v for k, v in usage.items() if k in USAGE_ATTRS})
        error = usage.get("StarterError")
        if isinstance(error, str) and error:
            code = usage.get("HoldReasonCode", HoldReasonCode.FailedToCreateProcess)
            sub = usage.get("HoldReasonSubCode", 0)
            self._end_run(shadow, "failed", now, out, reason=error,
                          code=code if isinstance(code, int) else HoldReasonCode.FailedToCreateProcess,
                          subcode=sub if isinstance(sub, int) else 0)
        elif msg.hold_code is not None:
            self._end_run(shadow, "held", now, out, reason=msg.hold_reason, code=msg.hold_code,
                          subcode=msg.hold_subcode)
        elif msg.vacated:
            reason = usage.get("VacateReason")
            self._end_run(shadow, "vacated", now, out,
                          reason=reason if isinstance(reason, str) and reason else "the job was vacated from its slot")
        else:
            self._end_run(shadow, "exited", now, out, exit_code=msg.exit_code, exit_signal=msg.exit_signal,
                          core_dumped=msg.core_dumped)
        out.append(c.Reply(event.conn_id, m.Ack()))

    def _end_run(self, shadow: Shadow, kind: str, now: float, out: list, *, reason: str = "",
                 exit_code: int | None = None, exit_signal: int | None = None, core_dumped: bool = False,
                 code: int = 0, subcode: int = 0) -> None:
        """Finish ``shadow``: record the outcome in the queue and the log, then free its claim.

        ``kind``: ``exited`` (the job ended by itself), ``vacated`` (taken off its slot),
        ``failed`` (the starter could not start it), ``held`` (the execute side killed it and
        asks for a hold), ``refused`` (the startd refused the activation), ``lost`` (the claim
        is gone or the lease ran out).
        """
        self._step(shadow, ShadowEvent.ENDED)
        self.shadows.pop(shadow.job_id, None)
        claim = self.claims.get(shadow.claim_id)
        job = self._job(shadow.job_id)
        if job is not None:
            # Not fsynced on its own: the next job started on the claim commits durably at once
            # (one fsync for both), and the sync below covers the other cases -- either way
            # before the service acknowledges the exit or writes the user log.
            # Its events (TERMINATED, EVICTED, HELD...) go into the queue's outbox with the end
            # they announce (htc.daemons.schedd.owed): a schedd killed before it writes them
            # writes them when it starts again.
            with self.queue.transaction(durable=False):
                events = self._record_end(shadow, claim, job, kind, now, reason, exit_code, exit_signal,
                                          core_dumped, code, subcode)
                out += owe(self.queue, ul.write(job, *events))
            again = None if shadow.left_queue else self._job(shadow.job_id)
            if again is not None and again.status == JobStatus.IDLE:
                self._forget_reuse_order(self._submitter(again))  # idle again: a reuse candidate
                self._lane_enqueue(again)
                self._reschedule_due = True  # the next ad update asks the negotiator to place it
        out.append(c.Log(f"{shadow.label}: run ended ({kind}{': ' + reason if reason else ''})"))
        self._changed()
        if claim is not None:
            self._claim_done(claim, *_claim_after(kind, code, shadow.stop is not None), now=now, out=out)
        self.queue.sync()

    def _record_end(self, shadow: Shadow, claim, job, kind: str, now: float, reason: str, exit_code, exit_signal,
                    core_dumped: bool, code: int, subcode: int) -> list:
        q, job_id = self.queue, shadow.job_id
        status = JobStatus(job.status)
        if status == JobStatus.REMOVED:
            q.retire(job_id, now=now)  # its JOB_ABORTED event was written when it was removed
            return []
        if status not in (JobStatus.RUNNING, JobStatus.SUSPENDED, JobStatus.TRANSFERRING_OUTPUT):
            return []  # held (or otherwise settled) while it was being stopped
        usage = dict(shadow.usage)
        attrs = self._usage_attributes(job, shadow, claim, now)
        if kind != "exited":
            q.set_attributes(job_id, attrs)  # (an exit records them with its own attributes)
        if kind in ("failed", "held"):
            q.hold(job_id, reason, code=code, subcode=subcode, now=now)
            return [ul.held_event(job, reason, code, subcode, now)]
        if kind in ("vacated", "refused", "lost"):
            q.set_status(job_id, JobStatus.IDLE, now=now)
            if kind == "vacated":
                return [ul.evicted_event(job, usage, reason, now)]
            if kind == "refused":
                failures = int(ul.number(job, "NumShadowExceptions")) + 1
                q.set_attributes(job_id, {"NumShadowExceptions": str(failures)})
                message = f"the startd refused to run the job: {reason}"
                if failures < MAX_REFUSALS:
                    return [ul.shadow_exception_event(job, message, now)]
                # A job no startd can start (its input is missing, say) would otherwise bounce forever.
                reason = f"{message} ({failures} times in a row)"
                q.hold(job_id, reason, code=HoldReasonCode.FailedToCreateProcess, now=now)
                return [ul.shadow_exception_event(job, message, now),
                        ul.held_event(job, reason, HoldReasonCode.FailedToCreateProcess, 0, now)]
            return [ul.reconnect_failed_event(job, reason, claim.slot_name if claim else "", now)]
        if status == JobStatus.SUSPENDED:
            q.set_status(job_id, JobStatus.RUNNING, now=now)
        decision, change = q.exit_and_apply(job_id, ExitInfo(exit_code, exit_signal, core_dumped), now=now,
                                            attrs=attrs)
        shadow.left_queue = change.left_queue
        if decision.action is PolicyAction.COMPLETE:
            cumulative = {k: float(attrs[k]) for k in ("CumulativeRemoteUserCpu", "CumulativeRemoteSysCpu")}
            return [ul.terminated_event(job, exit_code, exit_signal, core_dumped, usage, cumulative,
                                        self._requests_of(job), claim.slot_values if claim else {}, now)]
        if decision.action is PolicyAction.REQUEUE:
            return [ul.requeued_event(job, exit_code, exit_signal, usage, decision.reason, now)]
        if decision.action is PolicyAction.HOLD:
            return [ul.held_event(job, decision.reason, decision.code, decision.subcode, now)]
        q.retire(job_id, now=now)  # REMOVE: the job is not running any more
        return [ul.aborted_event(job, decision.reason, now)]

    def _usage_attributes(self, job, shadow: Shadow, claim, now: float) -> dict[str, str]:
        usage = shadow.usage
        attrs = {k: str(v) for k, v in usage.items()
                 if k in USAGE_ATTRS and isinstance(v, (int, float)) and not isinstance(v, bool)}
        user, system = (float(usage.get(k, 0.0) or 0.0) for k in ("RemoteUserCpu", "RemoteSysCpu"))
        attrs["RemoteWallClockTime"] = str(ul.number(job, "RemoteWallClockTime") + max(0.0, now - shadow.started))
        attrs["CumulativeRemoteUserCpu"] = str(ul.number(job, "CumulativeRemoteUserCpu") + user)
        attrs["CumulativeRemoteSysCpu"] = str(ul.number(job, "CumulativeRemoteSysCpu") + system)
        attrs["LastRemoteHost"] = quote(claim.slot_name if claim else "")
        return attrs

    @staticmethod
    def _requests_of(job) -> dict[str, float | None]:
        ad = None  # a ClassAd of the job only for a request that is an expression, not a number
        out: dict[str, float | None] = {}
        for name in ("RequestCpus", "RequestDisk", "RequestMemory"):
            text = job.get(name)
            if text is None:
                value = None
            else:
                try:
                    value = parse_literal(text)
                except ValueError:
                    ad = job_classad(job) if ad is None else ad
                    value = ad.eval(name)
            out[name] = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        return out

    # -- timers -----------------------------------------------------------------------------

    def _shadow_deadline(self) -> float | None:
        times = [s.retry_at for s in self.shadows.values() if s.retry_at is not None and not s.call_pending]
        times += [t for s in self.shadows.values() if (t := s.duration_deadline) is not None]
        return min(times, default=None)

    def _hold_for_duration(self, shadow: Shadow, now: float, out: list) -> None:
        """The run outlived its AllowedJobDuration: hold it (46) and have the startd vacate it."""
        limit, shadow.duration_limit = shadow.duration_limit, None
        job = self._job(shadow.job_id)
        if job is None or limit is None or JobStatus(job.status) not in ACTIVE_STATES:
            return
        reason = f"The job exceeded allowed job duration of {format_time_short(limit)}"
        code = HoldReasonCode.JobDurationExceeded
        with self.queue.transaction():
            self.queue.hold(shadow.job_id, reason, code=code, subcode=0, now=now)
            out += owe(self.queue, ul.write(job, ul.held_event(job, reason, code, 0, now)))
        out.append(c.Log(f"{shadow.label}: {reason}; holding it"))
        self._stop_shadow(shadow.job_id, "hold", False, now, out)
        self._changed()

    def _shadow_timers(self, now: float, out: list) -> None:
        for shadow in list(self.shadows.values()):
            deadline = shadow.duration_deadline
            if deadline is not None and now >= deadline:
                self._hold_for_duration(shadow, now, out)
            if shadow.retry_at is None or shadow.retry_at > now or shadow.call_pending:
                continue
            shadow.retry_at = None
            claim = self.claims.get(shadow.claim_id)
            if claim is None or self._job(shadow.job_id) is None:
                self._end_run(shadow, "lost", now, out, reason="its claim is gone")
            else:
                self._send_activation(shadow, claim, now, out)


__all__ = ["SHADOW", "machine_table", "Shadow", "ShadowEvent", "ShadowHandling", "ShadowState", "USAGE_ATTRS", "ad_text",
           "ad_values", "job_duration_limit", "parse_job_id"]
