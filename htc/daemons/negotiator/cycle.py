"""One negotiation cycle: fair-share pie spins, per-submitter negotiation, best-slot search.

Theory of operation
-------------------
:func:`negotiate_cycle` is HTCondor's ``negotiateWithGroup`` + ``negotiate`` +
``matchmakingAlgorithm`` for a pool without group quotas, as a pure function of the slot ads,
the submitters with their resource requests, and the accountant (which it updates with the
matches it makes).

**Pie spins.** Each spin divides the pool's total slot weight among the submitters still
negotiating in inverse proportion to their effective priority (:func:`pie_slices`); a
submitter's *limit* is its slice minus what it already holds. Submitters negotiate in the order
of :func:`order_submitters`, each until its limit is reached or it runs out of requests
(:func:`~.negotiate.negotiate_entry`, HTCondor's ``negotiate``, in :mod:`.negotiate`). A
submitter that got everything it asked for (or whose requests match nothing) leaves; one that
hit its limit stays, and the pie is spun again with the leftovers while anything changed. In
the first spin (with preemption considered) a submitter over its limit may still take slots
whose ``RANK`` strictly prefers its jobs.

**Best slot.** For a request (one autocluster) the candidates are the idle slots that accept
the job and that the job accepts (both ``Requirements`` hold), plus the claimed slots
:func:`~htc.daemons.negotiator.preemption.decide_preemption` allows
(:mod:`htc.daemons.negotiator.claimed`). The best candidate has
the highest ``NEGOTIATOR_PRE_JOB_RANK``, then job ``Rank``, then ``NEGOTIATOR_POST_JOB_RANK``,
then no preemption over rank preemption over priority preemption, then ``PREEMPTION_RANK``,
then the slot name (so results are deterministic). Idle slots are searched class by class
with caches shared between requests (:mod:`htc.daemons.negotiator.search`); claimed slots are
few and checked one by one, after a cheap filter drops those no request could preempt.

A matched slot leaves the cycle; a partitionable slot gives up the request's (quantized)
``RequestCpus``/``RequestMemory``/``RequestDisk`` and stays while it has cores left.

**One bad job.** Expressions come from users. If working on one request raises (its ad
cannot be analysed, an expression of it fails in a way evaluation does not turn into ERROR),
that request is left out of this cycle and the cycle goes on with every other
(:meth:`_Cycle.skip`); :attr:`CycleResult.skipped` says which and why, and the negotiator
logs it at every cycle until the job changes or leaves.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from htc.classad import ClassAd
from htc.classad.ast import Literal
from htc.classad.clock import evaluation_time
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.clock import REAL, Clock
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.claimed import ClaimedSearch
from htc.daemons.negotiator.fair_share import order_submitters, pie_slices
from htc.daemons.negotiator.gc_pause import collector_paused
from htc.daemons.negotiator.groups import ROOT, allocate, build_tree, group_order
from htc.daemons.negotiator.match_runs import Match, MatchRun, expand, new_run
from htc.daemons.negotiator.matched_ad import carve_numbers, sizes_of
from htc.daemons.negotiator.negotiate import MM_DONE, MM_RESUME, negotiate_entry
from htc.daemons.negotiator.preemption import PreemptState
from htc.daemons.negotiator.search import RequestState
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slotreads import as_classad, number, same_type, slot_weight
from htc.daemons.negotiator.slots import UNAVAILABLE_STATES, Slot, SlotPool, names_and_other_reads
from htc.daemons.negotiator.submitters import SubmitterAd, accounting_group_of
from htc.daemons.negotiator.updown import entity_of, order_by_index
from htc.daemons.negotiator.vsearch import VectorSearch


@dataclass(frozen=True)
class CycleStatistics:
    """What one cycle did (``Negotiator.statistics()`` reports the latest)."""

    cycle: int = 0
    started: float = 0.0
    duration: float = 0.0  # from asking the collector to the last match (event time)
    match_seconds: float = 0.0  # CPU-side time spent matchmaking (instrumentation only)
    slots: int = 0
    candidate_slots: int = 0
    slot_classes: int = 0  # built by the class search (0: every request took the vector search)
    submitters: int = 0
    schedds: int = 0  # distinct schedds with a submitter in the cycle
    requests: int = 0
    idle_jobs: int = 0
    matches: int = 0
    rank_preemptions: int = 0
    priority_preemptions: int = 0
    rejections: int = 0
    rejections_by_reason: Mapping[str, int] = field(default_factory=dict)
    pie_spins: int = 0
    submitters_share_limited: tuple[str, ...] = ()
    failed_schedds: tuple[str, ...] = ()
    aborted: str = ""  # why the cycle was abandoned, if it was


@dataclass(frozen=True)
class CycleResult:
    """Matches of one cycle, in the order they were made, and its statistics.

    The cycle hands over its matches as runs (:class:`~.match_runs.MatchRun`: one record per
    request and slot); :attr:`matches` expands them, once, when it is first read."""

    runs: tuple[MatchRun, ...]
    statistics: CycleStatistics
    shares: Mapping[str, float] = field(default_factory=dict)
    #: requests left out of the cycle because working on them raised, one line each (which
    #: submitter, schedd and autocluster, and the error): the negotiator logs them
    skipped: tuple[str, ...] = ()
    #: every slot ad the cycle read with a Name, by name (the last ad of a name): what
    #: :meth:`.PendingSlots.record` looks the matched slots up in
    ads_by_name: Mapping[str, ClassAd] = field(default_factory=dict)

    @cached_property
    def matches(self) -> tuple[Match, ...]:
        """Every match of the cycle, in the order they were made (the runs expanded)."""
        return expand(self.runs)


class _Entry:
    __slots__ = ("ad", "requests")

    def __init__(self, ad: SubmitterAd):
        self.ad = ad
        self.requests: list[RequestState] = []


#: slack for float sums of shares (1/3 + 1/3 + 1/3 of 30 slots is not quite 30)
_EPSILON = 1e-9


class _Cycle:
    """The mutable state of one cycle; see the module docstring for the algorithm."""

    def __init__(self, settings: NegotiatorSettings, accountant: Accountant, now: float,
                 cycle: int):
        self.s = settings
        self.acct = accountant
        self.now = now
        self.cycle = cycle
        self.runs: list[MatchRun] = []  # the matches made, a record per run (.match_runs)
        self.matched = 0  # how many matches they hold
        self.preemptions: Counter[PreemptState] = Counter()  # matches that preempt, by kind
        self.reasons: Counter[str] = Counter()
        self.rejections = 0
        self.share_limited: set[str] = set()
        self.pie_left = 0.0
        self.free = 0  # untaken candidate slots
        self.search = VectorSearch(settings)  # by columns, scalar where it must (vsearch)
        self.claimed = ClaimedSearch(settings, accountant, now)
        self.claim_seq = 0
        self.skipped: list[str] = []

    def skip(self, entry: _Entry, request: ResourceRequest, exc: Exception,
             rs: RequestState | None = None) -> None:
        """Leave one request out of the cycle: working on it raised (one job must not stop
        the matchmaking of every other; the negotiator logs why)."""
        if rs is not None:
            rs.remaining = 0
        self.skipped.append(
            f"skipped the request of {entry.ad.name} at {entry.ad.schedd} (autocluster "
            f"{request.autocluster_id}, {request.count} job(s)): {type(exc).__name__}: {str(exc)[:300]}")

    # ------------------------------------------------------------------ set-up

    def build_pool(self, slots: list[Slot], requests: list[RequestState]) -> SlotPool:
        roots: set[str] = set()
        job_names: set[str] = set()
        for rs in requests:
            try:
                # Every slot attribute any job expression can read belongs in the class key:
                # TARGET.x, and plain names the job lacks (they fall back to the slot).
                names, reads = names_and_other_reads(rs.job)
            except Exception as exc:  # noqa: BLE001 - see skip()
                self.skip(rs.entry, rs.request, exc, rs)
                continue
            job_names |= names
            roots |= reads
        pool = SlotPool(roots, job_names, self.s.compiled("pre_job_rank"),
                        self.s.compiled("post_job_rank"))
        if not any(rs.remaining > 0 for rs in requests):
            # Nothing to match (no idle job asked, or every request was skipped): count the
            # candidates, which the pie and the statistics need, but build no classes and no
            # per-cycle claimed ads that no search will read (slot_classes is 0 then).
            self.free = sum(1 for slot in slots
                            if not slot.claimed or self.claimed.may_preempt(slot))
            return pool
        idle = []
        for slot in slots:
            if slot.remote_user is not None:  # (slot.claimed)
                if self.claimed.may_preempt(slot):
                    self.claimed.prepare(slot)
                    pool.claimed.append(slot)
                    self.free += 1
            else:
                if slot.partitionable:
                    slot.ad = slot.ad.copy()  # carving edits it; keep the caller's ad intact
                idle.append(slot)
        pool.add_all(idle)
        self.free += len(idle)
        return pool

    def submitter_job(self, entry: _Entry, request: ResourceRequest) -> ClassAd:
        job = request.job.copy() if isinstance(request.job, ClassAd) else ClassAd(dict(request.job))
        name = entry.ad.name
        eup = self.acct.effective_priority(name)
        job["SubmitterUserPrio"] = eup
        job["SubmittorPrio"] = eup
        job["SubmitterUserResourcesInUse"] = self.acct.weighted_resources_used(name)
        group = accounting_group_of(name, self.s.accountant.group_names)
        job["SubmitterGroup"] = group if group is not None else "<none>"
        job["SubmitterNegotiatingGroup"] = job["SubmitterGroup"]  # groups negotiate as themselves
        if self.s.updown_policy:
            job["SubmitterUpDownIndex"] = self.acct.updown.index(
                entity_of(name, entry.ad.schedd, self.s.updown))
        return job

    # ------------------------------------------------------------------ matching

    def make_match(self, rs: RequestState, pool: SlotPool, slot: Slot, state: PreemptState,
                   cost: float, carve) -> None:
        entry = rs.entry.ad
        # a carved slot's ad as it is now (see .matched_ad), else the ad itself
        sizes = [sizes_of(slot.ad)] if carve is not None else None
        victim = None
        if state is not PreemptState.NONE:
            victim = slot.remote_user
            self.preemptions[state] += 1  # (a run's further matches never preempt: runs.py)
        self.runs.append(new_run((  # (every field in order: see MatchRun)
            entry.name, entry.schedd, entry.schedd_address, rs.request.autocluster_id,
            rs.request.job_ids, rs.matched, 1, slot.name, slot.address, slot.claim_id or None,
            self.cycle, self.claim_seq, slot.ad, sizes, state, victim, cost, carve)))
        self.claim_seq += 1
        self.matched += 1
        rs.matched += 1
        rs.remaining -= 1
        if carve is None:
            self.acct.add_match(entry.name, slot.name, cost, self.now)
            pool.take(slot)
            self.search.changed(slot)
            self.free -= 1
            self.search.taken_count += 1
            return
        # A partitionable slot: charge a pseudo-resource per carve (the real dynamic slot
        # replaces it in the next cycle's check_matches) and shrink the slot.
        self.acct.add_carves(entry.name, slot.name, slot.carves, 1, cost, self.now)
        slot.carves += 1
        self.search.taken_count += 1
        ad = slot.ad
        if not carve_numbers(ad, carve):
            for name, amount in zip(("Cpus", "Memory", "Disk"), carve):
                have = number(ad, name)
                if have is not None:
                    ad[name] = same_type(ad[name], have - amount)
        slot.weight = slot_weight(ad, self.s.use_slot_weights)
        if (number(ad, "Cpus", 1.0) or 0.0) < 1.0 or (number(ad, "Memory", 1.0) or 0.0) <= 0:
            pool.take(slot)
            self.free -= 1
            self.search.changed(slot)
        else:
            self.search.changed(slot)
            self.search.hold(rs, slot, pool)  # re-classed when rs is done with it

    def spin_groups(self, entries: list[_Entry], pool: SlotPool, pool_weight: float,
                    min_weight: float) -> tuple[int, dict[str, float]]:
        """Accounting groups with quotas (:mod:`.groups`): allocate the pool to the groups, then
        spin each group's pie over its allocation, in ``GROUP_SORT_EXPR`` order, for up to
        ``GROUP_QUOTA_MAX_ALLOCATION_ROUNDS`` rounds."""
        s, acct = self.s, self.acct
        names = s.accountant.group_names
        tree = build_tree(names, s.groups)
        by_group: dict[str, list[_Entry]] = {}
        for entry in entries:
            by_group.setdefault(accounting_group_of(entry.ad.name, names) or ROOT, []).append(entry)
        members = {g: {e.ad.name for e in es} for g, es in by_group.items()}
        spins, shares = 0, {}
        idle: set[str] = set()  # groups that could use nothing of their last allocation
        for _round in range(s.groups.max_allocation_rounds):
            requested = {}
            for g, es in by_group.items():
                held = sum(acct.weighted_resources_used(n) for n in members[g])
                wanting = 0 if g in idle else sum(r.remaining for e in es for r in e.requests)
                requested[g] = held + wanting
            allocated = allocate(tree, pool_weight, requested)
            for node in tree.walk():
                node.usage = sum(acct.weighted_resources_used(n) for n in members.get(node.name, ()))
            before_round = self.matched
            for node in group_order(tree, s.groups):
                group_entries = by_group.get(node.name)
                if not group_entries or node.name in idle or self.free <= 0:
                    continue
                before = self.matched
                limit = allocated[node.name] - node.usage
                if limit > _EPSILON:
                    n, got = self.spin_pie(group_entries, pool, allocated[node.name], min_weight,
                                           group_limit=limit)
                    spins += n
                    for name, share in got.items():
                        shares.setdefault(name, share)
                if self.matched == before:
                    idle.add(node.name)
            if self.matched == before_round or self.free <= 0:
                break
        return spins, shares

    def spin_pie(self, entries: list[_Entry], pool: SlotPool, pool_weight: float,
                 min_weight: float, group_limit: float = math.inf) -> tuple[int, dict[str, float]]:
        """HTCondor's ``negotiateWithGroup``: spin the pie while anything changes.

        With group quotas ``pool_weight`` is the group's allocation and ``group_limit`` what the
        group may still gain (allocation - usage); without, the pool and no limit.

        Returns:
            The number of spins, and each submitter's share of the pool in the first spin.
        """
        s, acct = self.s, self.acct
        eups = {e.ad.name: acct.effective_priority(e.ad.name) for e in entries}
        spins = 0
        shares: dict[str, float] = {}
        active = list(entries)
        while active and self.free > 0:
            spins += 1
            ignore_limit = spins == 1 and s.consider_preemption
            names = {e.ad.name for e in active}
            slices = pie_slices({n: eups[n] for n in names},
                                {n: acct.weighted_resources_used(n) for n in names}, pool_weight)
            if spins == 1:
                # the order is decided once, before anyone negotiates
                shares = {n: p.share for n, p in slices.items()}
                keyed = {(e.ad.name, e.ad.schedd): e for e in active}
                active = [keyed[k] for k in order_submitters(keyed, eups, slices)]
            if s.ignore_user_priorities:
                self.pie_left = group_limit
            else:
                self.pie_left = min(group_limit, sum(slices[e.ad.name].limit for e in active))
            if not s.consider_preemption and self.pie_left <= 0:
                break
            pie_orig, count_orig = self.pie_left, len(active)
            still = []
            for entry in active:
                name = entry.ad.name
                limit = math.inf if s.ignore_user_priorities else max(
                    0.0, slices[name].share * pool_weight - acct.weighted_resources_used(name))
                limit = min(limit, self.pie_left)
                if entry.ad.idle_jobs <= 0 or not any(r.remaining for r in entry.requests):
                    result = MM_DONE
                elif spins > 1 and self.pie_left < min_weight - _EPSILON:
                    # HTCondor also skips a submitter whose own limit is below one slot here;
                    # htc lets it round up once (docs/negotiator.md, "Differences"), so a
                    # slot split between two submitters' fractional limits is not left idle.
                    result = MM_RESUME
                else:
                    result = negotiate_entry(self, entry, pool, limit, limit, ignore_limit)
                if result == MM_RESUME:
                    # stays for the next spin, where its rejected requests are offered again
                    still.append(entry)
            active = still
            if group_limit != math.inf:  # what later spins of the group may still add
                group_limit -= max(0.0, pie_orig - self.pie_left)
            if not (self.pie_left < pie_orig or len(active) < count_orig):
                break
        return spins, shares

    def spin_updown(self, entries: list[_Entry], pool: SlotPool) -> tuple[int, dict[str, float]]:
        """``NEGOTIATOR_POLICY = UPDOWN``: submitters in ascending schedule index, no pie; each
        takes what it can, at most ``UPDOWN_PLACEMENTS_PER_CYCLE`` matches per entity."""
        ud, index = self.s.updown, self.acct.updown
        keyed = {(e.ad.name, e.ad.schedd): e for e in entries}
        placed: Counter[str] = Counter()
        for key in order_by_index(keyed, index, ud):
            if self.free <= 0:
                break
            entry = keyed[key]
            if entry.ad.idle_jobs <= 0 or not any(r.remaining for r in entry.requests):
                continue
            entity = entity_of(entry.ad.name, entry.ad.schedd, ud)
            budget = ud.placements_per_cycle - placed[entity] if ud.placements_per_cycle else None
            if budget is not None and budget <= 0:
                continue
            before = self.matched
            self.pie_left = math.inf
            negotiate_entry(self, entry, pool, math.inf, math.inf, False, max_matches=budget)
            placed[entity] += self.matched - before
        return 1, {}


def negotiate_cycle(
    machine_ads: Sequence[ClassAd],
    submitters: Sequence[SubmitterAd],
    requests: Mapping[tuple[str, str], Sequence[ResourceRequest]],
    accountant: Accountant,
    settings: NegotiatorSettings,
    now: float,
    cycle: int = 0,
    clock: Clock = REAL,
) -> CycleResult:
    """Run the matchmaking of one cycle.

    The accountant must already be brought up to date for this cycle
    (``update_priorities`` and ``check_matches``); every match made is added to it.

    Args:
        machine_ads: all slot ads of the pool (claimed ones included: they count in the pie).
        submitters: one entry per submitter per schedd.
        requests: ``{(schedd, submitter): requests}`` in the schedd's order.
        accountant: the pool's accountant.
        settings: negotiator settings.
        now: the current time.
        cycle: the cycle number (used in minted claim ids).
        clock: measures how long the matchmaking took (``match_seconds``, instrumentation
            only: no decision reads it).

    Returns:
        The matches and statistics of the cycle.
    """
    # ClassAd time() is ``now``, not the real clock; no cyclic GC passes over the pool's
    # millions of live objects while it runs (:mod:`.gc_pause`)
    with evaluation_time(now), collector_paused():
        return _negotiate_cycle(machine_ads, submitters, requests, accountant, settings, now,
                                cycle, clock)


def read_slots(machine_ads: Sequence, use_slot_weights: bool
               ) -> tuple[list[Slot], dict[str, ClassAd], float, float]:
    """The cycle's :class:`Slot` of each ad that can take a match, in order.

    Returns:
        ``(slots, ads_by_name, pool_weight, min_weight)``: the slots of the ads with a Name and
        a state that can take a match; every ad with a Name, by name (the last of a name);
        the sum of their slot weights, and the smallest (``math.inf`` itself when none).
    """
    slots: list[Slot] = []
    by_name: dict[str, ClassAd] = {}
    pool_weight = 0.0
    min_weight = math.inf
    available: dict[str, bool] = {}  # slot state -> can take a match (read once per state)
    for ad in machine_ads:
        if ad.__class__ is ClassAd:
            # ad.get("Name") and slot_weight, their answers for a literal read from the table
            exprs = ad.table
            node = exprs.get("name")
            name = node.value if node.__class__ is Literal and node.value.__class__ is str \
                else ad.get("Name")
            weight = None
            if use_slot_weights and "slotweight" not in exprs:
                node = exprs.get("cpus")
                if node.__class__ is Literal and node.value.__class__ in (int, float):
                    weight = float(node.value)
                    if not weight >= 0:
                        weight = 1.0
        else:
            ad = as_classad(ad)
            name = ad.get("Name")
            weight = None
        if not isinstance(name, str) or not name:
            continue  # an ad without a Name cannot be claimed; the collector should not keep it
        by_name[name] = ad
        slot = Slot(ad, name)
        slot.weight = weight = slot_weight(ad, use_slot_weights) if weight is None else weight
        pool_weight += weight
        if weight < min_weight:
            min_weight = weight
        state = slot.state
        ok = available.get(state)
        if ok is None:
            ok = available[state] = state.lower() not in UNAVAILABLE_STATES
        if ok:
            slots.append(slot)
    return slots, by_name, pool_weight, min_weight


def _negotiate_cycle(machine_ads, submitters, requests, accountant, settings, now, cycle,
                     clock) -> CycleResult:
    started = clock.monotonic()  # instrumentation only; decisions use ``now``
    state = _Cycle(settings, accountant, now, cycle)
    slots, ads_by_name, pool_weight, min_weight = read_slots(machine_ads,
                                                             settings.use_slot_weights)
    min_weight = 0.0 if min_weight is math.inf else min_weight

    entries = []
    all_requests: list[RequestState] = []
    for sub in submitters:
        if sub.idle_jobs + sub.running_jobs <= 0:
            continue
        if not settings.consider_preemption and sub.idle_jobs <= 0:
            continue
        entry = _Entry(sub)
        for req in requests.get((sub.schedd, sub.name), ()):
            try:
                entry.requests.append(RequestState(entry, req, state.submitter_job(entry, req)))
            except Exception as exc:  # noqa: BLE001 - see _Cycle.skip
                state.skip(entry, req, exc)
        all_requests.extend(entry.requests)
        entries.append(entry)
    pool = state.build_pool(slots, all_requests)
    candidate_slots = state.free

    if settings.updown_policy:
        spins, shares = state.spin_updown(entries, pool)
    elif settings.accountant.group_names:
        spins, shares = state.spin_groups(entries, pool, pool_weight, min_weight)
    else:
        spins, shares = state.spin_pie(entries, pool, pool_weight, min_weight)

    runs = tuple(state.runs)
    stats = CycleStatistics(
        cycle=cycle, started=now,
        match_seconds=clock.monotonic() - started,
        slots=len(machine_ads), candidate_slots=candidate_slots,
        slot_classes=pool.class_count, submitters=len(entries),
        schedds=len({e.ad.schedd for e in entries}), requests=len(all_requests),
        idle_jobs=sum(e.ad.idle_jobs for e in entries),
        matches=state.matched,
        rank_preemptions=state.preemptions[PreemptState.RANK],
        priority_preemptions=state.preemptions[PreemptState.PRIORITY],
        rejections=state.rejections, rejections_by_reason=dict(state.reasons),
        pie_spins=spins, submitters_share_limited=tuple(sorted(state.share_limited)))
    # the cycle's slots, classes and requests refer to each other: unlinked, reference counting
    # frees them now, and the collector's pass after the cycle walks only what it returns
    pool.close()
    for entry in entries:
        entry.requests = []
    return CycleResult(runs=runs, statistics=stats, shares=shares, skipped=tuple(state.skipped),
                       ads_by_name=ads_by_name)
