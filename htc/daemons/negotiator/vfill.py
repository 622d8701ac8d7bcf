"""A request's fill: its whole sequence of slot steps decided in one vectorised pass.

Theory of operation
-------------------
After a vector turn, the one-step loop (``negotiate_entry``'s turns, or
:meth:`~.vsearch.VectorSearch.take`'s chain of them) repeats: among the rows that match the
request at their current size, take the best (the smallest key ``(-pre, -jr, -post, name
rank)``), carve it, until a cut (the jobs left, the UPDOWN budget, ``cycle.free``, the
submitter's limit). Between two of its steps nothing moves but the slot carved, and a row's
key and verdict at a size are a function of the row and the size alone. So each row that
matches now has a *sequence*: its keys at the sizes after 0, 1, 2, ... carves, ending where
the carve no longer fits, the slot is used up (Cpus under 1 or no Memory after a carve) or
the row first stops matching (it never matches again: nothing but its own carve changes it).

The loop is the greedy merge of those sequences (always the smallest head), and that merge is
a sort by each element's **prefix maximum** along its row (ties within a row in step order;
rows never tie: the name rank is in the key). :func:`decide` takes the best rows by their key
now from the shared order (:mod:`.vorder`), evaluates every (row, step) in one call of the
plan's clauses and ranks (as :class:`~.vsteps.StepMemo` does), sorts, and cuts:

- every row outside the window ranks at or below its first key at every step, so the first
  row left out (or not taken: not partitionable, a size that is not a whole number) is a
  *barrier*, an element at its first key where the pass stops;
- a row's steps past the jobs left are never reached (that many of its own come first);
- the jobs left and the budget (a count), ``cycle.free`` (the slots used up), the limit:
  ``used`` before each step (``np.add.accumulate`` adds the costs in order, exactly as one
  addition per match) against ``limit``, and ``_best``'s refusal of the step's cost (there
  ``_full_best`` would walk for a cheaper slot: the pass stops before it).

Most passes need no sort: where every row's key is as good or better at each step than at the
one before (HTCondor's default pre-job rank prefers the smaller slot, so a carve raises it),
each row's prefix maximum is its first key, and the merge is the rows in the shared order's
order, each taking its steps in one block: the pass is cut row by row.

Only whole-number sizes and carves are taken (then the size after ``j`` carves is
``h - j * c`` exactly, as :func:`~.vsteps._whole_sequence` has it); anything else is the one-step
loop's. The pass ends at the first cut; :func:`commit` commits its blocks (a row's contiguous
steps: one turn's carve and its run) in order, and the search forgets the request's queue,
hint and kept steps, so whatever comes next is decided by a turn, as before.
``tests/unit/test_negotiator_fill.py`` compares whole cycles with the fill on and off.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from htc.daemons.negotiator.match_runs import Steps
from htc.daemons.negotiator.negotiate import after_matches
from htc.daemons.negotiator.runs import commit_fill
from htc.daemons.negotiator.vexpr import INT, Inexact, Unsupported

_CARVED = ("cpus", "memory", "disk")
_WHOLE = 2 ** 53
#: the jobs left (or budget) below which a fill is the one-step loop's: a pass costs some sixty
#: array operations, the loop some 40 us per slot (case 2's requests of 20 jobs: filled, at 12
#: here, they cost what the loop costs, 1.06 s of ``take`` in both, their commits the most)
FEWEST_JOBS = 64
#: the rows a pass looks at, at most (the first left out is its barrier)
MOST_ROWS = 256
#: the (row, step) pairs a pass evaluates, at most (rows past them are left out; fewer
#: rows cover the jobs left twice over)
MOST_ELEMENTS = 16384


def fill(search, cycle, rs, pool, plan, row, used, limit, used_u, limit_u, budget) -> list:
    """The fill of request ``rs`` from its turn's ``row`` on, for ``search`` (the
    :class:`~.vsearch.VectorSearch` whose turn it is), decided in passes (:func:`decide`) and
    committed (:func:`commit`); returns what :meth:`~.vsearch.VectorSearch.take` returns,
    empty when the first pass takes nothing (the one-step loop decides). A pass that stopped
    at its barrier alone is followed by another from where it stopped, after
    ``negotiate_entry``'s tests before a turn."""
    table, taken = search.table, []
    if (rs.remaining < FEWEST_JOBS or (budget is not None and budget < FEWEST_JOBS)
            or plan.mask is None or plan.log_pos != len(table.log) or search.idle.hot is not None
            or pool.claimed or not _whole(plan.wants)):
        return taken  # (a turn would not be the vector search's alone: the loop decides)
    per_row = _steps_of(table, row, plan.wants)  # (a guess of the steps a row gives)
    while True:
        jobs = rs.remaining if budget is None else min(rs.remaining, budget)
        # the rows to look at: enough for the jobs left twice over, by the guess
        want = min(jobs, MOST_ROWS, -(-2 * jobs // per_row) + 2) + 1
        try:
            mask = search._current_mask(plan)  # (the rows the last pass carved, again)
            ranked, complete = search._shared(plan).ranked_arrays(
                plan.cursor, mask.__getitem__, want)
            if not ranked[0].size or (not taken and ranked[0][0] != row):
                return taken
            found = decide(table, plan, ranked, complete, jobs, cycle.free, plan.cost,
                           used, limit, used_u, limit_u)
        except (Unsupported, Inexact):
            return taken  # (the loop's turn raises again and answers for it)
        if found is None:
            return taken
        # the request's queue, hint and kept steps are the one-step loop's: its next turn
        # makes them afresh
        search._turn = search._hint = search._queue = search._steps = search._ahead = None
        blocks, k, more = found
        made = commit(search, cycle, rs, pool, plan, blocks, k, not taken)
        taken += made
        if not more:
            return taken
        # the steps a row gave this pass (one, where slots whose rank falls take turns)
        per_row = max(1, sum(n for n, _cost in made) // len({b[0] for b in blocks}))
        used, used_u, budget, more = after_matches(cycle, rs, made, used, used_u, budget, limit)
        if not more:
            return taken  # (negotiate_entry's tests before a turn: it decides)


def look_width(search, jobs: int) -> int:
    """The rows a turn's look finds for a request with ``jobs`` left when a fill may follow it
    (:func:`fill`'s first pass then looks at no more: the order serves it from the turn's
    look, :meth:`~.vorder.SharedOrder._look`); 0 when no fill follows."""
    return MOST_ROWS + 1 if search.fill and search.chain and jobs >= FEWEST_JOBS else 0


def _whole(carve) -> bool:
    """Whether ``carve`` is three positive whole numbers (ints or floats) within 2**53: the
    carves a pass takes (then a size after ``j`` of them is ``h - j * c`` exactly)."""
    return all(c.__class__ in (int, float) and 0 < c <= _WHOLE and int(c) == c
               for c in carve)  # (NaN: False)


def _steps_of(table, row: int, carve) -> int:
    """How many of the whole ``carve`` fit ``row`` now (at least one): :func:`fill`'s first
    guess of the steps a row of its window gives."""
    most = None
    for have, amount in zip(table.res[:, row].tolist(), carve):
        if -_WHOLE <= have <= _WHOLE:  # (NaN: the slot does not say)
            steps = int(have // amount)
            most = steps if most is None else min(most, steps)
    return max(1, most or 1)


def decide(table, plan, ranked: tuple, complete: bool, jobs: int, free: int, cost,
           used: float, limit: float, used_u: float, limit_u: float):
    """``(blocks, k, more)``: the fill's blocks, in order, as ``[(row, cpus, memory, disk,
    steps, cost)]`` (the row's sizes at the block's first step: each next step is less the
    carve ``k``, whole numbers); ``more``: the pass stopped at its barrier alone (a pass from
    there may take more). None when the pass takes nothing (the one-step loop decides).

    ``ranked``: the request's best rows now, best first, with their keys, as
    :meth:`~.vorder.SharedOrder.ranked_arrays` gives them (``complete``: every row that
    matches; their keys are by ``plan``'s ranks, as the order's); ``jobs``: the steps the
    jobs left and the budget allow; ``cost``: each row's cost (``plan.cost``).

    When every row's key is at least as good at each step as at the step before (the
    default ``NEGOTIATOR_PRE_JOB_RANK`` prefers the smaller slot: a carve raises it), each
    row's prefix maximum is its first key, the merge is the rows in their order, each
    taking its steps in one block, and the pass is cut row by row (:func:`_row_blocks`);
    else the steps are merged by sorting (:func:`_merged`) and cut step by step."""
    carve = plan.wants
    if not _whole(carve):
        return None
    k = np.array([int(c) for c in carve], dtype=np.int64)
    rows, first = ranked[0], ranked[1:]  # (first: the rows' keys now, pre, jr, post, name)
    barrier = None if complete else rows.size - 1  # (the barrier's position in ranked)
    if not complete:
        rows = rows[:-1]
    # the rows' sizes now, as whole numbers: a row that is not partitionable or says a size
    # that is not an int ends the window (its first key is the barrier)
    good, sizes = _sizes(table, rows)
    h = sizes.astype(np.int64)  # (exact: an INT column holds |v| <= 2**53)
    kc = k[:, None]
    fit = h // kc
    fit = np.minimum(np.minimum(fit[0], fit[1]), fit[2])
    k0, k1 = int(k[0]), int(k[1])
    up = np.maximum(np.minimum((h[0] - 1) // k0, -(-h[1] // k1) - 1), 0)
    used_up = up < fit
    n = np.where(used_up, up + 1, fit)
    good &= n > 0
    steps = np.minimum(n, jobs)
    total = np.cumsum(steps)
    cut = int(np.argmin(good)) if not good.all() else rows.size
    # enough rows for the jobs left twice over (rows past them are left out: see _fill)
    over = int(np.searchsorted(total, min(max(2 * jobs, 16), MOST_ELEMENTS))) + 1
    m = min(cut, over)
    if m == 0:
        return None
    if m < rows.size:
        barrier = m
    rows, h, sizes, steps = rows[:m], h[:, :m], sizes[:, :m], steps[:m]
    n, used_up = n[:m], used_up[:m]
    count = int(total[m - 1])
    # every (row, step): its sizes, its verdict, its key
    starts = total[:m] - steps
    seg = np.repeat(np.arange(m), steps)
    step = np.arange(count) - starts[seg]
    index = rows[seg]
    at = sizes.take(seg, axis=1) - step * kc.astype(float)  # (exact: whole, within 2**53)
    tags = np.full(count, INT, dtype=np.int8)  # (read, never written: the three share it)
    env = table.rows(index, {"cpus": (tags, at[0]), "memory": (tags, at[1]),
                             "disk": (tags, at[2])})
    ok = np.ones(count, dtype=bool)
    for fn in plan.clauses:
        ok &= fn(env)
    values = []
    for fn in (plan.pre, plan.jr, plan.post):
        part = fn(env)
        if fn is plan.jr and np.isnan(part).any():
            raise Inexact("a NaN job rank")  # (as ranks_of: the scalar walk decides)
        values.append(part)
    # a row's sequence ends at its first failing step: ``nok`` steps of it match
    nok = steps.copy()
    if not ok.all():
        fails = np.flatnonzero(~ok)
        rows_failing = seg[fails]
        head = np.empty(fails.size, dtype=bool)  # (each row's first failing step)
        head[0] = True
        np.not_equal(rows_failing[1:], rows_failing[:-1], out=head[1:])
        nok[rows_failing[head]] = step[fails[head]]
    # rows whose keys only get better: the rows in ranked's order (their first keys, each
    # above the barrier's), a block each
    if free >= 1 and _improving([part for part in values if part.__class__ is np.ndarray
                                 and part.ndim], starts):
        return _row_blocks(rows, h, k, nok, n, used_up, barrier is not None, jobs, free,
                           cost, used, limit, used_u, limit_u)
    merged, more = _merged(table, index, seg, step < nok[seg], values, first, barrier, count,
                           jobs)
    return _element_blocks(merged, more, seg, step, n, used_up, index, at, k, jobs, free, cost,
                           used, limit, used_u, limit_u)


def _sizes(table, rows) -> tuple:
    """``(good, sizes)``: which of ``rows`` are partitionable and say whole-number sizes (an
    INT), and their sizes ``(3, len(rows))`` (floats: whole numbers where good). Where every
    row's carved columns are INT (the common case) they are the table's ``res``."""
    good = table.partitionable[rows]  # (a copy: fancy indexing)
    if all(table.uniform(lname) == INT for lname in _CARVED):
        return good, table.res.take(rows, axis=1)
    sizes = []
    for lname in _CARVED:
        tags, values = table.column(lname)
        good &= tags[rows] == INT
        sizes.append(values[rows])
    return good, np.stack(sizes)


def _improving(parts: list, starts) -> bool:
    """Whether every row's key is as good or better at each of its steps than at the step
    before: ``parts`` the key's parts that are arrays, by step, highest first (``pre``,
    ``jr``, ``post``: higher is better, no NaN), ``starts`` each row's first step. The first
    part rising at every step (the default pre-job rank) decides it in a few operations."""
    if not parts:
        return True
    bounds = starts[1:] - 1  # (a row's last step and the next row's first are no pair)
    rising = parts[0][1:] > parts[0][:-1]
    rising[bounds] = True
    if rising.all():
        return True
    ge = None
    for part in reversed(parts):
        later, earlier = part[1:], part[:-1]
        ge = later >= earlier if ge is None else (later > earlier) | ((later == earlier) & ge)
    ge[bounds] = True
    return bool(ge.all())


def _row_blocks(rows, h, k, nok, n, used_up, barred: bool, jobs: int, free: int, cost,
                used: float, limit: float, used_u: float, limit_u: float):
    """:func:`decide`'s answer when each row's steps are one block in row order: the first
    ``nok`` steps of each row (``h`` its sizes now, ``n`` its steps to the end, ``used_up``
    whether its last step uses the slot up), cut by the jobs, the slots used up (``free``,
    at least 1), and the limit, as :func:`_element_blocks` cuts them step by step.
    ``barred``: a barrier ends the window."""
    cum = np.cumsum(nok)
    found = int(cum[-1])
    more = barred and found < jobs
    take = min(found, jobs)
    if free <= nok.size:  # (else fewer rows than free slots: they cannot use them all up)
        ends = cum[used_up & (nok == n)]  # (the steps up to each used-up row's last, in order)
        if ends.size >= free and ends[free - 1] <= take:
            take, more = int(ends[free - 1]), False
    if take == 0:
        return None
    row_cost = cost[rows]
    if not _all_allowed(row_cost, take, used, limit, used_u, limit_u):
        allowed = _allowed(np.repeat(row_cost, nok)[:take], used, limit, used_u, limit_u)
        if allowed is not None:
            take, more = allowed, False
            if take == 0:
                return None
    last = int(np.searchsorted(cum, take))  # (the row of the last step taken)
    lens = nok[:last + 1].copy()
    lens[last] -= int(cum[last]) - take
    pick = np.flatnonzero(lens)
    sizes = h.take(pick, axis=1).tolist()
    blocks = list(zip(rows[pick].tolist(), sizes[0], sizes[1], sizes[2], lens[pick].tolist(),
                      row_cost[pick].tolist()))
    return blocks, k.tolist(), more


def _all_allowed(row_cost, count: int, used: float, limit: float, used_u: float,
                 limit_u: float) -> bool:
    """Whether the limit surely allows ``count`` steps whose costs are ``row_cost``'s (by
    row), when they are one whole number ``c >= 0`` and ``used``, ``used_u`` are whole: then
    every sum ``used + i * c`` up to ``count`` is exact (within 2**53), the same numbers as
    one addition per match, rising, so :func:`_allowed`'s test holds at every step if it
    holds at the last. False: :func:`_allowed` decides."""
    c = float(row_cost[0])
    if not (c >= 0 and c.is_integer() and float(used).is_integer()
            and float(used_u).is_integer()
            and max(abs(used), abs(used_u)) + count * c <= _WHOLE):
        return False
    if (row_cost != c).any():
        return False
    before, before_u = used + (count - 1) * c, used_u + (count - 1) * c
    return before < limit and (before_u + c <= limit_u * (1 + 1e-6) + 1e-9
                               or (before_u <= 0 and limit_u > 0))


def _allowed(costs, used: float, limit: float, used_u: float, limit_u: float):
    """How many of the steps of ``costs`` (in order) the limit allows, when not all: ``used``
    before each (``np.add.accumulate`` adds the costs in order, exactly as one addition per
    match) against ``limit``, and ``_best``'s refusal of the step's cost (there ``_full_best``
    would walk for a cheaper slot: the pass stops before it). None: it allows them all."""
    before = np.add.accumulate(np.concatenate(([used], costs)))[:-1]
    before_u = (before if used_u == used
                else np.add.accumulate(np.concatenate(([used_u], costs)))[:-1])
    allowed = (before < limit) & ((before_u + costs <= limit_u * (1 + 1e-6) + 1e-9)
                                  | ((before_u <= 0) & (limit_u > 0)))
    return None if allowed.all() else int(np.argmin(allowed))


def _merged(table, index, seg, ok, values: list, first: tuple, barrier, count: int,
            jobs: int):
    """``(merged, more)``: the steps that match (``ok``), in the order the one-step loop
    takes them: by each row's prefix maximum of its keys (``values``: the elements' ``pre``,
    ``jr``, ``post``), ties within a row in step order, before the barrier's first key
    (``first``'s at position ``barrier``); ``more``: the barrier alone stopped it (fewer than
    ``jobs``)."""
    # the key's parts that tell the elements apart: a rank that is one number for them all and
    # the barrier (no rank that reads a row: most ranks) orders nothing and is left out
    parts, theirs = [], []
    for part, barrier_part in zip(values, first):
        if part.__class__ is not np.ndarray or not part.ndim:
            if barrier is None or barrier_part[barrier] == part:
                continue
            part = np.full(count, part)
        parts.append(part)
        theirs.append(barrier_part)
    names = table.name_rank[index]
    if barrier is not None:  # one more element: the barrier, at its first key
        parts = [np.append(mine, part[barrier]) for mine, part in zip(parts, theirs)]
        names = np.append(names, first[3][barrier])
    # dense ranks of the keys, then each row's prefix maximum (a segment's offset keeps the
    # running maximum within it)
    order = np.lexsort((names, *(-part for part in reversed(parts))))
    sn = names[order]
    new = np.empty(order.size, dtype=bool)
    new[0] = True
    np.not_equal(sn[1:], sn[:-1], out=new[1:])
    for part in parts:
        sp = part[order]
        new[1:] |= sp[1:] != sp[:-1]
    dense = np.empty(order.size, dtype=np.int64)
    dense[order] = np.cumsum(new)
    span = order.size + 1
    lead = dense[:count] + seg * span
    prefix = np.maximum.accumulate(lead) - seg * span
    take = np.flatnonzero(ok)
    merged = take[np.lexsort((take, prefix[take]))]
    if barrier is not None:
        merged = merged[prefix[merged] < dense[count]]
    return merged, barrier is not None and merged.size < jobs


def _element_blocks(merged, more: bool, seg, step, n, used_up, index, at, k, jobs: int,
                    free: int, cost, used: float, limit: float, used_u: float, limit_u: float):
    """:func:`decide`'s answer from the steps ``merged`` in order (``more``: the barrier
    alone stopped them): cut by the jobs, the slots used up, the limit (``more``: none bit,
    the barrier did), made blocks (runs of one row, each with its row's sizes at its first
    step, ``at``, and its cost)."""
    merged = merged[:jobs]
    if free <= n.size:  # (else fewer rows than free slots: they cannot use them all up)
        last = (step[merged] == n[seg[merged]] - 1) & used_up[seg[merged]]
        if last.any():
            ups = np.cumsum(last)
            if ups[-1] >= free:
                merged = merged[:int(np.searchsorted(ups, free)) + 1]
                more = False
    allowed = _allowed(cost[index[merged]], used, limit, used_u, limit_u)
    if allowed is not None:
        merged = merged[:allowed]
        more = False
    if merged.size == 0:
        return None
    segs = seg[merged]
    firsts = np.flatnonzero(np.concatenate(([True], segs[1:] != segs[:-1])))
    lens = np.diff(np.append(firsts, segs.size))
    heads = merged[firsts]
    rows_of = index[heads]
    sizes = at[:, heads].astype(np.int64).tolist()
    blocks = list(zip(rows_of.tolist(), sizes[0], sizes[1], sizes[2], lens.tolist(),
                      cost[rows_of].tolist()))
    return blocks, k.tolist(), more


def commit(search, cycle, rs, pool, plan, blocks, k, turned: bool) -> list:
    """Commit the fill's ``blocks`` (:func:`decide`'s) in order, as the one-step loop's turns
    would: one :func:`~.runs.commit_fill` of them all (:func:`~.runs.commit_runs` of them,
    a :func:`~.runs.commit_run` each), then the rows of their slots in one
    :meth:`~.columns.SlotTable.update_whole`; returns ``[(matches, cost), ...]`` as
    :meth:`~.vsearch.VectorSearch.take` does. Every block's states (the slot's sizes before
    each carve: whole numbers, ``h - j * k`` at step ``j``) and the sizes it leaves are made
    for them all in a few array operations."""
    table, dirty = search.table, search._dirty
    rows, h0s, h1s, h2s, counts, costs = map(list, zip(*blocks))
    slots = list(map(table.slots.__getitem__, rows))
    for slot in slots:
        if slot.cls is not None:  # (hold's, for a vector request: as make_match's)
            slot.cls = None
            dirty.append(slot)
    h = np.array((h0s, h1s, h2s), dtype=np.int64)  # (ints within 2**53, as decide made them)
    n = np.array(counts, dtype=np.int64)
    left = h - n * np.array(k, dtype=np.int64)[:, None]  # (as less_carve of each last state)
    # each block's states, the slot's sizes before each carve, made when read
    states = list(map(Steps, zip(h0s, h1s, h2s), repeat(tuple(k)), counts))
    commit_fill(cycle, search.idle, rs, pool, slots, plan.wants, counts, costs, states, left)
    # (after commit_run: the rows follow, as search.changed of each)
    table.update_whole(np.array(rows, dtype=np.intp), left,
                       [slot.taken for slot in slots], [slot.weight for slot in slots])
    search.vector_runs += int(np.count_nonzero(n > 1))
    turns = len(blocks) - turned  # (``turned``: the first is the turn that came here)
    search.vector_turns += turns
    search.chained_turns += turns
    return list(zip(counts, costs))
