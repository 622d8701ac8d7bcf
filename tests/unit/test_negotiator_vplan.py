"""Compiled plans are shared between requests and still decide as a fresh compile does (issue
#19, "Fast"): a typed template compiled for one job and bound to another job's values of the
same types gives what compiling for that job gives, and what ClassAd says; a plan compiler that
has seen other requests (differing in a constant, an operator or a type) builds for each the
plan a fresh compiler builds."""

from __future__ import annotations

import numpy as np
import pytest

from hypothesis import HealthCheck, assume, given, settings as hsettings, strategies as st

from htc.classad import ClassAd, ExprTree
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator import clauses as clauses_module, vplan
from htc.daemons.negotiator.columns import SlotTable
from htc.daemons.negotiator.search import IdleSearch, RequestState
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slots import Slot
from htc.daemons.negotiator.vexpr import Inexact, Unsupported, scalar
from htc.daemons.negotiator.vplan import PlanCompiler
from htc.daemons.negotiator.vtyped import compile_template, compile_typed, signature
from tests.negotiator_cycles import make_job, make_slot
from tests.unit.test_negotiator_vexpr import _JOB_NAMES, _SLOT_NAMES, _UNIFORM, _ad, _expr
from tests.unit.test_negotiator_vstatic import _grouped_ad


def _names(expr: ExprTree) -> tuple:
    return tuple(sorted({r[7:] if r.startswith("target.") else r for r in expr.attributes()}))


@hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_expr(), slots=st.lists(_ad(_SLOT_NAMES, _UNIFORM), min_size=1, max_size=6),
       first=_ad(_JOB_NAMES, _UNIFORM), second=_ad(_JOB_NAMES, _UNIFORM),
       slot_is_my=st.booleans())
def test_a_template_bound_to_another_jobs_values_is_that_jobs_compile(text, slots, first,
                                                                      second, slot_is_my):
    expr = ExprTree(text)
    names = _names(expr)
    assume(signature(first, names) == signature(second, names))
    try:
        table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
        template = compile_template(expr.node, first, slot_is_my, table)
    except Unsupported:
        return  # outside the typed subset: the tagged form decides (test_negotiator_vexpr)
    assert template.read <= set(names)
    rows = table.rows()
    try:
        shared = np.broadcast_to(np.asarray(
            template.bind(template.values(second))(rows), dtype=float), (len(slots),))
    except Inexact:
        shared = None
    tag, fresh_fn = compile_typed(expr.node, second, slot_is_my, table)
    assert tag == template.tag
    try:
        fresh = np.broadcast_to(np.asarray(fresh_fn(rows), dtype=float), (len(slots),))
    except Inexact:
        assert shared is None
        return
    assert shared is not None
    np.testing.assert_array_equal(shared, fresh)
    if template.test is not None:  # a comparison's verdict, as booleans
        verdict = template.test(rows, template.values(second))
        assert np.broadcast_to(verdict, shared.shape).tolist() == (shared != 0).tolist()
    for ad, value in zip(slots, shared.tolist()):
        got = expr.eval(ad, second) if slot_is_my else expr.eval(second, ad)
        want_tag, want = scalar(got)
        assert want_tag == tag
        assert value == want or (np.isnan(value) and np.isnan(want))


def _slots():
    return [make_slot(f"slot1@m{i}", Cpus=c, Memory=m, KFlops=k, PartitionableSlot=p)
            for i, (c, m, k, p) in enumerate([(8, 4096, 1024, True), (4, 1024, 2048, True),
                                              (2, 2048, 512, False), (1, 1000, 1024, False)])]


_REQUIREMENTS = ["TARGET.Memory >= RequestMemory", "TARGET.Memory > RequestMemory",
                 "TARGET.Memory >= 1024", 'TARGET.Memory >= "1024"',
                 "TARGET.KFlops >= RequestKFlops", "TARGET.KFlops > RequestKFlops",
                 "TARGET.KFlops >= 1024", 'TARGET.KFlops >= "1024"',
                 "TARGET.KFlops * 2 >= RequestKFlops", "TARGET.Memory / RequestCpus >= 512"]
_VALUES = [1024, 2048, 4096, 1024.0, "1024", True, 0]
_RANKS = ["0.0", "TARGET.KFlops / 1000", "TARGET.KFlops * RequestCpus", "TARGET.Memory"]


