"""How a run ends: the queue change and the user-log events of one finished run.

A run ends in one of six ways (the ``kind``): ``exited`` (the job ended by itself), ``vacated``
(taken off its slot), ``failed`` (the starter could not start it), ``held`` (the execute side
killed it and asks for a hold), ``refused`` (the startd refused the activation), ``lost`` (the
claim is gone or the lease ran out). What that means for the job is decided once, here, from
its state in the queue and the kind: a job removed or held meanwhile stays so; an exit goes
through the job's ``on_exit_*`` / ``max_retries`` policy (``JobQueue.exit_and_apply``); an
eviction makes it Idle again. A shadow's end (:mod:`htc.daemons.schedd.shadows`) and a lane
call's (:mod:`htc.daemons.schedd.lanes`) both come through :func:`record_end`, inside the
caller's transaction; :func:`claim_after` says what becomes of the claim.
"""

from __future__ import annotations

from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.leverage import leverage_attributes
from htc.jobqueue import Action as PolicyAction
from htc.jobqueue import ExitInfo, HoldReasonCode, JobStatus
from htc.jobqueue.ads import parse_literal, quote
from htc.jobqueue.expr import job_classad

__all__ = ["CLAIM_ENDING", "JOB_FILE_FAILURES", "MAX_REFUSALS", "USAGE_ATTRS", "claim_after", "record_end", "record_run_time",
           "slot_weight", "uncommitted_seconds"]

#: refused activations in a row after which a job is held rather than matched again
MAX_REFUSALS = 3

#: usage attributes a starter reports and the queue records at the end of a run
USAGE_ATTRS = ("RemoteUserCpu", "RemoteSysCpu", "ImageSize", "ResidentSetSize", "MemoryUsage", "DiskUsage")

#: hold codes of a start that failed because of the job's own files: the slot is fine
JOB_FILE_FAILURES = frozenset({HoldReasonCode.TransferInputError, HoldReasonCode.TransferOutputError})


#: what a starter's exit report says when its job ended by itself while the startd was ending
#: its claim (a vacate that reached the job after it exited; the name
#: :data:`htc.daemons.startd.reports.CLAIM_ENDING` sends)
CLAIM_ENDING = "ClaimEnding"


def claim_after(kind: str, code: int, stopped: bool, usage=None) -> tuple[bool, bool]:
    """What becomes of the claim a run ended on: ``(reusable, release)``.

    A job that ended by itself leaves a claim for the next idle job (claim reuse). So does a
    job whose starter failed on the job's own files (its input is missing): the startd holds
    the claim Claimed/Idle, and dropping it silently would leave the slot claimed by nobody
    until its lease ran out. Any other failed start, or a refused activation, may be the
    slot's fault (EXECUTE unreachable, a broken slot user): the claim is released, and the
    negotiator finds the next job a slot. A run the startd ended (vacate, lost claim) or that
    the schedd stopped (the Vacate it sent ends the claim) leaves no claim to reuse or release;
    so does a job that ended by itself while the startd was ending its claim (its exit report's
    ``usage`` has :data:`CLAIM_ENDING`): the vacate came after the exit, and the claim is gone
    all the same -- offered to the next job, it would only earn a refused activation.
    """
    if kind == "refused":
        return False, True  # the startd still holds the claim, idle
    if stopped or kind in ("vacated", "lost") or (usage is not None and usage.get(CLAIM_ENDING)):
        return False, False
    if kind in ("exited", "held") or (kind == "failed" and code in JOB_FILE_FAILURES):
        return True, False
    return False, True  # failed for another reason


def keep_claim_idle(job) -> float:
    """The job's ``KeepClaimIdle`` (``keep_claim_idle``; DAGMan sets it on a node job with
    children, DAGMAN_HOLD_CLAIM_TIME): seconds its claim stays Claimed/Idle after it ended, for
    the next job (0 when unset, not a number, or negative)."""
    text = job.get("KeepClaimIdle")
    if text is None:
        return 0.0
    try:
        value = parse_literal(text)
    except ValueError:
        value = job_classad(job).eval("KeepClaimIdle")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return max(0.0, float(value))


