"""The best idle slot by columns: one vectorised pass over every free slot per request turn.

Theory of operation
-------------------
:class:`VectorSearch` is the cycle's idle-slot search when the pool allows it (no claimed
slot is a preemption candidate, every slot's ``Cpus``/``Memory``/``Disk`` is a number); it
keeps the scalar search (:class:`~.search.IdleSearch`) for the requests it cannot compile and
for pools it does not take, and keeps the two consistent (a slot carved by one is re-classed
before the other looks, see :meth:`VectorSearch._sync_scalar`).

**A plan per request** (:class:`_Plan`, built at the request's first search): the job's
``Requirements`` clauses and ``Rank``, ``NEGOTIATOR_PRE_JOB_RANK`` and ``POST_JOB_RANK``
compiled to functions over the slot table's columns (:mod:`.vexpr`, :mod:`.columns`). What
the compiler does not take (strings, function calls: ``TARGET.Arch == "X86_64"``, the
default post-job rank) must read none of the carved resources, through either ad's
expressions; then it has one value per slot for the whole cycle, evaluated once per slot by
the ClassAd evaluator and shared by every request whose job agrees on the values it reads
(``static`` columns, keyed by the clause text and the projection of the job). Otherwise the
request falls back to the scalar search.

**A turn** (:meth:`VectorSearch.best`): the request's mask (free, static verdicts, fit to
its literal carve, compiled clauses) applied along the best-first order shared by the
requests that rank alike (:mod:`.vorder`), which gives the best matching slot and the
runner-up; when the submitter's limit refuses the best, every candidate is sorted with
``np.lexsort`` and the first the limit permits wins, exactly as the scalar walk decides.

**A run** (:meth:`VectorSearch.extend`): after a carve from a partitionable slot, the
resource states of the next steps come from the exact numeric stepping of :mod:`.runs`; the
slot's clauses and key are evaluated at all of those sizes in one call, and the steps are
taken while the slot still matches and its key beats the best other candidate of the turn
(other slots do not change during a turn). So no monotonicity proof is needed: every step is
evaluated. ``tests/unit/test_negotiator_vsearch.py`` compares whole cycles with the scalar
search on random pools.
"""

from __future__ import annotations

import numpy as np

from htc.classad import ExprTree
from htc.classad.match import rank, requirements_hold
from htc.daemons.negotiator.columns import SlotTable
from htc.daemons.negotiator.preemption import WORST_RANK, PreemptState
from htc.daemons.negotiator.runs import _numeric_steps, commit_run, extend_run
from htc.daemons.negotiator.search import IdleSearch
from htc.daemons.negotiator.slots import CARVED, closure, eval_rank, projection
from htc.daemons.negotiator.vorder import Cursor, SharedOrder
from htc.daemons.negotiator.vexpr import (BOOL, INT, REAL, Inexact, Unsupported, compile_vector,
                                          holds, ranks, scalar)
from htc.daemons.negotiator.vtyped import compile_typed

_SLOT_ROOTS = ("requirements",)


class _Plan:
    """A request's compiled matching and ranking (see the module docstring)."""

    __slots__ = ("static", "clauses", "pre", "jr", "post", "wants", "cost", "epoch", "ranking",
                 "cursor", "mask", "log_pos")

    def __init__(self):
        self.static = None  # bool array: what does not change as slots shrink
        self.clauses = []  # compiled clauses reading a carved resource
        self.pre = self.jr = self.post = None  # functions rows -> rank array
        self.mask = None  # bool per row: does it match now (see VectorSearch._current_mask)
        self.log_pos = 0  # the table's change log read up to when ``mask`` was brought up


