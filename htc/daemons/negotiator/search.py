"""The best idle slot for a resource request, found class by class with shared caches.

Theory of operation
-------------------
Slots are grouped into classes (:mod:`htc.daemons.negotiator.slots`); a request needs the
best class that matches it, where "best" is HTCondor's order: ``NEGOTIATOR_PRE_JOB_RANK``, the
job's ``Rank``, ``NEGOTIATOR_POST_JOB_RANK``, then the slot name.

Each request walks a heap of classes keyed by their current best slot (its :class:`Lane`;
requests whose jobs agree on every value the classes' expressions read, and that order classes
alike, share one, so a class one of them found not to match is popped once for all of them:
100 users submitting the same job shape walk the classes once). Ranks are cheap and
matching is not, so the heap is built from ranks alone and a class is tested for a match only
when it reaches the top; a request that matches its best-ranked class costs one test. Keys
only get worse as slots are taken, so entries are re-validated lazily when they surface; a
class that gains a better slot (a partitionable slot that shrank into it) is announced in the
pool's availability log, which every request replays.

Three caches let requests share work, each keyed by exactly what the cached value depends on:

* the slot's verdict (its ``Requirements``, usually ``START``) depends on the class and on the
  few job attributes the slot reads (``Owner`` for a desktop policy): ``slot_side``;
* each top-level ``&&`` clause of the job's ``Requirements`` depends on the slot values and
  the job values that clause reads (``TARGET.Arch == "X86_64"``: the slot's ``Arch`` and no job
  value), so classes agreeing on those share it: ``clause_value``;
* the job's ``Rank`` of a class depends on its text and the job values it reads:
  ``rank_cache``; requests that order classes alike start from one shared heap snapshot.

A partitionable slot just carved for a request is *held* for it (:meth:`IdleSearch.hold`) and
compared with the best class directly. Carving changes only the slot's ``Cpus``, ``Memory``
and ``Disk``, so each look after the first re-evaluates only the ``Requirements`` clauses and
ranks whose references (followed through both ads) reach one of them -- its *carve plan*,
shared by the slots of one configuration; the rest keeps the value it had
(``tests/unit/test_negotiator_reference.py`` compares the matches with a brute-force search).
"""

from __future__ import annotations

import heapq

from htc.classad import ClassAd, ExprTree, Undefined
from htc.classad.ast import ListExpr, Literal
from htc.classad.match import rank, requirements_hold, symmetric_match
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.bases import (_FAILS, _HOLDS, _UNSURE, BaseVerdicts, LaneSets,
                                          resource_comparison)
from htc.daemons.negotiator.clauses import carve_plan, requirement_clauses
from htc.daemons.negotiator.fitting import Fitting, too_small
from htc.daemons.negotiator.preemption import (WORST_RANK, PreemptState, as_rank,
                                               submitter_limit_permits)
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slotreads import eval_rank
from htc.daemons.negotiator.slots import CARVED, Slot, SlotPool, closure, projection

_LITERALS = (Literal, ListExpr)  # syntax trees closure() does not look into
_NO_PLAN = object()

_CARVED = CARVED


class RequestState:
    """What a cycle knows about one resource request (see the module docstring)."""

    __slots__ = ("entry", "request", "remaining", "job", "cache", "lane", "claimed", "matched",
                 "const_rank", "clauses", "views", "order")

    def __init__(self, entry, request: ResourceRequest, job: ClassAd):
        self.entry = entry  # the submitter entry it belongs to
        self.request = request
        self.remaining = request.count
        self.job = job
        self.cache: dict[int, tuple] = {}  # class id -> rank parts (dynamic classes only)
        #: the heap of classes and match verdicts, shared with every request that the classes
        #: cannot tell apart (:meth:`IdleSearch.lane`); assigned at the request's first search
        self.lane: Lane | None = None
        literal = job.get("Rank", 0.0)
        if isinstance(literal, ExprTree):
            self.const_rank = None
            # requests whose Rank reads the same job values order classes the same way
            refs = [r for r in literal.attributes() if not r.startswith("target.")]
            self.order = ("expr", repr(literal), projection(job, refs))
        else:
            # a literal Rank (the usual 0.0) need not be evaluated per class
            self.const_rank = as_rank(literal) or 0.0
            self.order = ("const", self.const_rank)
        self.clauses = requirement_clauses(job)
        self.views: dict[tuple[str, ...], tuple] = {}  # job names -> projection of the job
        self.claimed: list | None = None  # matching claimed slots, computed on first need
        self.matched = 0


