"""The best idle slot for a resource request, found class by class with shared caches.

Theory of operation
-------------------
Slots are grouped into classes (:mod:`htc.daemons.negotiator.slots`); a request needs the
best class that matches it, where "best" is HTCondor's order: ``NEGOTIATOR_PRE_JOB_RANK``, the
job's ``Rank``, ``NEGOTIATOR_POST_JOB_RANK``, then the slot name.

Each request keeps a heap of classes keyed by their current best slot. Ranks are cheap and
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
"""

from __future__ import annotations

import heapq

from htc.classad import ClassAd, ExprTree, Undefined
from htc.classad.ast import Binary, Paren
from htc.classad.match import rank, requirements_hold, symmetric_match
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.preemption import (WORST_RANK, PreemptState, as_rank,
                                               submitter_limit_permits)
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slots import (Slot, SlotPool, closure, eval_rank, number,
                                          projection, quantize, slot_weight)

_HOLDS, _FAILS, _UNSURE = "holds", "fails", "unsure"  # a Requirements clause on a class


def requirement_clauses(job: ClassAd):
    """Split a job's Requirements into its top-level ``&&`` clauses.

    Returns:
        ``(text, expression, job names read, slot names read)`` per clause, or None when the
        Requirements is missing or a literal (then it is evaluated as a whole).
    """
    req = job.get("Requirements")
    if not isinstance(req, ExprTree):
        return None
    out = []
    todo = [req.node]  # the parsed tree; each clause is wrapped back into an ExprTree
    while todo:
        node = todo.pop()
        while isinstance(node, Paren):
            node = node.inner
        if isinstance(node, Binary) and node.op == "&&":
            todo.extend((node.right, node.left))
            continue
        clause = ExprTree(node)
        refs = clause.attributes()
        # a plain name the job lacks falls back to the slot: count it on both sides
        out.append((repr(clause), clause,
                    tuple(sorted(r for r in refs if not r.startswith("target."))),
                    tuple(sorted({r[7:] if r.startswith("target.") else r for r in refs}))))
    return tuple(out)


class RequestState:
    """What a cycle knows about one resource request (see the module docstring)."""

    __slots__ = ("entry", "request", "remaining", "job", "cache", "ok", "heap", "log_pos",
                 "claimed", "matched", "const_rank", "clauses", "views", "order")

    def __init__(self, entry, request: ResourceRequest, job: ClassAd):
        self.entry = entry  # the submitter entry it belongs to
        self.request = request
        self.remaining = request.count
        self.job = job
        self.cache: dict[int, tuple] = {}  # class id -> rank parts (dynamic classes only)
        self.ok: dict[int, bool] = {}  # class id -> match (evaluated lazily)
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
        self.heap: list[tuple] = []
        self.log_pos = 0
        self.claimed: list | None = None  # matching claimed slots, computed on first need
        self.matched = 0


