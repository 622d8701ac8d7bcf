"""The negotiator's sans-IO core: when to negotiate, what to ask for, whom to tell.

Theory of operation
-------------------
A negotiation cycle has three phases; the core moves between them on events and tells its
service what to do with actions (it never touches the network or the clock)::

    IDLE --deadline--> FETCHING --PoolAds--> REQUESTING --all answers (or timeout)--> IDLE
         FetchPoolAds            AskResourceRequests x N     NotifyMatch x M, SaveAccountant,
                                                             PublishAccounting, CycleFinished

1. At the deadline the core emits :class:`FetchPoolAds`; the service queries the collector
   for slot ads and submitter ads and answers with :class:`PoolAds`.
2. The core brings the accountant up to date (priorities aged to now, match records reconciled
   with the claimed slots), computes the significant attributes, and emits one
   :class:`AskResourceRequests` per submitter with idle jobs at each schedd. Each schedd
   answers, through the service, with :class:`RequestsReceived` (its autoclusters with
   counts) or the service reports :class:`RequestsFailed`.
3. When every schedd has answered, or ``NEGOTIATOR_TIMEOUT`` has passed, the core runs the
   matchmaking (:func:`~htc.daemons.negotiator.cycle.negotiate_cycle`) and emits a
   :class:`NotifyMatch` per match (the service tells the schedd and the startd), a
   :class:`SaveAccountant` with the accountant's snapshot (the service writes it atomically),
   :class:`PublishAccounting` with one Accounting ad per submitter (for the collector and
   ``htc userprio``), and :class:`CycleFinished` with the cycle's statistics.

When cycles happen. Negotiation is driven by events: a :class:`Reschedule` (a submit, a
released job, a claim given back with jobs still idle, a user's request) pulls the next cycle
forward to ``trigger_delay`` (10 ms) after it, so that a burst of triggers coalesces into one
cycle, and no sooner than ``NEGOTIATOR_MIN_INTERVAL`` after the previous cycle started (htc's
default is 0; HTCondor's 5 s). A trigger that arrives during a cycle schedules the next one the
same way once the cycle ends. Without triggers a *periodic* cycle runs every
``NEGOTIATOR_INTERVAL`` from the start of the previous one and never sooner than
``NEGOTIATOR_CYCLE_DELAY`` after it ended.

HTCondor keeps cycles 20 s apart (the cycle delay) because the startds need time to report the
claims of the last cycle; a cycle that ran sooner would see a slot it just gave away as free
and give it away again. htc remembers instead: a slot matched in a cycle is *pending*
(:class:`PendingSlots`) until its ad in the collector changes -- the startd carved it or
claimed it -- or ``NEGOTIATOR_TIMEOUT`` passes (the match lapsed). Until then a later cycle
leaves a pending static slot out and sees a pending partitionable slot without what was carved
from it, so back-to-back cycles neither wait nor match a slot twice.

Replies that belong to an earlier cycle (a schedd that answered after the timeout) are
counted and ignored; an event the core does not know is a caller error.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

from htc.daemons import core as c
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.autocluster import ResourceRequest, negotiator_significant_attributes
from htc.daemons.negotiator.cycle import CycleStatistics, Match, SubmitterAd, negotiate_cycle
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slots import as_classad, claimed_resources
from htc.errors import UsageError
from htc.wire import messages

__all__ = [
    "Negotiator", "NegotiatorSettings", "NegotiatorStatistics", "PendingSlots", "Phase",
    "Wakeup", "Reschedule", "PoolAds", "PoolAdsFailed", "RequestsReceived", "RequestsFailed",
    "SetPriorityFactor", "SetRealPriority", "ResetUsage",
    "FetchPoolAds", "AskResourceRequests", "NotifyMatch", "SaveAccountant", "PublishAccounting",
    "CycleFinished",
    "Match", "SubmitterAd", "CycleStatistics", "submitter_from_ad",
]


class Phase(enum.Enum):
    """Where the core is in a negotiation cycle."""

    IDLE = "idle"
    FETCHING = "fetching"  # waiting for the collector's slot and submitter ads
    REQUESTING = "requesting"  # waiting for the schedds' resource requests


# --------------------------------------------------------------------------- events


#: The service's timer fired (``next_deadline()`` has passed): the shared ``Tick`` event.
Wakeup = c.Tick


@dataclass(frozen=True)
class Reschedule(c.Event):
    """Negotiate soon: new idle jobs, a slot became free, or someone asked."""

    reason: str = ""


@dataclass(frozen=True)
class PoolAds(c.Event):
    """The collector's answer to :class:`FetchPoolAds`: all slot ads and submitter ads."""

    cycle: int
    machines: tuple = ()
    submitters: tuple = ()