def _requests():
    out = []
    for requirement in _REQUIREMENTS:
        for value in _VALUES:
            for rank in _RANKS:
                job = make_job(RequestMemory=value if value != "1024" else 1024,
                               RequestKFlops=value, RequestCpus=2 if value == 4096 else 1,
                               exprs={"Requirements": requirement})
                job["Rank"] = ExprTree(rank)
                out.append(RequestState(None, ResourceRequest(len(out) + 1, job, 1), job))
    return out


def _outcome(plan, table):
    """What a plan decides over every row: the match verdict and the three ranks."""
    if plan is None:
        return None
    rows = table.rows()
    ok = plan.static.copy()
    for fn in plan.clauses:
        ok &= np.broadcast_to(fn(rows), ok.shape)
    return (ok.tolist(),) + tuple(np.broadcast_to(np.asarray(f(rows), dtype=float),
                                                  ok.shape).tolist()
                                  for f in (plan.pre, plan.jr, plan.post))


def test_a_shared_compiler_builds_what_a_fresh_one_builds(monkeypatch):
    """Requests that differ in a constant (``RequestKFlops`` 1024, 2048), a type (1024,
    1024.0, "1024", true), an operator (>= and >) or a literal share what they can, and each
    plan decides what a compiler that never saw the others decides."""
    settings = NegotiatorSettings()
    compiles = []
    real = vplan.compile_template

    def counting(*args):
        compiles.append(1)
        return real(*args)
    monkeypatch.setattr(vplan, "compile_template", counting)
    slots = [Slot(ad, ad["Name"]) for ad in _slots()]
    table = SlotTable(slots)
    shared = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
    requests = _requests()
    plans = [shared.compile(rs) for rs in requests]
    decided = [_outcome(plan, table) for plan in plans]
    shared_compiles = len(compiles)
    # (a plan is whole when none of its clauses can raise; some of these are, some not)
    wholes = [plan.whole for plan in plans if plan is not None]
    assert wholes == [all(fn in shared._whole for fn in plan.clauses)
                      for plan in plans if plan is not None]
    for rs, got in zip(requests, decided):
        fresh_table = SlotTable(slots)
        fresh = PlanCompiler(settings, IdleSearch(settings).literal_wants, fresh_table)
        assert got == _outcome(fresh.compile(rs), fresh_table), repr(rs.job)
    # one template per (expression, signature): far fewer than one per request
    assert shared_compiles < len(compiles) - shared_compiles
    assert any(plan is not None for plan in decided)
    # and the verdicts are ClassAd's
    for rs, got in zip(requests, decided):
        if got is not None:
            assert got[0] == [bool(rs.job.eval("Requirements", slot.ad) is True)
                              for slot in slots], repr(rs.job)


def test_plans_of_one_carve_cost_share_its_cost_per_row():
    """``Plan.cost``: a partitionable row costs the request's cpus (a carve), a static row its
    slot weight. Plans of one carve cost share the array; each holds what it says."""
    settings = NegotiatorSettings()
    slots = [Slot(ad, ad["Name"]) for ad in _slots()]
    for slot, weight in zip(slots, (8.0, 4.0, 2.5, 0.5)):
        slot.weight = weight
    table = SlotTable(slots)
    compiler = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
    shapes = ((1, 1024), (2, 1024), (1, 2048), (2, 512), (4, 1024))
    jobs = [make_job(RequestCpus=cpus, RequestMemory=memory) for cpus, memory in shapes]
    plans = [compiler.compile(RequestState(None, ResourceRequest(i, job, 1), job))
             for i, job in enumerate(jobs)]
    assert all(plan is not None for plan in plans)
    for plan, (cpus, _) in zip(plans, shapes):
        assert plan.cost.tolist() == [cpus, cpus, 2.5, 0.5]
    assert plans[0].cost is plans[2].cost and plans[1].cost is plans[3].cost
    assert len({id(plan.cost) for plan in plans}) == 3


@pytest.mark.parametrize("requirement", ["TARGET.Memory >= RequestMemory",
                                         "TARGET.KFlops >= RequestKFlops"])