def record_end(queue, shadow, claim, job, kind: str, now: float, reason: str, exit_code, exit_signal,
               core_dumped: bool, code: int, subcode: int) -> list:
    """Record in ``queue`` how the run ``shadow`` of ``job`` on ``claim`` (None: gone) ended;
    returns the user-log events that announce it. Sets ``shadow.left_queue`` when the job
    moved to the history."""
    q, job_id = queue, shadow.job_id
    status = JobStatus(job.status)
    usage = dict(shadow.usage)
    attrs = _usage_attributes(job, shadow, claim, now)
    if kind != "exited" or status not in (JobStatus.RUNNING, JobStatus.SUSPENDED, JobStatus.TRANSFERRING_OUTPUT):
        # Whatever ended the run, the time it ran is the job's (HTCondor's schedd adds each
        # run's wall time when its shadow goes, removed and held jobs included); an exit
        # records them with its own attributes.
        q.set_attributes(job_id, attrs)
    if status == JobStatus.REMOVED:
        q.retire(job_id, now=now)  # its JOB_ABORTED event was written when it was removed
        return []
    if status not in (JobStatus.RUNNING, JobStatus.SUSPENDED, JobStatus.TRANSFERRING_OUTPUT):
        return []  # held (or otherwise settled) while it was being stopped
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
    # The run's work is kept (HTCondor's CommittedTime, CommittedSlotTime): it ended by itself.
    # A self-checkpointing job committed the time up to its last checkpoint already.
    kept = uncommitted_seconds(job, shadow, now)
    attrs["CommittedTime"] = str(ul.number(job, "CommittedTime") + kept)
    attrs["CommittedSlotTime"] = str(ul.number(job, "CommittedSlotTime") + kept * slot_weight(claim))
    decision, change = q.exit_and_apply(job_id, ExitInfo(exit_code, exit_signal, core_dumped), now=now,
                                        attrs=attrs)
    shadow.left_queue = change.left_queue
    if decision.action is PolicyAction.COMPLETE:
        cumulative = {k: float(attrs[k]) for k in ("CumulativeRemoteUserCpu", "CumulativeRemoteSysCpu")}
        return [ul.terminated_event(job, exit_code, exit_signal, core_dumped, usage, cumulative,
                                    _requests_of(job), claim.slot_values if claim else {}, now)]
    if decision.action is PolicyAction.REQUEUE:
        return [ul.requeued_event(job, exit_code, exit_signal, usage, decision.reason, now)]
    if decision.action is PolicyAction.HOLD:
        return [ul.held_event(job, decision.reason, decision.code, decision.subcode, now)]
    q.retire(job_id, now=now)  # REMOVE: the job is not running any more
    return [ul.aborted_event(job, decision.reason, now)]


def slot_weight(claim) -> float:
    """The weight of the slot a run used (:func:`htc.daemons.schedd.claims.slot_weight_of`,
    evaluated when the claim took its slot ad), by which HTCondor multiplies a run's time into
    ``CumulativeSlotTime``; 1 without a claim."""
    return claim.weight if claim is not None else 1.0


def _run_seconds(shadow, now: float) -> float:
    return max(0.0, now - shadow.started)


def uncommitted_seconds(job, shadow, now: float) -> float:
    """The run's time not yet in ``CommittedTime``: since its start, or since its last stored
    checkpoint (``JobLastCheckpointTime``, :mod:`htc.daemons.schedd.checkpoints`) if later."""
    return max(0.0, now - max(shadow.started, ul.number(job, "JobLastCheckpointTime")))


def _usage_attributes(job, shadow, claim, now: float) -> dict[str, str]:
    """The job's usage once the run ``shadow`` ends: the run's wall time added to
    ``RemoteWallClockTime`` and (times the slot's weight) ``CumulativeSlotTime``, its CPU to
    the ``Cumulative...Cpu`` figures, whatever ended it (HTCondor's schedd accumulates these
    when a shadow goes, in update_remote_wall_clock)."""
    usage = shadow.usage
    attrs = {k: str(v) for k, v in usage.items()
             if k in USAGE_ATTRS and isinstance(v, (int, float)) and not isinstance(v, bool)}
    user, system = (float(usage.get(k, 0.0) or 0.0) for k in ("RemoteUserCpu", "RemoteSysCpu"))
    ran = _run_seconds(shadow, now)
    attrs["RemoteWallClockTime"] = str(ul.number(job, "RemoteWallClockTime") + ran)
    attrs["CumulativeSlotTime"] = str(ul.number(job, "CumulativeSlotTime") + ran * slot_weight(claim))
    attrs["LastRemoteWallClockTime"] = str(ran)
    attrs["CumulativeRemoteUserCpu"] = str(ul.number(job, "CumulativeRemoteUserCpu") + user)
    attrs["CumulativeRemoteSysCpu"] = str(ul.number(job, "CumulativeRemoteSysCpu") + system)
    remote = float(attrs["CumulativeRemoteUserCpu"]) + float(attrs["CumulativeRemoteSysCpu"])
    attrs.update(leverage_attributes(job, shadow, remote, ul.number))
    attrs["LastRemoteHost"] = quote(claim.slot_name if claim else "")
    if claim is not None and claim.pool:
        attrs["LastRemotePool"] = quote(claim.pool)  # HTCondor's: the flocked pool the job last ran in
    return attrs


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


def record_run_time(queue, shadow, claim, job, now: float) -> None:
    """Record the time of the run ``shadow`` that the schedd stops following without its end
    (``condor_rm -forcex``): the job keeps what it ran."""
    queue.set_attributes(shadow.job_id, _usage_attributes(job, shadow, claim, now))
