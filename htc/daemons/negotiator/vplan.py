"""A request's plan: its clauses and ranks compiled to functions of the slot table's rows.

Theory of operation
-------------------
The vector search (:mod:`.vsearch`) builds a :class:`Plan` at a request's first search, with
the :class:`PlanCompiler` of the cycle's slot table: the job's ``Requirements`` clauses and
``Rank``, ``NEGOTIATOR_PRE_JOB_RANK`` and ``POST_JOB_RANK`` compiled to functions over the
table's columns (:mod:`.vexpr`, :mod:`.vtyped`, :mod:`.columns`). What the compilers do not
take (strings, function calls but :mod:`.vtyped`'s two: ``TARGET.Arch == "X86_64"``) must
read none of the carved resources, through either ad's expressions; then it has one value per
slot for the whole cycle, evaluated by the ClassAd evaluator and shared by every request whose
job agrees on the values it reads (``static`` columns, keyed by the clause text and the
projection of the job). It is evaluated once per group of slots that agree on every literal
value it can read of the slot (:mod:`.vstatic`: 10,000 slots of two
architectures evaluate ``TARGET.Arch == "X86_64"`` twice). Otherwise the request takes the
scalar search (the compiler returns None).

Compiled functions are shared too (:meth:`PlanCompiler._function`). A typed compile
(:mod:`.vtyped`) depends on the types of the job values it reads, not on the values: it is
compiled once per expression, job signature and column types (the table's epoch) as a
template, and each request binds its own values to it (5,000 autoclusters that differ in
``RequestMemory`` and ``RequestDisk`` compile ``TARGET.Memory >= RequestMemory`` once). A bound
function is shared by the requests of the same values; a template that does arithmetic is
tried over every row once per values (a zero divisor raises there, and the request takes the
scalar search, as when it was compiled afresh). The tagged form (:mod:`.vexpr`) is compiled
per job values (:meth:`PlanCompiler._cached`). ``tests/unit/test_negotiator_vplan.py`` checks
that a shared compiler builds what a fresh one builds.

Whole plans are shared too (:meth:`PlanCompiler.compile`): requests whose jobs agree on every
value a plan can read of them (:meth:`PlanCompiler._shape`) get the compiled parts of the first
one's plan, each in a plan of its own (its turn state and ranking). The submitters of one
autocluster differ only in ``Owner`` and the ``Submitter*`` attributes the cycle adds: case 1
of ``benchmarks/negotiator_bench.py`` compiles 50 plans for its 200 requests. A request is
keyed by that projection only when an earlier one agrees with it on its order and literal
request (a cheap key): 5,000 requests of 5,000 shapes pay no projection.
"""

from __future__ import annotations

import math
from itertools import filterfalse

import numpy as np

from htc.classad import ExprTree
from htc.classad.ast import AttrRef, Literal
from htc.classad.match import rank, requirements_hold
from htc.classad.operators import is_true_for_match
from htc.daemons.negotiator.preemption import WORST_RANK
from htc.daemons.negotiator.slotreads import eval_rank
from htc.daemons.negotiator.slots import CARVED, _node_refs, _value_key, closure, projection
from htc.daemons.negotiator.vexpr import (BOOL, INT, REAL, Inexact, Unsupported, compile_vector,
                                          holds, ranks, scalar)
from htc.daemons.negotiator.vstatic import SLOT_REQUIREMENTS, SlotGroups
from htc.daemons.negotiator.vtyped import compile_template, compile_typed, signature

_HOLDS = object()  # _function's ``worst`` for a Requirements clause
_NEW = object()  # no template yet
_PER_JOB = object()  # a template that cannot be shared: compiled per job values
_TAGGED = object()  # no typed template: the tagged form, compiled per job values
#: names a plain reference does not read as itself (tree_refs reads nothing of them)
_NOT_BARE = frozenset({"my", "target", "parent"})


class Plan:
    """A request's compiled matching and ranking (see the module docstring); the search keeps
    its turn state here too (``cursor``, ``mask``, ``log_pos``)."""

    __slots__ = ("static", "clauses", "whole", "pre", "jr", "post", "wants", "wants_col", "cost",
                 "epoch", "ranking", "cursor", "mask", "log_pos")

    def __init__(self):
        self.static = None  # bool array: what does not change as slots shrink
        self.clauses = []  # compiled clauses reading a carved resource
        #: True when no clause can raise: they may be evaluated over every row at once
        self.whole = True
        self.pre = self.jr = self.post = None  # functions rows -> rank array
        self.mask = None  # bool per row: does it match now (see VectorSearch._current_mask)
        self.log_pos = 0  # the table's change log read up to when ``mask`` was brought up


