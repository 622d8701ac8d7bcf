"""The negotiator's sans-IO core: when to negotiate, what to ask for, whom to tell.

Theory of operation
-------------------
A negotiation cycle has three phases (:mod:`htc.daemons.negotiator.states` holds their table);
the core moves between them on events and tells its service what to do with actions
(:mod:`htc.daemons.negotiator.events`; it never touches the network or the clock)::

    IDLE --deadline--> FETCHING --PoolAds--> REQUESTING --all answers (or timeout)--> IDLE
         FetchPoolAds            AskResourceRequests x N     NotifyMatches x R, SaveAccountant,
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
   :class:`NotifyMatches` per run of matches of one request on one slot (the service tells
   the schedd and the startd of each match; :mod:`~htc.daemons.negotiator.match_runs`), a
   :class:`SaveAccountant` with the accountant's state (:meth:`.Accountant.saved`, its runs of
   carves as runs: the service names them as it writes the snapshot, atomically),
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

Cycles need not wait for the startds to report the claims of the last one (HTCondor's
``NEGOTIATOR_CYCLE_DELAY`` guards that): a slot matched in a cycle stays *pending*
(:class:`~htc.daemons.negotiator.pending.PendingSlots`) until its startd reports it again, so
back-to-back cycles neither wait nor match a slot twice.

Events are dispatched through tables of the handlers themselves: :data:`_ON_EVENT` for events
that mean the same in every phase, :data:`_IN_CYCLE` for the steps of a cycle, looked up by
``(phase, type(event))``; a cycle's reply that fits no step is stale.

Replies that belong to an earlier cycle (a schedd that answered after the timeout) are
counted and ignored; an event the core does not know is a caller error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from htc.classad.clock import evaluation_time
from htc.daemons import core as c
from htc.daemons.autocluster import (ResourceRequest, SignificantCache,
                                    negotiator_significant_attributes)
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.cycle import CycleStatistics, negotiate_cycle
from htc.daemons.negotiator.gc_pause import collector_paused
from htc.daemons.negotiator.events import (AskResourceRequests, CycleFinished, FetchPoolAds,
                                           NotifyMatches, PoolAds, PoolAdsFailed,
                                           PublishAccounting, RequestsFailed, RequestsReceived,
                                           Reschedule, ResetUsage, SaveAccountant,
                                           SetAccumulatedUsage, SetPriorityFactor,
                                           SetRealPriority, Wakeup)
from htc.daemons.negotiator.pending import PendingSlots
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slotreads import as_classad, claimed_resources
from htc.daemons.negotiator.states import Phase, Step, step
from htc.daemons.negotiator.submitters import SubmitterAd, submitter_from_ad
from htc.daemons.negotiator.updown import poll_counts
from htc.errors import UsageError
from htc.wire import messages

__all__ = ["Negotiator", "NegotiatorStatistics"]


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
        #: slot expressions and policy texts already read, for the significant attributes
        self._significant = SignificantCache()

    # ------------------------------------------------------------------ public API

    def handle(self, event: c.Event, now: float) -> list[c.Action]:
        """Apply one event at time ``now`` and return the actions for the service.

        Besides the events of :mod:`htc.daemons.negotiator.events` the core takes the shared
        ones of :mod:`htc.daemons.core`: ``Tick`` (alias :data:`Wakeup`), ``Started``,
        ``StopRequested`` (answered with :class:`SaveAccountant` and ``Exit``),
        ``Reconfigured`` (new :class:`NegotiatorSettings`) and ``Received`` carrying the wire's
        ``Reschedule`` (acknowledged, and treated as a trigger).

        Raises:
            UsageError: ``event`` is not a negotiator event.
        """
        # ClassAd time() and CurrentTime read ``now``, not the real clock (a FakeClock or the
        # simulator's clock drives PREEMPTION_REQUIREMENTS' ``time() - EnteredCurrentState``).
        with evaluation_time(now):
            return self._dispatch(event, now)

    def _dispatch(self, event: c.Event, now: float) -> list[c.Action]:
        kind = type(event)
        handler = _ON_EVENT.get(kind)
        if handler is not None:
            return handler(self, event, now)
        handler = _IN_CYCLE.get((self.phase, kind))
        if handler is not None:
            if kind is not Wakeup and event.cycle != self.cycle:
                self._stale += 1
                return []
            return handler(self, event, now)
        if kind in _REPLIES:
            # a reply for a cycle that already ended (e.g. after the timeout): harmless
            self._stale += 1
            return []
        raise UsageError(
            f"negotiator in phase {self.phase.value} got {event!r}, which is not a negotiator "
            "event; pass one of the event classes of htc.daemons.negotiator.events"
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

    def _on_reschedule(self, event: Reschedule, now: float) -> list:
        return self._trigger(now)

    def _trigger(self, now: float) -> list:
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
        self.phase = step(self.phase, Step.CYCLE_DUE)
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

    def _finish(self, now: float, why: Step) -> None:
        self.phase = step(self.phase, why)
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
        self._finish(now, Step.ABORTED)
        return [CycleFinished(stats)]

    # ------------------------------------------------------------------ cycle phases

    def _on_pool_ads(self, event: PoolAds, now: float) -> list:
        machines = self.pending.apply([as_classad(ad) for ad in event.machines], now)
        submitters = [submitter_from_ad(ad) for ad in event.submitters]
        acct = self.accountant
        acct.update_priorities(now)
        acct.check_matches(claimed_resources(machines, self.settings.use_slot_weights), now)
        if self.settings.updown_policy:
            running, queued = poll_counts(submitters, self.settings.updown)
            acct.updown.update(now, running, queued, self.settings.updown)
        self._machines, self._submitters = machines, submitters
        self._requests = {}
        asks: dict[tuple[str, str], SubmitterAd] = {}
        for sub in submitters:
            if sub.idle_jobs > 0:
                asks.setdefault((sub.schedd, sub.name), sub)
        if not asks:
            return self._negotiate(now)
        significant = negotiator_significant_attributes(
            machines, self.settings.policy_texts(), self.settings.startd_job_attrs,
            cache=self._significant)
        self._waiting = set(asks)
        self.phase = step(self.phase, Step.ASKED_SCHEDDS)
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
        with collector_paused():  # the cycle and its actions: see gc_pause
            return self._negotiate_and_report(now)

    def _negotiate_and_report(self, now: float) -> list:
        result = negotiate_cycle(self._machines, self._submitters, self._requests,
                                 self.accountant, self.settings, now, self.cycle)
        stats = replace(result.statistics, started=self._last_start,
                        duration=now - self._last_start,
                        failed_schedds=tuple(sorted(self._failed)))
        self._completed += 1
        self._total_matches += stats.matches
        self._last_stats = stats
        self.pending.record(result.runs, result.ads_by_name, now + self.settings.timeout)
        self._finish(now, Step.MATCHED)
        self._shares = dict(result.shares)
        actions: list = [c.Log(f"cycle {self.cycle}: {line}", logging.WARNING) for line in result.skipped]
        actions.extend(map(NotifyMatches, result.runs))  # (a run each: no object per match here)
        actions.extend(self._accounting_changed())
        actions.append(CycleFinished(stats))
        return actions

    def _accounting_changed(self) -> list:
        return [SaveAccountant(self.accountant.saved()),
                PublishAccounting(tuple(self.accountant.accounting_ads(self._shares)))]

    # ------------------------------------------------------------------ the service's events

    def _on_received(self, event: c.Received, now: float) -> list:
        handler = _ON_MESSAGE.get(type(event.msg))
        if handler is None:
            return [c.unknown_request(event, "negotiator")]
        return handler(self, event, now)

    def _on_reschedule_message(self, event: c.Received, now: float) -> list:
        # condor_reschedule from a schedd (after a submit) or a tool
        return [c.Reply(event.conn_id, messages.Ack(detail="negotiation cycle scheduled")),
                *self._trigger(now)]

    def _on_started(self, event: c.Started, now: float) -> list:
        return []  # the first cycle is already due: next_deadline() says when

    def _on_stop(self, event: c.StopRequested, now: float) -> list:
        # A cycle in flight is abandoned (its matches were not sent); usage is kept.
        return [SaveAccountant(self.accountant.saved()), c.Exit(0)]

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

    def _set_factor(self, event: SetPriorityFactor, now: float) -> list:
        self.accountant.set_priority_factor(event.submitter, event.factor)
        return self._accounting_changed()

    def _set_priority(self, event: SetRealPriority, now: float) -> list:
        self.accountant.set_real_priority(event.submitter, event.priority)
        return self._accounting_changed()

    def _set_accumulated(self, event: SetAccumulatedUsage, now: float) -> list:
        self.accountant.set_accumulated_usage(event.submitter, event.seconds)
        return self._accounting_changed()

    def _reset_usage(self, event: ResetUsage, now: float) -> list:
        self.accountant.reset_usage(event.submitter)
        return self._accounting_changed()


#: a handler: the core, the event and the time in, the actions out
Handler = Callable[[Negotiator, c.Event, float], list]

#: event type -> handler, for events that mean the same whatever the phase
_ON_EVENT: Mapping[type, Handler] = {
    Reschedule: Negotiator._on_reschedule,
    c.Received: Negotiator._on_received,
    c.Started: Negotiator._on_started,
    c.StopRequested: Negotiator._on_stop,
    c.Reconfigured: Negotiator._on_reconfigured,
    SetPriorityFactor: Negotiator._set_factor,
    SetRealPriority: Negotiator._set_priority,
    ResetUsage: Negotiator._reset_usage,
    SetAccumulatedUsage: Negotiator._set_accumulated,
}
#: (phase, event type) -> handler: the events a cycle waits for in each phase. Which step of
#: the state table follows is the handler's to decide; a reply outside these is stale.
_IN_CYCLE: Mapping[tuple[Phase, type], Handler] = {
    (Phase.IDLE, Wakeup): Negotiator._on_wakeup_idle,
    (Phase.FETCHING, Wakeup): Negotiator._on_wakeup_waiting,
    (Phase.REQUESTING, Wakeup): Negotiator._on_wakeup_waiting,
    (Phase.FETCHING, PoolAds): Negotiator._on_pool_ads,
    (Phase.FETCHING, PoolAdsFailed): Negotiator._on_pool_ads_failed,
    (Phase.REQUESTING, RequestsReceived): Negotiator._on_requests,
    (Phase.REQUESTING, RequestsFailed): Negotiator._on_requests_failed,
}
_REPLIES = frozenset({PoolAds, PoolAdsFailed, RequestsReceived, RequestsFailed})
#: wire message type -> handler, for the messages the negotiator core answers itself
_ON_MESSAGE: Mapping[type, Handler] = {
    messages.Reschedule: Negotiator._on_reschedule_message,
}