def test_jobs_that_differ_only_in_a_constant_share_one_template(monkeypatch, requirement):
    settings = NegotiatorSettings()
    compiles = []
    real = vplan.compile_template

    def counting(*args):
        compiles.append(1)
        return real(*args)
    monkeypatch.setattr(vplan, "compile_template", counting)
    table = SlotTable([Slot(ad, ad["Name"]) for ad in _slots()])
    compiler = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
    plans, counts = [], []
    for value in (512, 1024, 2048, 3000, 4096):
        job = make_job(RequestMemory=value, RequestKFlops=value,
                       exprs={"Requirements": requirement})
        plans.append(compiler.compile(RequestState(None, ResourceRequest(1, job, 1), job)))
        counts.append(len(compiles))
    assert all(plan is not None for plan in plans)
    assert counts[0] >= 1 and counts == [counts[0]] * 5  # the first job's compiles serve all
    held = [plan.clauses[0](table.rows()).tolist() for plan in plans]
    assert held[0] != held[-1]  # the values are bound, not shared
    attr = requirement.split()[0][7:]
    assert held == [[slot[attr] >= value for slot in _slots()]
                    for value in (512, 1024, 2048, 3000, 4096)]


def test_a_job_value_of_another_type_gets_its_own_template():
    table = SlotTable([Slot(ad, ad["Name"]) for ad in _slots()])
    node = ExprTree("TARGET.KFlops >= RequestKFlops").node
    names = ("kflops", "requestkflops")
    kinds = {signature(ClassAd({"RequestKFlops": v}), names) for v in (1, 2, 1.0, True, "1")}
    assert len(kinds) == 4  # int, real, boolean, a string
    integer = compile_template(node, ClassAd({"RequestKFlops": 1024}), False, table)
    assert integer.params == ("requestkflops",) and integer.safe
    with pytest.raises(Unsupported):
        compile_template(node, ClassAd({"RequestKFlops": "1024"}), False, table)
    arith = compile_template(ExprTree("TARGET.KFlops / RequestKFlops >= 1").node,
                             ClassAd({"RequestKFlops": 2}), False, table)
    assert not arith.safe  # a zero divisor raises at run time: bound values are tried first
    with pytest.raises(Inexact):
        arith.bind((0.0,))(table.rows())


def test_a_comparison_reading_a_carved_resource_gives_its_verdict_as_booleans():
    table = SlotTable([Slot(ad, ad["Name"]) for ad in _slots()])
    template = compile_template(ExprTree("(TARGET.Memory >= RequestMemory)").node,
                                ClassAd({"RequestMemory": 1024}), False, table)
    verdict = template.test(table.rows(), (2048.0,))
    assert verdict.dtype == bool
    assert verdict.tolist() == [ad["Memory"] >= 2048 for ad in _slots()]
    assert (template.fn(table.rows(), (2048.0,)) != 0).tolist() == verdict.tolist()


_STARTS = ["True", 'TARGET.Owner != "bob"', "TARGET.SubmitterUserPrio < 10",
           "TARGET.Memory >= 2048"]
_SHAPE_REQUIREMENTS = ["TARGET.Memory >= RequestMemory",
                       'TARGET.Memory >= RequestMemory && Owner != "carol"',
                       "TARGET.Memory >= RequestMemory && Blocked =!= true",
                       "TARGET.KFlops >= RequestKFlops"]
_SHAPE_RANKS = [0.0, "TARGET.Memory", 'ifThenElse(Owner == "alice", TARGET.Memory, 1)']


def _shape_request(n, owner, prio, requirement, rank, memory):
    job = make_job(owner, RequestMemory=memory, RequestKFlops=1024, SubmitterUserPrio=prio,
                   exprs={"Requirements": requirement, "Blocked": 'Owner == "bob"'})
    job["Rank"] = ExprTree(rank) if isinstance(rank, str) else rank
    return RequestState(None, ResourceRequest(n, job, 1), job)


@hsettings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(starts=st.lists(st.sampled_from(_STARTS), min_size=4, max_size=4),
       jobs=st.lists(st.tuples(st.sampled_from(["alice", "bob", "carol"]),
                               st.sampled_from([1.0, 20.0]),
                               st.sampled_from(_SHAPE_REQUIREMENTS),
                               st.sampled_from(_SHAPE_RANKS), st.sampled_from([1024, 2048])),
                     min_size=1, max_size=8))
