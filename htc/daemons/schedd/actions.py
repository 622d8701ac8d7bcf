"""What the schedd does when a tool acts on jobs (rm, hold, release, vacate, suspend, continue)
or edits them.

Every request is answered only after the queue change it asks for is committed, with its
user-log events kept in the same transaction (:mod:`htc.daemons.schedd.owed`). Only a job's
owner or an administrator acts on a job or edits it (:mod:`htc.daemons.schedd.access`). A
running job's stop goes to its shadow (:meth:`htc.daemons.schedd.shadows.Shadows.stop`),
which asks the startd to vacate it; suspend and continue go to the startd, and the queue follows once
the startd has done it.
"""

from __future__ import annotations

from htc.daemons import core as c
from htc.daemons.calls import Call
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.access import Denied, denied_log
from htc.daemons.schedd.ends import record_run_time
from htc.daemons.schedd.events import Answer
from htc.daemons.schedd.owed import owe
from htc.errors import UsageError
from htc.jobqueue import HoldReasonCode, JobStatus
from htc.jobqueue.ads import int_literal
from htc.jobqueue.states import ACTIVE_STATES
from htc.wire import messages as m

__all__ = ["JobActions"]

#: the tool's verb of each action (in the default reason)
_VERBS = {m.JobAction.Remove: "rm", m.JobAction.RemoveX: "rm -forcex", m.JobAction.Hold: "hold",
          m.JobAction.Release: "release", m.JobAction.Vacate: "vacate_job",
          m.JobAction.VacateFast: "vacate_job -fast", m.JobAction.Suspend: "suspend",
          m.JobAction.Continue: "continue"}


