"""Runs: one decision per (request x partitionable slot) hands over k jobs at once.

Theory of operation
-------------------
Once a request has carved a dynamic slot out of a partitionable slot, the slot is *held* for it
(:meth:`~htc.daemons.negotiator.search.IdleSearch.hold`), and the request's next job takes the
held slot again without looking at the classes when the slot still matches, its key beats the
best stored class key (the top of the request's heap) and the submitter's limit permits the
cost. Between two such steps nothing else in the cycle moves: the heap, the classes and the
claimed slots are untouched, and the held slot differs only in ``Cpus``, ``Memory`` and
``Disk``, each smaller by the same carve. So the decisions of the next n steps are a function
of the step number alone, and :func:`extend_run` computes how many of them the one-step loop
would make, then commits them as plain bookkeeping (one :class:`~.match_runs.MatchRun`, the
accountant's charge, the slot's new size set once).

What is numeric is stepped exactly as the one-step loop does (the same float additions of the
cost to ``used``, the same fits and exhaustion tests). What is ClassAd -- the carve plan's
``Requirements`` clauses and the ranks that read a carved resource -- is not evaluated per
step. :func:`direction` proves, from the syntax tree, that a value only grows (or only shrinks,
or stays) as the slot's resources shrink: references to the carved literals, sums, differences,
products and quotients with constants of known sign, comparisons and ``&&``/``||`` (monotone
in the order false < undefined < true); anything else is "unknown". A clause that only gets
less true as the slot shrinks holds on a prefix of the steps, found by bisection (O(log k)
evaluations); a key whose parts all get worse holds on a prefix too; one whose first deciding
part improves holds for every step once it holds for the first. Where the analysis cannot tell,
the run stops and the one-step loop carries on, so a run never decides what a single step would
not (``tests/unit/test_negotiator_reference.py`` compares both with a brute-force search).
"""

from __future__ import annotations

from itertools import accumulate, repeat
from operator import attrgetter

from htc.classad.ast import (AttrRef, Binary, Call, Conditional, ListExpr, Literal, Paren, Select,
                             Subscript, Unary)
from htc.classad.match import rank
from htc.daemons.negotiator.match_runs import new_run
from htc.daemons.negotiator.preemption import PreemptState, submitter_limit_permits
from htc.daemons.negotiator.slotreads import INT_LITERALS, eval_rank, literal, slot_weight
from htc.daemons.negotiator.vsteps import less_carve

#: directions of a value as the slot's Cpus, Memory and Disk grow (None: unknown)
INC, CONST, DEC = 1, 0, -1
_CARVED = ("cpus", "memory", "disk")
_NAMES = ("Cpus", "Memory", "Disk")
_MAX_DEPTH = 12
_name, _address, _ad = map(attrgetter, ("name", "address", "ad"))


def _flip(d):
    return None if d is None else -d


def _combine(a, b):
    """Direction of a function non-decreasing in both arguments."""
    if a is None or b is None:
        return None
    if a == CONST:
        return b
    if b == CONST or a == b:
        return a
    return None


def _number(value):
    return value if value.__class__ in (int, float) else None