def test_requests_of_one_shape_share_a_plan_that_decides_what_a_fresh_compile_decides(
        starts, jobs):
    """Requests that differ in values some slot, clause or rank may read (``Owner``,
    ``SubmitterUserPrio``, through an expression of the job too) get from one compiler the
    plans a compiler that never saw the others gives, ranking included."""
    settings = NegotiatorSettings()
    slots = []
    for ad, start in zip(_slots(), starts):
        ad["Start"] = ExprTree(start)
        slots.append(Slot(ad, ad["Name"]))
    table = SlotTable(slots)
    shared = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
    requests = [_shape_request(n + 1, *job) for n, job in enumerate(jobs)]
    plans = [shared.compile(rs) for rs in requests]
    for rs, plan in zip(requests, plans):
        fresh_table = SlotTable(slots)
        fresh = PlanCompiler(settings, IdleSearch(settings).literal_wants, fresh_table)
        want = fresh.compile(rs)
        assert _outcome(plan, table) == _outcome(want, fresh_table), repr(rs.job)
        if plan is not None:
            assert plan.ranking == want.ranking
            assert (plan.wants, plan.cost.tolist()) == (want.wants, want.cost.tolist())
    assert len({id(plan) for plan in plans if plan is not None}) == sum(
        plan is not None for plan in plans)  # a plan (its turn state) per request


def test_submitters_of_one_autocluster_share_one_compile_unless_something_reads_them(
        monkeypatch):
    """Four submitters' requests of one shape (they differ in ``Owner`` and
    ``SubmitterUserPrio``) compile once when nothing reads those; a slot that reads
    ``TARGET.Owner`` makes them compile apart."""
    settings = NegotiatorSettings()
    compiled = []
    real = PlanCompiler._compile

    def counting(self, rs):
        compiled.append(rs)
        return real(self, rs)
    monkeypatch.setattr(PlanCompiler, "_compile", counting)
    for start, compiles in (("True", 1), ('TARGET.Owner != "bob"', 4)):
        compiled.clear()
        slots = []
        for ad in _slots():
            ad["Start"] = ExprTree(start)
            slots.append(Slot(ad, ad["Name"]))
        table = SlotTable(slots)
        compiler = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
        requests = [_shape_request(n, owner, prio, "TARGET.Memory >= RequestMemory",
                                   "TARGET.Memory", 1024)
                    for n, (owner, prio) in enumerate([("alice", 1.0), ("bob", 2.0),
                                                       ("carol", 3.0), ("dave", 4.0)])]
        plans = [compiler.compile(rs) for rs in requests]
        assert len(compiled) == compiles
        verdicts = [_outcome(plan, table)[0] for plan in plans]
        assert verdicts[1] == ([False] * 4 if compiles == 4 else verdicts[0])
        assert verdicts[0] == [True, True, True, False]  # Memory 4096, 1024, 2048, 1000


@hsettings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts=st.lists(_expr(), min_size=1, max_size=4), real=st.floats(0.0, 1.0))
def test_clauses_kept_by_text_are_the_split_of_each_jobs_own_tree(texts, real):
    """Jobs whose ``Requirements`` read alike, parsed afresh, get the clauses a split of their
    own tree gives (texts, names, trees); reals that differ in their last digit do not meet."""
    near = real + abs(real) * 2.0 ** -52 + 5e-324
    for value in (real, near, real):
        text = " && ".join([f"({t})" for t in texts] + [f"TARGET.Load == {value!r}"])
        job = make_job(exprs={"Requirements": text})
        got = clauses_module.requirement_clauses(job)
        want = clauses_module._split(ExprTree(text))
        assert [(t, e, j, s) for t, e, j, s in got] == [(t, e, j, s) for t, e, j, s in want]
        assert got[-1][1].node.right.value == value


def _closure_reads(slots):
    """What the slots' expressions reach, slot by slot (what :func:`~.vplan._slot_reads` must
    give): every slot followed with :func:`~.slots.closure`."""
    from htc.classad.ast import Literal
    from htc.daemons.negotiator.slots import CARVED, closure
    reach, targets = set(CARVED), set()
    for slot in slots:
        exprs = slot.ad._exprs
        roots = [n for n, node in exprs.items()
                 if node.__class__ is not Literal and n not in CARVED]
        if roots:
            names, tg = closure(slot.ad, roots)
            targets |= tg | {n for n in names if n not in exprs}
            reach.update(n for n in roots if closure(slot.ad, (n,))[0] & CARVED)
    return reach, targets


@hsettings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(slots=st.lists(st.fixed_dictionaries({
    "Requirements": st.sampled_from(["START", "MY.START", "TARGET.J", "START && A", "A",
                                     "PARENT", "true", None]),
    "START": st.sampled_from(["true", "A", "B > 1", "TARGET.K", "Memory > 2", "{ A, J }",
                              None]),
    "A": st.sampled_from([True, "Cpus * 2", "J", "TARGET.J", None]),
    "Memory": st.sampled_from([2048, "Disk / 2", None])}), min_size=1, max_size=8))
