"""What the startd tells the schedd and the shadow about their claims and jobs.

Theory of operation
-------------------
Reports, with the shadow's conventions (:mod:`htc.daemons.schedd.shadows`): usage goes to the claim's
shadow as StarterUpdate every STARTER_UPDATE_INTERVAL (the first after
STARTER_INITIAL_UPDATE_INTERVAL) and at once when the job is suspended or continued, with
``JobState`` (``"Running"``/``"Suspended"``) and ``JobStateSequence``, a number that grows with
every suspension or continuation and that the answer to a Suspend/Continue carries as well
(``Ack.sequence``), so the shadow can tell a stale state from a new one. A job's streamed stdout/stderr goes to the
shadow as JobOutput, sent by the service itself (:mod:`htc.daemons.starter.stream`; it asks
:meth:`JobReports.output_target` where to), all of it before the exit is reported. The
exit goes as JobExited and is retried until the shadow takes it or the claim ends, so a
schedd that is briefly away (within the claim lease) still learns how its job ended. A job
that could not be started is reported as a vacated JobExited whose usage ad has
``StarterError`` and ``HoldReasonCode`` (6 FailedToCreateProcess, 13 TransferInputError);
output that could not be transferred adds ``StarterError`` with code 12
(TransferOutputError); a vacated job carries ``VacateReason``, and a job that ended by itself
while its claim was ending (a vacate that came after the exit) ``ClaimEnding``, so the schedd
does not offer that claim to another job. A vacated standard-universe job
carries ``VacateCheckpointed`` (the image its vacate wrote was kept by the schedd's checkpoint
store) and, when it was not, ``VacateCheckpointError``: such a job is not held but requeued, to
resume from its previous image (or from the start without one), as Condor's standard universe
did; the schedd notes it in the evicted event (:func:`htc.daemons.schedd.userlog.evicted_event`).
A periodic image that fails only makes a line in the starter's log. A job the core holds for
breaking its AllowedExecuteDuration (:class:`~htc.daemons.startd.events.HoldJob`) is killed
(``KillJob`` to the service) and its JobExited carries the hold request (``hold_code`` 47,
``hold_subcode``, ``hold_reason``), which the shadow applies.
A claim the startd ends itself (owner back, lease expired, drain, vacate) is reported to the
schedd with ReleaseClaim. A delivered report renews the claim's lease like a keep-alive: the
schedd is evidently there.

The reports are :class:`JobReports`, an object the wire adapter
(:class:`~htc.daemons.startd.adapter.StartdDaemon`) holds and feeds with the service's starter
events; it keeps a :class:`Contact` per claim.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from htc.daemons import core as c
from htc.daemons.startd import events as ev
from htc.daemons.calls import Call, CallFailed
from htc.daemons.startd.ads import ad_text
from htc.daemons.startd.settings import StartdServiceSettings
from htc.jobqueue.states import HoldReasonCode
from htc.wire import messages as m

__all__ = ["CLAIM_ENDING", "Contact", "JobReports", "short_claim_id"]

#: the exit report's attribute saying the claim is ending though the job ended by itself (why)
CLAIM_ENDING = "ClaimEnding"


@dataclass
class Contact:
    """Who to tell about one claim, and what is still to be told."""

    claim_id: str
    schedd_name: str
    schedd_address: str
    submitter: str
    shadow_address: str = ""
    job_id: str = "0.0"
    activation_conn: int | None = None   # the ActivateClaim being answered
    exit_report: m.JobExited | None = None
    exit_retry_at: float | None = None
    hold: ev.HoldJob | None = None       # the running job is being killed to be held


def short_claim_id(claim_id: str) -> str:
    """A claim id without its secret part, for logs and messages."""
    return claim_id.rsplit("#", 1)[0] + "#..." if claim_id.count("#") >= 2 else claim_id


class JobReports:
    """The startd's reports to the schedd's shadow about its claims' jobs (see the module docstring).

    Args:
        settings: the service settings (the adapter replaces them on reconfig).
    """

    def __init__(self, settings: StartdServiceSettings):
        self.settings = settings
        self.contacts: dict[str, Contact] = {}
        self.suspended: set[str] = set()       # claims whose job is stopped
        self.state_sequence = 0                # counts suspensions and continuations (JobStateSequence)

    def state_changed(self, claim_id: str, suspended: bool, running: bool, out: list[c.Action]) -> None:
        """The job of ``claim_id`` was suspended or continued: tell its shadow (when ``running``)."""
        self.state_sequence += 1
        if suspended:
            self.suspended.add(claim_id)
        else:
            self.suspended.discard(claim_id)
        self.send_update(claim_id, {}, running, out)

    def activation_answered(self, a: ev.ReplyActivate, out: list[c.Action]) -> None:
        """Answer the ActivateClaim the core accepted or refused."""
        contact = self.contacts.get(a.claim_id)
        if contact is None:
            return
        if a.accepted:
            contact.exit_report, contact.exit_retry_at = None, None  # the previous run was reported
            contact.hold = None
        if contact.activation_conn is not None:
            out.append(c.Reply(contact.activation_conn, m.Ack(detail=f"starting job {contact.job_id}")
                               if a.accepted else m.ErrorReply(code="bad_request", message=a.reason)))
            contact.activation_conn = None

    def hold(self, a: ev.HoldJob, out: list[c.Action]) -> None:
        """The core holds the running job: kill it; its exit report carries the hold."""
        contact = self.contacts.get(a.claim_id)
        if contact is not None:
            contact.hold = a
        out.append(c.Log(f"claim {short_claim_id(a.claim_id)}: killing job "
                         f"{contact.job_id if contact else '?'} to hold it: {a.reason}"))
        out.append(ev.KillJob(a.slot, a.claim_id))

    def claim_ended(self, a: ev.ClaimEnded, out: list[c.Action]) -> None:
        """The startd ended a claim by itself: tell its schedd (ReleaseClaim) and forget it."""
        out.append(c.Log(f"claim {short_claim_id(a.claim_id)} on {a.slot} ended: {a.reason}"))
        contact = self.contacts.pop(a.claim_id, None)
        if contact is not None:
            out.append(c.Send(contact.schedd_address, m.ReleaseClaim(claim_id=a.claim_id, reason=a.reason),
                              cookie=("ended", a.claim_id)))

    def output_target(self, claim_id: str) -> tuple[str, str] | None:
        """Where the running job of ``claim_id`` streams its output: ``(shadow address, job id)``;
        None when the claim has no shadow (any more). The service's streamer asks before each
        chunk (:mod:`htc.daemons.starter.stream`): a reconnecting shadow may listen elsewhere."""
        contact = self.contacts.get(claim_id)
        if contact is None or not contact.shadow_address:
            return None
        return contact.shadow_address, contact.job_id

    def send_update(self, claim_id: str, usage: dict[str, Any], running: bool, out: list[c.Action]) -> None:
        """Send the shadow the job's usage (when its starter is ``running``)."""
        contact = self.contacts.get(claim_id)
        if contact is None or not contact.shadow_address or not running:
            return
        ad = dict(usage, JobState="Suspended" if claim_id in self.suspended else "Running",
                  JobStateSequence=self.state_sequence)
        out.append(c.Send(contact.shadow_address, m.StarterUpdate(claim_id=claim_id, job_id=contact.job_id,
                                                                  update_ad=ad_text(ad)), cookie=("update", claim_id)))

    def started(self, e: ev.StarterStarted, out: list[c.Action]) -> None:
        """The job is running: log it."""
        contact = self.contacts.get(e.claim_id)
        out.append(c.Log(f"claim {short_claim_id(e.claim_id)}: job {contact.job_id if contact else '?'} is running"))

    def failed(self, e: ev.StarterFailed, out: list[c.Action]) -> None:
        """The job could not start: report a vacated exit with the hold the job asks for."""
        self.suspended.discard(e.claim_id)
        contact = self.contacts.get(e.claim_id)
        out.append(c.Log(f"claim {short_claim_id(e.claim_id)}: the job could not start: {e.error}", logging.WARNING))
        if contact is not None and contact.shadow_address:
            usage = {"StarterError": e.error, "HoldReasonCode": e.hold_code, "HoldReasonSubCode": e.hold_subcode}
            contact.exit_report = m.JobExited(claim_id=e.claim_id, job_id=contact.job_id, vacated=True,
                                              usage_ad=ad_text(usage))
            out.append(self.report_exit(contact))

    def exited(self, e: ev.StarterExited, end_reason: str, out: list[c.Action]) -> None:
        """The job is gone: report its exit (``end_reason``: why its claim is ending, if it is)."""
        self.suspended.discard(e.claim_id)
        r = e.record
        contact = self.contacts.get(e.claim_id)
        how = f"signal {r.exit_signal}" if r.exit_signal is not None else f"exit code {r.exit_code}"
        out.append(c.Log(f"claim {short_claim_id(e.claim_id)}: job {contact.job_id if contact else '?'} ended with {how}"
                         f"{' (vacated)' if r.vacated else ''}"))
        if contact is None or not contact.shadow_address:
            return
        usage = r.to_ad()
        transfer_error = r.transfer_error
        if r.vacated and r.vacate_checkpointed is not None:
            # a standard job's vacate image: kept, or not (then it resumes from its previous one)
            usage["VacateCheckpointed"] = r.vacate_checkpointed
            if r.checkpoint_error:
                usage["VacateCheckpointError"] = r.checkpoint_error
        elif r.checkpoint_error:  # (an image written without a vacate: the job's own SIGTSTP)
            transfer_error = "; ".join(filter(None, (transfer_error, r.checkpoint_error)))
        if transfer_error:
            usage.update(StarterError=f"output transfer failed: {transfer_error}",
                         HoldReasonCode=int(HoldReasonCode.TransferOutputError), HoldReasonSubCode=0)
        if r.oom_killed:
            usage["JobOOMKilled"] = True
        if r.vacated:
            usage["VacateReason"] = end_reason or "the job was vacated from its slot"
        elif end_reason:  # it ended by itself before a vacate reached it, but its claim is ending
            usage[CLAIM_ENDING] = end_reason
        hold = contact.hold if r.vacated else None  # a job that ended by itself first is not held
        contact.exit_report = m.JobExited(
            claim_id=e.claim_id, job_id=contact.job_id, exit_code=r.exit_code, exit_signal=r.exit_signal,
            core_dumped=r.core_dumped, vacated=r.vacated, usage_ad=ad_text(usage),
            hold_code=hold.code if hold else None, hold_subcode=hold.subcode if hold else 0,
            hold_reason=hold.reason if hold else "")
        contact.hold = None
        out.append(self.report_exit(contact))

    def exit_delivered(self, e: Any, contact: Contact, ok: bool, now: float, out: list[c.Action]) -> None:
        """The shadow took (``ok``), refused or did not get the exit report of ``contact``'s job."""
        if ok:
            contact.exit_report = None
        elif isinstance(e, CallFailed) and e.refused:
            out.append(c.Log(f"the shadow at {e.to} refused the exit of job {contact.job_id}: {e.error}",
                             logging.WARNING))
            contact.exit_report = None
        else:
            contact.exit_retry_at = now + self.settings.retry_interval
            out.append(c.Log(f"cannot tell {e.to} that job {contact.job_id} ended ({e.error}); retrying "
                             "while the claim lasts", logging.WARNING))

    def report_exit(self, contact: Contact) -> Call:
        """The call that reports the exit of ``contact``'s job (again)."""
        contact.exit_retry_at = None
        assert contact.exit_report is not None
        return Call(contact.shadow_address, contact.exit_report, cookie=("exit", contact.claim_id))

    def retry_deadline(self) -> float | None:
        """When the next exit report is to be sent again."""
        return min((ct.exit_retry_at for ct in self.contacts.values() if ct.exit_retry_at is not None), default=None)

    def retry(self, now: float, out: list[c.Action]) -> None:
        """Send again the exit reports whose retry time has come."""
        for contact in self.contacts.values():
            if contact.exit_retry_at is not None and now >= contact.exit_retry_at and contact.exit_report:
                out.append(self.report_exit(contact))
