"""The best idle slot by columns: one vectorised pass over every free slot per request turn.

Theory of operation
-------------------
:class:`VectorSearch` is the cycle's idle-slot search when the pool allows it (no claimed
slot is a preemption candidate, every slot's ``Cpus``/``Memory``/``Disk`` is a number); it
keeps the scalar search (:class:`~.search.IdleSearch`) for the requests it cannot compile and
for pools it does not take, and keeps the two consistent (a slot carved by one is re-classed
before the other looks, see :meth:`VectorSearch._sync_scalar`).

**A plan per request** (:class:`~.vplan.Plan`, built at the request's first search by the
table's :class:`~.vplan.PlanCompiler`): the job's clauses and ranks compiled to functions over
the slot table's columns, and what no carve changes as per-slot columns evaluated once; the
request falls back to the scalar search when its plan cannot be built.

**A turn** (:meth:`VectorSearch.best`): the request's mask (free, static verdicts, fit to
its literal carve, compiled clauses) applied along the best-first order shared by the
requests that rank alike (:mod:`.vorder`), which gives the best matching slots; the request
keeps them (:class:`~.vorder.Queue`) and its next turns take the best and the runner-up from
them, brought up to date with the rows changed since. When the submitter's limit refuses the
best, every candidate is sorted with ``np.lexsort`` and the first the limit permits wins,
exactly as the scalar walk decides.

**A run** (:meth:`VectorSearch.extend`): after a carve from a partitionable slot, the
resource states of the next steps come from the exact numeric stepping of :mod:`.runs`; the
slot's clauses and key are evaluated at all of those sizes in one call, and the steps are
taken while the slot still matches and its key beats the best other candidate of the turn
(other slots do not change during a turn). So no monotonicity proof is needed: every step is
evaluated -- ahead, for the next slots of the queue too (:mod:`.vsteps`), and what the run
leaves of the slot is its request's next verdict on it (:meth:`VectorSearch._hinted`).
The turn's own carve and its run are one commit (:meth:`VectorSearch.take`): the run is
decided from what the carve would leave (the slot's size, the jobs left, ``used``), then both
are committed with one row update and one accountant call; a carve that changes a column's
type, or uses the slot up and still fits what it leaves, is made alone first (``make_match``,
then :meth:`VectorSearch.extend`). After a commit the request's next turn is made by
:meth:`VectorSearch.take` itself (:meth:`VectorSearch._next_turn`), as ``negotiate_entry``'s
next turn would make it, while it is one that ``take`` commits: one call per request visit,
not one per slot. Before that loop, ``take`` tries the request's whole fill in one vectorised
pass (:mod:`.vfill`: a greedy merge of each row's steps, sorted by their prefix maximum); what
it leaves is decided by the next turns, and a request it does not take by the loop.
``tests/unit/test_negotiator_vsearch.py`` compares whole cycles with the scalar search on
random pools.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from htc.daemons.negotiator import vfill
from htc.daemons.negotiator.columns import SlotTable
from htc.daemons.negotiator.negotiate import after_matches
from htc.daemons.negotiator.preemption import WORST_RANK, PreemptState
from htc.daemons.negotiator.runs import (_numeric_steps, commit_run, extend_run, limit_count,
                                         steps_from)
from htc.daemons.negotiator.search import IdleSearch
from htc.daemons.negotiator.vexpr import Inexact, Unsupported
from htc.daemons.negotiator.vmask import current_mask
from htc.daemons.negotiator.vorder import (Cursor, Queue, SharedOrder, best_position,
                                          first_permitted, ranks_of)
from htc.daemons.negotiator.vplan import PlanCompiler
from htc.daemons.negotiator.vsteps import (StepMemo, after_run, carve_sizes, carved_column,
                                           size_after_carve, slot_size)

_SLOT_ROOTS = ("requirements",)
_CARVED = ("cpus", "memory", "disk")
#: the candidates a request's turn keeps for its next turns (see :class:`~.vorder.Queue`)
QUEUE_LENGTH = 32
#: rows changed since a queue was made beyond which the next turn makes it afresh
QUEUE_CHANGES_MOST = 64


class VectorSearch:
    """The idle-slot search over the slot table (see the module docstring)."""

    #: False: every request takes the scalar search (the tests compare both ways)
    enabled = True
    #: False: :meth:`take` commits one slot, and every next slot is a turn of
    #: ``negotiate_entry`` (the tests compare both ways)
    chain = True
    #: False: :meth:`take` leaves the request's fill to the one-step loop, not :mod:`.vfill`
    #: (the tests compare both ways)
    fill = True

    def __init__(self, settings):
        self.s = settings
        self.idle = IdleSearch(settings)
        self.table: SlotTable | None = None
        self._pool = None
        self._plans: dict[int, tuple] = {}  # id(rs) -> (rs, plan or None)
        self._dirty: list = []  # slots carved here, to re-class before a scalar search
        self._turn = None  # (rs, candidate rows best first) of the last vector turn
        self._queue: Queue | None = None  # the best candidates of the last vector request
        self._steps: StepMemo | None = None  # the runs evaluated ahead for the last request
        self._ahead = None  # the steps of the last run, when evaluated ahead
        #: (plan, row, log length, matches, key) of the slot the last run left: the verdict
        #: and key its request's next turn would evaluate, while the log has nothing after
        self._hint = None
        self._compiler: PlanCompiler | None = None  # the table's (see _table)
        self._orders: dict[tuple, SharedOrder] = {}  # ranking -> its shared order
        self.vector_turns = self.vector_runs = 0
        #: the vector turns :meth:`take` made itself, after a commit (no ``negotiate_entry`` turn)
        self.chained_turns = 0

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
        states = None
        if self.table.slots[turn[1]] is slot:
            size = slot_size(slot)
            if size is not None:
                states = self._kept(plan, turn[1], rs.remaining, size, cost, carve, used, limit,
                                    used_u, limit_u, budget)[0]
        if states is None:
            states = _numeric_steps(self.idle, rs, slot, cost, carve, used, limit, used_u,
                                    limit_u, budget)
        if not states:
            self._hint_unfit(plan, turn[1], slot)
            return 0
        self._ahead = None
        try:
            k = self._run_steps(plan, slot, states, turn, carve, rs.remaining)
        except (Unsupported, Inexact):
            return 0
        n = 0
        if k > 0:
            self.vector_runs += 1
            n = commit_run(cycle, self.idle, rs, pool, slot, cost, carve, states[:k])
            self.changed(slot)
        if self._ahead is not None:
            self._leave_hint(plan, turn[1], k)
        return n

    def take(self, cycle, rs, pool, slot, cost, carve, used, limit, used_u, limit_u,
             budget) -> list:
        """The vector turn's carve of the partitionable ``slot`` for ``rs`` and the run after
        it (:meth:`extend`'s), committed at once: one :func:`~.runs.commit_run` of both, one
        row update, one accountant call; then the request's next turns, slot after slot, as
        long as each is one (:meth:`_next_turn`). Returns the matches it made, slot by slot, as
        ``[(matches, cost), ...]``; empty when it made none (a scalar turn, runs off, a carve
        that changes a column's type or uses the slot up and still fits it,
        :func:`~.vsteps.carve_sizes`): ``make_match`` and :meth:`extend` then make them one
        after the other.

        It decides what they decide: between the first carve and the run nothing else moves,
        and what the run reads of that carve (the slot's size after it, the request's jobs
        left, ``used`` + ``cost``: the arguments here are the values before it) is computed
        without making it; the row's update and the hints come after the commit, as after
        ``extend``'s. ``used``, ``used_u`` and ``budget`` follow the matches made here as
        ``negotiate_entry`` has them follow (one float addition per match). The request's
        whole fill is tried first (:func:`~.vfill.fill`); when it takes nothing, this loop does."""
        turn = self._turn
        if turn is None or turn[0] is not rs or not self.idle.runs:
            return []
        plan = self._plan_of(rs)
        if plan is None or self.table.slots[turn[1]] is not slot:
            return []
        sizes = carve_sizes(slot, carve)
        if sizes is None:
            return []
        if self.fill and self.chain and not turn[3]:
            taken = vfill.fill(self, cycle, rs, pool, plan, turn[1], used, limit, used_u,
                               limit_u, budget)
            if taken:
                return taken
        taken = []
        while True:
            n = self._commit(cycle, rs, pool, slot, cost, carve, used, limit, used_u, limit_u,
                             budget, plan, sizes)
            taken.append((n, cost))
            if not self.chain:
                return taken
            used, used_u, budget, more = after_matches(cycle, rs, ((n, cost),), used, used_u,
                                                       budget, limit)
            if not more:
                return taken  # (negotiate_entry's tests before a turn: it decides)
            found = self._next_turn(rs, plan, pool, used_u, limit_u)
            if found is None:
                return taken
            slot, cost, sizes = found

    def _commit(self, cycle, rs, pool, slot, cost, carve, used, limit, used_u, limit_u, budget,
                plan, sizes) -> int:
        """:meth:`take`'s carve of ``slot`` (whose ``sizes`` are its size and what the carve
        leaves, :func:`~.vsteps.carve_sizes`) and the run after it, for the turn
        ``self._turn``; returns how many matches it made."""
        turn, self._turn = self._turn, None
        size, after = sizes
        if slot.cls is not None:  # (hold's, for a vector request: as make_match's)
            slot.cls = None
            self._dirty.append(slot)
        row, jobs = turn[1], rs.remaining - 1
        used, used_u = used + cost, used_u + cost  # (negotiate_entry's additions, in order)
        budget = None if budget is None else budget - 1
        states, known = self._kept(plan, row, jobs, after, cost, carve, used, limit, used_u,
                                   limit_u, budget)
        if states is None:
            states = steps_from(after, jobs, cost, carve, used, limit, used_u, limit_u, budget)
        k, hint = 0, None
        if states:
            self._ahead = None
            try:
                k = self._run_steps(plan, slot, states, turn, carve, jobs, known)
                hint = self._ahead is not None
            except (Unsupported, Inexact):
                k = 0  # (no hint: extend leaves none then)
        if k:
            self.vector_runs += 1
        n = commit_run(cycle, self.idle, rs, pool, slot, cost, carve, [size, *states[:k]],
                       first=True)
        self.changed(slot)
        if not states:
            self._hint_unfit(plan, row, slot)
        elif hint:
            self._leave_hint(plan, row, k)
        return n

    def _next_turn(self, rs, plan, pool, used, limit):
        """The request's next turn, made here as :meth:`best` would make it, when it is a
        vector turn of a partitionable slot that :meth:`take` commits: ``(slot, cost, sizes)``,
        with ``self._turn`` set; else None, and nothing a turn would not do was done (the
        turn ``negotiate_entry`` then makes finds what this one found).

        Between two turns of one request nothing else in the cycle moves: the plan is the
        same, no slot is held by the class search (:meth:`best`'s flush has nothing to do),
        and the turn reads the request's mask and queue, brought up to date with the rows
        changed since -- usually the one slot just carved, whose verdict and key the run left
        (:meth:`_hinted`): it leaves the queue, and the next best is the queue's next."""
        table = self.table
        if plan.epoch != table.epoch or self.idle.hot is not None or pool.claimed:
            return None
        ranked = self._after_unmatched(plan)
        if ranked is None:
            try:
                ranked = self._ranked(plan, self._current_mask(plan), rs.remaining)
            except Exception:  # noqa: BLE001 - best() makes the turn again and answers for it
                return None
        if not ranked:
            return None
        row = ranked[0][0]
        cost = float(plan.cost[row])
        if not (used + cost <= limit * (1 + 1e-6) + 1e-9 or (used <= 0 and limit > 0)):
            return None  # (the limit refuses the best: best() walks the whole order)
        slot = table.slots[row]
        if not slot.partitionable:
            return None
        sizes = carve_sizes(slot, plan.wants)
        if sizes is None:
            return None
        self.vector_turns += 1
        self.chained_turns += 1
        self._turn = (rs, row, ranked[1][1] if len(ranked) > 1 else None, False)
        return slot, cost, sizes

    def _after_unmatched(self, plan):
        """The request's queue when the one row logged since its last turn is the slot the
        last run left unmatched (its hint, :meth:`_leave_hint`/:meth:`_hint_unfit`): its mask
        and queue brought up to date as :func:`~.vmask.current_mask` and
        :meth:`~.vorder.Queue.take` do then (the row's verdict False, and it leaves the
        queue), in a few lines: the chain's usual turn. None when that is not the case, or
        the queue is then too short (:meth:`_ranked` looks at the shared order)."""
        hint, queue, mask = self._hint, self._queue, plan.mask
        if (hint is None or hint[3] or hint[0] is not plan or queue is None
                or queue.plan is not plan or mask is None):
            return None
        log = self.table.log
        n = len(log)
        if (hint[2] != n or plan.log_pos != n - 1 or queue.pos != n - 1 or log[-1] != hint[1]
                or mask.size >> 3 < 1 or QUEUE_CHANGES_MOST < 1):
            return None  # (current_mask would evaluate all again, _ranked make a new queue)
        row = hint[1]
        mask[row] = False
        plan.log_pos = queue.pos = n
        ranked = queue.ranked = [item for item in queue.ranked if item[0] != row]
        return ranked if len(ranked) >= 2 or queue.complete else None

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

    def _current_mask(self, plan) -> np.ndarray:
        return current_mask(self.table, plan, self._hinted)

    def _leave_hint(self, plan, row: int, k: int) -> None:
        """After a run of ``k`` steps whose steps were evaluated ahead: what the request's
        mask and key will find of the slot (:func:`~.vsteps.after_run`), for its next turn."""
        table = self.table
        found = after_run(self._ahead, k, bool(table.alive[row]))
        self._ahead = None
        if found is not None:
            matches, key = found
            if matches:
                key = (-key[0], -key[1], -key[2], int(table.name_rank[row]))
            self._hint = (plan, row, len(table.log), matches, key)

    def _hint_unfit(self, plan, row: int, slot) -> None:
        """After a carve that left no run: when the slot is used up or the carve no longer
        fits it, the request's mask will not take it (else no hint: a limit stopped it)."""
        table = self.table
        if table.slots[row] is not slot:
            return
        if table.alive[row] and not any(w > h for w, h in zip(plan.wants,
                                                              table.res[:, row].tolist())):
            return  # (NaN, a size the slot does not say, never refuses: as the mask's fit)
        self._hint = (plan, row, len(table.log), False, None)

    def _hinted(self, plan, pos: int):
        """The hint of the last run, when the rows logged since ``pos`` are all its slot and
        nothing was logged after it, for ``plan``; else None."""
        hint = self._hint
        if hint is None or hint[0] is not plan:
            return None
        log = self.table.log
        if hint[2] != len(log):
            return None
        row = hint[1]
        for r in log[pos:]:
            if r != row:
                return None
        return hint

    def _keys(self, plan, rows, n: int):
        return ranks_of(plan.pre, plan.jr, plan.post, rows, n)

    def _shared(self, plan) -> SharedOrder:
        cursor = plan.cursor
        if cursor is not None and cursor.order.table is self.table:
            return cursor.order  # (the order of its ranking for this table, made below)
        order = self._orders.get(plan.ranking)
        if order is None or order.table is not self.table:
            # (the ranks' functions, not the plan or the search: no reference cycle)
            order = self._orders[plan.ranking] = SharedOrder(
                self.table, partial(ranks_of, plan.pre, plan.jr, plan.post))
        if plan.cursor is None or plan.cursor.order is not order:
            plan.cursor = Cursor(order)
        return order

    def _best(self, rs, plan, used, limit):
        mask = self._current_mask(plan)
        ranked = self._ranked(plan, mask, rs.remaining, vfill.look_width(self, rs.remaining))
        if not ranked:
            return None, False, False
        row, (pre, jr, post, _name) = ranked[0]
        second = ranked[1] if len(ranked) > 1 else None
        cost = float(plan.cost[row])
        if not (used + cost <= limit * (1 + 1e-6) + 1e-9 or (used <= 0 and limit > 0)):
            return self._full_best(rs, plan, used, limit)
        self.vector_turns += 1
        slot = self.table.slots[row]
        carve = plan.wants if slot.partitionable else None
        key = (-pre, -jr, -post, -PreemptState.NONE, -WORST_RANK, slot.name)
        self._turn = (rs, row, None if second is None else second[1], False)
        return (key, slot, cost, carve), True, False

    def _ranked(self, plan, mask, jobs: int, wider: int = 0) -> list:
        """The best candidates of the request, best first: at least two, or all there are.

        The queue of the request's last turn is brought up to date when only a few rows
        changed since (in the turns between, this request carved its best slot); else the
        shared order gives :data:`QUEUE_LENGTH` afresh (or one more than the request's
        ``jobs`` left, when fewer) from a look at ``wider`` rows (:func:`~.vfill.look_width`)."""
        log = self.table.log
        queue = self._queue
        if queue is not None and queue.plan is plan and len(log) - queue.pos <= QUEUE_CHANGES_MOST:
            if len(log) > queue.pos:
                queue.take(self.table, lambda rows, n: self._keys(plan, rows, n), mask,
                           log[queue.pos:], self._hinted(plan, queue.pos))
                queue.pos = len(log)
            if len(queue.ranked) >= 2 or queue.complete:
                return queue.ranked
        order = self._shared(plan)
        want = max(2, min(QUEUE_LENGTH, jobs + 1))
        ranked, complete = order.ranked(plan.cursor, mask.__getitem__, want, wider)
        self._queue = Queue(plan, len(log), ranked, complete)
        return ranked

    def _full_best(self, rs, plan, used, limit):
        table = self.table
        idx = self._candidates(plan)
        if idx.size == 0:
            return None, False, False
        pre, jr, post = self._keys(plan, table.rows(idx), idx.size)
        names = table.name_rank[idx]
        self.vector_turns += 1
        k = best_position(pre, jr, post, names, None)
        row = int(idx[k])
        cost = float(plan.cost[row])
        limited = False
        if not (used + cost <= limit * (1 + 1e-6) + 1e-9 or (used <= 0 and limit > 0)):
            # the best is refused for the limit: walk the whole order (a cheaper slot may fit)
            k = first_permitted(pre, jr, post, names, plan.cost[idx], used, limit)
            if k is None:
                return None, True, True
            limited, row = True, int(idx[k])
            cost = float(plan.cost[row])
        slot = table.slots[row]
        carve = plan.wants if slot.partitionable else None
        key = (-float(pre[k]), -float(jr[k]), -float(post[k]), -PreemptState.NONE, -WORST_RANK,
               slot.name)
        other = None
        if not limited and idx.size > 1:
            j = best_position(pre, jr, post, names, k)
            other = (float(pre[j]), float(jr[j]), float(post[j]), int(names[j]))
        self._turn = (rs, row, other, limited)
        return (key, slot, cost, carve), True, limited

    def _run_steps(self, plan, slot, states, turn, carve, jobs: int, known=None) -> int:
        """How many of ``states`` (the slot's sizes at the next steps) the one-step loop would
        give the slot: while it matches and its key beats the turn's best other candidate
        (``jobs``: the request's jobs left before them; ``known``: the steps evaluated ahead
        that ``states`` were cut from, when the caller has them: :meth:`_kept`)."""
        table = self.table
        _rs, row, other, limited = turn
        if limited or table.slots[row] is not slot:
            return 0
        n = len(states)
        if known is None:
            known = self._known_steps(plan, row, carve, states, jobs)
        if known is not None:
            tags, ok, keys, _sizes, _ended = known
            for lname, tag in zip(_CARVED, tags):
                if table.uniform(lname) not in (None, tag):
                    return 0  # the carve would change the column's type: step by step
            self._ahead = known  # (its verdicts hold for the columns' types: see _leave_hint)
        else:
            carved = {}
            for k, lname in enumerate(_CARVED):
                column = carved_column([s[k] for s in states])
                if column is None or table.uniform(lname) not in (None, column[0]):
                    return 0  # the carve would change the column's type: step by step
                tag, values = column
                carved[lname] = (np.full(n, tag, dtype=np.int8), values)
            rows = table.rows(np.full(n, row), carved)
            ok = np.ones(n, dtype=bool)
            for fn in plan.clauses:
                ok &= fn(rows)
            pre, jr, post = self._keys(plan, rows, n)
            ok = ok.tolist()
            keys = zip((-pre).tolist(), (-jr).tolist(), (-post).tolist())
        if other is None:
            return ok.index(False) if False in ok[:n] else n
        # the key beats the other's: (-pre, -jr, -post, name) as tuples compare (a run is a
        # few steps: Python's compares of a few floats cost less than a dozen numpy calls)
        opre, ojr, opost, oname = other
        theirs = (-opre, -ojr, -opost)
        name = int(table.name_rank[row])
        for i, (good, key) in enumerate(zip(ok[:n], keys)):
            if not (good and (key < theirs or (key == theirs and name < oname))):
                return i
        return n

    def _kept(self, plan, row, jobs, size, cost, carve, used, limit, used_u, limit_u, budget):
        """``(states, known)``: :func:`~.runs._numeric_steps`' answer from the sizes evaluated
        ahead for ``row``, whose slot's size is ``size``, for a request with ``jobs`` left (cut
        to its limits by :func:`~.runs.limit_count`; None when not kept), and the steps it took
        them from (:meth:`_known_steps`' answer for those states, or None)."""
        for have, amount in zip(size, carve):
            if have is not None and amount > have:
                return [], None  # the carve no longer fits: no step
        known = self._known_steps(plan, row, carve, [size], jobs)
        if known is None:
            return None, None
        sizes, ended = known[3], known[4]
        steps = jobs if budget is None else min(jobs, budget)
        most = min(steps, len(sizes))
        m = limit_count(most, cost, used, limit, used_u, limit_u)
        if m == len(sizes) < steps and not ended:
            return None, None  # (more steps than kept)
        return sizes[:m], known

    def _known_steps(self, plan, row, carve, states, jobs: int):
        """:meth:`~.vsteps.StepMemo.steps` of ``row``'s run ``states`` evaluated ahead: kept
        from an earlier call, or evaluated now with the next rows of the queue (as many as
        take the request's ``jobs`` left)."""
        memo = self._steps
        if memo is None or memo.plan is not plan:
            memo = self._steps = StepMemo(plan)
        known = memo.steps(row, carve, states)
        if known is not None:
            return known
        starts = [(row, states[0])]
        queue = self._queue
        if queue is not None and queue.plan is plan:
            table = self.table
            for other, _key in queue.ranked:
                if other != row and other not in memo.rows and table.partitionable[other]:
                    size = size_after_carve(table.slots[other], carve)
                    if size is not None:
                        starts.append((other, size))
        memo.evaluate(self, carve, starts, jobs)
        return memo.steps(row, carve, states)

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
                plan = self._compiler.compile(rs)
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
        slots = pool.free_slots()  # (without classing them: the class search's held slot too)
        if any(s.partitionable and "slotweight" in s.ad._exprs for s in slots):
            return None  # a carve's cost would read the slot's SlotWeight
        try:
            table = SlotTable(slots)
        except Unsupported:
            return None
        self._compiler = PlanCompiler(self.s, self.idle.literal_wants, table)
        self.table = table
        return table

    # ---------------------------------------------------------------- the scalar side

    def _sync_scalar(self, pool) -> None:
        """Re-class the slots the vector turns carved, before a scalar search looks."""
        dirty, self._dirty = self._dirty, []
        for slot in dirty:
            if not slot.taken and slot.cls is None:
                pool.reclass(slot)