class PlanCompiler:
    """Compiles requests' plans against one slot table, sharing what requests agree on.

    Args:
        settings: the negotiator's settings (its ranks, slot weights).
        literal_wants: ``job -> (cpus, memory, disk)`` the job's literal request, or None
            (:meth:`~.fitting.Fitting.literal_wants`).
        table: the cycle's :class:`~.columns.SlotTable`.
    """

    def __init__(self, settings, literal_wants, table):
        self.s = settings
        self.literal_wants = literal_wants
        self.table = table
        self._static: dict[tuple, np.ndarray] = {}  # (what, job view) -> verdict column
        self._compiled: dict[tuple, object] = {}  # see _cached
        self._templates: dict[tuple, object] = {}  # see _function
        self._static_and: dict[tuple, np.ndarray] = {}  # static columns' ids -> their AND
        self._bound: dict[tuple, object] = {}  # (template key, job values) -> function
        self._shapes: dict[tuple, Plan | None] = {}  # see compile
        self._kinds: dict[tuple, tuple | None] = {}  # see compile
        self._costs: dict[tuple, np.ndarray] = {}  # a carve's cost -> Plan.cost (_compile)
        self._whole: set = set()  # bound functions that cannot raise (see Plan.whole)
        reach, targets = _slot_reads(table.slots, table.reads.exprs)
        #: slot attributes whose value a carve can change (through the slot's expressions)
        self._carved_reach = reach
        #: what the slots' expressions read of the job
        self._slot_targets = tuple(sorted(targets))
        #: the static columns' evaluations, by groups of slots (:mod:`.vstatic`)
        self.groups = SlotGroups(table.slots, self._slot_targets, table.reads)

    def compile(self, rs) -> Plan | None:
        """The plan of request ``rs``, or None when it must take the scalar search.

        Shared by the requests whose job agrees on every value a plan can read of it
        (:meth:`_shape`: 4 submitters' requests of one autocluster differ in ``Owner`` and the
        ``Submitter*`` attributes the cycle adds, which no plan reads): each request gets a
        plan of its own (its turn state, its ranking) holding the same compiled parts."""
        # a cheap key first (a key of some of what _shape keys): a request alone of its kind
        # pays no projection (case 2 of negotiator_bench: 5,000 autoclusters, 5,000 kinds)
        kind = (self.table.epoch, rs.order, self.literal_wants(rs.job))
        first = self._kinds.get(kind, _NEW)
        if first is _NEW:  # (its plan is the one the later requests of its shape copy)
            plan = self._compile(rs)
            self._kinds[kind] = (rs, plan)
            return plan
        else:
            if first is not None:  # the second request of its kind: key the first one too
                self._shapes[self._shape(first[0])] = first[1]
                self._kinds[kind] = None
            key = self._shape(rs)
            shared = self._shapes.get(key, _NEW)
            if shared is _NEW:
                shared = self._shapes[key] = self._compile(rs)
        if shared is None:
            return None
        plan = Plan()
        plan.static, plan.clauses, plan.whole, plan.pre, plan.jr, plan.post = (
            shared.static, shared.clauses, shared.whole, shared.pre, shared.jr, shared.post)
        plan.wants, plan.wants_col, plan.cost, plan.epoch = (
            shared.wants, shared.wants_col, shared.cost, shared.epoch)
        plan.ranking = (rs.order, shared.ranking[1])
        plan.cursor = None
        return plan

    def _shape(self, rs) -> tuple:
        """A key of everything :meth:`_compile` reads of ``rs``: the job's values of every name
        its ``Requirements``, ``Rank`` and request attributes, the slots' expressions and the
        negotiator's ranks can read of it (followed through the job's expressions), and the
        table's column types. An expression ``Requirements`` is keyed by its clauses' texts and
        the values they read, an expression ``Rank`` by the request's order (its text and the
        values it reads): hashing the trees themselves would walk them."""
        names = set(self._shape_names())
        clauses = rs.clauses and tuple(
            (text, job_refs, slot_refs) for text, _, job_refs, slot_refs in rs.clauses)
        if clauses:
            names.discard("requirements")
            for _, job_refs, _ in clauses:
                names.update(job_refs)
        if rs.const_rank is None:
            names.discard("rank")  # (rs.order)
        return (self.table.epoch, rs.order, rs.const_rank, clauses, projection(rs.job, names))

    def _shape_names(self) -> tuple:
        """The job names :meth:`_shape` starts from (see there; cached per table)."""
        key = ("shape names",)
        names = self._compiled.get(key)
        if names is None:
            refs = {"requirements", "rank", "requestcpus", "requestmemory", "requestdisk"}
            refs.update(self._ranks_read())
            names = self._compiled[key] = tuple(sorted(refs))
        return names

    def _compile(self, rs) -> Plan | None:
        """:meth:`compile` of a request no request of its shape compiled before."""
        job, table, s = rs.job, self.table, self.s
        wants = self.literal_wants(job)
        if wants is None:
            return None
        plan = Plan()
        plan.wants = wants
        plan.wants_col = np.array(wants, dtype=float)[:, None]  # beside the table's ``res``
        plan.epoch = table.epoch
        n = len(table.slots)
        if "requirements" in self._carved_reach:
            return None  # a slot's Requirements reads a carved resource
        static = self._static_column(("slot",), None, rs, lambda slot: requirements_hold(
            slot.ad, job), SLOT_REQUIREMENTS)
        if static is None:
            return None
        columns = [static]  # the static columns ANDed (shared by the requests of the same)
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
                plan.clauses.append(self._function(
                    ("clause", text), expr.node, self._clause_names(text, job_refs, slot_refs),
                    job, False, _HOLDS))
                continue
            except Unsupported:
                pass  # not compilable: a static column, below, when it reads no carved resource
            if set(slot_refs) & self._carved_reach:
                return None
            # HTCondor's test of a Requirements value (the scalar search's too)
            column = self._static_column(
                ("clause", text), job_refs, rs,
                lambda slot, e=expr: is_true_for_match(e.eval(job, slot.ad)), (expr, False))
            if column is None:
                return None
            columns.append(column)
        key = tuple(id(column) for column in columns)  # (columns _static keeps alive)
        both = self._static_and.get(key)
        if both is None:
            both = columns[0]
            for column in columns[1:]:
                both = both & column
            both = self._static_and[key] = np.broadcast_to(both, (n,))
        plan.static = both if static is columns[0] else np.broadcast_to(static & both, (n,))
        plan.whole = all(fn in self._whole for fn in plan.clauses)
        plan.pre = self._rank(s.compiled("pre_job_rank"), rs, True, "pre")
        plan.post = self._rank(s.compiled("post_job_rank"), rs, True, "post")
        plan.jr = self._job_rank(rs)
        if plan.pre is None or plan.post is None or plan.jr is None:
            return None
        plan.ranking = (rs.order, projection(job, self._ranks_read()))
        plan.cursor = None
        weights = s.use_slot_weights
        carve_cost = (wants[0] if wants[0] >= 0 else 1.0) if weights else 1.0
        # shared by the plans of one carve cost: a static slot's weight is the same all cycle
        # (only a carve sets a slot's weight, and a partitionable row takes carve_cost)
        key = (carve_cost, math.copysign(1.0, carve_cost))  # (-0.0 is kept as it was)
        plan.cost = self._costs.get(key)
        if plan.cost is None:
            plan.cost = self._costs[key] = np.where(table.partitionable, carve_cost,
                                                    table.weight)
        return plan

    def _ranks_read(self) -> tuple:
        """What the negotiator's pre- and post-job ranks read (see :meth:`_view_names`)."""
        key = ("ranks read", self._slot_targets)
        names = self._compiled.get(key)
        if names is None:
            refs = set()
            for expr in (self.s.compiled("pre_job_rank"), self.s.compiled("post_job_rank")):
                if expr is not None:
                    refs |= expr.attributes()
            names = self._compiled[key] = self._view_names(refs)
        return names

    def _cached(self, what, names, job, build):
        """A compiled function, shared by the requests whose job agrees on ``names`` (what it
        reads), for the table's current column types; :class:`Unsupported` is kept too."""
        return _kept(self._compiled, (what, self.table.epoch, projection(job, names)), build)

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

    def _clause_names(self, text, job_refs, slot_refs) -> tuple:
        """Every name a clause reads (cached by its text)."""
        key = ("clause names", text)
        names = self._compiled.get(key)
        if names is None:
            names = self._compiled[key] = tuple(sorted(set(job_refs) | set(slot_refs)))
        return names

    def _function(self, what, node, names, job, slot_is_my, worst):
        """``rows -> values`` of a clause (``worst`` :data:`_HOLDS`: does it hold?) or of a
        rank (see :func:`_finish`) for ``job``, ``names`` every name ``node`` reads.

        Typed when every type is known (:mod:`.vtyped`): one template per signature of the
        job (the types of its values, :func:`~.vtyped.signature`) and column types, bound to
        the job's values; the bound function is shared by the jobs of the same values, and
        one that can raise is tried over every row first. Else tagged (:mod:`.vexpr`), shared
        as :meth:`_cached`. :class:`Unsupported` if neither (kept too)."""
        key = (what, slot_is_my, self.table.epoch, signature(job, names))
        template = self._templates.get(key, _NEW)
        if template is _NEW:
            try:
                template = compile_template(node, job, slot_is_my, self.table)
                if not template.read <= set(names):
                    template = _PER_JOB  # it read more than its signature says: not shared
            except Unsupported:
                try:  # the tagged form, below (whether it compiles depends on types only)
                    compile_vector(node, job, slot_is_my)
                    template = _TAGGED
                except (Unsupported, RecursionError) as exc:
                    template = Unsupported(str(exc) or type(exc).__name__)
            except RecursionError as exc:
                template = Unsupported(str(exc) or type(exc).__name__)
            self._templates[key] = template
        if template is _TAGGED or template is _PER_JOB:
            def build():
                if template is _PER_JOB:
                    try:
                        tag, fn = compile_typed(node, job, slot_is_my, self.table)
                    except Unsupported:
                        pass  # this job's types leave the typed subset: the tagged form
                    else:
                        return self._probed(_finish(tag, fn, worst))
                tagged = compile_vector(node, job, slot_is_my)
                if worst is _HOLDS:
                    return self._probed(lambda rows: holds(tagged(rows)))
                return self._probed(lambda rows: ranks(tagged(rows), worst))
            return self._cached(what, names, job, build)
        if isinstance(template, Unsupported):
            raise Unsupported(*template.args)  # a fresh one: see _kept
        p = template.values(job)

        def bind():
            if worst is _HOLDS and template.test is not None:
                fn = _bound_test(template.test, p)
            else:
                fn = _finish(template.tag, template.bind(p), worst)
            if template.fixed:  # the finished values of every row, once (raises as a probe)
                fn = _fixed(fn(self.table.rows()))
            elif not template.safe:
                return self._probed(fn)
            self._whole.add(fn)  # (it cannot raise: no arithmetic, or values computed)
            return fn
        return _kept(self._bound, (key, p), bind)

    def _job_view(self, job, names):
        """``projection(job, names)`` when the job values ``names`` (followed through the job)
        read no carved resource, else None: one walk of the job's expressions for both."""
        reached, targets = closure(job, names)
        reach = self._carved_reach
        if targets & reach or {n for n in reached if n not in job._exprs} & reach:
            return None
        return tuple((n, _value_key(job, n)) for n in sorted(reached))  # (projection's)

    def _static_column(self, what, job_refs, rs, verdict, read=None):
        """A verdict per slot that no carve changes, shared by requests whose job agrees on
        what it reads; None when it could change (it reads a carved resource). ``read``:
        ``(expression, slot_is_my)`` that ``verdict`` evaluates (see
        :meth:`~.vstatic.SlotGroups.evaluate`)."""
        job = rs.job
        view = self._job_view(job, set(job_refs or ()) | set(self._slot_targets))
        if view is None:
            return None
        key = (what, view)
        column = self._static.get(key)
        if column is None:
            column = self._static[key] = self.groups.evaluate(
                lambda slot: bool(verdict(slot)), read, job, bool)
        return column

    def _rank(self, expr, rs, slot_is_my, which):
        """A negotiator rank as a function of rows: compiled, or (reading no carved resource)
        evaluated once per slot and shared by the requests whose job agrees on what it reads."""
        if expr is None:
            return lambda rows: 0.0
        names = self._names_of(expr)
        try:
            return self._function((which, id(expr)), expr.node, names, rs.job, slot_is_my,
                                  WORST_RANK)
        except Unsupported:
            pass  # not compilable: a static column of per-slot values, below
        view = None if set(names) & self._carved_reach else self._job_view(rs.job, names)
        if view is None:
            return None
        key = (which, id(expr), view)  # (the settings' own expression)
        values = self._static.get(key)
        if values is None:
            job = rs.job
            values = self._static[key] = self.groups.evaluate(
                lambda slot: eval_rank(expr, slot.ad, job), (expr, slot_is_my), job, float)
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
            return self._function(("jr", text), expr.node, names, rs.job, False, None)
        except Unsupported:
            pass  # not compilable: a static column of per-slot values, below
        view = None if set(names) & self._carved_reach else self._job_view(rs.job, names)
        if view is None:
            return None
        key = ("jr", repr(expr), view)
        values = self._static.get(key)
        if values is None:
            job = rs.job
            values = self._static[key] = self.groups.evaluate(
                lambda slot: rank(job, slot.ad), (expr, False), job, float)
        return _indexed(values)