class JobActions:
    """The schedd's answers to ActOnJobs and EditJobs.

    Args:
        schedd: the core it belongs to (its queue, access rules, shadows, claims, lanes).
    """

    def __init__(self, schedd):
        self.schedd = schedd

    def _select(self, ids: tuple[str, ...], constraint: str, now: float) -> tuple[list, int]:
        """The jobs named by ``ids`` (cluster or cluster.proc) or ``constraint``, and how many ids named none."""
        queue = self.schedd.queue
        if not ids:
            return queue.query(constraint, now=now), 0
        jobs, missing = [], 0
        for text in ids:
            cluster, _, proc = text.partition(".")
            found = queue.query(f"ClusterId == {int(cluster)}" + (f" && ProcId == {int(proc)}" if proc else ""))
            missing += not found
            jobs += found
        return jobs, missing

    # -- acting on jobs ---------------------------------------------------------------------

    def act(self, event: c.Received, msg: m.ActOnJobs, now: float, out: list) -> None:
        """Answer ActOnJobs: apply the action to each selected job the peer may change."""
        sd = self.schedd
        access = sd.access
        who = access.user(event)
        reason = msg.reason or f"via htc {_VERBS[msg.action]} (by user {who or 'unknown'})"
        jobs, missing = self._select(msg.ids, msg.constraint, now)
        counts = {"success": 0, "not_found": missing, "bad_status": 0, "already_done": 0,
                  "permission_denied": 0, "error": 0}
        on = _ON_ACTION[msg.action]
        for job in jobs:
            outcome = on(self, job, msg, reason, now, out) if access.may_change(event, job) else "permission_denied"
            counts[outcome] += 1
        out.append(c.Reply(event.conn_id, m.ActOnJobsReply(**counts)))
        if counts["permission_denied"]:
            others = sorted({job.owner for job in jobs if not access.may_change(event, job)})
            out.append(denied_log(event, f"ActOnJobs {msg.action.value}",
                                  f"{counts['permission_denied']} job(s) of {', '.join(others)}: only a job's "
                                  "owner or an administrator acts on it"))
        if msg.action is m.JobAction.Release and counts["success"]:
            for job in jobs:
                again = sd.job(job.job_id)
                if again is not None:
                    sd.lanes.enqueue(again)
            sd.lanes.feed_all(now, out)
            sd.claims.use_lingering(now, out)
            sd.new_work(now)  # released jobs are idle work, like a submit
        else:
            sd.changed()

    def _remove(self, job, msg: m.ActOnJobs, reason: str, now: float, out: list) -> str:
        sd = self.schedd
        q, status, job_id = sd.queue, JobStatus(job.status), job.job_id
        if status == JobStatus.COMPLETED or (status == JobStatus.REMOVED and msg.action is m.JobAction.Remove):
            return "already_done"
        fast = msg.action is m.JobAction.RemoveX
        if job_id in sd.local:
            # A scheduler/local universe job's process gets its kill signal; the job leaves the
            # queue, with its Aborted event, once the process is gone (local_jobs).
            if status != JobStatus.REMOVED:
                q.remove(job_id, reason, now=now)
            sd.local.stop(job_id, "remove", fast, now, out, abort_due=status != JobStatus.REMOVED, reason=reason)
            self.remove_others(job, now, out)
            return "success"
        if status != JobStatus.REMOVED:
            with q.transaction():  # the event goes into the outbox with the change (schedd.owed)
                q.remove(job_id, reason, now=now)
                out += owe(q, ul.write(job, ul.aborted_event(job, reason, now)))
        if status in ACTIVE_STATES or status == JobStatus.REMOVED:
            if not sd.shadows.stop(job_id, "remove", fast, now, out) or fast:
                self._forget_run(job_id, now)
        self.remove_others(job, now, out)
        return "success"

    def remove_others(self, job, now: float, out: list) -> None:
        """The removed ``job``'s ``OtherJobRemoveRequirements`` (a constraint; DAGMan's job sets
        ``DAGManJobId =?= <its cluster>``): remove the jobs it matches too, as HTCondor's schedd
        does (``removeOtherJobs``), each of them with its own others in turn."""
        sd = self.schedd
        constraint = ul.literal(job, "OtherJobRemoveRequirements")
        if not isinstance(constraint, str) or not constraint.strip():
            return
        try:
            others = sd.queue.query(constraint, now=now)
        except UsageError as exc:
            out.append(c.Log(f"job {job.cluster_id}.{job.proc_id}: OtherJobRemoveRequirements = {constraint} "
                             f"cannot be evaluated ({exc}); no other job removed"))
            return
        reason = (f"removed because <OtherJobRemoveRequirements = {constraint}> fired when job "
                  f"({job.cluster_id}.{job.proc_id}) was removed")
        out.append(c.Log(f"Constraint <OtherJobRemoveRequirements = {constraint}> fired because job "
                         f"({job.cluster_id}.{job.proc_id}) was removed: {len(others)} job(s) match"))
        msg = m.ActOnJobs(action=m.JobAction.Remove, constraint=constraint)
        for other in others:
            if other.job_id != job.job_id and JobStatus(other.status) not in (JobStatus.REMOVED, JobStatus.COMPLETED):
                self._remove(other, msg, reason, now, out)

    def _hold(self, job, msg: m.ActOnJobs, reason: str, now: float, out: list) -> str:
        sd = self.schedd
        q, status, job_id = sd.queue, JobStatus(job.status), job.job_id
        if status == JobStatus.HELD:
            return "already_done"
        if status in (JobStatus.REMOVED, JobStatus.COMPLETED):
            return "bad_status"
        code = msg.reason_code if msg.reason_code is not None else HoldReasonCode.UserRequest
        subcode = msg.reason_subcode or 0
        with q.transaction():
            q.hold(job_id, reason, code=code, subcode=subcode, now=now)
            out += owe(q, ul.write(job, ul.held_event(job, reason, code, subcode, now)))
        if status in ACTIVE_STATES:
            sd.stop_run(job_id, "hold", False, now, out)
        return "success"

    def _release(self, job, msg: m.ActOnJobs, reason: str, now: float, out: list) -> str:
        q = self.schedd.queue
        if JobStatus(job.status) != JobStatus.HELD:
            return "bad_status"
        spooling = ul.awaits_spooled_input(job)
        if spooling and "HTCSpooledInput" not in job:
            # Its input has not arrived (schedd.spool releases it once it has): as HTCondor's
            # condor_release (AR_BAD_STATUS), which would run it without its input, its UserLog
            # the submitter's file.
            return "bad_status"
        with q.transaction():
            q.release(job.job_id, reason, now=now)
            if not spooling:  # (HTCondor releases a spooled job with write_to_user_log false)
                out += owe(q, ul.write(job, ul.released_event(job, reason, now)))
        return "success"

    def _vacate(self, job, msg: m.ActOnJobs, reason: str, now: float, out: list) -> str:
        if JobStatus(job.status) not in ACTIVE_STATES:
            return "bad_status"
        fast = msg.action is m.JobAction.VacateFast
        return "success" if self.schedd.stop_run(job.job_id, "vacate", fast, now, out, reason=reason) else "bad_status"

    def _suspend_or_continue(self, job, msg: m.ActOnJobs, reason: str, now: float, out: list) -> str:
        # The startd's starter stops or resumes the job; the queue follows once the startd has
        # done it (see Shadows._suspension_answered).
        sd = self.schedd
        suspend = msg.action is m.JobAction.Suspend
        wanted = JobStatus.RUNNING if suspend else JobStatus.SUSPENDED
        shadow = sd.shadows.get(job.job_id)
        claim = sd.claims.get(shadow.claim_id) if shadow is not None else None
        if JobStatus(job.status) != wanted or claim is None:
            return "bad_status"
        request = m.Suspend(claim_id=claim.id, reason=reason) if suspend else m.Continue(claim_id=claim.id)
        out.append(Call(claim.startd, request,
                        cookie=(Answer.SUSPEND if suspend else Answer.CONTINUE, job.job_id, claim.id)))
        return "success"

    def _forget_run(self, job_id, now: float) -> None:
        """condor_rm -forcex: the job leaves the queue now, whatever its starter still does."""
        sd = self.schedd
        shadow = sd.shadows.get(job_id)
        sd.shadows.forget(job_id)
        job = sd.job(job_id)
        if job is not None and job.status == JobStatus.REMOVED:
            with sd.queue.transaction():
                if shadow is not None:  # the time it ran stays the job's
                    record_run_time(sd.queue, shadow, sd.claims.get(shadow.claim_id), job, now)
                sd.queue.retire(job_id, now=now)

    # -- edit -----------------------------------------------------------------------------------

    def edit(self, event: c.Received, msg: m.EditJobs, now: float, out: list) -> None:
        """Answer EditJobs: set the attributes on every selected job, all or none.

        Raises:
            Denied: a selected job is not the peer's (and the peer no administrator).
        """
        sd = self.schedd
        queue = sd.queue
        jobs, _ = self._select(msg.ids, msg.constraint, now)
        others = sorted({job.owner for job in jobs if not sd.access.may_change(event, job)})
        if others:
            text = f"you may not edit jobs of {', '.join(others)}; select only your own jobs"
            out.append(denied_log(event, "EditJobs", text))
            raise Denied(text)
        events = []
        with queue.transaction():  # all edits, or none
            for job in jobs:
                for attr, text in msg.attributes.items():
                    if attr.lower() == "jobprio":
                        old = queue.set_prio(job.job_id, int_literal("JobPrio", text))
                        old_text = str(old)
                    else:
                        old_text = queue.edit(job.job_id, attr, text)
                    events += ul.write(job, ul.attribute_update_event(job, attr, text, old_text, now))
            out += owe(queue, events)
        out.append(c.Reply(event.conn_id, m.EditReply(matched=len(jobs))))
        sd.matches.forget_reuse_order()  # priorities or requirements may have changed
        sd.changed()


#: each action -> how it is applied to one job (returns the outcome counted in the reply)
_ON_ACTION = {
    m.JobAction.Remove: JobActions._remove,
    m.JobAction.RemoveX: JobActions._remove,
    m.JobAction.Hold: JobActions._hold,
    m.JobAction.Release: JobActions._release,
    m.JobAction.Vacate: JobActions._vacate,
    m.JobAction.VacateFast: JobActions._vacate,
    m.JobAction.Suspend: JobActions._suspend_or_continue,
    m.JobAction.Continue: JobActions._suspend_or_continue,
}