def direction(node, my, target, slot, depth: int = 0):
    """How the value of ``node`` (MY = ``my``, TARGET = ``target``) moves as the literal
    ``Cpus``/``Memory``/``Disk`` of ``slot`` (one of the two ads) grow: INC, DEC, CONST or None
    when it cannot be proven monotone."""
    if depth > _MAX_DEPTH:
        return None
    cls = node.__class__
    if cls is Literal:
        return CONST
    if cls is Paren:
        return direction(node.inner, my, target, slot, depth + 1)
    if cls is AttrRef:
        if node.lname in ("my", "target"):
            return None
        ad = my if node.lname in my._exprs else target if (
            target is not None and node.lname in target._exprs) else None
        return _attribute(ad, node.lname, my, target, slot, depth)
    if cls is Select:
        base = node.base
        if base.__class__ is not AttrRef or base.lname not in ("my", "target"):
            return None
        ad = my if base.lname == "my" else target
        if ad is None or node.lname not in ad._exprs:
            return CONST
        return _attribute(ad, node.lname, my, target, slot, depth)
    if cls is Unary:
        d = direction(node.operand, my, target, slot, depth + 1)
        if node.op == "+":
            return d
        return _flip(d) if node.op in ("-", "!") else (CONST if d == CONST else None)
    if cls is Binary:
        op = node.op
        left = direction(node.left, my, target, slot, depth + 1)
        right = direction(node.right, my, target, slot, depth + 1)
        if left == CONST and right == CONST:
            return CONST
        if op in ("+", "&&", "||"):
            return _combine(left, right)
        if op == "-":
            return _combine(left, _flip(right))
        if op in (">", ">="):
            return _combine(left, _flip(right))
        if op in ("<", "<="):
            return _combine(_flip(left), right)
        if op == "*":
            if left == CONST:
                return _scaled(node.left, right, my, target)
            if right == CONST:
                return _scaled(node.right, left, my, target)
            return None
        if op == "/" and right == CONST:
            return _scaled(node.right, left, my, target, divisor=True)
        return None
    if cls is Call:
        if node.lname in ("eval", "evalinewcontext"):
            return None  # reads attributes named by a string: no references to follow
        args = [direction(a, my, target, slot, depth + 1) for a in node.args]
        return CONST if all(a == CONST for a in args) else None
    if cls is Conditional:
        parts = [direction(p, my, target, slot, depth + 1)
                 for p in (node.cond, node.then, node.other) if p is not None]
        return CONST if all(p == CONST for p in parts) else None
    if cls is ListExpr:
        return CONST if all(direction(i, my, target, slot, depth + 1) == CONST
                            for i in node.items) else None
    if cls is Subscript:
        parts = (direction(node.base, my, target, slot, depth + 1),
                 direction(node.index, my, target, slot, depth + 1))
        return CONST if parts == (CONST, CONST) else None
    return None


def _attribute(ad, lname, my, target, slot, depth):
    if ad is None:
        return CONST  # undefined whatever the slot's size
    node = ad._exprs[lname]
    if node.__class__ is Literal:
        return INC if ad is slot and lname in _CARVED else CONST
    if ad is slot and lname in _CARVED:
        return None  # an expression resource is not carved as a number
    other = target if ad is my else my
    return direction(node, ad, other, slot, depth + 1)


def _scaled(const_node, d, my, target, divisor: bool = False):
    """Direction of ``const * x`` (or ``x / const``) where ``x`` moves in direction ``d``."""
    from htc.classad import ExprTree

    tree = ExprTree(const_node)
    if tree.attributes():
        return None  # its sign could differ from slot to slot of one configuration
    value = _number(tree.eval())
    if value is None or d is None or (divisor and value == 0):
        return None
    if value == 0:
        return CONST
    return d if value > 0 else -d


# ---------------------------------------------------------------------------------------------
# the run


class _Analysis:
    """The directions of a carve plan's clauses and ranks for one (request, slot shape)."""

    __slots__ = ("clauses", "pre", "jr", "post")

    def __init__(self, search, rs, ad, plan):
        job = rs.job
        self.clauses = tuple((expr, direction(expr.node, job, ad, ad)) for expr in plan[0])
        pre_dyn, jr_dyn, post_dyn = plan[1:]
        self.pre = direction(search.pre_rank.node, ad, job, ad) if pre_dyn else CONST
        job_rank = job.get("Rank")
        self.jr = (direction(job_rank.node, job, ad, ad)
                   if jr_dyn and rs.const_rank is None else CONST)
        self.post = direction(search.post_rank.node, ad, job, ad) if post_dyn else CONST


def _set(ad, values) -> None:
    # the three are numeric literals already (_numeric_steps checked): replace their trees
    table = ad.table
    for lname, value in zip(_CARVED, values):
        if value is not None:
            table[lname] = literal(value)


def _prefix(ok, n: int, known: int = 1) -> int:
    """The largest k <= n with ok(1..k) all true, for a prefix-shaped ``ok`` true at
    ``known`` (0: nothing known); evaluates ``ok`` O(log n) times."""
    if n <= known or ok(n):
        return n
    lo, hi = known, n  # ok(lo) (or lo == 0), not ok(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _numeric_steps(search, rs, slot, cost, carve, used, limit, used_u, limit_u, budget):
    """The resource states of the next steps the numbers allow (remaining jobs, the UPDOWN
    budget, the submitter's limit, fitting, exhaustion), stepped exactly as the loop does."""
    ad = slot.ad
    have = []
    for lname in _CARVED:
        node = ad._exprs.get(lname)
        if node is None:
            have.append(None)
        elif node.__class__ is Literal and _number(node.value) is not None:
            have.append(node.value)
        else:
            return []
    return steps_from(have, rs.remaining, cost, carve, used, limit, used_u, limit_u, budget)