class Lane:
    """One walk through the classes: a heap of classes keyed by their current best slot, the
    position reached in the pool's availability log, and the match verdict per class.

    Every value in it depends only on the job values the classes' expressions read and on the
    order of the job's ``Rank``; requests that agree on those (the same job shape submitted by
    several users, several autoclusters of one user differing in what matching never reads)
    share one lane, so a class one of them found not to match is never looked at again by
    the others."""

    __slots__ = ("heap", "log_pos", "ok", "sets")

    def __init__(self):
        self.heap: list[tuple] = []
        self.log_pos = 0
        self.ok: dict[int, bool] = {}  # class id -> match (evaluated lazily)
        #: what the lane decided per base (:class:`~.bases.LaneSets`), at its first match test
        self.sets: LaneSets | None = None


#: the job attributes that decide matching apart from what the slots read of the job
_JOB_ROOTS = ("requirements", "rank", "requestcpus", "requestmemory", "requestdisk")


class IdleSearch(Fitting):
    """The shared caches of one cycle and the best-idle-slot search over them."""

    #: False to take one job per search (:mod:`.runs`; the tests compare both ways)
    runs = True

    def __init__(self, settings: NegotiatorSettings):
        self.s = settings
        self.pre_rank = settings.compiled("pre_job_rank")
        self.post_rank = settings.compiled("post_job_rank")
        self.clause_reads: dict[tuple[str, int], tuple] = {}  # (clause, class id) -> info
        self._clause_base: dict[tuple[str, int], tuple] = {}  # (clause, base) -> info
        self._slot_base: dict[int, bool] = {}  # base -> slot verdict is per base
        self._comparisons: dict[int, tuple] = {}  # id(clause) -> (it, resource_comparison)
        self.bases: BaseVerdicts | None = None  # set when the first lane starts (see best)
        self.clause_value: dict[tuple, str] = {}
        self.slot_side: dict[tuple, bool] = {}
        self.rank_cache: dict[tuple, float] = {}
        self.snapshots: dict[tuple, tuple[list, int, int]] = {}
        #: (order, excluded bases) -> (the snapshot, its heap without those bases' classes)
        self._filtered: dict[tuple, tuple[tuple, list]] = {}
        self.taken_count = 0  # slots taken or carved so far (ages the snapshots)
        #: a partitionable slot just carved for a request, kept out of the classes while that
        #: request goes on taking from it (see :meth:`hold`)
        self.hot: tuple[RequestState, Slot, SlotPool] | None = None
        #: id(job) -> (job, its (cpus, memory, disk) request) when those are literals (the
        #: entry holds the job: no other job takes its id while it is remembered)
        self._wants: dict[int, tuple] = {}
        #: (request, held slot, carve plan, last rank parts) of the held slot's last look
        self._hot_memo: tuple | None = None
        self._plans: dict[tuple, tuple | None] = {}  # (lane, slot's shape) -> its carve plan
        self._shapes: dict[int, tuple] = {}  # id(slot) -> (slot, its names, its expressions)
        self._lanes: dict[tuple, Lane] = {}
        self._lane_roots: tuple[str, ...] | None = None  # None: not decided yet
        #: False to give every request a lane of its own (the tests compare both ways)
        self.share_lanes = True
        self.run_analyses: dict[tuple, object] = {}  # (lane, carve plan) -> its directions
        self.runs_made = self.run_jobs = 0  # runs committed, and the jobs they placed

    # ------------------------------------------------------------------ lanes

    def lane(self, rs: RequestState, pool: SlotPool) -> Lane:
        """The lane of ``rs``: shared with the requests whose job agrees with its job on every
        value matching reads, when no class ranks per request (see :class:`Lane`)."""
        if self._lane_roots is None:
            # What the slots read of a job: the same for a slot and its shrunk self, so the
            # classes of the pool's first build cover every class the cycle will make.
            if not self.share_lanes or any(c.pre_dynamic or c.post_dynamic
                                           for c in pool.classes):
                self._lane_roots = ()
            else:
                reads = set(_JOB_ROOTS)
                for cls in pool.classes:
                    reads.update(cls.job_reads)
                self._lane_roots = tuple(sorted(reads))
        if not self._lane_roots:
            return Lane()
        key = (rs.order, projection(rs.job, self._lane_roots))
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = Lane()
        return lane

    # ------------------------------------------------------------------ the carved slot

    def hold(self, rs: RequestState, slot: Slot, pool: SlotPool) -> None:
        """Keep a partitionable slot just carved for ``rs`` out of the classes for now.

        Re-classing a shrunk slot is what costs: its new class is announced to every request.
        The next job of the same request usually wants the same slot again (the default
        ``NEGOTIATOR_PRE_JOB_RANK`` prefers the fuller slot), so while ``rs`` negotiates the slot is
        compared with the classes' best directly (:meth:`best`); it joins a class when another
        request asks or ``rs`` prefers another slot. Results are those of re-classing at once.
        """
        if self.hot is not None and self.hot[1] is not slot:
            self.flush()
        slot.cls = None
        self.hot = (rs, slot, pool)
        memo = self._hot_memo
        if memo is not None and memo[0] is rs and memo[1] is slot and memo[2] is not None:
            self._hot_memo = (rs, slot, memo[2], memo[3])  # carved since: re-check what reads it
        else:
            self._hot_memo = None

    def flush(self) -> None:
        """Put the held slot (if any, and not used up) into its class now."""
        if self.hot is not None:
            _, slot, pool = self.hot
            self.hot = None
            self._hot_memo = None
            if not slot.taken:
                pool.reclass(slot)

    def _hot_candidate(self, rs: RequestState, slot: Slot):
        """``(key, carve)`` of the held slot for ``rs``, or None when it no longer matches.

        The first look after the hold evaluates everything; later looks (the slot only shrank
        since, by carves for ``rs``) re-evaluate only what reads ``Cpus``, ``Memory`` or
        ``Disk`` (:func:`~.clauses.carve_plan`): what reads none of them has the value it had.
        """
        ad, job = slot.ad, rs.job
        memo = self._hot_memo
        if memo is not None and memo[0] is rs and memo[1] is slot and memo[2] is not None:
            plan, last = memo[2], memo[3]
            for expr in plan[0]:
                value = self.decide_clause(expr, job, ad)
                if value is True:
                    continue
                if value is False or value is Undefined or not requirements_hold(job, ad):
                    self._hot_memo = None
                    return None
                break  # the whole Requirements held: no clause needs another look
        else:
            if not self.matches_ad(rs, slot.base, ad):
                return None
            # the plan depends on the job and on the slot's expressions, not on its values:
            # slots of one configuration share it
            # (carving changes literal values only: a slot keeps its shape all cycle long)
            slot_shape = self._shapes.get(id(slot))
            if slot_shape is None or slot_shape[0] is not slot:
                slot_shape = self._shapes[id(slot)] = (slot, frozenset(ad.table), tuple(
                    (n, e) for n, e in ad.table.items() if e.__class__ not in _LITERALS))
            # requests of one lane agree on everything the plan follows (their jobs' matching
            # expressions and the values those read): they share it (and its run analysis)
            shape = (id(rs.lane) if rs.lane is not None else id(job), slot_shape[1],
                     slot_shape[2])
            plan = self._plans.get(shape, _NO_PLAN)
            if plan is _NO_PLAN:
                plan = self._plans[shape] = carve_plan(rs, ad, (self.pre_rank, self.post_rank))
            last = None
        carve = self.fits(job, ad)
        if carve is None:
            self._hot_memo = None
            return None
        pre_dyn, jr_dyn, post_dyn = plan[1:] if plan is not None else (True, True, True)
        # (pre, job rank, post) in the plan's order: (clauses, pre, job rank, post)
        pre = eval_rank(self.pre_rank, ad, job) if last is None or pre_dyn else last[0]
        if rs.const_rank is not None:
            jr = rs.const_rank
        else:
            jr = rank(job, ad) if last is None or jr_dyn else last[1]
        post = eval_rank(self.post_rank, ad, job) if last is None or post_dyn else last[2]
        parts = (pre, jr, post)
        self._hot_memo = (rs, slot, plan, parts)
        return self.key(parts, slot), carve

    # ------------------------------------------------------------------ matching

    def matches(self, rs: RequestState, cls) -> bool:
        """Do the request's job and the class's slots accept each other (and does it fit)?

        What reads none of the carved resources was decided for the lane per *base* (the
        classes a partitionable slot passes through as it shrinks share one,
        :mod:`.bases`); a class adds only the clauses that read ``Cpus``, ``Memory`` or
        ``Disk``, the slot's verdict where it reads one of them, and the fitting.
        """
        lane = rs.lane
        ok = lane.ok.get(cls.id)
        if ok is None:
            sets = lane.sets
            if sets is None:
                sets = lane.sets = self.bases.lane_sets(rs)
            base = cls.base
            if base in sets.excluded:
                ok = False
            else:
                full = sets.full is None or base in sets.full
                ok = ((base not in self.bases.slot_sets(rs)[1] or self.slot_accepts(rs, cls))
                      and self._job_accepts(rs, cls, None if full else sets.clauses_left(base))
                      and not (cls.partitionable and self.fits_class(rs.job, cls) is None))
            lane.ok[cls.id] = ok
        return ok

    def matches_ad(self, rs: RequestState, base: int | None, ad: ClassAd) -> bool:
        """:meth:`matches` for a slot ad that stands for no class (the held slot, which is
        carved from one of ``base``'s classes), fitting left out."""
        lane = rs.lane
        sets = lane.sets if lane is not None else None
        if sets is None or base is None or self.bases is None:
            return symmetric_match(rs.job, ad)
        if base in sets.excluded:
            return False
        job = rs.job
        if base in self.bases.slot_sets(rs)[1] and not requirements_hold(ad, job):
            return False
        if sets.full is None or base in sets.full:
            return requirements_hold(job, ad)
        for clause in sets.clauses_left(base):
            value = self.decide_clause(clause[1], job, ad)
            if value is True:
                continue
            if value is False or value is Undefined:
                return False
            return requirements_hold(job, ad)  # an error or a number: the whole of it
        return True

    def decide_clause(self, expr: ExprTree, job: ClassAd, ad: ClassAd):
        """A ``Requirements`` clause's value, by arithmetic when it compares a resource
        (:func:`~.bases.resource_comparison`), else evaluated."""
        hit = self._comparisons.get(id(expr))
        if hit is None or hit[0] is not expr:
            hit = self._comparisons[id(expr)] = (expr, resource_comparison(expr))
        decide = hit[1]
        if decide is not None:
            value = decide(job, ad)
            if value is not None:
                return value
        return expr.eval(job, ad)

    def slot_base_side(self, cls) -> bool:
        """Is the slot's verdict the same for every class of ``cls``'s base? (It reads
        nothing of the job and, through the slot's own expressions, none of the carved
        resources.)"""
        flag = self._slot_base.get(cls.base)
        if flag is None:
            if cls.job_reads:
                flag = False
            else:
                names, _ = closure(cls.ad, ("requirements",))
                flag = not (names & _CARVED)
            self._slot_base[cls.base] = flag
        return flag

    def clause_info(self, text: str, job_refs, slot_refs, cls) -> tuple:
        """``(job names read, slot view, reads a carved resource)`` of one clause on ``cls``."""
        info = self.clause_reads.get((text, cls.id))
        if info is None:
            info = self._clause_base.get((text, cls.base))
            if info is None:
                ad = cls.ad
                # a slot attribute the clause reads may itself read the job (TARGET.x)
                names, targets = closure(ad, slot_refs)
                reads = tuple(sorted(set(job_refs) | targets | {n for n in names if n not in ad}))
                # the clause's value depends on these slot values and the job's: classes that
                # agree on them (every X86_64 class for TARGET.Arch == "X86_64") share it
                carved = bool(names & _CARVED)
                info = (reads, projection(ad, names), carved)
                if not carved:  # the same slot values for every class of the base
                    self._clause_base[(text, cls.base)] = info
            self.clause_reads[(text, cls.id)] = info
        return info

    @staticmethod
    def view(rs: RequestState, names: tuple[str, ...]) -> tuple:
        view = rs.views.get(names)
        if view is None:
            view = rs.views[names] = projection(rs.job, names)
        return view

    def slot_accepts(self, rs: RequestState, cls) -> bool:
        # per base when no class of the base can differ (:meth:`_slot_base_side`)
        where = ("b", cls.base) if self.slot_base_side(cls) else cls.id
        key = (where, self.view(rs, cls.job_reads))
        accepts = self.slot_side.get(key)
        if accepts is None:
            accepts = self.slot_side[key] = requirements_hold(cls.ad, rs.job)
        return accepts

    def _job_accepts(self, rs: RequestState, cls, clauses=None) -> bool:
        """The job's Requirements on ``cls``: all of it, or only ``clauses`` (those its base
        part left, :class:`~.bases.LaneSets`) when given."""
        # All clauses True: a match. A False or UNDEFINED clause never lets && be true.
        # Any other clause value (an error, a number) is left to the full evaluation.
        if rs.clauses is None:
            return requirements_hold(rs.job, cls.ad)
        job, ad = rs.job, cls.ad
        for clause in (rs.clauses if clauses is None else clauses):
            text, expr = clause[0], clause[1]
            hit = self._comparisons.get(id(expr))
            if hit is None or hit[0] is not expr:
                hit = self._comparisons[id(expr)] = (expr, resource_comparison(expr))
            if hit[1] is not None:  # TARGET.Memory >= RequestMemory: by arithmetic
                value = hit[1](job, ad)
                if value is True:
                    continue
                if value is False:
                    return False
            reads, slot_view, _carved = self.clause_info(text, clause[2], clause[3], cls)
            verdict = self.clause_verdict(rs, text, expr, slot_view, reads, cls)
            if verdict is _FAILS:
                return False
            if verdict is _UNSURE:
                return requirements_hold(rs.job, cls.ad)
        return True

    def clause_verdict(self, rs, text, expr, slot_view, reads, cls) -> str:
        key = (text, slot_view, self.view(rs, reads))
        verdict = self.clause_value.get(key)
        if verdict is None:
            value = expr.eval(rs.job, cls.ad)
            verdict = self.clause_value[key] = (
                _HOLDS if value is True else
                _FAILS if value is False or value is Undefined else _UNSURE)
        return verdict

    # ------------------------------------------------------------------ ordering

    def _job_rank(self, rs: RequestState, cls) -> float:
        if rs.const_rank is not None:
            return rs.const_rank
        key = (rs.order, cls.id)
        value = self.rank_cache.get(key)
        if value is None:
            value = self.rank_cache[key] = rank(rs.job, cls.ad)
        return value

    def _parts(self, rs: RequestState, cls) -> tuple:
        """(pre, job rank, post) of a request against a class; None for a static part."""
        if not (cls.pre_dynamic or cls.post_dynamic):
            return (None, self._job_rank(rs, cls), None)
        cached = rs.cache.get(cls.id)
        if cached is None:
            ad, job = cls.ad, rs.job
            pre = eval_rank(self.pre_rank, ad, job) if cls.pre_dynamic else None
            post = eval_rank(self.post_rank, ad, job) if cls.post_dynamic else None
            cached = rs.cache[cls.id] = (pre, self._job_rank(rs, cls), post)
        return cached

    @staticmethod
    def key(parts: tuple, slot: Slot) -> tuple:
        """The sort key of an idle candidate (smaller is better, as in a min-heap)."""
        pre, jr, post = parts
        return (-(slot.pre if pre is None else pre), -jr, -(slot.post if post is None else post),
                -PreemptState.NONE, -WORST_RANK, slot.name)

    def _start_heap(self, rs: RequestState, pool: SlotPool) -> None:
        # Requests that order classes alike share one snapshot; it may be stale, which the
        # lazy re-validation in best() tolerates (keys only get worse, gains are logged).
        snap = self.snapshots.get(rs.order)
        if snap is None or self.taken_count - snap[2] > max(64, len(pool.classes) // 8):
            heap = [(self.key((None, self._job_rank(rs, cls), None), slot), cls.id)
                    for cls in pool.classes
                    if not (cls.pre_dynamic or cls.post_dynamic)
                    and (slot := cls.best()) is not None]
            heapq.heapify(heap)
            snap = self.snapshots[rs.order] = (heap, len(pool.avail_log), self.taken_count)
        lane = rs.lane
        excluded = lane.sets.excluded if lane.sets is not None else None
        if excluded:
            # leave out the classes of the bases the lane excludes: they would surface and be
            # popped one by one, in every lane (lanes that exclude the same bases -- one
            # architecture's -- share the filtered copy of the snapshot)
            key = (rs.order, frozenset(excluded))
            hit = self._filtered.get(key)
            if hit is None or hit[0] is not snap:
                classes = pool.classes
                heap = [e for e in snap[0] if classes[e[1]].base not in excluded]
                heapq.heapify(heap)
                hit = self._filtered[key] = (snap, heap)
            lane.heap = hit[1].copy()
        else:
            lane.heap = snap[0].copy()  # a copy of a heap is a heap
        lane.log_pos = snap[1]
        for cls in pool.classes:
            if (cls.pre_dynamic or cls.post_dynamic) and (slot := cls.best()) is not None:
                heapq.heappush(lane.heap, (self.key(self._parts(rs, cls), slot), cls.id))

    def replay(self, rs: RequestState, pool: SlotPool) -> None:
        """Push the classes that gained a slot since ``rs``'s lane last looked."""
        lane, log = rs.lane, pool.avail_log
        end = len(log)
        if lane.log_pos >= end:
            return
        classes, ok, heap, job = pool.classes, lane.ok, lane.heap, rs.job
        excluded = lane.sets.excluded if lane.sets is not None else ()
        wants = self.literal_wants(job)
        push, key, parts = heapq.heappush, self.key, self._parts
        while lane.log_pos < end:
            cls = classes[log[lane.log_pos]]
            lane.log_pos += 1
            cid = cls.id
            if ok.get(cid) is False or cls.base in excluded:
                continue  # a class never changes its key: no match stays no match
            if cls.partitionable:
                res = cls.res
                if res is None or wants is None:
                    small = self.fits(job, cls.ad) is None
                else:
                    small = too_small(res, wants)
                if small:
                    ok[cid] = False  # a shrunk slot too small for this lane's jobs
                    continue
            slot = cls.best()
            if slot is not None:
                push(heap, (key(parts(rs, cls), slot), cid))

    def best(self, rs: RequestState, pool: SlotPool, used: float, limit: float):
        """Find the best idle slot for ``rs`` whose cost fits the unclaimed limit.

        Returns:
            ``(candidate, matched_any, limited)`` where candidate is ``(key, slot, cost,
            carve)`` or None; ``limited`` says a matching slot was refused for the limit.
        """
        hot = None
        if self.hot is not None:
            if self.hot[0] is rs:
                hot = self.hot[1]
            else:
                self.flush()
        lane = rs.lane
        if lane is None:
            lane = rs.lane = self.lane(rs, pool)
        if self.bases is None or self.bases.pool is not pool:
            self.bases = BaseVerdicts(self, pool)
        if lane.sets is None:
            lane.sets = self.bases.lane_sets(rs)
        if lane.log_pos == 0 and not lane.heap:
            self._start_heap(rs, pool)
        self.replay(rs, pool)
        heap = lane.heap
        held = None
        if hot is not None:
            held = self._hot_candidate(rs, hot)
            if held is None:
                self.flush()  # rs cannot use it any more: others may
                hot = None
            elif not heap or held[0] < heap[0][0]:
                # stored keys only understate how good a class is now (they get worse, and
                # gains were replayed above), so the held slot beats every class: no need to
                # look at them
                cost = self.cost(hot, held[1])
                if submitter_limit_permits(used, limit, cost):
                    return (held[0], hot, cost, held[1]), True, False
        aside = []
        found = None
        matched_any = limited = False
        while heap:
            key, cid = heap[0]
            cls = pool.classes[cid]
            slot = cls.best()
            if slot is None or not self.matches(rs, cls):
                heapq.heappop(heap)
                continue
            current = self.key(self._parts(rs, cls), slot)
            if current != key:
                heapq.heapreplace(heap, (current, cid))
                continue
            matched_any = True
            carve = self.fits_class(rs.job, cls) if slot.partitionable else None
            cost = self.cost(slot, carve)
            if not submitter_limit_permits(used, limit, cost):
                limited = True
                aside.append(heapq.heappop(heap))  # a cheaper class may still fit
                continue
            found = (key, slot, cost, carve)
            break
        for item in aside:
            heapq.heappush(heap, item)
        if hot is not None:
            if held is not None:
                matched_any = True
                key, carve = held
                if found is None or key < found[0]:
                    cost = self.cost(hot, carve)
                    if submitter_limit_permits(used, limit, cost):
                        return (key, hot, cost, carve), True, limited
                    limited = True
        return found, matched_any, limited