class IdleSearch:
    """The shared caches of one cycle and the best-idle-slot search over them."""

    def __init__(self, settings: NegotiatorSettings):
        self.s = settings
        self.pre_rank = settings.compiled("pre_job_rank")
        self.post_rank = settings.compiled("post_job_rank")
        self.clause_reads: dict[tuple[str, int], tuple[tuple[str, ...], tuple]] = {}
        self.clause_value: dict[tuple, str] = {}
        self.slot_side: dict[tuple, bool] = {}
        self.rank_cache: dict[tuple, float] = {}
        self.snapshots: dict[tuple, tuple[list, int, int]] = {}
        self.taken_count = 0  # slots taken or carved so far (ages the snapshots)
        #: a partitionable slot just carved for a request, kept out of the classes while that
        #: request goes on taking from it (see :meth:`hold`)
        self.hot: tuple[RequestState, Slot, SlotPool] | None = None
        #: id(job) -> its (cpus, memory, disk) request when those are literals (jobs live
        #: as long as the cycle, so their ids are stable)
        self._wants: dict[int, tuple[float, float, float]] = {}

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

    def flush(self) -> None:
        """Put the held slot (if any, and not used up) into its class now."""
        if self.hot is not None:
            _, slot, pool = self.hot
            self.hot = None
            if not slot.taken:
                pool.reclass(slot)

    def _hot_candidate(self, rs: RequestState, slot: Slot):
        """``(key, carve)`` of the held slot for ``rs``, or None when it no longer matches."""
        ad, job = slot.ad, rs.job
        if not symmetric_match(job, ad):
            return None
        carve = self.fits(job, ad)
        if carve is None:
            return None
        jr = rs.const_rank if rs.const_rank is not None else rank(job, ad)
        parts = (eval_rank(self.pre_rank, ad, job), jr, eval_rank(self.post_rank, ad, job))
        return self.key(parts, slot), carve

    # ------------------------------------------------------------------ partitionable slots

    def fits(self, job: ClassAd, ad: ClassAd) -> tuple[float, float, float] | None:
        """The (cpus, memory, disk) a p-slot ``ad`` would carve for ``job``, or None if it can't."""
        wants = self._wants.get(id(job))
        if wants is None:
            s = self.s
            cpus = max(1.0, quantize(number(job, "RequestCpus", 1.0, ad), s.cpus_quantum))
            memory = quantize(number(job, "RequestMemory", 0.0, ad), s.memory_quantum)
            disk = quantize(number(job, "RequestDisk", 0.0, ad), s.disk_quantum)
            wants = (cpus, memory, disk)
            if not any(isinstance(job.get(n), ExprTree)
                       for n in ("RequestCpus", "RequestMemory", "RequestDisk")):
                self._wants[id(job)] = wants  # literals: the same against every slot
        cpus, memory, disk = wants
        for want, have_name in ((cpus, "Cpus"), (memory, "Memory"), (disk, "Disk")):
            have = number(ad, have_name)
            if have is not None and want > have:
                return None
        return cpus, memory, disk

    def cost(self, slot: Slot, carve) -> float:
        """The slot weight a match costs: the slot's, or that of the dynamic slot carved."""
        if carve is None:
            return slot.weight
        if not self.s.use_slot_weights:
            return 1.0
        if "SlotWeight" not in slot.ad:
            return carve[0] if carve[0] >= 0 else 1.0  # GetSlotWeight falls back to Cpus
        dslot = slot.ad.copy()
        dslot["Cpus"], dslot["Memory"], dslot["Disk"] = carve
        return slot_weight(dslot, True)

    # ------------------------------------------------------------------ matching

    def matches(self, rs: RequestState, cls) -> bool:
        """Do the request's job and the class's slots accept each other (and does it fit)?"""
        ok = rs.ok.get(cls.id)
        if ok is None:
            ok = (self._slot_accepts(rs, cls) and self._job_accepts(rs, cls)
                  and not (cls.partitionable and self.fits(rs.job, cls.ad) is None))
            rs.ok[cls.id] = ok
        return ok

    @staticmethod
    def _view(rs: RequestState, names: tuple[str, ...]) -> tuple:
        view = rs.views.get(names)
        if view is None:
            view = rs.views[names] = projection(rs.job, names)
        return view

    def _slot_accepts(self, rs: RequestState, cls) -> bool:
        key = (cls.id, self._view(rs, cls.job_reads))
        accepts = self.slot_side.get(key)
        if accepts is None:
            accepts = self.slot_side[key] = requirements_hold(cls.ad, rs.job)
        return accepts

    def _job_accepts(self, rs: RequestState, cls) -> bool:
        # All clauses True: a match. A False or UNDEFINED clause never lets && be true.
        # Any other clause value (an error, a number) is left to the full evaluation.
        if rs.clauses is None:
            return requirements_hold(rs.job, cls.ad)
        ad = cls.ad
        for text, expr, job_refs, slot_refs in rs.clauses:
            where = (text, cls.id)
            info = self.clause_reads.get(where)
            if info is None:
                # a slot attribute the clause reads may itself read the job (TARGET.x)
                names, targets = closure(ad, slot_refs)
                reads = tuple(sorted(set(job_refs) | targets | {n for n in names if n not in ad}))
                # the clause's value depends on these slot values and the job's: classes that
                # agree on them (every X86_64 class for TARGET.Arch == "X86_64") share it
                info = self.clause_reads[where] = (reads, projection(ad, names))
            reads, slot_view = info
            key = (text, slot_view, self._view(rs, reads))
            verdict = self.clause_value.get(key)
            if verdict is None:
                value = expr.eval(rs.job, ad)
                verdict = self.clause_value[key] = (
                    _HOLDS if value is True else
                    _FAILS if value is False or value is Undefined else _UNSURE)
            if verdict is _FAILS:
                return False
            if verdict is _UNSURE:
                return requirements_hold(rs.job, ad)
        return True

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
        rs.heap = snap[0].copy()  # a copy of a heap is a heap
        rs.log_pos = snap[1]
        for cls in pool.classes:
            if (cls.pre_dynamic or cls.post_dynamic) and (slot := cls.best()) is not None:
                heapq.heappush(rs.heap, (self.key(self._parts(rs, cls), slot), cls.id))

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
        if rs.log_pos == 0 and not rs.heap:
            self._start_heap(rs, pool)
        log = pool.avail_log
        while rs.log_pos < len(log):
            cls = pool.classes[log[rs.log_pos]]
            rs.log_pos += 1
            if rs.ok.get(cls.id) is False:
                continue  # a class never changes its key: no match stays no match
            slot = cls.best()
            if slot is not None:
                heapq.heappush(rs.heap, (self.key(self._parts(rs, cls), slot), cls.id))
        heap = rs.heap
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
            if slot is None:
                heapq.heappop(heap)
                continue
            current = self.key(self._parts(rs, cls), slot)
            if current != key:
                heapq.heapreplace(heap, (current, cid))
                continue
            if not self.matches(rs, cls):
                heapq.heappop(heap)
                continue
            matched_any = True
            carve = self.fits(rs.job, slot.ad) if slot.partitionable else None
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