def steps_from(have, jobs: int, cost, carve, used, limit, used_u, limit_u, budget) -> list:
    """:func:`_numeric_steps` from the slot's size ``have`` (``(cpus, memory, disk)``, numbers
    or None) for a request with ``jobs`` left."""
    states = []
    h0, h1, h2 = have
    c0, c1, c2 = carve
    steps = jobs if budget is None else min(jobs, budget)
    while len(states) < steps:
        if used >= limit:
            break
        if (h0 is not None and c0 > h0) or (h1 is not None and c1 > h1) or (
                h2 is not None and c2 > h2):
            break
        if not submitter_limit_permits(used_u, limit_u, cost):
            break
        states.append((h0, h1, h2))
        used += cost
        used_u += cost
        h0, h1, h2 = less_carve(h0, h1, h2, c0, c1, c2)
        if (1.0 if h0 is None else h0) < 1.0 or (1.0 if h1 is None else h1) <= 0:
            break  # this carve uses the slot up: the run ends with it
    return states


def limit_count(most: int, cost, used, limit, used_u, limit_u) -> int:
    """How many of ``most`` steps the request's limits allow, counted as
    :func:`_numeric_steps` counts them (the same float additions): its steps are the sizes'
    steps (fitting, exhaustion) cut to this many."""
    # submitter_limit_permits(used_u, limit_u, cost) inlined, its bound computed once (the
    # same float each step): this runs once per step of every run
    bound, any_share = limit_u * (1 + 1e-6) + 1e-9, limit_u > 0
    n = 0
    while n < most:
        if used >= limit or not (used_u + cost <= bound or (used_u <= 0 and any_share)):
            break
        used += cost
        used_u += cost
        n += 1
    return n


def run_length(search, rs, slot, pool, cost, carve, used, limit, used_u, limit_u,
               budget) -> list:
    """The resource states of the steps (after the one just made) the one-step loop would give
    ``rs`` from the held ``slot`` by the fast path; empty when it would not, or cannot be told."""
    lane = rs.lane
    if pool.claimed and not (search.s.updown_policy
                             or (rs.claimed is not None and all(c[0].taken for c in rs.claimed))):
        return []
    if lane is None or (not lane.heap and lane.log_pos == 0):
        return []
    search.replay(rs, pool)  # what the next step's search would replay first
    if id(rs.job) not in search._wants:
        return []  # the carve depends on the slot: step by step
    states = _numeric_steps(search, rs, slot, cost, carve, used, limit, used_u, limit_u, budget)
    if not states:
        return []
    ad, job = slot.ad, rs.job
    held = search._hot_candidate(rs, slot)  # the first step: everything evaluated
    if held is None or held[1] != carve:
        return []
    memo = search._hot_memo
    plan, first = memo[2], memo[3]
    top = lane.heap[0][0] if lane.heap else None
    if plan is None or (top is not None and not held[0] < top):
        return []
    shape = (id(lane), id(plan))  # a plan belongs to one lane (IdleSearch._hot_candidate)
    analysis = search.run_analyses.get(shape)
    if analysis is None:
        analysis = search.run_analyses[shape] = _Analysis(search, rs, ad, plan)
    n = len(states)
    saved = tuple(ad.get(name) for name in _NAMES)

    def at(j):  # the slot as it is at step j (1-based)
        _set(ad, states[j - 1])

    def clauses_hold(j, exprs):
        at(j)
        return all(search.decide_clause(expr, job, ad) is True for expr in exprs)

    def key_at(j):
        at(j)
        pre = eval_rank(search.pre_rank, ad, job) if analysis.pre != CONST else first[0]
        jr = rank(job, ad) if analysis.jr != CONST else first[1]
        post = eval_rank(search.post_rank, ad, job) if analysis.post != CONST else first[2]
        return search.key((pre, jr, post), slot)

    try:
        k = n
        dirs = [d for _e, d in analysis.clauses]
        if None in dirs:
            return []
        # a clause that grows truer as the slot shrinks holds at every step once at the first;
        # one that grows less true holds on a prefix
        shrinking = tuple(e for e, d in analysis.clauses if d == INC)
        if shrinking:
            k = _prefix(lambda j: clauses_hold(j, shrinking), k)
        if top is not None and k > 0:
            k = min(k, _key_prefix(analysis, held[0], top, key_at, k))
        return states[:k]
    finally:
        _set(ad, saved)


