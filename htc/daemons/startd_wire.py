"""The startd's wire adapter: wire messages to ``Startd`` core events, core actions to messages.

Theory of operation
-------------------
:class:`StartdDaemon` is the object :class:`~htc.daemons.startd_service.StartdService` (a
:class:`~htc.daemons.service.DaemonService`) drives. It wraps the sans-IO
:class:`htc.daemons.startd.Startd` core, which speaks its own events and actions
(:mod:`htc.daemons.startd_events`), and keeps what the core does not: who to tell about each
claim (the schedd's and the shadow's addresses from RequestClaim/ActivateClaim), which
connection waits for which answer, the sensor clock, the per-slot order of ad updates, and
job-exit reports not yet delivered. It reads no clock and touches no socket either, so its
tests are lists of events. The process work it asks for -- :class:`SampleSensors`,
:class:`RunStarter`, and the core's ``SuspendJob``/``ContinueJob``/``VacateJob``/``KillJob``/
``KillStarter`` -- is the service's; the service answers with :class:`Sampled`,
:class:`StarterStarted`, :class:`StarterFailed`, :class:`StarterUsage` and
:class:`StarterExited`.

Messages served: MatchNotify, RequestClaim (answered with ClaimReply; a claim that preempts a
running one is answered when the slot is free), ActivateClaim (acknowledged when the core
accepts it; the starter then sets the job up), ClaimKeepAlive, ReleaseClaim, Vacate,
Suspend/Continue (straight to the starter, as condor_suspend reaches HTCondor's starter through
the shadow), DrainJobs and CancelDrainJobs. An ActivateClaim repeated by a reconnecting shadow
for a job that is still running, or that ended and is not yet reported, is refused with
``bad_request`` saying so (the shadow follows the job) and never starts the job twice.

Reports, with the shadow's conventions (:mod:`htc.daemons.shadow`): usage goes to the claim's
shadow as StarterUpdate every STARTER_UPDATE_INTERVAL (the first after
STARTER_INITIAL_UPDATE_INTERVAL) and at once when the job is suspended or continued, with
``JobState`` (``"Running"``/``"Suspended"``). The exit goes as JobExited and is retried until
the shadow takes it or the claim ends, so a schedd that is briefly away (within the claim
lease) still learns how its job ended. A job that could not be started is reported as a
vacated JobExited whose usage ad has ``StarterError`` and ``HoldReasonCode`` (6
FailedToCreateProcess, 13 TransferInputError); output that could not be transferred adds
``StarterError`` with code 12 (TransferOutputError); a vacated job carries ``VacateReason``.
A claim the startd ends itself (owner back, lease expired, drain, vacate) is reported to the
schedd with ReleaseClaim. A delivered report renews the claim's lease like a keep-alive: the
schedd is evidently there.

Ads: each slot ad goes to the collector on change and every UPDATE_INTERVAL. Updates of one
slot are sent one at a time, newest last, so that a slow send cannot overtake a newer one;
a failed send is retried after ``retry_interval``. A claimed slot whose activity alone
changed (Busy, Idle, Busy again as a schedd runs job after job on its claim) sends only its
newest ad, ``claimed_update_delay`` (1 s) later: every state change still goes out at once.
Once the collector has taken an ad in which an unclaimed slot offers more than before, the
negotiator is sent a Reschedule. Each ad carries ``UpdateSequenceNumber`` and
``DaemonStartTime`` (which report this is) and ``ClaimId``, the id the
negotiator hands to the schedd in MatchNotify (HTCondor keeps it in a private ad; htc's
collector has none yet, so every local user who may query the collector can read it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from htc.classad import ClassAd, ClassAdParseError, ExprTree
from htc.daemons import core as c
from htc.daemons import startd_events as ev
from htc.daemons.schedd_calls import Call, CallDone, CallFailed
from htc.daemons.sensors import SensorSettings
from htc.daemons.startd import Startd
from htc.daemons.startd_slots import StartdSettings, UnknownClaim
from htc.daemons.starter import ExitRecord
from htc.errors import HTCError, UsageError
from htc.wire import messages as m

__all__ = [
    "StartdServiceSettings", "StartdDaemon", "Contact", "SampleSensors", "RunStarter", "Sampled", "StarterStarted",
    "StarterFailed", "StarterUsage", "StarterExited", "STARTER_ACTIONS", "ad_text", "parse_ad", "parse_job",
    "evaluated", "job_id_of", "short_claim_id",
]


@dataclass(frozen=True)
class StartdServiceSettings:
    """The core's settings plus what the service needs (knob names in the comments)."""

    startd: StartdSettings
    sensors: SensorSettings
    execute_dir: Path                         # EXECUTE
    address: str = "startd"                   # where schedds and the negotiator reach it
    collector: str = "collector"
    negotiator: str = "negotiator"            # told (Reschedule) when a slot offers more than before
    sample_interval: float = 5.0              # POLLING_INTERVAL: sensors sampled, policy evaluated
    ad_lifetime: int = 900                    # CLASSAD_LIFETIME (at least 2 x UPDATE_INTERVAL)
    starter_update_interval: float = 300.0    # STARTER_UPDATE_INTERVAL
    starter_initial_update_interval: float = 8.0  # STARTER_INITIAL_UPDATE_INTERVAL
    retry_interval: float = 5.0               # between attempts to deliver a job exit or an ad
    claimed_update_delay: float = 1.0         # a claimed slot's activity-only ad changes wait this long
    stop_timeout: float = 630.0               # graceful shutdown: longest wait for jobs to vacate
    fast_stop_timeout: float = 35.0           # fast shutdown: longest wait for killed jobs
    slot_user: str = "nobody"                 # who runs jobs when the startd is root
    execute_note: str = ""                    # why execute_dir is not EXECUTE (see htc.daemons.execute_dir)
    execute_chosen: bool = False              # execute_dir is the startd's own per-pool directory
    use_cgroups: bool = True
    slot_weight: str = "Cpus"                 # SLOT_WEIGHT, published as an expression