@dataclass(frozen=True)
class PoolAdsFailed(c.Event):
    """The collector could not be asked; the cycle is abandoned."""

    cycle: int
    reason: str


@dataclass(frozen=True)
class RequestsReceived(c.Event):
    """A schedd's resource requests for one submitter, best first."""

    cycle: int
    schedd: str
    submitter: str
    requests: tuple[ResourceRequest, ...] = ()


@dataclass(frozen=True)
class RequestsFailed(c.Event):
    """A schedd could not be asked for a submitter's requests (it is skipped this cycle)."""

    cycle: int
    schedd: str
    submitter: str
    reason: str


@dataclass(frozen=True)
class SetPriorityFactor(c.Event):
    """``htc userprio -setfactor``."""

    submitter: str
    factor: float


@dataclass(frozen=True)
class SetRealPriority(c.Event):
    """``htc userprio -setprio``."""

    submitter: str
    priority: float


@dataclass(frozen=True)
class ResetUsage(c.Event):
    """``htc userprio -resetusage``."""

    submitter: str


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class FetchPoolAds(c.Action):
    """Query the collector for every slot ad and submitter ad; answer with PoolAds."""

    cycle: int


@dataclass(frozen=True)
class AskResourceRequests(c.Action):
    """Ask ``schedd`` for ``submitter``'s resource requests; answer with RequestsReceived."""

    cycle: int
    schedd: str
    schedd_address: str
    submitter: str
    significant_attributes: tuple[str, ...]


@dataclass(frozen=True)
class NotifyMatch(c.Action):
    """Tell the schedd and the startd of ``match`` (wire message MatchNotify)."""

    match: Match


@dataclass(frozen=True)
class SaveAccountant(c.Action):
    """Persist the accountant (write ``snapshot`` as JSON, atomically)."""

    snapshot: dict


@dataclass(frozen=True)
class PublishAccounting(c.Action):
    """Advertise these Accounting ads (one per submitter) to the collector for ``htc userprio``."""

    ads: tuple[dict, ...]


@dataclass(frozen=True)
class CycleFinished(c.Action):
    """A cycle ended (with matches or aborted); publish its statistics."""

    statistics: CycleStatistics


@dataclass(frozen=True)
class NegotiatorStatistics:
    """The negotiator's state at a glance (``Negotiator.statistics()``)."""

    phase: str
    cycle: int
    cycles_completed: int
    cycles_aborted: int
    total_matches: int
    stale_replies: int
    next_cycle: float | None
    last_cycle: CycleStatistics | None


def submitter_from_ad(ad) -> SubmitterAd:
    """Read a Submitter ad (``Name``, ``ScheddName``, ``MyAddress``, ``IdleJobs``, ``RunningJobs``).

    Raises:
        UsageError: the ad lacks ``Name`` or ``ScheddName``.
    """
    if isinstance(ad, SubmitterAd):
        return ad
    name, schedd = ad.get("Name"), ad.get("ScheddName")
    if not isinstance(name, str) or not isinstance(schedd, str):
        raise UsageError(
            f"submitter ad needs string Name and ScheddName attributes, got Name={name!r}, "
            f"ScheddName={schedd!r}; the schedd advertises one such ad per submitter"
        )

    def count(attr: str) -> int:
        v = ad.get(attr, 0)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0

    address = ad.get("MyAddress", ad.get("ScheddIpAddr", ""))
    return SubmitterAd(name=name, schedd=schedd,
                       schedd_address=address if isinstance(address, str) else "",
                       idle_jobs=count("IdleJobs"), running_jobs=count("RunningJobs"))