def _slot_reads(slots, rows: list | None = None) -> tuple[set, set]:
    """``(reach, targets)`` of the slots' expressions: the slot attributes whose value a carve
    can change (the carved resources and the expressions that read them), and what the
    expressions read of the job (``TARGET.x``, and the names a slot lacks).

    What :func:`~.slots.closure` finds of one slot is a function of its expressions' names,
    classes and the names each reads, and of which names the slot lacks: slots that agree on
    the first three (``Requirements = START`` and one ``Start``) are followed once, and each
    slot's lacking names are looked up. A plain reference reads its name (as
    :func:`~htc.daemons.tree_reads.tree_refs` says, without the call).

    ``rows``: the slots' ``ClassAd._exprs`` (the table's), read instead of each slot's ad (a
    slot and its ad are two more objects per slot to fetch, out of the cache: 16.5 -> 16.1 ms
    for case 1's 10,000 slots, same-process A/B). Reading one more name of each row here,
    while the row is at hand, costs more than a pass of its own (``Requirements``, for
    :mod:`.vstatic`: +4 ms, its own pass 1.5 ms: a lookup's memory is not the items' that
    the loop reads)."""
    reach, targets = set(CARVED), set()
    followed: dict[tuple, tuple] = {}  # the key above -> (names it reaches, targets)
    if rows is None:
        rows = [slot.ad._exprs for slot in slots]
    for i, exprs in enumerate(rows):
        key = []
        for lname, node in exprs.items():
            cls = node.__class__
            if cls is not Literal:
                key.append((lname, cls, node.lname if cls is AttrRef and node.lname not in
                            _NOT_BARE else _node_refs(node)))
        if not key:
            continue
        key = tuple(key)
        hit = followed.get(key)
        if hit is None:
            ad = slots[i].ad
            roots = [lname for lname, _, _ in key if lname not in CARVED]
            names, tg = closure(ad, roots) if roots else (set(), set())
            if not names.isdisjoint(CARVED):  # one of them reads a carved resource: which
                reach.update(lname for lname in roots if closure(ad, (lname,))[0] & CARVED)
            hit = followed[key] = (frozenset(names), tg)
            targets |= tg
        if not exprs.keys() >= hit[0]:  # (one set test when it lacks none, the common case)
            targets.update(filterfalse(exprs.__contains__, hit[0]))  # (the names it lacks)
    return reach, targets