# --- the adapter's own events and actions ----------------------------------------------------


@dataclass(frozen=True)
class Sampled(c.Event):
    """The service measured the machine (``Sensors.sample``)."""

    attrs: dict[str, Any]


@dataclass(frozen=True)
class StarterStarted(c.Event):
    """The job of ``claim_id`` is running."""

    claim_id: str


@dataclass(frozen=True)
class StarterFailed(c.Event):
    """The job of ``claim_id`` could not be started; ``error`` says why (nothing is running).

    ``hold_code`` is the HoldReasonCode the job should be held with (6 FailedToCreateProcess,
    13 TransferInputError).
    """

    claim_id: str
    error: str
    hold_code: int = 6


@dataclass(frozen=True)
class StarterUsage(c.Event):
    """The starter measured the job of ``claim_id`` (RemoteUserCpu, ImageSize, ...)."""

    claim_id: str
    attrs: dict[str, Any]


@dataclass(frozen=True)
class StarterExited(c.Event):
    """The job of ``claim_id`` is gone and its sandbox cleaned up."""

    claim_id: str
    record: ExitRecord


@dataclass(frozen=True)
class SampleSensors(c.Action):
    """Measure the machine now and feed :class:`Sampled`."""


@dataclass(frozen=True)
class RunStarter(c.Action):
    """Start a starter for ``job_ad`` on ``slot`` and watch it until the job is gone."""

    slot: str
    claim_id: str
    job_ad: dict[str, Any]
    slot_ad: dict[str, Any]


#: HTCondor's HoldReasonCode for a job the starter could not start / whose input could not be fetched
HOLD_FAILED_TO_CREATE_PROCESS = 6
HOLD_TRANSFER_INPUT = 13

#: core actions the service carries out on the claim's starter
STARTER_ACTIONS = (ev.SuspendJob, ev.ContinueJob, ev.VacateJob, ev.KillJob, ev.KillStarter)


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


def ad_text(ad: dict[str, Any]) -> str:
    """A core ad (name -> value or ExprTree) as new-syntax ClassAd text."""
    return str(ClassAd({k: v for k, v in ad.items() if v is not None}))


#: job attributes the core reads as numbers; submit writes some as expressions over the job
#: (``RequestDisk = MAX({1024, (TransferInputSizeMB + 1) * 1.25}) * 1024``)
REQUEST_ATTRS = ("RequestCpus", "RequestMemory", "RequestDisk")