def _key_prefix(analysis, first_key, top, key_at, n: int) -> int:
    """How many steps from the first keep the held slot's key below the heap's ``top``."""
    # a key part moves against the rank: a rank that grows with the resources gets worse
    # (a larger key) as the slot shrinks
    moves = (analysis.pre, analysis.jr, analysis.post)
    if None in moves:
        return 0
    for i, d in enumerate(moves):
        v, t = first_key[i], top[i]
        if d == CONST:
            if v < t:
                return n
            if v > t:
                return 0
            continue
        if d == DEC:  # the key part improves as the slot shrinks
            return n if v < t else 0
        # the key part gets worse: a prefix, if the parts after it do not improve
        if all(m != DEC for m in moves[i + 1:]):
            return _prefix(lambda j: key_at(j) < top, n)
        if v == t:
            return 0
        return _prefix(lambda j: key_at(j)[i] < t, n)
    return n if first_key[3:] < top[3:] else 0


def extend_run(cycle, search, rs, pool, slot, cost, carve, used, limit, used_u, limit_u,
               budget) -> int:
    """After a carve of the held ``slot`` for ``rs``, commit the further matches the one-step
    loop would make from it; return how many (0: none, the loop goes on as before).
    ``search`` is the cycle's scalar search (:class:`~.search.IdleSearch`)."""
    if not search.runs or search.hot is None or search.hot[0] is not rs or search.hot[1] is not slot:
        return 0
    states = run_length(search, rs, slot, pool, cost, carve, used, limit, used_u, limit_u, budget)
    if not states:
        return 0
    search.runs_made += 1
    return commit_run(cycle, search, rs, pool, slot, cost, carve, states)


def commit_run(cycle, search, rs, pool, slot, cost, carve, states, first: bool = False) -> int:
    """Commit one match per resource state in ``states`` (the slot's size before each carve)
    as the one-step loop would: one :class:`~.match_runs.MatchRun` of them all (the matches it
    expands to are the one-step loop's), an accountant charge each, the slot's new size set
    once; returns how many. ``first``: ``states[0]`` is the turn's own carve
    (:meth:`~.vsearch.VectorSearch.take`), not a step of the run. ``states`` is kept by the
    run: the caller does not change it afterwards."""
    return commit_runs(cycle, search, rs, pool, ((slot, cost, carve, states, first),))[0]


def commit_runs(cycle, search, rs, pool, blocks, left=None) -> list[int]:
    """:func:`commit_run` of each block of ``blocks`` in turn, for one request ``rs``: a
    block is ``(slot, cost, carve, states, first)`` as commit_run takes them (a slot may come
    back in a later block); returns how many matches each made. ``left``, when the caller
    knows them: each block's ``(cpus, memory, disk)`` after its last carve, as
    :func:`~.vsteps.less_carve` of its last state gives them (a fill's whole numbers). The same runs, charges, slot
    sizes, taken slots and counters as the calls one after the other
    (``tests/unit/test_negotiator_commit_runs.py``), with what they share looked up once.
    As after commit_run, the caller then brings each slot's row up to date
    (:meth:`~.vsearch.VectorSearch.changed`)."""
    entry = rs.entry.ad
    name, schedd, schedd_address = entry.name, entry.schedd, entry.schedd_address
    request = rs.request
    acid, job_ids = request.autocluster_id, request.job_ids
    append = cycle.runs.append
    now, cycle_no, weights = cycle.now, cycle.cycle, cycle.s.use_slot_weights
    matched, seq, free, run_jobs = rs.matched, cycle.claim_seq, cycle.free, 0
    made, none, charges = [], PreemptState.NONE, []
    keep, charge = made.append, charges.append
    for (slot, cost, carve, states, first), after in zip(blocks, left or repeat(None)):
        n = len(states)
        first_carve, slot_name, ad = slot.carves, slot.name, slot.ad
        append(new_run((  # (every field in order: see MatchRun)
            name, schedd, schedd_address, acid, job_ids, matched, n, slot_name, slot.address,
            slot.claim_id or None, cycle_no, seq, ad, states, none, None, cost,
            carve)))
        matched += n
        seq += n
        slot.carves = first_carve + n
        charge((slot_name, first_carve, n, cost))
        # what the last carve leaves (states hold int and float sizes only: less_carve is
        # same_type's), written as shared literals
        if after is None:
            h0, h1, h2 = states[-1]
            c0, c1, c2 = carve
            left0, left1, left2 = less_carve(h0, h1, h2, c0, c1, c2)
        else:
            left0, left1, left2 = after
        table = ad._exprs
        if left0 is not None:
            table["cpus"] = literal(left0)
        if left1 is not None:
            table["memory"] = literal(left1)
        if left2 is not None:
            table["disk"] = literal(left2)
        if not weights:
            slot.weight = 1.0
        elif left0 is not None and "slotweight" not in table:  # (slot_weight's usual ad)
            weight = float(left0)
            slot.weight = weight if weight >= 0 else 1.0
        else:
            slot.weight = slot_weight(ad, True)
        # (make_match's test of the ad, on the numbers just set: an absent one reads as 1.0)
        if (1.0 if left0 is None else left0) < 1.0 or (1.0 if left1 is None else left1) <= 0:
            pool.take(slot)  # as make_match does; the slot stays "hot" until the next search
            free -= 1
        keep(n)
        run_jobs += n - first
    # (add_carves of each run in turn, at once: nothing above reads the accountant)
    cycle.acct.add_carve_runs(name, charges, now)
    cycle.free = free
    search.run_jobs += run_jobs
    total = matched - rs.matched
    cycle.matched += total
    rs.matched = matched
    rs.remaining -= total
    cycle.claim_seq = seq
    search.taken_count += total
    return made