def _fixed(values):
    """A function of rows reading ``values``, a function's values over every row: a column
    (indexed), or one value for every row (0-d, a number: given as it is, as the function
    gave it)."""
    if values.__class__ is np.ndarray and values.ndim:
        return _indexed(values)
    return lambda rows: values


def _indexed(values: np.ndarray):
    """A function of rows reading a fixed per-slot column."""
    def column(rows):
        return values if rows.index is None else values[rows.index]
    return column


def _kept(cache: dict, key, build):
    """``cache[key]``, built on first use. What does not compile is kept as :class:`Unsupported`
    and raised again as a fresh copy: the kept instance raised itself would hold the traceback
    of each raise, whose frames hold the instance (the cache entry read into a local), a
    reference cycle per raise, which the cycle's end paid for with a garbage collection of a
    million objects (case 2 of negotiator_bench)."""
    hit = cache.get(key)
    if hit is None:
        try:
            hit = build()
        except (Unsupported, Inexact, RecursionError) as exc:
            hit = Unsupported(str(exc) or type(exc).__name__)
        cache[key] = hit
    if isinstance(hit, Unsupported):
        raise Unsupported(*hit.args)
    return hit


def _finish(tag, fn, worst):
    """A typed function of rows as the search reads it: for a clause (``worst``
    :data:`_HOLDS`) does it hold; for a rank, its value (non-numbers ``worst``, NaN too;
    ``worst`` None: a job's Rank, non-numbers 0.0 and NaN kept)."""
    if worst is _HOLDS:
        if tag in (BOOL, INT, REAL):
            return lambda rows: fn(rows) != 0  # true, or a non-zero number (NaN too)
        return lambda rows: False  # UNDEFINED or ERROR on every slot
    if tag in (BOOL, INT) or (tag == REAL and worst is None):
        return fn
    if tag == REAL:
        def real(rows):
            values = np.asarray(fn(rows), dtype=float)
            nan = np.isnan(values)  # (no NaN: the values themselves, as an INT rank's are)
            return np.where(nan, worst, values) if nan.any() else values
        return real
    constant = 0.0 if worst is None else worst
    return lambda rows: constant


def _bound_test(test, p):
    """A clause's verdict as booleans (:attr:`~.vtyped.Template.test`) with the values ``p``."""
    return lambda rows: test(rows, p)
