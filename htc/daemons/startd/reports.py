"""What the startd tells the schedd and the shadow about their claims and jobs.

Theory of operation
-------------------
Reports, with the shadow's conventions (:mod:`htc.daemons.schedd.shadow`): usage goes to the claim's
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
(TransferOutputError); a vacated job carries ``VacateReason``. A job the core holds for
breaking its AllowedExecuteDuration (:class:`~htc.daemons.startd.events.HoldJob`) is killed
(``KillJob`` to the service) and its JobExited carries the hold request (``hold_code`` 47,
``hold_subcode``, ``hold_reason``), which the shadow applies.
A claim the startd ends itself (owner back, lease expired, drain, vacate) is reported to the
schedd with ReleaseClaim. A delivered report renews the claim's lease like a keep-alive: the
schedd is evidently there.

The adapter keeps a :class:`Contact` per claim; the reports are :class:`JobReports`, a mixin
of :class:`~htc.daemons.startd.wire.StartdDaemon` fed with the service's starter events.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from htc.daemons import core as c
from htc.daemons.startd import events as ev
from htc.daemons.calls import Call, CallFailed
from htc.daemons.startd.ads import ad_text
from htc.daemons.startd.service_events import StarterExited, StarterFailed, StarterStarted, StarterUsage
from htc.wire import messages as m

__all__ = ["Contact", "JobReports", "short_claim_id"]


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
    """The startd's reports to the shadow about its job.

    A mixin of :class:`htc.daemons.startd.wire.StartdDaemon`.
    """

    def _job_state_changed(self, claim_id: str, suspended: bool, out: list[c.Action]) -> None:
        self.state_sequence += 1
        if suspended:
            self.suspended.add(claim_id)
        else:
            self.suspended.discard(claim_id)
        self._send_update(claim_id, {}, out)

    def output_target(self, claim_id: str) -> tuple[str, str] | None:
        """Where the running job of ``claim_id`` streams its output: ``(shadow address, job id)``;
        None when the claim has no shadow (any more). The service's streamer asks before each
        chunk (:mod:`htc.daemons.starter.stream`): a reconnecting shadow may listen elsewhere."""
        contact = self.contacts.get(claim_id)
        if contact is None or not contact.shadow_address:
            return None
        return contact.shadow_address, contact.job_id

    def _send_update(self, claim_id: str, usage: dict[str, Any], out: list[c.Action]) -> None:
        contact = self.contacts.get(claim_id)
        if contact is None or not contact.shadow_address or claim_id not in self.running:
            return
        ad = dict(usage, JobState="Suspended" if claim_id in self.suspended else "Running",
                  JobStateSequence=self.state_sequence)
        out.append(c.Send(contact.shadow_address, m.StarterUpdate(claim_id=claim_id, job_id=contact.job_id,
                                                                  update_ad=ad_text(ad)), cookie=("update", claim_id)))

    def _on_started(self, e: StarterStarted, out: list[c.Action]) -> None:
        contact = self.contacts.get(e.claim_id)
        out.append(c.Log(f"claim {short_claim_id(e.claim_id)}: job {contact.job_id if contact else '?'} is running"))

    def _on_failed(self, e: StarterFailed, now: float, out: list[c.Action]) -> None:
        self.running.discard(e.claim_id)
        self.suspended.discard(e.claim_id)
        contact = self.contacts.get(e.claim_id)
        out.append(c.Log(f"claim {short_claim_id(e.claim_id)}: the job could not start: {e.error}", logging.WARNING))
        if contact is not None and contact.shadow_address:
            usage = {"StarterError": e.error, "HoldReasonCode": e.hold_code, "HoldReasonSubCode": 0}
            contact.exit_report = m.JobExited(claim_id=e.claim_id, job_id=contact.job_id, vacated=True,
                                              usage_ad=ad_text(usage))
            out.append(self._report_exit(contact))
        self._core_quietly(ev.JobExited(e.claim_id), now, out)
        self._maybe_finish_stop(now, out)

    def _on_usage(self, e: StarterUsage, now: float, out: list[c.Action]) -> None:
        self._core_quietly(ev.JobUpdate(e.claim_id, e.attrs), now, out)
        self._send_update(e.claim_id, e.attrs, out)

    def _on_exited(self, e: StarterExited, now: float, out: list[c.Action]) -> None:
        self.running.discard(e.claim_id)
        self.suspended.discard(e.claim_id)
        r = e.record
        contact = self.contacts.get(e.claim_id)
        how = f"signal {r.exit_signal}" if r.exit_signal is not None else f"exit code {r.exit_code}"
        out.append(c.Log(f"claim {short_claim_id(e.claim_id)}: job {contact.job_id if contact else '?'} ended with {how}"
                         f"{' (vacated)' if r.vacated else ''}"))
        if contact is not None and contact.shadow_address:
            usage = r.to_ad()
            if r.transfer_error:
                usage.update(StarterError=f"output transfer failed: {r.transfer_error}", HoldReasonCode=12,
                             HoldReasonSubCode=0)
            if r.oom_killed:
                usage["JobOOMKilled"] = True
            if r.vacated:
                claim = self._claim(e.claim_id)
                usage["VacateReason"] = (claim.end_reason if claim is not None and claim.end_reason
                                         else "the job was vacated from its slot")
            hold = contact.hold if r.vacated else None  # a job that ended by itself first is not held
            contact.exit_report = m.JobExited(
                claim_id=e.claim_id, job_id=contact.job_id, exit_code=r.exit_code, exit_signal=r.exit_signal,
                core_dumped=r.core_dumped, vacated=r.vacated, usage_ad=ad_text(usage),
                hold_code=hold.code if hold else None, hold_subcode=hold.subcode if hold else 0,
                hold_reason=hold.reason if hold else "")
            contact.hold = None
            out.append(self._report_exit(contact))
        self._core_quietly(ev.JobExited(e.claim_id), now, out)
        self._maybe_finish_stop(now, out)

    def _claim(self, claim_id: str):
        for slot in self.startd.slots.values():
            if slot.claim is not None and slot.claim.id == claim_id:
                return slot.claim
        return None

    def _exit_delivered(self, e: Any, contact: Contact, ok: bool, now: float, out: list[c.Action]) -> None:
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

    def _report_exit(self, contact: Contact) -> Call:
        contact.exit_retry_at = None
        assert contact.exit_report is not None
        return Call(contact.shadow_address, contact.exit_report, cookie=("exit", contact.claim_id))

    def _retry_exits(self, now: float, out: list[c.Action]) -> None:
        """Send again the exit reports whose retry time has come."""
        for contact in self.contacts.values():
            if contact.exit_retry_at is not None and now >= contact.exit_retry_at and contact.exit_report:
                out.append(self._report_exit(contact))