#: what tells one report of a slot from the next: the startd's update counter, else (an ad
#: without one) the attributes that change when a startd claims or carves the slot
_REPORT = ("DaemonStartTime", "UpdateSequenceNumber")
_CLAIM_SIGNATURE = ("State", "Activity", "Cpus", "Memory", "Disk", "ClaimId")


class PendingSlots:
    """Slots matched by recent cycles whose startds have not reported the claims yet.

    Keyed by slot name: which report of the slot was matched (the startd's
    ``UpdateSequenceNumber``; for an ad without one, its State, Activity, resources and
    ClaimId), what was given away on it (the whole slot, or the sum of the carves from a
    partitionable slot) and until when the record holds. A newer report is the startd's
    answer: the record is dropped and the ad is taken as it is. (Content alone cannot tell: a
    p-slot whose claim came and went between two cycles looks as it did.)
    """

    def __init__(self) -> None:
        self._slots: dict[str, tuple[tuple, bool, list[float], float]] = {}
        #: slot name -> what each of its recorded matches gave away: (claim id, autocluster,
        #: carve or None for the whole slot), so that a match the schedd let lapse gives it back
        self._given: dict[str, list[tuple[str, int, tuple[float, float, float] | None]]] = {}

    def __len__(self) -> int:
        return len(self._slots)

    @staticmethod
    def _signature(ad) -> tuple:
        names = _REPORT if ad.get("UpdateSequenceNumber") is not None else _CLAIM_SIGNATURE
        return tuple(ad.get(name) for name in names)

    def record(self, matches, machines, until: float) -> None:
        """Remember the slots ``matches`` gave away (``machines``: the ads the cycle saw)."""
        ads = {ad.get("Name"): ad for ad in machines}
        for match in matches:
            ad = ads.get(match.slot_name)
            if ad is None:
                continue
            signature, whole, carved, _ = self._slots.get(match.slot_name, (self._signature(ad), False, [0.0] * 3, 0))
            if match.carved is None:
                whole = True
            else:
                carved = [have + more for have, more in zip(carved, match.carved)]
            self._slots[match.slot_name] = (signature, whole, carved, until)
            self._given.setdefault(match.slot_name, []).append((match.claim_id, match.autocluster_id, match.carved))

    def lapsed(self, slot_name: str, claim_id: str, autocluster_id: int | None) -> bool:
        """A schedd let a match of ``slot_name`` lapse: give back what it held (True: found)."""
        given = self._given.get(slot_name, [])
        found = next((g for g in given if g[0] == claim_id and g[1] == autocluster_id), None) \
            or next((g for g in given if g[0] == claim_id), None)
        record = self._slots.get(slot_name)
        if found is None or record is None:
            return False
        given.remove(found)
        signature, whole, carved, until = record
        if found[2] is not None:
            carved = [max(0.0, have - back) for have, back in zip(carved, found[2])]
        whole = any(g[2] is None for g in given)
        if not whole and not any(amount > 0 for amount in carved):
            self._forget(slot_name)
        else:
            self._slots[slot_name] = (signature, whole, carved, until)
        return True

    def _forget(self, slot_name: str) -> None:
        self._slots.pop(slot_name, None)
        self._given.pop(slot_name, None)

    def apply(self, machines: list, now: float) -> list:
        """The slot ads as a cycle at ``now`` should see them: pending slots held back."""
        out = []
        seen = set()
        for ad in machines:
            name = ad.get("Name")
            seen.add(name)
            pending = self._slots.get(name)
            if pending is None:
                out.append(ad)
                continue
            signature, whole, carved, until = pending
            if now >= until or self._signature(ad) != signature:
                self._forget(name)  # the startd reported, or the match lapsed
                out.append(ad)
                continue
            if whole:
                continue
            ad = ad.copy()
            for attr, amount in zip(("Cpus", "Memory", "Disk"), carved):
                have = ad.get(attr)
                if isinstance(have, (int, float)) and not isinstance(have, bool):
                    ad[attr] = type(have)(have - amount) if isinstance(have, int) else have - amount
            cpus, memory = ad.get("Cpus", 1), ad.get("Memory", 1)
            if isinstance(cpus, (int, float)) and cpus < 1 or isinstance(memory, (int, float)) and memory <= 0:
                continue  # all of it is on its way to the schedds
            out.append(ad)
        for name in [n for n in self._slots if n not in seen]:
            self._forget(name)  # the slot is gone from the pool
        return out