def test_slots_followed_once_per_shape_reach_what_each_slot_reaches(slots):
    """Slots of the same expressions (names, classes, what each reads) are followed once, and
    give what following every slot gives: what a carve changes, what they read of the job
    (names a slot lacks too)."""
    from htc.daemons.negotiator.vplan import _slot_reads
    table = [Slot(_grouped_ad(values), f"s{i}") for i, values in enumerate(slots)]
    want = _closure_reads(table)
    assert _slot_reads(table) == want
    assert _slot_reads(table, [slot.ad._exprs for slot in table]) == want  # (the rows')


def test_a_real_ranks_nan_is_its_worst_and_its_numbers_pass_through():
    """_finish of a REAL rank: NaN rows (``-inf - -inf``) become ``worst``, other rows keep
    their value (-infinity too); a rank without NaN is its values unchanged."""
    worst = -1.0e30
    real = vplan._finish(vplan.REAL, lambda rows: np.array([1.5, np.nan, -np.inf]), worst)
    assert list(real(None)) == [1.5, worst, -np.inf]
    clean = vplan._finish(vplan.REAL, lambda rows: np.array([1.5, 2.5]), worst)
    assert list(clean(None)) == [1.5, 2.5]
    assert float(vplan._finish(vplan.REAL, lambda rows: np.nan, worst)(None)) == worst
    assert float(vplan._finish(vplan.REAL, lambda rows: 3.0, worst)(None)) == 3.0


@hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_expr(calls=True), slots=st.lists(_ad(_SLOT_NAMES, _UNIFORM), min_size=1,
                                             max_size=6),
       job=_ad(_JOB_NAMES, _UNIFORM), slot_is_my=st.booleans(), data=st.data())
def test_a_compiled_function_of_some_rows_is_its_fresh_compiles(text, slots, job, slot_is_my,
                                                                 data):
    """PlanCompiler._function (a template that reads no carved resource: its finished values
    over every row, computed once and indexed) gives over some rows, carved resources
    replaced, what a fresh typed compile gives there, for a clause and both kinds of rank."""
    expr = ExprTree(text)
    try:
        table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
        tag, fresh = compile_typed(expr.node, job, slot_is_my, table)
    except Unsupported:
        return  # outside the typed subset (test_negotiator_vexpr)
    index = np.array(data.draw(st.lists(st.integers(0, len(slots) - 1), max_size=8)), dtype=int)
    carved = {}
    for lname in ("cpus", "memory", "disk"):
        sizes = data.draw(st.lists(st.integers(0, 64), min_size=index.size,
                                   max_size=index.size))
        carved[lname] = (np.full(index.size, vplan.INT, dtype=np.int8),
                         np.array(sizes, dtype=float))
    env = table.rows(index, carved)
    compiler = PlanCompiler(NegotiatorSettings(), lambda job: (1, 1, 1), table)
    for worst in (vplan._HOLDS, -1.0e30, None):
        try:
            fn = compiler._function(("t", id(worst)), expr.node, _names(expr), job, slot_is_my,
                                    worst)
        except Unsupported:
            continue  # a row where it raises: the request would take the scalar search
        want_fn = vplan._finish(tag, fresh, worst)
        try:
            want = want_fn(env)
        except Inexact:
            with pytest.raises(Inexact):
                fn(env)
            continue
        got = np.broadcast_to(np.asarray(fn(env), dtype=float), (index.size,))
        want = np.broadcast_to(np.asarray(want, dtype=float), (index.size,))
        np.testing.assert_array_equal(got, want)


def test_jobs_holding_one_requirements_tree_get_its_split_without_printing_it(monkeypatch):
    """Jobs that hold one Requirements tree (the parser shares a text's tree) get the split of
    its text, the tree printed once; an entry of another tree under the same id is not
    taken for it."""
    first = make_job(exprs={"Requirements": "TARGET.Memory >= 10 && TARGET.Arch == \"X\""})
    second = make_job(exprs={"Requirements": "TARGET.Memory >= 10"})
    second["Requirements"] = first.get("Requirements")
    node = first.get("Requirements").node
    assert second.get("Requirements").node is node
    printed = []
    unparse = ExprTree.unparse
    monkeypatch.setattr(ExprTree, "unparse", lambda self, **kw: printed.append(1) or unparse(
        self, **kw))
    clauses_module._BY_TREE.clear()
    got = clauses_module.requirement_clauses(first)
    assert clauses_module.requirement_clauses(second) is got and len(printed) == 1
    want = clauses_module._split(first.get("Requirements"))
    assert [c[0] for c in got] == [c[0] for c in want] == ["TARGET.Memory >= 10",
                                                          'TARGET.Arch == "X"']
    other = ExprTree("TARGET.Cpus > 1")
    clauses_module._BY_TREE[id(node)] = (other.node, clauses_module._split(other))
    assert [c[0] for c in clauses_module.requirement_clauses(first)] == [c[0] for c in want]