class VectorSearch:
    """The idle-slot search over the slot table (see the module docstring)."""

    #: False: every request takes the scalar search (the tests compare both ways)
    enabled = True

    def __init__(self, settings):
        self.s = settings
        self.idle = IdleSearch(settings)
        self.table: SlotTable | None = None
        self._pool = None
        self._plans: dict[int, tuple] = {}  # id(rs) -> (rs, plan or None)
        self._static: dict[tuple, np.ndarray] = {}  # (what, job view) -> verdict column
        self._dirty: list = []  # slots carved here, to re-class before a scalar search
        self._turn = None  # (rs, candidate rows best first) of the last vector turn
        self._carved_reach: set[str] = set()
        self._orders: dict[tuple, SharedOrder] = {}  # ranking -> its shared order
        self._compiled: dict[tuple, object] = {}  # see _cached
        self._slot_targets: tuple[str, ...] = ()
        self.vector_turns = self.vector_runs = 0

    # ---------------------------------------------------------------- the cycle's interface

    @property
    def taken_count(self) -> int:
        return self.idle.taken_count

    @taken_count.setter
    def taken_count(self, value: int) -> None:
        self.idle.taken_count = value

    def changed(self, slot) -> None:
        """A match changed ``slot`` (carved or taken): its row follows."""
        if self.table is not None:
            self.table.update(slot)

    def hold(self, rs, slot, pool) -> None:
        """After a carve: the scalar search holds the slot for its request; a vector request
        leaves it out of the classes until a scalar search needs them (:meth:`_sync_scalar`)."""
        if self._plan_of(rs) is None:
            self.idle.hold(rs, slot, pool)
            return
        if slot.cls is not None:
            slot.cls = None
            self._dirty.append(slot)

    def extend(self, cycle, rs, pool, slot, cost, carve, used, limit, used_u, limit_u, budget):
        """The further jobs of ``rs`` the held ``slot`` takes at once (:mod:`.runs`)."""
        plan = self._plan_of(rs)
        if plan is None:
            n = extend_run(cycle, self.idle, rs, pool, slot, cost, carve, used, limit, used_u,
                           limit_u, budget)
            if n:
                self.changed(slot)
            return n
        turn, self._turn = self._turn, None
        if turn is None or turn[0] is not rs or not self.idle.runs:
            return 0
        states = _numeric_steps(self.idle, rs, slot, cost, carve, used, limit, used_u, limit_u,
                                budget)
        if not states:
            return 0
        try:
            k = self._run_steps(plan, slot, states, turn)
        except (Unsupported, Inexact):
            return 0
        if k <= 0:
            return 0
        self.vector_runs += 1
        n = commit_run(cycle, self.idle, rs, pool, slot, cost, carve, states[:k])
        self.changed(slot)
        return n

    def best(self, rs, pool, used: float, limit: float):
        """``IdleSearch.best``'s contract: ``(candidate, matched_any, limited)``."""
        self._turn = None
        plan = self._plan(rs, pool)
        if plan is None:
            self._sync_scalar(pool)
            return self.idle.best(rs, pool, used, limit)
        self.idle.flush()  # a slot a scalar request held joins its class again
        if plan.epoch != self.table.epoch:  # a column changed type: compile again
            self._plans.pop(id(rs))
            return self.best(rs, pool, used, limit)
        try:
            return self._best(rs, plan, used, limit)
        except (Unsupported, Inexact):
            self._plans[id(rs)] = (rs, None)
            self._sync_scalar(pool)
            return self.idle.best(rs, pool, used, limit)

    # ---------------------------------------------------------------- turns

    def _candidates(self, plan) -> np.ndarray:
        """Every row that matches the request now."""
        return np.flatnonzero(self._current_mask(plan))

    def _full_mask(self, plan) -> np.ndarray:
        table = self.table
        mask = table.alive & plan.static
        wants = plan.wants
        res = table.res
        fit = ~((wants[0] > res[0]) | (wants[1] > res[1]) | (wants[2] > res[2]))
        mask &= fit | ~table.partitionable
        if plan.clauses:
            idx = np.flatnonzero(mask)
            if idx.size:
                rows = table.rows(idx)
                ok = np.ones(idx.size, dtype=bool)
                for fn in plan.clauses:
                    ok &= fn(rows)
                mask[idx[~ok]] = False
        return mask

    def _current_mask(self, plan) -> np.ndarray:
        """The request's mask over every row, kept across its turns: a row's verdict changes
        only when a match changes the row, and every such change is in the table's log, so
        only the rows logged since the last turn are evaluated again (all of them when the
        log grew by more than an eighth of the table)."""
        table = self.table
        log = table.log
        mask = plan.mask
        if mask is None or len(log) - plan.log_pos > (mask.size >> 3):
            mask = plan.mask = self._full_mask(plan)
        elif len(log) > plan.log_pos:
            changed = np.unique(np.array(log[plan.log_pos:], dtype=np.intp))
            mask[changed] = self._mask(plan, changed)
        plan.log_pos = len(log)
        return mask

    def _keys(self, plan, rows, n: int):
        pre, jr, post = plan.pre(rows), plan.jr(rows), plan.post(rows)
        if np.ndim(pre) == 0:
            pre = np.full(n, pre)
        if np.ndim(jr) == 0:
            jr = np.full(n, jr)
        if np.ndim(post) == 0:
            post = np.full(n, post)
        if np.isnan(jr).any():
            raise Inexact("a NaN job rank")  # tuple order with NaN: the scalar walk decides
        return pre, jr, post

    def _mask(self, plan, idx) -> np.ndarray:
        """Which of rows ``idx`` are free, match the request and fit its carve."""
        table = self.table
        wants, res = plan.wants, table.res
        ok = table.alive[idx] & plan.static[idx]
        fit = ~((wants[0] > res[0, idx]) | (wants[1] > res[1, idx]) | (wants[2] > res[2, idx]))
        ok &= fit | ~table.partitionable[idx]
        if plan.clauses and ok.any():
            rows = table.rows(idx)
            for fn in plan.clauses:
                ok &= fn(rows)
        return ok

    def _shared(self, plan) -> SharedOrder:
        order = self._orders.get(plan.ranking)
        if order is None or order.table is not self.table:
            order = self._orders[plan.ranking] = SharedOrder(
                self.table, lambda rows, n, p=plan: self._keys(p, rows, n))
        if plan.cursor is None or plan.cursor.order is not order:
            plan.cursor = Cursor(order)
        return order

    def _best(self, rs, plan, used, limit):
        order = self._shared(plan)
        mask = self._current_mask(plan)
        found, second = order.best(plan.cursor, mask.__getitem__)
        if found is None:
            return None, False, False
        row, (pre, jr, post, _name) = found
        cost = float(plan.cost[row])
        if not (used + cost <= limit * (1 + 1e-6) + 1e-9 or (used <= 0 and limit > 0)):
            return self._full_best(rs, plan, used, limit)
        self.vector_turns += 1
        slot = self.table.slots[row]
        carve = plan.wants if slot.partitionable else None
        key = (-pre, -jr, -post, -PreemptState.NONE, -WORST_RANK, slot.name)
        self._turn = (rs, row, None if second is None else second[1], False)
        return (key, slot, cost, carve), True, False

    def _full_best(self, rs, plan, used, limit):
        table = self.table
        idx = self._candidates(plan)
        if idx.size == 0:
            return None, False, False
        pre, jr, post = self._keys(plan, table.rows(idx), idx.size)
        names = table.name_rank[idx]
        self.vector_turns += 1
        k = _argbest(pre, jr, post, names, None)
        row = int(idx[k])
        cost = float(plan.cost[row])
        limited = False
        if not (used + cost <= limit * (1 + 1e-6) + 1e-9 or (used <= 0 and limit > 0)):
            # the best is refused for the limit: walk the whole order (a cheaper slot may fit)
            order = np.lexsort((names, -post, -jr, -pre))
            costs = plan.cost[idx[order]]
            permits = (used + costs <= limit * (1 + 1e-6) + 1e-9) | (used <= 0 and limit > 0)
            first = int(np.argmax(permits))
            if not permits[first]:
                return None, True, True
            k, limited = int(order[first]), True
            row, cost = int(idx[k]), float(costs[first])
        slot = table.slots[row]
        carve = plan.wants if slot.partitionable else None
        key = (-float(pre[k]), -float(jr[k]), -float(post[k]), -PreemptState.NONE, -WORST_RANK,
               slot.name)
        other = None
        if not limited and idx.size > 1:
            j = _argbest(pre, jr, post, names, k)
            other = (float(pre[j]), float(jr[j]), float(post[j]), int(names[j]))
        self._turn = (rs, row, other, limited)
        return (key, slot, cost, carve), True, limited

    def _run_steps(self, plan, slot, states, turn) -> int:
        """How many of ``states`` (the slot's sizes at the next steps) the one-step loop would
        give the slot: while it matches and its key beats the turn's best other candidate."""
        table = self.table
        _rs, row, other, limited = turn
        if limited or table.slots[row] is not slot:
            return 0
        n = len(states)
        carved = {}
        for k, lname in enumerate(("cpus", "memory", "disk")):
            pairs = [(5, 0.0) if s[k] is None else scalar(s[k]) for s in states]
            tags = np.array([p[0] for p in pairs], dtype=np.int8)
            if table.uniform(lname) not in (None, *tags.tolist()[:1]) or (tags != tags[0]).any():
                return 0  # the carve would change the column's type: step by step
            carved[lname] = (tags, np.array([p[1] for p in pairs]))
        rows = table.rows(np.full(n, row), carved)
        ok = np.ones(n, dtype=bool)
        for fn in plan.clauses:
            ok &= fn(rows)
        pre, jr, post = self._keys(plan, rows, n)
        if other is not None:
            opre, ojr, opost, oname = other
            last = table.name_rank[row] < oname
            ok &= (pre > opre) | ((pre == opre) & ((jr > ojr) | ((jr == ojr) & (
                (post > opost) | ((post == opost) & last)))))
        bad = np.flatnonzero(~ok)
        return int(bad[0]) if bad.size else n

    # ---------------------------------------------------------------- plans

    def _plan_of(self, rs):
        hit = self._plans.get(id(rs))
        return hit[1] if hit is not None and hit[0] is rs else None

    def _plan(self, rs, pool):
        hit = self._plans.get(id(rs))
        if hit is not None and hit[0] is rs:
            return hit[1]
        plan = None
        if self.enabled and self._table(pool) is not None:
            try:
                plan = self._compile(rs)
            except (Unsupported, Inexact, RecursionError):
                plan = None  # (a 700-term || nests deeper than the compilers recurse)
        self._plans[id(rs)] = (rs, plan)
        return plan

    def _table(self, pool):
        if self._pool is pool:
            return self.table
        self._pool, self.table = pool, None
        if pool.claimed:
            return None  # preemption candidates: the scalar search weighs them
        slots = [c.members[k][2] for c in pool.classes for k in range(len(c.members))]
        slots = list({id(s): s for s in slots if not s.taken}.values())
        if self.idle.hot is not None and not self.idle.hot[1].taken:
            slots.append(self.idle.hot[1])
        if any(s.partitionable and "slotweight" in s.ad._exprs for s in slots):
            return None  # a carve's cost would read the slot's SlotWeight
        try:
            table = SlotTable(slots)
        except Unsupported:
            return None
        reach, targets = set(CARVED), set()
        for slot in slots:
            ad = slot.ad
            for lname, node in ad._exprs.items():
                if lname in CARVED or node.__class__.__name__ == "Literal":
                    continue
                names, tg = closure(ad, (lname,))
                if names & CARVED:
                    reach.add(lname)
                targets |= tg | {n for n in names if n not in ad._exprs}
        self._carved_reach, self._slot_targets = reach, tuple(sorted(targets))
        self.table = table
        return table

    def _compile(self, rs) -> _Plan | None:
        job, table, s = rs.job, self.table, self.s
        wants = self.idle.literal_wants(job)
        if wants is None:
            return None
        plan = _Plan()
        plan.wants = wants
        plan.epoch = table.epoch
        n = len(table.slots)
        if "requirements" in self._carved_reach:
            return None  # a slot's Requirements reads a carved resource
        static = self._static_column(("slot",), None, rs, lambda slot: requirements_hold(
            slot.ad, job))
        if static is None:
            return None
        req = job.get("Requirements")
        if req is None:
            return None
        clauses = rs.clauses or ((repr(req), req if isinstance(req, ExprTree) else None,
                                  (), ()),)
        for text, expr, job_refs, slot_refs in clauses:
            if expr is None:
                try:
                    value = scalar(req)
                except Unsupported:
                    return None
                static = static & holds(value)
                continue
            try:
                plan.clauses.append(self._cached(
                    ("clause", text), set(job_refs) | set(slot_refs), job,
                    lambda e=expr: self._probed(self._holds_fn(e.node, job))))
                continue
            except Unsupported:
                pass  # not compilable: evaluated per slot once, below, when it reads no carved resource
            if set(slot_refs) & self._carved_reach:
                return None
            column = self._static_column(("clause", text), job_refs, rs,
                                         lambda slot, e=expr: holds(scalar_or_none(e.eval(
                                             job, slot.ad))))
            if column is None:
                return None
            static = static & column
        plan.static = np.broadcast_to(static, (n,))
        plan.pre = self._rank(s.compiled("pre_job_rank"), rs, True, "pre")
        plan.post = self._rank(s.compiled("post_job_rank"), rs, True, "post")
        plan.jr = self._job_rank(rs)
        if plan.pre is None or plan.post is None or plan.jr is None:
            return None
        ranks_read = set()
        for expr in (s.compiled("pre_job_rank"), s.compiled("post_job_rank")):
            if expr is not None:
                ranks_read |= expr.attributes()
        plan.ranking = (rs.order, projection(job, self._view_names(ranks_read)))
        plan.cursor = None
        weights = s.use_slot_weights
        carve_cost = (wants[0] if wants[0] >= 0 else 1.0) if weights else 1.0
        plan.cost = np.where(table.partitionable, carve_cost, table.weight)
        return plan

    def _cached(self, what, names, job, build):
        """A compiled function, shared by the requests whose job agrees on ``names`` (what it
        reads), for the table's current column types; :class:`Unsupported` is kept too."""
        key = (what, self.table.epoch, projection(job, names))
        hit = self._compiled.get(key)
        if hit is None:
            try:
                hit = build()
            except (Unsupported, Inexact, RecursionError) as exc:
                hit = Unsupported(str(exc) or type(exc).__name__)
            self._compiled[key] = hit
        if isinstance(hit, Unsupported):
            raise Unsupported(*hit.args)  # a new one: a raised one keeps its frames (and all)
        return hit

    def _probed(self, fn):
        """``fn`` after one call over every row (builds its columns, raises what it raises)."""
        fn(self.table.rows())
        return fn

    def _names_of(self, expr, text=None) -> tuple:
        """Every name ``expr`` reads, with what the slots read of the job (cached by text)."""
        key = ("names", text if text is not None else id(expr))
        names = self._compiled.get(key)
        if names is None:
            names = self._compiled[key] = self._view_names(expr.attributes())
        return names

    def _holds_fn(self, node, job):
        """``rows -> bool array``: does a ``Requirements`` clause (MY = the job) hold? Typed
        when every type is known (:mod:`.vtyped`), else tagged (:mod:`.vexpr`);
        :class:`Unsupported` if neither."""
        try:
            tag, fn = compile_typed(node, job, False, self.table)
        except Unsupported:
            tagged = compile_vector(node, job, False)
            return lambda rows: holds(tagged(rows))
        if tag in (BOOL, INT, REAL):
            return lambda rows: fn(rows) != 0  # true, or a non-zero number (NaN too)
        return lambda rows: False  # UNDEFINED or ERROR on every slot

    def _rank_fn(self, node, job, slot_is_my: bool, worst):
        """``rows -> floats``: a rank (non-numbers ``worst``, NaN too; ``worst`` None: a
        job's Rank, non-numbers 0.0 and NaN kept), typed or tagged as :meth:`_holds_fn`."""
        try:
            tag, fn = compile_typed(node, job, slot_is_my, self.table)
        except Unsupported:
            tagged = compile_vector(node, job, slot_is_my)
            return lambda rows: ranks(tagged(rows), worst)
        if tag in (BOOL, INT) or (tag == REAL and worst is None):
            return fn
        if tag == REAL:
            def real(rows):
                values = np.asarray(fn(rows), dtype=float)
                return np.where(np.isnan(values), worst, values)
            return real
        constant = 0.0 if worst is None else worst
        return lambda rows: constant

    def _job_reads_ok(self, job, names) -> bool:
        """Do the job values ``names`` (followed through the job) read no carved resource?"""
        reached, targets = closure(job, names)
        reach = self._carved_reach
        return not (targets & reach or {n for n in reached if n not in job._exprs} & reach)

    def _static_column(self, what, job_refs, rs, verdict):
        """A verdict per slot that no carve changes, shared by requests whose job agrees on
        what it reads; None when it could change (it reads a carved resource)."""
        job = rs.job
        names = set(job_refs or ()) | set(self._slot_targets)
        if not self._job_reads_ok(job, names):
            return None
        key = (what, projection(job, names))
        column = self._static.get(key)
        if column is None:
            column = self._static[key] = np.array(
                [bool(verdict(slot)) for slot in self.table.slots], dtype=bool)
        return column

    def _rank(self, expr, rs, slot_is_my, which):
        """A negotiator rank as a function of rows: compiled, or (reading no carved resource)
        evaluated once per slot and shared by the requests whose job agrees on what it reads."""
        if expr is None:
            return lambda rows: 0.0
        names = self._names_of(expr)
        try:
            return self._cached((which, id(expr)), names, rs.job, lambda: self._probed(
                self._rank_fn(expr.node, rs.job, slot_is_my, WORST_RANK)))
        except Unsupported:
            pass  # not compilable: a static column of per-slot values, below
        if set(names) & self._carved_reach or not self._job_reads_ok(rs.job, names):
            return None
        key = (which, repr(expr), projection(rs.job, names))
        values = self._static.get(key)
        if values is None:
            job = rs.job
            values = self._static[key] = np.array(
                [eval_rank(expr, slot.ad, job) for slot in self.table.slots])
        return _indexed(values)

    def _view_names(self, refs) -> tuple:
        """Every name ``refs`` can read of either ad, and what the slots read of the job."""
        return tuple(sorted({r[7:] if r.startswith("target.") else r for r in refs}
                            | set(self._slot_targets)))

    def _job_rank(self, rs):
        if rs.const_rank is not None:
            const = rs.const_rank
            return lambda rows: const
        expr = rs.job.get("Rank")
        text = rs.order[1]
        names = self._names_of(expr, text)
        try:
            return self._cached(("jr", text), names, rs.job, lambda: self._probed(
                self._rank_fn(expr.node, rs.job, False, None)))
        except Unsupported:
            pass  # not compilable: a static column of per-slot values, below
        if set(names) & self._carved_reach or not self._job_reads_ok(rs.job, names):
            return None
        refs = names
        key = ("jr", repr(expr), projection(rs.job, refs))
        values = self._static.get(key)
        if values is None:
            values = self._static[key] = np.array(
                [rank(rs.job, slot.ad) for slot in self.table.slots])
        return _indexed(values)

    # ---------------------------------------------------------------- the scalar side

    def _sync_scalar(self, pool) -> None:
        """Re-class the slots the vector turns carved, before a scalar search looks."""
        dirty, self._dirty = self._dirty, []
        for slot in dirty:
            if not slot.taken and slot.cls is None:
                pool.reclass(slot)


def scalar_or_none(value):
    """``(tag, value)`` of an evaluated value for :func:`~.vexpr.holds`; strings and other
    non-numbers as ERROR (they never let a Requirements hold)."""
    try:
        return scalar(value)
    except Unsupported:
        return (1, 0.0)


def _argbest(pre, jr, post, names, skip):
    """The position of the best key (highest pre, job rank, post, then the first name),
    leaving out position ``skip``."""
    cand = np.arange(pre.size)
    if skip is not None:
        cand = cand[cand != skip]
    for part in (pre, jr, post):
        if cand.size == 1:
            return int(cand[0])
        sub = part[cand]
        cand = cand[sub == sub.max()]
    return int(cand[np.argmin(names[cand])]) if cand.size > 1 else int(cand[0])


def _indexed(values: np.ndarray):
    """A function of rows reading a fixed per-slot column."""
    def column(rows):
        return values if rows.index is None else values[rows.index]
    return column
