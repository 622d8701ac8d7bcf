"""The startd's wire adapter: wire messages to ``Startd`` core events, core actions to messages.

Theory of operation
-------------------
:class:`StartdDaemon` is the object :class:`~htc.daemons.startd.service.StartdService` (a
:class:`~htc.daemons.service.DaemonService`) drives. It wraps the sans-IO
:class:`htc.daemons.startd.core.Startd` core, which speaks its own events and actions
(:mod:`htc.daemons.startd.events`), and keeps what the core does not: who to tell about each
claim (the schedd's and the shadow's addresses from RequestClaim/ActivateClaim), which
connection waits for which answer, the sensor clock, the per-slot order of ad updates, and
job-exit reports not yet delivered. It reads no clock and touches no socket either, so its
tests are lists of events. The process work it asks for is the service's, and so are the
answers (:mod:`htc.daemons.startd.events`).

Messages served: MatchNotify, RequestClaim (answered with ClaimReply; a claim that preempts a
running one is answered when the slot is free), ActivateClaim (acknowledged when the core
accepts it; the starter then sets the job up; ``lane``: a call lane), RunCalls (checked and
acknowledged once queued for the claim's running lane: :class:`QueueCalls`; the service relays
the results, :mod:`htc.daemons.startd.lanes`), ClaimKeepAlive (with ``watch``: a claim watch, whose
answer is held and whose connection closing means the schedd is gone, :mod:`htc.daemons.startd.watches`),
ReleaseClaim, Vacate, Suspend/Continue (straight to the starter, as condor_suspend reaches HTCondor's starter through
the shadow), DrainJobs and CancelDrainJobs. An ActivateClaim repeated by a reconnecting shadow
for a job that is still running, or that ended and is not yet reported, is refused with
``bad_request`` saying so (the shadow follows the job) and never starts the job twice.

The adapter holds four parts, each an object of its own module: the reports of jobs to their
shadow and claims to their schedd (usage, exit, hold, a claim ended;
:class:`~htc.daemons.startd.reports.JobReports`), the slot ads to the collector
(:class:`~htc.daemons.startd.ads.SlotAds`), the claim watches
(:class:`~htc.daemons.startd.watches.ClaimWatches`) and the claim requests waiting for their
answer (:class:`~htc.daemons.startd.claim_requests.ClaimRequests`). Events, messages and core actions are
dispatched by their type through the tables at the end of this module. A claim the startd ends itself (owner
back, lease expired, drain, vacate) is reported to the schedd with ReleaseClaim. A delivered
report renews the claim's lease like a keep-alive: the schedd is evidently there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from htc.classad import ClassAdParseError
from htc.daemons import core as c
from htc.daemons.calls import CallDone, CallFailed
from htc.daemons.startd import events as ev
from htc.daemons.startd.ads import SlotAds, ad_text, job_id_of
from htc.daemons.startd.jobads import JobAdReader
from htc.daemons.startd.claim_requests import ClaimRequests
from htc.daemons.startd.core import Startd
from htc.daemons.startd.lanes import refused_call
from htc.daemons.startd.periodic_checkpoint import PeriodicCheckpoints
from htc.daemons.startd.reports import Contact, JobReports, short_claim_id
from htc.daemons.startd.settings import StartdServiceSettings, keep_layout
from htc.daemons.startd.slots import UnknownClaim, claim_holder, live_claim_ids
from htc.daemons.startd.watches import UNWATCHED_GRACE, ClaimWatches, Watch
from htc.errors import HTCError, UsageError
from htc.wire import messages as m
from htc.wire.messages.schema import built_here

__all__ = ["StartdDaemon"]

#: requests a startd that is shutting down refuses
_REFUSED_WHILE_STOPPING = frozenset({m.RequestClaim, m.ActivateClaim, m.MatchNotify})


class _NoSuchSlot(HTCError):
    """A message named a slot this startd does not have."""


class StartdDaemon:
    """The wire adapter around a :class:`Startd` core (see the module docstring).

    Args:
        settings: the service settings (the core's are ``settings.startd``).
        now: when the startd starts.
    """

    def __init__(self, settings: StartdServiceSettings, now: float):
        self.settings = settings
        self.startd = Startd(settings.startd, now)
        self.reports = JobReports(settings)
        self.ads = SlotAds(settings, now)
        self.claim_watches = ClaimWatches()
        self.running: set[str] = set()         # claims whose starter is alive
        self.periodic_checkpoints = PeriodicCheckpoints()  # PERIODIC_CHECKPOINT (its own module)
        self.lanes: set[str] = set()           # running claims whose job is a call lane
        self.requests = ClaimRequests()        # claim requests waiting for their answer
        self._next_sample: float | None = None
        self._sampled = False
        self._last_core_tick = now
        self._stopping: tuple[float, bool] | None = None   # (deadline, fast)
        self._exited = False
        self._job_ads = JobAdReader()  # the job ads of RequestClaim and ActivateClaim
        self._now = now

    @property
    def contacts(self) -> dict[str, Contact]:
        """Who to tell about each claim (kept by the job reports)."""
        return self.reports.contacts

    @property
    def watches(self) -> dict[str, Watch]:
        """The claim watches held, by claim id (kept by the claim watches)."""
        return self.claim_watches.watches

    def output_target(self, claim_id: str) -> tuple[str, str] | None:
        """Where the running job of ``claim_id`` sends its output (see :meth:`JobReports.output_target`)."""
        return self.reports.output_target(claim_id)

    # --- the core interface ---------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The next sample, core timer, retry or stop deadline."""
        times = [self._next_sample, self.ads.deadline(), self.claim_watches.deadline(), self.reports.retry_deadline()]
        if self._sampled:
            core_next = self.startd.next_deadline()
            if core_next is not None and core_next <= self._last_core_tick:
                # A core timer that a Tick did not move (a lease that expired while the slot was
                # already preempting): look again at the next sample instead of spinning.
                core_next = self._last_core_tick + self.settings.sample_interval
            times.append(core_next)
        if self._stopping is not None:
            times.append(self._stopping[0])
        return min((t for t in times if t is not None), default=None)

    def handle(self, event: c.Event, now: float) -> list[c.Action]:
        """Apply one event; return what the service must do."""
        out: list[c.Action] = []
        if self._exited:
            return out
        self._now = now
        c.dispatch(_ON_EVENT, "startd", self, event, now, out)
        return out

    # --- driving the core -------------------------------------------------------------------

    def _core(self, event: Any, now: float, out: list[c.Action]) -> None:
        """Hand ``event`` to the core and translate what it returns."""
        for action in self.startd.handle(event, now):
            translate = _TRANSLATE.get(type(action))
            if translate is None:
                raise TypeError(f"startd: the adapter cannot translate {action!r}")
            translate(self, action, now, out)
        self._forget_ended_claims()

    def _core_quietly(self, event: Any, now: float, out: list[c.Action]) -> None:
        """Feed a report about a claim that may have ended meanwhile."""
        try:
            self._core(event, now, out)
        except UnknownClaim as exc:
            out.append(c.Log(f"ignoring {type(event).__name__}: {exc}"))

    def _parse_job(self, text: str) -> dict[str, Any]:
        return self._job_ads.read(text)  # (each definition's text parsed once: startd/jobads.py)

    def _live_claims(self) -> set[str]:
        return live_claim_ids(self.startd.slots.values())

    def _forget_ended_claims(self) -> None:
        # A claim the schedd released ends without ClaimEnded: forget its contact too.
        live = self._live_claims() | self.running
        for claim_id in [cid for cid in self.contacts if cid not in live]:
            del self.contacts[claim_id]
        self.lanes &= self.running

    # --- the core's actions -------------------------------------------------------------------

    def _advertise(self, a: ev.AdvertiseSlot, now: float, out: list[c.Action]) -> None:
        self.ads.advertise(a, now, out)

    def _invalidate(self, a: ev.InvalidateSlot, now: float, out: list[c.Action]) -> None:
        self.ads.invalidate(a, out)

    def _reply_activate(self, a: ev.ReplyActivate, now: float, out: list[c.Action]) -> None:
        self.reports.activation_answered(a, out)

    def _start_starter(self, a: ev.StartStarter, now: float, out: list[c.Action]) -> None:
        contact = self.contacts.get(a.claim_id)
        if contact is not None:
            contact.job_id = job_id_of(a.job_ad)
        self.running.add(a.claim_id)
        if a.lane:
            self.lanes.add(a.claim_id)
        else:
            self.lanes.discard(a.claim_id)
        out.append(ev.RunStarter(a.slot, a.claim_id, dict(a.job_ad), dict(a.slot_ad), a.lane))

    def _to_starter(self, a: Any, now: float, out: list[c.Action]) -> None:
        out.append(a)  # the service carries it out on the claim's starter

    def _suspend_or_continue_job(self, a: ev.SuspendJob | ev.ContinueJob, now: float, out: list[c.Action]) -> None:
        out.append(a)
        self.reports.state_changed(a.claim_id, type(a) is ev.SuspendJob, a.claim_id in self.running, out)

    def _hold_job(self, a: ev.HoldJob, now: float, out: list[c.Action]) -> None:
        self.reports.hold(a, out)

    def _claim_ended(self, a: ev.ClaimEnded, now: float, out: list[c.Action]) -> None:
        self.reports.claim_ended(a, out)

    def _reply_claim(self, a: ev.ReplyClaim, now: float, out: list[c.Action]) -> None:
        waiter = self.requests.answered(a.claim_id)
        if waiter is None:
            out.append(c.Log(f"claim {short_claim_id(a.claim_id)} on {a.slot}: nobody waits for the answer", logging.WARNING))
            return
        request = waiter.msg
        if a.accepted:
            self.contacts[a.claim_id] = Contact(a.claim_id, request.schedd_name, request.schedd_address,
                                                request.submitter)
            self.claim_watches.granted(a.claim_id, now, waiter.uid, self._live_claims())
            out.append(c.Log(f"{a.slot} claimed by {request.schedd_name} for {request.submitter}"))
        out.append(c.Reply(waiter.conn_id, m.ClaimReply(claim_id=a.claim_id, accepted=a.accepted,
                                                        slot_ad=ad_text(a.slot_ad) if a.slot_ad else "",
                                                        reason=a.reason)))

    # --- messages ---------------------------------------------------------------------------

    def _on_received(self, e: c.Received, now: float, out: list[c.Action]) -> None:
        msg = e.msg
        if self._stopping is not None and type(msg) in _REFUSED_WHILE_STOPPING:
            out.append(c.Reply(e.conn_id, m.ErrorReply(code="unavailable", message=(
                f"startd {self.settings.startd.name!r} is shutting down; ask the negotiator for another slot"))))
            return
        handler = _ON_MESSAGE.get(type(msg))
        if handler is None:
            out.append(c.unknown_request(e, "startd"))
            return
        try:
            handler(self, e, msg, now, out)
        except (UnknownClaim, _NoSuchSlot) as exc:
            out.append(c.Reply(e.conn_id, m.ErrorReply(code="not_found", message=str(exc))))
        except ClassAdParseError as exc:
            out.append(c.bad_request(e, f"{type(msg).__name__}: the job ad is not a ClassAd: {exc}"))

    def _slot_or_fail(self, name: str) -> str:
        try:
            return self.startd.slot(name).name
        except UsageError as exc:
            raise _NoSuchSlot(str(exc)) from None

    def _slot_of_claim(self, claim_id: str) -> str:
        slot = claim_holder(self.startd.slots.values(), claim_id)
        if slot is None:
            raise UnknownClaim(f"{self.settings.startd.name} holds no claim {short_claim_id(claim_id)}; it ended or "
                               "never existed -- drop it and ask the negotiator for a new match")
        return slot.name

    def _match_notify(self, e: c.Received, msg: m.MatchNotify, now: float, out: list[c.Action]) -> None:
        self._core(ev.MatchNotified(self._slot_or_fail(msg.slot_name), msg.claim_id), now, out)
        out.append(c.Reply(e.conn_id, m.Ack()))

    def _keep_alive(self, e: c.Received, msg: m.ClaimKeepAlive, now: float, out: list[c.Action]) -> None:
        self._core(ev.KeepAlive(msg.claim_id), now, out)
        if msg.watch > 0:
            self.claim_watches.hold(e, msg, now, out)  # answered later (htc.daemons.startd.watches)
        else:
            out.append(c.Reply(e.conn_id, m.Ack()))

    def _vacate(self, e: c.Received, msg: m.Vacate, now: float, out: list[c.Action]) -> None:
        slots = [self._slot_of_claim(msg.claim_id)] if msg.claim_id else \
            [self._slot_or_fail(name) for name in msg.slot_names]
        for slot in slots:
            self._core(ev.Vacate(slot, fast=msg.fast), now, out)
        out.append(c.Reply(e.conn_id, m.Ack(detail=f"vacating {', '.join(slots)}")))

    def _drain(self, e: c.Received, msg: m.DrainJobs, now: float, out: list[c.Action]) -> None:
        self._core(ev.Drain(msg.how, msg.resume_on_completion, msg.reason), now, out)
        out.append(c.Reply(e.conn_id, m.Ack(detail=f"draining ({msg.how})")))

    def _cancel_drain(self, e: c.Received, msg: m.CancelDrainJobs, now: float, out: list[c.Action]) -> None:
        self._core(ev.CancelDrain(), now, out)
        out.append(c.Reply(e.conn_id, m.Ack(detail="drain cancelled")))

    def _request_claim(self, e: c.Received, msg: m.RequestClaim, now: float, out: list[c.Action]) -> None:
        # A claim id is "<slot name>#<n>#<secret>": the slot it was advertised by comes first.
        slot = self._slot_or_fail(msg.claim_id.split("#", 1)[0])
        job = self._parse_job(msg.job_ad)
        self.requests.begin(e.conn_id, msg, e.peer.uid if e.peer is not None else None)
        try:
            self._core(ev.RequestClaim(slot, msg.claim_id, job, msg.schedd_name, lease=msg.lease_duration), now, out)
        finally:
            if self.requests.end() is not None:
                # No answer yet: the claim preempts a running job and is answered when the slot is free.
                out.append(c.Log(f"claim request from {msg.schedd_name} for {slot} waits for the running job "
                                 "to retire"))

    def _activate(self, e: c.Received, msg: m.ActivateClaim, now: float, out: list[c.Action]) -> None:
        job = self._parse_job(msg.job_ad)
        contact = self.contacts.get(msg.claim_id)
        if contact is None:
            self._slot_of_claim(msg.claim_id)  # raises UnknownClaim for a claim nobody holds
            out.append(c.bad_request(e, f"claim {short_claim_id(msg.claim_id)} is held by a claim request this startd "
                                        "no longer knows; claim the slot again"))
            return
        contact.shadow_address = msg.shadow_address  # a restarted schedd may listen elsewhere
        if msg.claim_id in self.running:
            out.append(c.bad_request(e, f"claim {short_claim_id(msg.claim_id)} is already running job {contact.job_id}; "
                                        "its starter keeps reporting to the shadow"))
            return
        if contact.exit_report is not None and contact.job_id == job_id_of(job):
            out.append(c.bad_request(e, f"job {contact.job_id} already ended on claim {short_claim_id(msg.claim_id)}; "
                                        "its JobExited is on the way again"))
            out.append(self.reports.report_exit(contact))
            return
        contact.job_id = job_id_of(job)
        contact.activation_conn = e.conn_id
        self._core(ev.ActivateClaim(msg.claim_id, job, lane=msg.lane), now, out)

    def _run_calls(self, e: c.Received, msg: m.RunCalls, now: float, out: list[c.Action]) -> None:
        """Check the calls and queue them on the claim's running lane (the service relays them)."""
        slot = self._slot_of_claim(msg.claim_id)  # raises UnknownClaim (not_found) for a claim nobody holds
        if msg.claim_id not in self.running or msg.claim_id not in self.lanes:
            out.append(c.Reply(e.conn_id, m.ErrorReply(code="not_found", message=(
                f"claim {short_claim_id(msg.claim_id)} on {slot} runs no call lane; activate one "
                "(ActivateClaim with lane=True) or run the calls as jobs"))))
            return
        why = refused_call(msg.calls)
        if why:
            out.append(c.bad_request(e, f"RunCalls: {why} (none queued)"))
            return
        out.append(ev.QueueCalls(msg.claim_id, msg.calls))
        with built_here():  # (a count: the schedd validates the Ack on receipt)
            out.append(c.Reply(e.conn_id, m.Ack(detail=f"{len(msg.calls)} call(s) queued")))

    def _release(self, e: c.Received, msg: m.ReleaseClaim, now: float, out: list[c.Action]) -> None:
        waiter = self.requests.withdraw(msg.claim_id)
        self._core(ev.ReleaseClaim(msg.claim_id), now, out)
        if waiter is not None:
            out.append(c.Reply(waiter.conn_id, m.ClaimReply(claim_id=msg.claim_id, accepted=False,
                                                       reason="the claimant withdrew the request")))
        out.append(c.Reply(e.conn_id, m.Ack()))

    def _suspend_or_continue(self, e: c.Received, msg: m.Suspend | m.Continue, now: float,
                             out: list[c.Action]) -> None:
        slot = self._slot_of_claim(msg.claim_id)
        stop = type(msg) is m.Suspend
        if msg.claim_id not in self.running:
            what = "suspend" if stop else "continue"
            out.append(c.bad_request(e, f"claim {short_claim_id(msg.claim_id)} on {slot} runs no job to {what}"))
            return
        out.append(ev.SuspendJob(slot, msg.claim_id) if stop else ev.ContinueJob(slot, msg.claim_id))
        self.reports.state_changed(msg.claim_id, stop, True, out)
        out.append(c.Reply(e.conn_id, m.Ack(sequence=self.reports.state_sequence)))

    def _checkpoint(self, e: c.Received, msg: m.CheckpointClaim, now: float, out: list[c.Action]) -> None:
        slot = self._slot_of_claim(msg.claim_id)
        if msg.claim_id not in self.running:
            out.append(c.bad_request(e, f"claim {short_claim_id(msg.claim_id)} on {slot} runs no job to checkpoint"))
            return
        out.append(ev.CheckpointJob(slot, msg.claim_id))
        self.periodic_checkpoints.checkpointed(msg.claim_id, now)
        out.append(c.Reply(e.conn_id, m.Ack(detail=f"checkpointing the job on {slot}")))

    # --- the service's events -----------------------------------------------------------------

    def _on_started(self, e: c.Started, now: float, out: list[c.Action]) -> None:
        s = self.settings.startd
        out.append(c.Log(f"startd {s.name!r}: {len(self.startd.slots)} slot(s) of {s.cpus} cpus, "
                         f"{s.memory} MiB, {s.disk} KiB; reporting to {self.settings.collector!r}; "
                         f"jobs run in {self.settings.execute_dir}"))
        if self.settings.execute_note:
            out.append(c.Log(self.settings.execute_note, logging.WARNING))
        self._next_sample = now + self.settings.sample_interval
        out.append(ev.SampleSensors())

    def _on_sampled(self, e: ev.Sampled, now: float, out: list[c.Action]) -> None:
        self._sampled = True
        self._core(ev.SensorSample(e.attrs), now, out)
        self.periodic_checkpoints.evaluate(self.startd, self.running, now, out)

    def _on_starter_started(self, e: ev.StarterStarted, now: float, out: list[c.Action]) -> None:
        self.reports.started(e, out)
        self.periodic_checkpoints.started(e.claim_id, now)

    def _on_starter_failed(self, e: ev.StarterFailed, now: float, out: list[c.Action]) -> None:
        self.running.discard(e.claim_id)
        self.reports.failed(e, out)
        self._core_quietly(ev.JobExited(e.claim_id), now, out)
        self._maybe_finish_stop(now, out)

    def _on_starter_usage(self, e: ev.StarterUsage, now: float, out: list[c.Action]) -> None:
        self._core_quietly(ev.JobUpdate(e.claim_id, e.attrs), now, out)
        self.reports.send_update(e.claim_id, e.attrs, e.claim_id in self.running, out)

    def _on_starter_exited(self, e: ev.StarterExited, now: float, out: list[c.Action]) -> None:
        self.running.discard(e.claim_id)
        slot = claim_holder(self.startd.slots.values(), e.claim_id)
        self.reports.exited(e, slot.claim.end_reason if slot is not None and slot.claim else "", out)
        self._core_quietly(ev.JobExited(e.claim_id), now, out)
        self._maybe_finish_stop(now, out)

    def _on_watch_closed(self, e: ev.WatchClosed, now: float, out: list[c.Action]) -> None:
        claim_id = self.claim_watches.closed(e.conn_id)
        if claim_id is None or claim_id not in self._live_claims():
            return
        short = short_claim_id(claim_id)
        if claim_id in self.running and claim_id not in self.lanes:
            out.append(c.Log(f"claim {short}: its schedd's watch closed; the job keeps running within the "
                             "claim lease for a restarted schedd to reconnect"))
            return
        what = "its call lane ends" if claim_id in self.lanes else "it is released"
        out.append(c.Log(f"claim {short}: its schedd's watch closed (the schedd is gone); {what}"))
        self._core_quietly(ev.ClaimantGone(claim_id), now, out)

    # --- deliveries -------------------------------------------------------------------------

    def _on_delivery(self, e: Any, now: float, out: list[c.Action]) -> None:
        cookie = e.cookie
        if not isinstance(cookie, tuple) or len(cookie) != 2:
            return
        kind, key = cookie
        delivered = _ON_DELIVERY.get(kind)
        if delivered is not None:
            delivered(self, e, key, type(e) in (c.SendDone, CallDone), now, out)

    def _ad_delivered(self, e: Any, slot: str, ok: bool, now: float, out: list[c.Action]) -> None:
        self.ads.delivered(e, slot, ok, now, out, stopping=self._stopping is not None)
        if self.ads.withdrawn:
            self._exit(out)

    def _exit_delivered(self, e: Any, claim_id: str, ok: bool, now: float, out: list[c.Action]) -> None:
        contact = self.contacts.get(claim_id)
        if contact is not None and contact.exit_report is e.msg:
            self.reports.exit_delivered(e, contact, ok, now, out)
        self._update_delivered(e, claim_id, ok, now, out)

    def _update_delivered(self, e: Any, claim_id: str, ok: bool, now: float, out: list[c.Action]) -> None:
        if ok and claim_id in self._live_claims():
            self._core_quietly(ev.KeepAlive(claim_id), now, out)  # the schedd is evidently there

    def _reschedule_delivered(self, e: Any, slot: str, ok: bool, now: float, out: list[c.Action]) -> None:
        if not ok:
            out.append(c.Log(f"cannot ask {e.to} for a negotiation cycle: {e.error}"))

    def _ended_delivered(self, e: Any, claim_id: str, ok: bool, now: float, out: list[c.Action]) -> None:
        if not ok:
            out.append(c.Log(f"cannot tell {e.to} that claim {short_claim_id(claim_id)} ended: {e.error}",
                             logging.WARNING))

    # --- the clock ----------------------------------------------------------------------------

    def _on_tick(self, e: c.Tick, now: float, out: list[c.Action]) -> None:
        if self._next_sample is not None and now >= self._next_sample:
            self._next_sample = now + self.settings.sample_interval
            out.append(ev.SampleSensors())
        core_next = self.startd.next_deadline()
        if self._sampled and core_next is not None and core_next <= now:
            self._last_core_tick = now
            self._core(ev.Tick(), now, out)
        self.ads.flush(now, self.startd.slots, out)
        self.reports.retry(now, out)
        self.claim_watches.answer_due(now, self._live_claims(), lambda claim_id: self._core_quietly(
            ev.KeepAlive(claim_id), now, out), out)
        self._release_unwatched(now, out)
        if self._stopping is not None and now >= self._stopping[0]:
            if self.ads.withdrawing:
                self._exit(out)  # the collector is slow to take the invalidations: leave anyway
            else:
                out.append(c.Log(f"{len(self.running)} job(s) still running at the shutdown deadline; "
                                 "killing them on the way out", logging.WARNING))
                self._finish_stop(now, out)

    def _release_unwatched(self, now: float, out: list[c.Action]) -> None:
        """End the claims no schedd came to watch within UNWATCHED_GRACE of their grant."""
        due = self.claim_watches.unwatched(now)
        if not due:
            return
        live = self._live_claims()
        for claim_id in due:
            if claim_id in live and not (claim_id in self.running and claim_id not in self.lanes):
                out.append(c.Log(f"claim {short_claim_id(claim_id)}: no watch from its schedd "
                                 f"{UNWATCHED_GRACE:g} s after the grant (the schedd is gone); it is released"))
                self._core_quietly(ev.ClaimantGone(claim_id), now, out)

    # --- stop and reconfigure -------------------------------------------------------------------

    def _on_stop(self, e: c.StopRequested, now: float, out: list[c.Action]) -> None:
        if self._stopping is not None:
            if e.fast and not self._stopping[1]:
                self._stopping = (min(self._stopping[0], now + self.settings.fast_stop_timeout), True)
                self._core(ev.Vacate(None, fast=True), now, out)
            return
        timeout = self.settings.fast_stop_timeout if e.fast else self.settings.stop_timeout
        self._stopping = (now + timeout, e.fast)
        for slot in self.startd.slots.values():
            if slot.claim is not None and not slot.claim.end_reason:
                slot.claim.end_reason = f"the startd on {self.settings.startd.machine} is shutting down"
        out.append(c.Log(f"startd shutting down ({'fast' if e.fast else 'graceful'}): "
                         f"{'killing' if e.fast else 'vacating'} {len(self.running)} job(s)"))
        self._core(ev.Vacate(None, fast=e.fast), now, out)
        self._maybe_finish_stop(now, out)

    def _maybe_finish_stop(self, now: float, out: list[c.Action]) -> None:
        if self._stopping is not None and not self.running and not self.ads.withdrawing:
            self._finish_stop(now, out)

    def _finish_stop(self, now: float, out: list[c.Action]) -> None:
        """Withdraw every slot ad (after any update still on its way), then exit."""
        self._stopping = (now + 3.0, True)
        self.ads.withdraw(self.startd.slots, out)
        if not self.ads.in_flight:
            self._exit(out)

    def _exit(self, out: list[c.Action]) -> None:
        self._exited = True
        out.append(c.Exit(0))

    def _on_reconfigured(self, e: c.Reconfigured, now: float, out: list[c.Action]) -> None:
        new = e.settings
        if not isinstance(new, StartdServiceSettings):
            out.append(c.Log("reconfigured without settings: nothing changes"))
            return
        new, kept = keep_layout(self.settings, new)
        if kept:
            out.append(c.Log("reconfig: NUM_CPUS, MEMORY or NUM_SLOTS changed; the slots keep their old "
                             "resources until the startd restarts", logging.WARNING))
        self.settings = self.reports.settings = self.ads.settings = new
        self.startd.settings = new.startd
        self.startd.policy = new.startd.policy
        self._next_sample = now  # re-evaluate with the new policy at once
        for name, slot in sorted(self.startd.slots.items()):
            self.ads.advertise(ev.AdvertiseSlot(name, self.startd.slot_ad(slot, now), slot.claim_id), now, out)


_Handler = Callable[[StartdDaemon, Any, float, list[c.Action]], None]

#: what the adapter does with each event its service feeds it
_ON_EVENT: dict[type, _Handler] = {
    c.Started: StartdDaemon._on_started,
    c.Received: StartdDaemon._on_received,
    c.Tick: StartdDaemon._on_tick,
    c.SendDone: StartdDaemon._on_delivery,
    c.SendFailed: StartdDaemon._on_delivery,
    CallDone: StartdDaemon._on_delivery,
    CallFailed: StartdDaemon._on_delivery,
    c.StopRequested: StartdDaemon._on_stop,
    c.Reconfigured: StartdDaemon._on_reconfigured,
    ev.Sampled: StartdDaemon._on_sampled,
    ev.StarterStarted: StartdDaemon._on_starter_started,
    ev.StarterFailed: StartdDaemon._on_starter_failed,
    ev.StarterUsage: StartdDaemon._on_starter_usage,
    ev.StarterExited: StartdDaemon._on_starter_exited,
    ev.WatchClosed: StartdDaemon._on_watch_closed,
}

#: the messages the startd serves
_ON_MESSAGE: dict[type, Callable[[StartdDaemon, c.Received, Any, float, list[c.Action]], None]] = {
    m.RequestClaim: StartdDaemon._request_claim,
    m.ActivateClaim: StartdDaemon._activate,
    m.RunCalls: StartdDaemon._run_calls,
    m.MatchNotify: StartdDaemon._match_notify,
    m.ClaimKeepAlive: StartdDaemon._keep_alive,
    m.ReleaseClaim: StartdDaemon._release,
    m.Vacate: StartdDaemon._vacate,
    m.Suspend: StartdDaemon._suspend_or_continue,
    m.Continue: StartdDaemon._suspend_or_continue,
    m.CheckpointClaim: StartdDaemon._checkpoint,
    m.DrainJobs: StartdDaemon._drain,
    m.CancelDrainJobs: StartdDaemon._cancel_drain,
}

#: how each action of the core becomes the service's work or a message
_TRANSLATE: dict[type, _Handler] = {
    ev.AdvertiseSlot: StartdDaemon._advertise,
    ev.InvalidateSlot: StartdDaemon._invalidate,
    ev.ReplyClaim: StartdDaemon._reply_claim,
    ev.ReplyActivate: StartdDaemon._reply_activate,
    ev.StartStarter: StartdDaemon._start_starter,
    ev.SuspendJob: StartdDaemon._suspend_or_continue_job,
    ev.ContinueJob: StartdDaemon._suspend_or_continue_job,
    ev.VacateJob: StartdDaemon._to_starter,
    ev.KillJob: StartdDaemon._to_starter,
    ev.KillStarter: StartdDaemon._to_starter,
    ev.CheckpointJob: StartdDaemon._to_starter,
    ev.HoldJob: StartdDaemon._hold_job,
    ev.ClaimEnded: StartdDaemon._claim_ended,
}

#: the outcome of each kind of send (the first part of its cookie)
_ON_DELIVERY: dict[str, Callable[[StartdDaemon, Any, str, bool, float, list[c.Action]], None]] = {
    "ad": StartdDaemon._ad_delivered,
    "exit": StartdDaemon._exit_delivered,
    "update": StartdDaemon._update_delivered,
    "reschedule": StartdDaemon._reschedule_delivered,
    "ended": StartdDaemon._ended_delivered,
}