@hsettings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(exprs=st.dictionaries(st.sampled_from(["A", "B", "C", "RequestMemory"]), st.sampled_from(
    ["1", "2.5", "true", '"x"', "TARGET.Memory", "A + 1", "B", "Memory", "TARGET.KFlops",
     "C * 2", "undefined"]), max_size=4),
       names=st.sets(st.sampled_from(["a", "b", "c", "requestmemory", "d"]), max_size=3))
def test_a_jobs_view_is_its_projection_unless_it_reads_a_carved_resource(exprs, names):
    """PlanCompiler._job_view: None when the job values ``names`` reach a carved resource (as
    TARGET.x, or a name the job lacks, which falls back to the slot), else the projection."""
    from htc.daemons.negotiator.slots import closure, projection
    job = make_job(exprs=exprs)
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(_slots())])
    compiler = PlanCompiler(NegotiatorSettings(), lambda job: (1, 1, 1), table)
    reached, targets = closure(job, names)
    reach = compiler._carved_reach
    reads_carved = bool(targets & reach or {n for n in reached if n not in job._exprs} & reach)
    assert compiler._job_view(job, names) == (None if reads_carved else projection(job, names))


@hsettings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts=st.lists(_expr(calls=True), min_size=1, max_size=3),
       slots=st.lists(_ad(_SLOT_NAMES, _UNIFORM), min_size=1, max_size=6),
       job=_ad(_JOB_NAMES, _UNIFORM), data=st.data())
def test_a_plan_whose_clauses_cannot_raise_masks_every_row_at_once_alike(texts, slots, job,
                                                                         data):
    """vmask.full_mask of a plan whose clauses cannot raise (Plan.whole: every row at once)
    is its mask over the matching rows alone; a clause that can raise (arithmetic) keeps a
    plan off that path."""
    from htc.daemons.negotiator.vmask import full_mask
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
    compiler = PlanCompiler(NegotiatorSettings(), lambda job: (1, 1, 1), table)
    plan = vplan.Plan()
    for text in texts:
        expr = ExprTree(text)
        try:
            plan.clauses.append(compiler._function(("clause", text), expr.node, _names(expr),
                                                   job, False, vplan._HOLDS))
        except Unsupported:
            continue  # a row where it raises, or outside the subsets: not a clause of a plan
    plan.whole = all(fn in compiler._whole for fn in plan.clauses)
    n = len(slots)
    table.alive[:] = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    plan.static = np.broadcast_to(np.array(data.draw(st.lists(st.booleans(), min_size=n,
                                                               max_size=n))), (n,))
    plan.wants_col = np.array([[1.0], [0.0], [0.0]])
    whole = full_mask(table, plan)
    plan.whole = False
    try:
        some = full_mask(table, plan)
    except Inexact:
        assert False, "a clause of a whole plan raised"
    assert whole.tolist() == some.tolist()


def test_only_clauses_that_cannot_raise_are_whole():
    """A clause with arithmetic that reads a carved resource can raise as rows shrink: not
    Plan.whole; a comparison without arithmetic, or a clause computed once over every row (no
    carved resource read), is."""
    slots = [ClassAd({"A": 2, "Cpus": 4, "Memory": 1024}), ClassAd({"A": 0, "Cpus": 1,
                                                                     "Memory": 0})]
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
    compiler = PlanCompiler(NegotiatorSettings(), lambda job: (1, 1, 1), table)
    job = ClassAd({"RequestMemory": 100})
    for text, whole in (("TARGET.Memory * 2 >= RequestMemory", False),
                        ("TARGET.Memory >= RequestMemory", True), ("TARGET.A + 1 > 0", True)):
        expr = ExprTree(text)
        fn = compiler._function(("clause", text), expr.node, _names(expr), job, False,
                                vplan._HOLDS)
        assert (fn in compiler._whole) is whole, text