def parse_ad(text: str) -> dict[str, Any]:
    """Wire ClassAd text as the core's plain dict (expressions stay expressions).

    Raises:
        ClassAdParseError: the text is not a ClassAd.
    """
    ad = ClassAd(text)
    return {key: ad[key] for key in ad}


def parse_job(text: str) -> dict[str, Any]:
    """A job ad for the core: as :func:`parse_ad`, with the ``Request*`` resources evaluated
    in the job's own scope (the core evaluates expressions without one).

    Raises:
        ClassAdParseError: the text is not a ClassAd.
    """
    ad = ClassAd(text)
    job = {key: ad[key] for key in ad}
    for name in REQUEST_ATTRS:
        if isinstance(job.get(name), ExprTree):
            value = ad.eval(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                job[name] = value
    return job


def evaluated(ad: dict[str, Any]) -> dict[str, Any]:
    """The ad with every expression evaluated in its own scope (what a starter reads)."""
    whole = ClassAd(ad)
    out = {}
    for key, value in ad.items():
        if isinstance(value, ExprTree):
            value = whole.eval(key)
        if isinstance(value, (str, int, float, bool, list)):
            out[key] = value
    return out


def job_id_of(job: dict[str, Any]) -> str:
    """``cluster.proc`` of a job ad (``0.0`` when it names none)."""
    cluster, proc = job.get("ClusterId"), job.get("ProcId", 0)
    if isinstance(cluster, int) and isinstance(proc, int) and cluster >= 0 and proc >= 0:
        return f"{cluster}.{proc}"
    return "0.0"


class _NoSuchSlot(HTCError):
    """A message named a slot this startd does not have."""


def short_claim_id(claim_id: str) -> str:
    """A claim id without its secret part, for logs and messages."""
    return claim_id.rsplit("#", 1)[0] + "#..." if claim_id.count("#") >= 2 else claim_id


class StartdDaemon:
    """The wire adapter around a :class:`Startd` core (see the module docstring).

    Args:
        settings: the service settings (the core's are ``settings.startd``).
        now: when the startd starts.
    """

    def __init__(self, settings: StartdServiceSettings, now: float):
        self.settings = settings
        self.startd = Startd(settings.startd, now)
        self.contacts: dict[str, Contact] = {}
        self.running: set[str] = set()         # claims whose starter is alive
        self.suspended: set[str] = set()       # claims whose job is stopped
        self._waiting_claims: dict[str, tuple[int, m.RequestClaim]] = {}  # preemptions pending
        self._current: tuple[int, m.RequestClaim] | None = None
        self._next_sample: float | None = None
        self._sampled = False
        self._last_core_tick = now
        self._ads_in_flight: set[str] = set()
        self._ads_queued: dict[str, m.Message] = {}
        self._ads_failed: dict[str, m.Message] = {}
        self._ad_retry_at: float | None = None
        self._stopping: tuple[float, bool] | None = None   # (deadline, fast)
        self._withdrawing = False   # jobs are gone; the ads' invalidations are on their way
        self._exited = False
        self._started_at = int(now)
        self._ad_sequence = 0
        self._offers: dict[str, tuple[float, float]] = {}  # slot -> (Cpus, Memory) it offers unclaimed
        self._announce: set[str] = set()  # slots whose next delivered ad is news for the negotiator
        self._weight: tuple[str, ExprTree] | None = None  # SLOT_WEIGHT, parsed once
        self._last_job: tuple[str, dict[str, Any]] | None = None  # the job ad parsed last
        self._now = now
        self._told_state: dict[str, Any] = {}        # slot -> State of the last ad sent (or queued)
        self._deferred: dict[str, m.UpdateAd] = {}   # claimed slots' activity updates, newest only
        self._defer_until: float | None = None

    # --- the core interface ---------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The next sample, core timer, retry or stop deadline."""
        times = [self._next_sample, self._ad_retry_at, self._defer_until]
        if self._sampled:
            core_next = self.startd.next_deadline()
            if core_next is not None and core_next <= self._last_core_tick:
                # A core timer that a Tick did not move (a lease that expired while the slot was
                # already preempting): look again at the next sample instead of spinning.
                core_next = self._last_core_tick + self.settings.sample_interval
            times.append(core_next)
        times += [ct.exit_retry_at for ct in self.contacts.values()]
        if self._stopping is not None:
            times.append(self._stopping[0])
        return min((t for t in times if t is not None), default=None)

    def handle(self, event: c.Event, now: float) -> list[c.Action]:
        """Apply one event; return what the service must do."""
        out: list[c.Action] = []
        if self._exited:
            return out
        self._now = now
        if isinstance(event, c.Received):
            self._on_message(event, now, out)
        elif isinstance(event, c.Tick):
            self._on_tick(now, out)
        elif isinstance(event, Sampled):
            self._sampled = True
            self._core(ev.SensorSample(event.attrs), now, out)
        elif isinstance(event, StarterStarted):
            self._on_started(event, out)
        elif isinstance(event, StarterFailed):
            self._on_failed(event, now, out)
        elif isinstance(event, StarterUsage):
            self._on_usage(event, now, out)
        elif isinstance(event, StarterExited):
            self._on_exited(event, now, out)
        elif isinstance(event, (c.SendDone, c.SendFailed, CallDone, CallFailed)):
            self._on_delivery(event, now, out)
        elif isinstance(event, c.Started):
            s = self.settings.startd
            out.append(c.Log(f"startd {s.name!r}: {len(self.startd.slots)} slot(s) of {s.cpus} cpus, "
                             f"{s.memory} MiB, {s.disk} KiB; reporting to {self.settings.collector!r}; "
                             f"jobs run in {self.settings.execute_dir}"))
            if self.settings.execute_note:
                out.append(c.Log(self.settings.execute_note, logging.WARNING))
            self._next_sample = now + self.settings.sample_interval
            out.append(SampleSensors())
        elif isinstance(event, c.StopRequested):
            self._on_stop(event, now, out)
        elif isinstance(event, c.Reconfigured):
            self._on_reconfigured(event, now, out)
        else:
            raise TypeError(f"startd: unexpected event {event!r}")
        return out

    # --- driving the core -------------------------------------------------------------------

    def _core(self, event: Any, now: float, out: list[c.Action]) -> None:
        """Hand ``event`` to the core and translate what it returns."""
        for action in self.startd.handle(event, now):
            self._translate(action, out)
        self._forget_ended_claims()

    def _translate(self, a: Any, out: list[c.Action]) -> None:
        if isinstance(a, ev.AdvertiseSlot):
            ad = dict(a.ad)
            if a.claim_id:
                ad["ClaimId"] = a.claim_id
            # An expression, as HTCondor publishes it: a partitionable slot the negotiator carves
            # weighs what is left of it, not what it had.
            ad["SlotWeight"] = self._slot_weight()
            ad.setdefault("MyAddress", self.settings.address)
            # Which report this is: the negotiator holds back a slot it just matched until a
            # newer report comes (a p-slot may look the same again after a claim came and went).
            self._ad_sequence += 1
            ad["UpdateSequenceNumber"] = self._ad_sequence
            ad["DaemonStartTime"] = self._started_at
            self._note_offer(a.slot, ad)
            msg = m.UpdateAd(ad_type=m.AdType.Startd, name=a.slot, ad_text=ad_text(ad),
                             lifetime=self.settings.ad_lifetime)
            state = ad.get("State")
            if state == "Claimed" and self._told_state.get(a.slot) == "Claimed":
                # Only the activity changed (Busy <-> Idle as jobs come and go on a claim): the
                # newest such ad goes out claimed_update_delay later, not one per job start and end.
                self._deferred[a.slot] = msg
                if self._defer_until is None:
                    self._defer_until = self._now + self.settings.claimed_update_delay
            else:
                self._deferred.pop(a.slot, None)
                self._told_state[a.slot] = state
                self._queue_ad(a.slot, msg, out)
        elif isinstance(a, ev.InvalidateSlot):
            self._offers.pop(a.slot, None)
            self._deferred.pop(a.slot, None)
            self._told_state.pop(a.slot, None)
            self._queue_ad(a.slot, m.InvalidateAd(ad_type=m.AdType.Startd, name=a.slot), out)
        elif isinstance(a, ev.ReplyClaim):
            self._reply_claim(a, out)
        elif isinstance(a, ev.ReplyActivate):
            contact = self.contacts.get(a.claim_id)
            if contact is not None and a.accepted:
                contact.exit_report, contact.exit_retry_at = None, None  # the previous run was reported
            if contact is not None and contact.activation_conn is not None:
                out.append(c.Reply(contact.activation_conn, m.Ack(detail=f"starting job {contact.job_id}")
                                   if a.accepted else m.ErrorReply(code="bad_request", message=a.reason)))
                contact.activation_conn = None
        elif isinstance(a, ev.StartStarter):
            contact = self.contacts.get(a.claim_id)
            if contact is not None:
                contact.job_id = job_id_of(a.job_ad)
            self.running.add(a.claim_id)
            out.append(RunStarter(a.slot, a.claim_id, dict(a.job_ad), dict(a.slot_ad)))
        elif isinstance(a, STARTER_ACTIONS):
            out.append(a)
            if isinstance(a, (ev.SuspendJob, ev.ContinueJob)):
                self._job_state_changed(a.claim_id, isinstance(a, ev.SuspendJob), out)
        elif isinstance(a, ev.ClaimEnded):
            out.append(c.Log(f"claim {short_claim_id(a.claim_id)} on {a.slot} ended: {a.reason}"))
            contact = self.contacts.pop(a.claim_id, None)
            if contact is not None:
                out.append(c.Send(contact.schedd_address, m.ReleaseClaim(claim_id=a.claim_id, reason=a.reason),
                                  cookie=("ended", a.claim_id)))
        else:
            raise TypeError(f"startd: the adapter cannot translate {a!r}")

    def _parse_job(self, text: str) -> dict[str, Any]:
        # A schedd sends the same job ad in RequestClaim and then in ActivateClaim: parse it once.
        if self._last_job is None or self._last_job[0] != text:
            self._last_job = (text, parse_job(text))
        return dict(self._last_job[1])

    def _slot_weight(self) -> ExprTree:
        text = self.settings.slot_weight
        if self._weight is None or self._weight[0] != text:
            self._weight = (text, ExprTree(text))
        return self._weight[1]

    def _note_offer(self, slot: str, ad: dict[str, Any]) -> None:
        """Remember what an unclaimed slot offers; more than before is news for the negotiator.

        A slot that appears, or gets resources back (a dynamic slot returned to its p-slot, a
        claim ended), may run idle jobs the last cycle could not place: once the collector has
        its ad, the negotiator is asked for a cycle (Reschedule), rather than leaving the jobs
        to the next NEGOTIATOR_INTERVAL.
        """
        cpus, memory = ad.get("Cpus"), ad.get("Memory")
        if ad.get("State") != "Unclaimed" or not isinstance(cpus, (int, float)) or not isinstance(memory, (int, float)):
            self._offers.pop(slot, None)
            return
        before = self._offers.get(slot)
        if cpus > 0 and (before is None or cpus > before[0] or memory > before[1]):
            self._announce.add(slot)
        self._offers[slot] = (cpus, memory)

    def _live_claims(self) -> set[str]:
        live = set()
        for slot in self.startd.slots.values():
            claim = slot.claim
            if claim is not None:
                live.add(claim.id)
                if claim.preempting is not None:
                    live.add(claim.preempting.id)
        return live

    def _forget_ended_claims(self) -> None:
        # A claim the schedd released ends without ClaimEnded: forget its contact too.
        live = self._live_claims() | self.running
        for claim_id in [cid for cid in self.contacts if cid not in live]:
            del self.contacts[claim_id]

    # --- messages ---------------------------------------------------------------------------

    def _on_message(self, e: c.Received, now: float, out: list[c.Action]) -> None:
        msg = e.msg
        if self._stopping is not None and isinstance(msg, (m.RequestClaim, m.ActivateClaim, m.MatchNotify)):
            out.append(c.Reply(e.conn_id, m.ErrorReply(code="unavailable", message=(
                f"startd {self.settings.startd.name!r} is shutting down; ask the negotiator for another slot"))))
            return
        try:
            if isinstance(msg, m.RequestClaim):
                self._request_claim(e, msg, now, out)
            elif isinstance(msg, m.ActivateClaim):
                self._activate(e, msg, now, out)
            elif isinstance(msg, m.MatchNotify):
                self._core(ev.MatchNotified(self._slot_or_fail(msg.slot_name), msg.claim_id), now, out)
                out.append(c.Reply(e.conn_id, m.Ack()))
            elif isinstance(msg, m.ClaimKeepAlive):
                self._core(ev.KeepAlive(msg.claim_id), now, out)
                out.append(c.Reply(e.conn_id, m.Ack()))
            elif isinstance(msg, m.ReleaseClaim):
                self._release(e, msg, now, out)
            elif isinstance(msg, m.Vacate):
                slots = [self._slot_of_claim(msg.claim_id)] if msg.claim_id else \
                    [self._slot_or_fail(name) for name in msg.slot_names]
                for slot in slots:
                    self._core(ev.Vacate(slot, fast=msg.fast), now, out)
                out.append(c.Reply(e.conn_id, m.Ack(detail=f"vacating {', '.join(slots)}")))
            elif isinstance(msg, (m.Suspend, m.Continue)):
                self._suspend_or_continue(e, msg, out)
            elif isinstance(msg, m.DrainJobs):
                self._core(ev.Drain(msg.how, msg.resume_on_completion, msg.reason), now, out)
                out.append(c.Reply(e.conn_id, m.Ack(detail=f"draining ({msg.how})")))
            elif isinstance(msg, m.CancelDrainJobs):
                self._core(ev.CancelDrain(), now, out)
                out.append(c.Reply(e.conn_id, m.Ack(detail="drain cancelled")))
            else:
                out.append(c.unknown_request(e, "startd"))
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
        for slot in self.startd.slots.values():
            if slot.claim is not None and slot.claim.id == claim_id:
                return slot.name
        raise UnknownClaim(f"{self.settings.startd.name} holds no claim {short_claim_id(claim_id)}; it ended or never "
                           "existed -- drop it and ask the negotiator for a new match")

    def _request_claim(self, e: c.Received, msg: m.RequestClaim, now: float, out: list[c.Action]) -> None:
        # A claim id is "<slot name>#<n>#<secret>": the slot it was advertised by comes first.
        slot = self._slot_or_fail(msg.claim_id.split("#", 1)[0])
        job = self._parse_job(msg.job_ad)
        self._current = (e.conn_id, msg)
        try:
            self._core(ev.RequestClaim(slot, msg.claim_id, job, msg.schedd_name, lease=msg.lease_duration), now, out)
        finally:
            if self._current is not None:
                # No answer yet: the claim preempts a running job and is answered when the slot is free.
                self._waiting_claims[msg.claim_id] = self._current
                out.append(c.Log(f"claim request from {msg.schedd_name} for {slot} waits for the running job "
                                 "to retire"))
            self._current = None

    def _reply_claim(self, a: ev.ReplyClaim, out: list[c.Action]) -> None:
        current = self._current
        if current is not None and (a.claim_id == current[1].claim_id or a.claim_id not in self._waiting_claims):
            waiter, self._current = current, None
        else:
            waiter = self._waiting_claims.pop(a.claim_id, None)
        if waiter is None:
            out.append(c.Log(f"claim {short_claim_id(a.claim_id)} on {a.slot}: nobody waits for the answer", logging.WARNING))
            return
        conn_id, request = waiter
        if a.accepted:
            self.contacts[a.claim_id] = Contact(a.claim_id, request.schedd_name, request.schedd_address,
                                                request.submitter)
            out.append(c.Log(f"{a.slot} claimed by {request.schedd_name} for {request.submitter}"))
        out.append(c.Reply(conn_id, m.ClaimReply(claim_id=a.claim_id, accepted=a.accepted,
                                                 slot_ad=ad_text(a.slot_ad) if a.slot_ad else "",
                                                 reason=a.reason)))

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
            out.append(self._report_exit(contact))
            return
        contact.job_id = job_id_of(job)
        contact.activation_conn = e.conn_id
        self._core(ev.ActivateClaim(msg.claim_id, job), now, out)

    def _release(self, e: c.Received, msg: m.ReleaseClaim, now: float, out: list[c.Action]) -> None:
        waiter = self._waiting_claims.pop(msg.claim_id, None)
        self._core(ev.ReleaseClaim(msg.claim_id), now, out)
        if waiter is not None:
            out.append(c.Reply(waiter[0], m.ClaimReply(claim_id=msg.claim_id, accepted=False,
                                                       reason="the claimant withdrew the request")))
        out.append(c.Reply(e.conn_id, m.Ack()))

    def _suspend_or_continue(self, e: c.Received, msg: m.Suspend | m.Continue, out: list[c.Action]) -> None:
        slot = self._slot_of_claim(msg.claim_id)
        if msg.claim_id not in self.running:
            what = "suspend" if isinstance(msg, m.Suspend) else "continue"
            out.append(c.bad_request(e, f"claim {short_claim_id(msg.claim_id)} on {slot} runs no job to {what}"))
            return
        stop = isinstance(msg, m.Suspend)
        out.append(ev.SuspendJob(slot, msg.claim_id) if stop else ev.ContinueJob(slot, msg.claim_id))
        self._job_state_changed(msg.claim_id, stop, out)
        out.append(c.Reply(e.conn_id, m.Ack()))

    def _job_state_changed(self, claim_id: str, suspended: bool, out: list[c.Action]) -> None:
        if suspended:
            self.suspended.add(claim_id)
        else:
            self.suspended.discard(claim_id)
        self._send_update(claim_id, {}, out)

    def _send_update(self, claim_id: str, usage: dict[str, Any], out: list[c.Action]) -> None:
        contact = self.contacts.get(claim_id)
        if contact is None or not contact.shadow_address or claim_id not in self.running:
            return
        ad = dict(usage, JobState="Suspended" if claim_id in self.suspended else "Running")
        out.append(c.Send(contact.shadow_address, m.StarterUpdate(claim_id=claim_id, job_id=contact.job_id,
                                                                  update_ad=ad_text(ad)), cookie=("update", claim_id)))

    # --- starters ---------------------------------------------------------------------------

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
            contact.exit_report = m.JobExited(
                claim_id=e.claim_id, job_id=contact.job_id, exit_code=r.exit_code, exit_signal=r.exit_signal,
                core_dumped=r.core_dumped, vacated=r.vacated, usage_ad=ad_text(usage))
            out.append(self._report_exit(contact))
        self._core_quietly(ev.JobExited(e.claim_id), now, out)
        self._maybe_finish_stop(now, out)

    def _claim(self, claim_id: str):
        for slot in self.startd.slots.values():
            if slot.claim is not None and slot.claim.id == claim_id:
                return slot.claim
        return None

    def _report_exit(self, contact: Contact) -> Call:
        contact.exit_retry_at = None
        assert contact.exit_report is not None
        return Call(contact.shadow_address, contact.exit_report, cookie=("exit", contact.claim_id))

    def _core_quietly(self, event: Any, now: float, out: list[c.Action]) -> None:
        """Feed a report about a claim that may have ended meanwhile."""
        try:
            self._core(event, now, out)
        except UnknownClaim as exc:
            out.append(c.Log(f"ignoring {type(event).__name__}: {exc}"))

    # --- deliveries -------------------------------------------------------------------------

    def _on_delivery(self, e: Any, now: float, out: list[c.Action]) -> None:
        cookie = e.cookie
        if not isinstance(cookie, tuple) or len(cookie) != 2:
            return
        kind, key = cookie
        ok = isinstance(e, (c.SendDone, CallDone))
        if kind == "ad":
            self._ads_in_flight.discard(key)
            if ok and key in self._announce and isinstance(e.msg, m.UpdateAd) and not self._stopping:
                self._announce.discard(key)
                out.append(c.Send(self.settings.negotiator, m.Reschedule(), cookie=("reschedule", key),
                                  timeout=10.0))
            if not ok and key not in self._ads_queued and not self._withdrawing:
                self._ads_failed[key] = e.msg
                self._ad_retry_at = now + self.settings.retry_interval
                out.append(c.Log(f"cannot update the collector about {key}: {e.error}; retrying", logging.WARNING))
            queued = self._ads_queued.pop(key, None)
            if queued is not None:
                self._send_ad(key, queued, out)
            if self._withdrawing and not self._ads_in_flight:
                self._exit(out)
            return
        contact = self.contacts.get(key)
        if kind == "exit" and contact is not None and contact.exit_report is e.msg:
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
        elif kind == "reschedule" and not ok:
            out.append(c.Log(f"cannot ask {e.to} for a negotiation cycle: {e.error}"))
        elif kind == "ended" and not ok:
            out.append(c.Log(f"cannot tell {e.to} that claim {short_claim_id(key)} ended: {e.error}", logging.WARNING))
        if ok and kind in ("exit", "update") and key in self._live_claims():
            self._core_quietly(ev.KeepAlive(key), now, out)

    def _queue_ad(self, slot: str, msg: m.Message, out: list[c.Action]) -> None:
        self._ads_failed.pop(slot, None)
        if slot in self._ads_in_flight:
            self._ads_queued[slot] = msg  # sent when the one in flight is done: order kept
        else:
            self._send_ad(slot, msg, out)

    def _send_ad(self, slot: str, msg: m.Message, out: list[c.Action]) -> None:
        self._ads_in_flight.add(slot)
        out.append(c.Send(self.settings.collector, msg, cookie=("ad", slot), timeout=10.0))

    # --- the clock ----------------------------------------------------------------------------

    def _on_tick(self, now: float, out: list[c.Action]) -> None:
        if self._next_sample is not None and now >= self._next_sample:
            self._next_sample = now + self.settings.sample_interval
            out.append(SampleSensors())
        core_next = self.startd.next_deadline()
        if self._sampled and core_next is not None and core_next <= now:
            self._last_core_tick = now
            self._core(ev.Tick(), now, out)
        if self._defer_until is not None and now >= self._defer_until:
            self._defer_until = None
            deferred, self._deferred = self._deferred, {}
            for slot, msg in deferred.items():
                self._queue_ad(slot, msg, out)
        if self._ad_retry_at is not None and now >= self._ad_retry_at:
            self._ad_retry_at = None
            for slot, msg in list(self._ads_failed.items()):
                del self._ads_failed[slot]
                if slot in self.startd.slots or isinstance(msg, m.InvalidateAd):
                    self._queue_ad(slot, msg, out)
        for contact in self.contacts.values():
            if contact.exit_retry_at is not None and now >= contact.exit_retry_at and contact.exit_report:
                out.append(self._report_exit(contact))
        if self._stopping is not None and now >= self._stopping[0]:
            if self._withdrawing:
                self._exit(out)  # the collector is slow to take the invalidations: leave anyway
            else:
                out.append(c.Log(f"{len(self.running)} job(s) still running at the shutdown deadline; "
                                 "killing them on the way out", logging.WARNING))
                self._finish_stop(now, out)

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
        if self._stopping is not None and not self.running and not self._withdrawing:
            self._finish_stop(now, out)

    def _finish_stop(self, now: float, out: list[c.Action]) -> None:
        """Withdraw every slot ad (after any update still on its way), then exit."""
        self._withdrawing = True
        self._stopping = (now + 3.0, True)
        names = set(self.startd.slots) | self._ads_in_flight | set(self._ads_queued) | set(self._ads_failed)
        self._ads_failed.clear()
        self._deferred.clear()
        self._defer_until = None
        for name in sorted(names):
            self._queue_ad(name, m.InvalidateAd(ad_type=m.AdType.Startd, name=name), out)
        if not self._ads_in_flight:
            self._exit(out)

    def _exit(self, out: list[c.Action]) -> None:
        self._exited = True
        out.append(c.Exit(0))

    def _on_reconfigured(self, e: c.Reconfigured, now: float, out: list[c.Action]) -> None:
        new = e.settings
        if not isinstance(new, StartdServiceSettings):
            out.append(c.Log("reconfigured without settings: nothing changes"))
            return
        old = self.settings.startd
        layout = (old.cpus, old.memory, old.static_slots, old.machine)
        if (new.startd.cpus, new.startd.memory, new.startd.static_slots, new.startd.machine) != layout:
            out.append(c.Log("reconfig: NUM_CPUS, MEMORY or NUM_SLOTS changed; the slots keep their old "
                             "resources until the startd restarts", logging.WARNING))
            new = replace(new, startd=replace(new.startd, cpus=old.cpus, memory=old.memory, disk=old.disk,
                                              static_slots=old.static_slots, machine=old.machine))
        self.settings = new
        self.startd.settings = new.startd
        self.startd.policy = new.startd.policy
        self._next_sample = now  # re-evaluate with the new policy at once
        for name, slot in sorted(self.startd.slots.items()):
            self._translate(ev.AdvertiseSlot(name, self.startd.slot_ad(slot, now), slot.claim_id), out)