def commit_fill(cycle, search, rs, pool, slots, carve, counts, costs, states, left) -> None:
    """:func:`commit_runs` of a fill's blocks (:func:`~.vfill.commit`): block ``i`` is
    ``(slots[i], costs[i], carve, states[i], True)``, of ``counts[i]`` (``len(states[i])``)
    matches, and ``left[:, i]`` (``left``: a ``(3, len(slots))`` integer array) the sizes
    its last carve leaves, whole numbers, as ``commit_runs``' ``left``. The same runs,
    charges, ads, weights, taken slots and counters as commit_runs
    (``tests/unit/test_negotiator_commit_runs.py`` compares them on random fills), for less:
    one pass over the slots for what is per slot (the carve numbers, the ad's sizes, the
    weight), the runs then made in one ``map``, the slots used up found by one array test."""
    entry = rs.entry.ad
    name = entry.name
    request = rs.request
    m = len(slots)
    left0, left1, left2 = left.tolist()
    weights = cycle.s.use_slot_weights
    firsts = []  # (read in the loop: a slot may come back in a later block)
    keep = firsts.append
    names = list(map(_name, slots))
    addresses = list(map(_address, slots))
    claims = [slot.claim_id or None for slot in slots]
    ads = list(map(_ad, slots))
    # (literal of each size, an int: its shared node looked up here, made by literal if new)
    node = INT_LITERALS.get
    for slot, ad, n, cpus, memory, disk in zip(slots, ads, counts, left0, left1, left2):
        keep(first := slot.carves)
        slot.carves = first + n
        table = ad._exprs
        table["cpus"] = node(cpus) or literal(cpus)
        table["memory"] = node(memory) or literal(memory)
        table["disk"] = node(disk) or literal(disk)
        if not weights:
            slot.weight = 1.0
        elif "slotweight" not in table:
            weight = float(cpus)
            slot.weight = weight if weight >= 0 else 1.0
        else:
            slot.weight = slot_weight(ad, True)
    matched, seq = rs.matched, cycle.claim_seq
    cycle.runs.extend(map(new_run, zip(  # (every field in order: see MatchRun)
        repeat(name), repeat(entry.schedd), repeat(entry.schedd_address),
        repeat(request.autocluster_id), repeat(request.job_ids),
        accumulate(counts[:-1], initial=matched), counts, names, addresses,
        claims, repeat(cycle.cycle),
        accumulate(counts[:-1], initial=seq), ads, states, repeat(PreemptState.NONE),
        repeat(None), costs, repeat(carve))))
    total = sum(counts)
    # (make_match's test of the ad, on the numbers just set), each block in turn
    free = cycle.free
    for i in ((left[0] < 1) | (left[1] <= 0)).nonzero()[0].tolist():
        pool.take(slots[i])  # as make_match does; the slot stays "hot" until the next search
        free -= 1
    # (add_carves of each run in turn, at once: nothing above reads the accountant)
    cycle.acct.add_carve_runs(name, list(zip(names, firsts, counts, costs)), cycle.now)
    cycle.free = free
    search.run_jobs += total - m
    cycle.matched += total
    rs.matched = matched + total
    rs.remaining -= total
    cycle.claim_seq = seq + total
    search.taken_count += total