class Negotiator:
    """The negotiator daemon's decisions (see the module docstring).

    Args:
        settings: the negotiator knobs.
        accountant: the pool's accountant (restored from the service's snapshot), or None
            for a fresh one.
        now: the time the core starts; the first cycle is due at once.
    """

    def __init__(self, settings: NegotiatorSettings | None = None,
                 accountant: Accountant | None = None, now: float = 0.0):
        self.settings = settings or NegotiatorSettings()
        self.accountant = accountant or Accountant(self.settings.accountant, now=now)
        self.phase = Phase.IDLE
        self.cycle = 0
        self._next_cycle = now
        self._phase_deadline: float | None = None
        self._last_start: float | None = None
        self._last_end: float | None = None
        self._trigger_pending = False
        self._machines: list = []
        self._submitters: list[SubmitterAd] = []
        self._waiting: set[tuple[str, str]] = set()
        self._requests: dict[tuple[str, str], tuple[ResourceRequest, ...]] = {}
        self._failed: set[str] = set()
        self._completed = self._aborted = self._total_matches = self._stale = 0
        self._last_stats: CycleStatistics | None = None
        self._shares: dict[str, float] = {}
        self.pending = PendingSlots()

    # ------------------------------------------------------------------ public API

    def handle(self, event: c.Event, now: float) -> list[c.Action]:
        """Apply one event at time ``now`` and return the actions for the service.

        Besides this module's events the core takes the shared ones of
        :mod:`htc.daemons.core`: ``Tick`` (alias :data:`Wakeup`), ``Started``,
        ``StopRequested`` (answered with :class:`SaveAccountant` and ``Exit``),
        ``Reconfigured`` (new :class:`NegotiatorSettings`) and ``Received`` carrying the wire's
        ``Reschedule`` (acknowledged, and treated as a trigger).

        Raises:
            UsageError: ``event`` is not one of this module's event classes.
        """
        kind = type(event)
        if kind in _ADMIN:
            return getattr(self, _ADMIN[kind])(event)
        if kind is Reschedule:
            return self._on_reschedule(now)
        if kind in _SERVICE:
            return getattr(self, _SERVICE[kind])(event, now)
        handler = _TRANSITIONS.get((self.phase, kind))
        if handler is not None:
            if kind is not Wakeup and event.cycle != self.cycle:
                self._stale += 1
                return []
            return getattr(self, handler)(event, now)
        if kind in _REPLIES:
            # a reply for a cycle that already ended (e.g. after the timeout): harmless
            self._stale += 1
            return []
        raise UsageError(
            f"negotiator in phase {self.phase.value} got {event!r}, which is not a negotiator "
            "event; pass one of the event classes of htc.daemons.negotiator.core"
        )

    def match_lapsed(self, slot_name: str, claim_id: str, autocluster_id: int | None) -> bool:
        """A schedd did not take a match (its Ack to MatchNotify began ``MATCH_LAPSED``): what the
        match held of ``slot_name`` is free for the next cycle (True: there was such a match)."""
        return self.pending.lapsed(slot_name, claim_id, autocluster_id)

    def next_deadline(self) -> float | None:
        """Return when the service must send :class:`Wakeup` (a cycle or a timeout is due)."""
        if self.phase is Phase.IDLE:
            return self._next_cycle
        return self._phase_deadline

    def statistics(self) -> NegotiatorStatistics:
        """Return a frozen summary of the negotiator and its latest cycle."""
        return NegotiatorStatistics(
            phase=self.phase.value, cycle=self.cycle, cycles_completed=self._completed,
            cycles_aborted=self._aborted, total_matches=self._total_matches,
            stale_replies=self._stale,
            next_cycle=self._next_cycle if self.phase is Phase.IDLE else None,
            last_cycle=self._last_stats)

    # ------------------------------------------------------------------ scheduling

    def _earliest_start(self, now: float) -> float:
        """The soonest a triggered cycle may start: the coalescing gap, and NEGOTIATOR_MIN_INTERVAL
        after the previous start (no NEGOTIATOR_CYCLE_DELAY: pending slots cover what it guards)."""
        t = now + self.settings.trigger_delay
        if self._last_start is not None:
            t = max(t, self._last_start + self.settings.min_interval)
        return t

    def _on_reschedule(self, now: float) -> list:
        if self.phase is Phase.IDLE:
            self._next_cycle = min(self._next_cycle, self._earliest_start(now))
        else:
            self._trigger_pending = True
        return []

    def _on_wakeup_idle(self, event: Wakeup, now: float) -> list:
        if now < self._next_cycle:
            return []  # an early timer: nothing is due yet
        self.cycle += 1
        self._last_start = now
        self.phase = Phase.FETCHING
        self._phase_deadline = now + self.settings.timeout
        self._failed = set()
        return [FetchPoolAds(self.cycle)]

    def _on_wakeup_waiting(self, event: Wakeup, now: float) -> list:
        if now < self._phase_deadline:
            return []
        if self.phase is Phase.FETCHING:
            return self._abort(now, f"the collector did not answer within "
                                    f"NEGOTIATOR_TIMEOUT ({self.settings.timeout:g} s)")
        # Negotiate with the schedds that did answer; the others are skipped this cycle.
        self._failed.update(schedd for schedd, _ in self._waiting)
        self._waiting.clear()
        return self._negotiate(now)

    def _finish(self, now: float) -> None:
        self.phase = Phase.IDLE
        self._phase_deadline = None
        self._last_end = now
        periodic = max(self._last_start + self.settings.interval,
                       now + self.settings.cycle_delay,
                       self._last_start + self.settings.min_interval)
        self._next_cycle = periodic
        if self._trigger_pending:
            self._trigger_pending = False
            self._next_cycle = min(periodic, self._earliest_start(now))
        self._machines, self._submitters, self._requests = [], [], {}

    def _abort(self, now: float, reason: str) -> list:
        self._aborted += 1
        stats = CycleStatistics(cycle=self.cycle, started=self._last_start,
                                duration=now - self._last_start, aborted=reason)
        self._last_stats = stats
        self._finish(now)
        return [CycleFinished(stats)]

    # ------------------------------------------------------------------ cycle phases

    def _on_pool_ads(self, event: PoolAds, now: float) -> list:
        machines = self.pending.apply([as_classad(ad) for ad in event.machines], now)
        submitters = [submitter_from_ad(ad) for ad in event.submitters]
        acct = self.accountant
        acct.update_priorities(now)
        acct.check_matches(claimed_resources(machines, self.settings.use_slot_weights), now)
        self._machines, self._submitters = machines, submitters
        self._requests = {}
        asks: dict[tuple[str, str], SubmitterAd] = {}
        for sub in submitters:
            if sub.idle_jobs > 0:
                asks.setdefault((sub.schedd, sub.name), sub)
        if not asks:
            return self._negotiate(now)
        significant = negotiator_significant_attributes(
            machines, self.settings.policy_texts(), self.settings.startd_job_attrs)
        self._waiting = set(asks)
        self.phase = Phase.REQUESTING
        self._phase_deadline = now + self.settings.timeout
        return [AskResourceRequests(self.cycle, schedd, sub.schedd_address, name, significant)
                for (schedd, name), sub in asks.items()]

    def _on_pool_ads_failed(self, event: PoolAdsFailed, now: float) -> list:
        return self._abort(now, f"the collector could not be queried: {event.reason}")

    def _on_requests(self, event: RequestsReceived, now: float) -> list:
        key = (event.schedd, event.submitter)
        if key not in self._waiting:
            self._stale += 1  # an answer nobody asked for (or a duplicate)
            return []
        self._waiting.discard(key)
        self._requests[key] = tuple(event.requests)
        return self._negotiate(now) if not self._waiting else []

    def _on_requests_failed(self, event: RequestsFailed, now: float) -> list:
        key = (event.schedd, event.submitter)
        if key not in self._waiting:
            self._stale += 1
            return []
        self._waiting.discard(key)
        self._failed.add(event.schedd)
        return self._negotiate(now) if not self._waiting else []

    def _negotiate(self, now: float) -> list:
        result = negotiate_cycle(self._machines, self._submitters, self._requests,
                                 self.accountant, self.settings, now, self.cycle)
        stats = replace(result.statistics, started=self._last_start,
                        duration=now - self._last_start,
                        failed_schedds=tuple(sorted(self._failed)))
        self._completed += 1
        self._total_matches += stats.matches
        self._last_stats = stats
        self.pending.record(result.matches, self._machines, now + self.settings.timeout)
        self._finish(now)
        self._shares = dict(result.shares)
        actions: list = [c.Log(f"cycle {self.cycle}: {line}", logging.WARNING) for line in result.skipped]
        actions.extend(NotifyMatch(m) for m in result.matches)
        actions.extend(self._accounting_changed())
        actions.append(CycleFinished(stats))
        return actions

    def _accounting_changed(self) -> list:
        return [SaveAccountant(self.accountant.snapshot()),
                PublishAccounting(tuple(self.accountant.accounting_ads(self._shares)))]

    # ------------------------------------------------------------------ the service's events

    def _on_received(self, event: c.Received, now: float) -> list:
        if isinstance(event.msg, messages.Reschedule):
            # condor_reschedule from a schedd (after a submit) or a tool
            return [c.Reply(event.conn_id, messages.Ack(detail="negotiation cycle scheduled")),
                    *self._on_reschedule(now)]
        return [c.unknown_request(event, "negotiator")]

    def _on_started(self, event: c.Started, now: float) -> list:
        return []  # the first cycle is already due: next_deadline() says when

    def _on_stop(self, event: c.StopRequested, now: float) -> list:
        # A cycle in flight is abandoned (its matches were not sent); usage is kept.
        return [SaveAccountant(self.accountant.snapshot()), c.Exit(0)]

    def _on_reconfigured(self, event: c.Reconfigured, now: float) -> list:
        if not isinstance(event.settings, NegotiatorSettings):
            raise UsageError(
                f"negotiator reconfigured with {type(event.settings).__name__}; the service "
                "must pass NegotiatorSettings (NegotiatorSettings.from_config(config))")
        self.settings = event.settings
        self.accountant.settings = event.settings.accountant
        if self.phase is Phase.IDLE and self._last_start is not None:
            # a shorter NEGOTIATOR_INTERVAL takes effect now, not after the old one
            self._next_cycle = min(self._next_cycle,
                                   self._last_start + self.settings.interval)
        return []

    # ------------------------------------------------------------------ administration

    def _set_factor(self, event: SetPriorityFactor) -> list:
        self.accountant.set_priority_factor(event.submitter, event.factor)
        return self._accounting_changed()

    def _set_priority(self, event: SetRealPriority) -> list:
        self.accountant.set_real_priority(event.submitter, event.priority)
        return self._accounting_changed()

    def _reset_usage(self, event: ResetUsage) -> list:
        self.accountant.reset_usage(event.submitter)
        return self._accounting_changed()


#: (phase, event type) -> handler: the legal steps of a cycle. Anything else is stale or wrong.
_TRANSITIONS: Mapping[tuple[Phase, type], str] = {
    (Phase.IDLE, Wakeup): "_on_wakeup_idle",
    (Phase.FETCHING, Wakeup): "_on_wakeup_waiting",
    (Phase.REQUESTING, Wakeup): "_on_wakeup_waiting",
    (Phase.FETCHING, PoolAds): "_on_pool_ads",
    (Phase.FETCHING, PoolAdsFailed): "_on_pool_ads_failed",
    (Phase.REQUESTING, RequestsReceived): "_on_requests",
    (Phase.REQUESTING, RequestsFailed): "_on_requests_failed",
}
_REPLIES = frozenset({PoolAds, PoolAdsFailed, RequestsReceived, RequestsFailed})
_SERVICE: Mapping[type, str] = {
    c.Received: "_on_received",
    c.Started: "_on_started",
    c.StopRequested: "_on_stop",
    c.Reconfigured: "_on_reconfigured",
}
_ADMIN: Mapping[type, str] = {
    SetPriorityFactor: "_set_factor",
    SetRealPriority: "_set_priority",
    ResetUsage: "_reset_usage",
}
