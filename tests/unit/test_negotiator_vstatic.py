"""Static columns evaluated by groups of slots give what evaluating every slot gives (issue
#19, "Fast", :mod:`htc.daemons.negotiator.vstatic`): random expressions over random slots whose
values agree, nearly agree (1, 1.0 and true; 0.0 and -0.0; strings of other case) or are
expressions; the slot's own ``Requirements`` through chains of plain references, ending in a
literal or in an expression that slots share (one node) or do not."""

from __future__ import annotations

import pytest

from hypothesis import HealthCheck, example, given, settings as hsettings, strategies as st

from htc.classad import ClassAd, ExprTree
from htc.classad.match import requirements_hold
from htc.daemons.negotiator.columns import SlotTable
from htc.daemons.negotiator.search import IdleSearch
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slots import Slot
from htc.daemons.negotiator.vplan import PlanCompiler
from htc.daemons.negotiator.vstatic import SLOT_REQUIREMENTS, slot_reads
from tests.negotiator_cycles import make_job, make_slot
from tests.unit.test_negotiator_vexpr import _expr

_GROUP_VALUES = st.sampled_from(
    [1, 2, 1.0, 0.0, -0.0, True, False, '"LINUX"', '"Linux"', '"x86_64"', "undefined",
     "error", "A + 1", "TARGET.J * 2", "B", None])
_GROUP_LEAVES = ["A", "B", "C", "TARGET.A", "TARGET.A", "TARGET.B", "TARGET.C", "MY.A", "J",
                 "TARGET.J", "MY.J", "1", "0.0", '"linux"', '"LINUX"', "true", "undefined"]


@st.composite
def _group_expr(draw, depth=0):
    if depth > 2 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(_GROUP_LEAVES))
    kind = draw(st.sampled_from(["==", "=?=", "!=", "<", "+", "&&", "||", "call", "?:"]))
    a, b = draw(_group_expr(depth + 1)), draw(_group_expr(depth + 1))
    if kind == "call":
        fn = draw(st.sampled_from(["ifThenElse(isUndefined({a}), 1000, {b})", "toLower({a})",
                                   "strcmp({a}, {b})", "isString({a})", "string({a})"]))
        return fn.format(a=a, b=b)
    if kind == "?:":
        return f"(({a}) ? ({b}) : 7)"
    return f"(({a}) {kind} ({b}))"


def _grouped_ad(draw_values: dict) -> ClassAd:
    text = "; ".join(f"{k} = {v}" for k, v in draw_values.items() if v is not None)
    return ClassAd(f"[ {text} ]")


def _value_of(value) -> str:
    return f"{type(value).__name__} {value!r}"  # (a str: an object array keeps it whole)


@st.composite
def _grouped_slots(draw):
    """Slots whose values come from a small palette: many agree, some only nearly (1 and 1.0)."""
    twins = draw(st.sampled_from([[1, 1.0, True], [0, 0.0, -0.0, False], ['"LINUX"', '"Linux"'],
                                  ["A + 1", "TARGET.J * 2"]]))
    palette = st.sampled_from(twins + draw(st.lists(_GROUP_VALUES, max_size=2)))
    return draw(st.lists(st.fixed_dictionaries({n: palette for n in ("A", "B", "C")}),
                         min_size=1, max_size=12))


def _near(values, text="TARGET.A", job=None):
    """An example of slots whose values of A differ only in type, sign or case, or are
    expressions (reading B) that no key of a literal tells apart."""
    slots = [{"A": a, "B": b, "C": None} for a, b in values]
    return example(text=text, slots=slots, job=job or {"J": 1, "A": None, "K": None},
                   slot_is_my=False)


def _grouped(compiler, job, text: str):
    """``(expr, column, evaluations)``: the static column of ``text`` (MY = the job) by the
    compiler's slot groups, and how many times the verdict was called."""
    expr = ExprTree(text)
    calls = []
    got = compiler.groups.evaluate(
        lambda slot: calls.append(1) or expr.eval(job, slot.ad) is True, (expr, False), job, bool)
    return expr, got.tolist(), len(calls)


@_near([(1, None), (1.0, None), (True, None)])
@_near([(0.0, None), (-0.0, None), (0, None)], text="string(TARGET.A)")
@_near([('"LINUX"', None), ('"Linux"', None)], text='TARGET.A =?= "LINUX"')
@_near([("B", 1), ("B", 2), ("B", 1)])
@_near([('"LINUX"', None), ('"Linux"', None), ('"x86_64"', None)], text="TARGET.A == MY.J",
       job={"J": '"linux"', "A": None, "K": None})
@_near([('"LINUX"', None), ('"Linux"', None), ("1", None)],
       text='TARGET.A != "linux" || TARGET.A =?= "Linux"')
@_near([('"LINUX"', None), ('"Linux"', None)], text='TARGET.A == "linux" && TARGET.A')
@_near([('"LINUX"', None), ('"Linux"', None)], text='ifThenElse(TARGET.A == "x", 1, A)')
@_near([('"LINUX"', None), ('"Linux"', None)], text='ifThenElse(TARGET.A == "x", 1, J)',
       job={"J": "TARGET.A", "A": None, "K": None})
@_near([('"x"', '"x"'), ('"y"', '"x"')], text="TARGET.A == TARGET.B",
       job={"J": None, "A": None, "K": None, "B": '"z"'})
@hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_group_expr(), slots=_grouped_slots(),
       job=st.fixed_dictionaries({n: _GROUP_VALUES for n in ("J", "A", "K")}),
       slot_is_my=st.booleans())
def test_a_static_column_evaluated_by_groups_is_the_slot_by_slot_column(text, slots, job,
                                                                         slot_is_my):
    """Slots that agree on every literal value an expression reads share one evaluation, and
    the column is what evaluating every slot gives (strings of other case, 1 and 1.0 and
    true, 0.0 and -0.0, absent names, slot values that are expressions)."""
    expr = ExprTree(text)
    ads = [_grouped_ad(values) for values in slots]
    job_ad = _grouped_ad(job)
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(ads)])
    settings = NegotiatorSettings()
    compiler = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
    if slot_is_my:
        def verdict(slot):
            return _value_of(expr.eval(slot.ad, job_ad))
    else:
        def verdict(slot):
            return _value_of(expr.eval(job_ad, slot.ad))
    calls = []
    got = compiler.groups.evaluate(
        lambda slot: calls.append(1) or verdict(slot), (expr, slot_is_my), job_ad, object)
    assert got.tolist() == [verdict(slot) for slot in table.slots]
    assert len(calls) <= len(ads)


def test_slots_of_equal_values_share_one_evaluation_and_impure_expressions_do_not():
    ads = [make_slot(f"slot1@m{i}", Arch="X86_64" if i % 3 else "aarch64", Cpus=i + 1,
                     FileSystemDomain="submit.example.org" if i == 4 else f"m{i}.example.org")
           for i in range(9)]
    table = SlotTable([Slot(ad, ad["Name"]) for ad in ads])
    settings = NegotiatorSettings()
    compiler = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
    job = make_job(FileSystemDomain="Submit.Example.org")
    for text, evaluations in [('TARGET.Arch == "X86_64"', 2), ("TARGET.Cpus > 3", 9),
                              ("TARGET.FileSystemDomain == MY.FileSystemDomain", 2),
                              ("TARGET.FileSystemDomain =?= MY.FileSystemDomain", 2),
                              ("TARGET.FileSystemDomain == FileSystemDomain", 2),
                              ("TARGET.FileSystemDomain < MY.FileSystemDomain", 9),
                              ('TARGET.Arch == "X86_64" && random(2) < 5', 9),
                              ('TARGET.Arch == "X86_64" && time() > 0', 9),
                              ('TARGET.Arch == "X86_64" && CurrentTime > 0', 9)]:
        expr, got, calls = _grouped(compiler, job, text)
        assert calls == evaluations, text
        assert got == [expr.eval(job, ad) is True for ad in ads], text


@hsettings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(slots=st.lists(st.fixed_dictionaries({
    "Requirements": st.sampled_from(["START", "MY.START", "TARGET.J", "START && A", "A", "B",
                                     "true", "J", "CurrentTime > 0 && START", None]),
    "START": st.sampled_from(["true", "false", "1", "1.0", "0", "-0.0", "A", "B > 1",
                              "TARGET.K", '"yes"', None]),
    "A": st.sampled_from([True, 1, 0, 2.5, "undefined", None]),
    "B": st.sampled_from([1, 2, None])}), min_size=1, max_size=12),
    job=st.fixed_dictionaries({"J": st.sampled_from([True, 0, "TARGET.A", "TARGET.B > 1", None]),
                               "K": st.sampled_from([True, 1, 0, None]),
                               "B": st.sampled_from([5, None])}))
def test_the_slots_own_requirements_by_groups_is_the_slot_by_slot_column(slots, job):
    """Slots whose Requirements reach the same plain references and literal values share one
    evaluation (7,500 slots of ``Requirements = START; START = true`` evaluate it once); a job
    value that is an expression (it could read the slot back) keeps slot by slot."""
    ads = [_grouped_ad(values) for values in slots]
    job_ad = _grouped_ad(job)
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(ads)])
    settings = NegotiatorSettings()
    compiler = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
    calls = []

    def verdict(slot):
        calls.append(1)
        return requirements_hold(slot.ad, job_ad)
    got = compiler.groups.evaluate(verdict, SLOT_REQUIREMENTS, job_ad, bool)
    assert got.tolist() == [requirements_hold(ad, job_ad) for ad in ads]
    assert len(calls) <= len(ads)


def test_a_job_value_that_calls_random_or_a_whole_ad_keeps_the_evaluation_slot_by_slot():
    job = make_job(A=1, exprs={"J": "random(100)"})
    assert slot_reads(ExprTree("TARGET.J + Memory"), job, True) is None  # MY = the slot
    assert slot_reads(ExprTree("J + TARGET.Memory"), job, False) is None  # MY = the job
    assert slot_reads(ExprTree("A + TARGET.Memory"), job, False) == ("a", "memory")
    assert slot_reads(ExprTree("size(TARGET) > 3 && MY.A > 0"), job, False) is None  # the ad


def test_slots_whose_requirements_reach_the_same_values_share_one_evaluation():
    ads = [make_slot(f"slot1@m{i}", Arch="X86_64") for i in range(9)]
    for i, ad in enumerate(ads):
        ad["Requirements"] = ExprTree("START")
        # (a text of its own each: one text is one shared node, test_desktop_slots_sharing_...)
        ad["START"] = ExprTree(f"TARGET.J > 1 + {i} - {i}") if i % 3 == 0 else True
    table = SlotTable([Slot(ad, ad["Name"]) for ad in ads])
    settings = NegotiatorSettings()
    compiler = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
    for job, evaluations in [(make_job(J=2), 1 + 3), (make_job(exprs={"J": "TARGET.Cpus"}), 9)]:
        calls = []
        got = compiler.groups.evaluate(
            lambda slot: calls.append(1) or requirements_hold(slot.ad, job), SLOT_REQUIREMENTS,
            job, bool)
        assert len(calls) == evaluations
        assert got.tolist() == [requirements_hold(ad, job) for ad in ads]


def test_values_every_slot_shares_or_lacks_are_one_evaluation_and_chains_stay_apart():
    """A name no slot defines and a value every slot has tell no slots apart: one evaluation
    for all; two chains of plain references that end in the same value are two groups."""
    ads = [make_slot(f"slot1@m{i}", OpSys="LINUX") for i in range(6)]
    for i, ad in enumerate(ads):
        ad["Requirements"] = ExprTree("START" if i % 2 else "READY")
        ad["START"] = ExprTree("READY")
        ad["READY"] = True
    table = SlotTable([Slot(ad, ad["Name"]) for ad in ads])
    settings = NegotiatorSettings()
    compiler = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
    job = make_job()
    expr = ExprTree('TARGET.OpSys == "LINUX" && TARGET.Offline =!= true')
    calls = []
    got = compiler.groups.evaluate(lambda slot: calls.append(1) or expr.eval(job, slot.ad),
                                   (expr, False), job, bool)
    assert len(calls) == 1 and got.tolist() == [True] * 6
    calls = []
    got = compiler.groups.evaluate(
        lambda slot: calls.append(slot.name) or requirements_hold(slot.ad, job),
        SLOT_REQUIREMENTS, job, bool)
    assert sorted(calls) == ["slot1@m0", "slot1@m1"]  # READY, and START -> READY
    assert got.tolist() == [True] * 6


@hsettings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(st.tuples(st.integers(0, 3), st.sampled_from("abc"), st.booleans()),
                     min_size=1, max_size=12),
       big=st.sampled_from([1, 2 ** 40]))
def test_rows_grouped_by_codes_are_the_rows_equal_in_every_key(rows, big):
    """:func:`~.vstatic._combined` of each key's :func:`~.vstatic._codes`: two rows get the
    same code exactly when they agree on every key, every code below the bound (``big``:
    parts that claim 2**40 codes each, so that the digits renumber before 2**62)."""
    from htc.daemons.negotiator.vstatic import _codes, _combined

    parts = []
    for k in range(3):
        codes, count = _codes([row[k] for row in rows])
        parts.append((codes, count * big))
    assert _codes([row[0] for row in rows])[1] == len({row[0] for row in rows})
    codes, bound = _combined(parts)
    assert 0 <= codes.min() and codes.max() < bound
    for i, a in enumerate(rows):
        for j, b in enumerate(rows):
            assert (codes[i] == codes[j]) == (a == b)


# ------------------------------------------- the slots' Requirements ending in one shared node

#: slot and job values: numbers of each type (1e308: an overflow), booleans, UNDEFINED, ERROR,
#: absent, mostly; a string, an expression, an integer beyond what a column holds exactly (2**60)
#: now and then (they keep the slots slot by slot)
_START_VALUES = st.sampled_from([0, 1, -3, 7, 0.0, -0.0, 0.5, 1e308, True, False, "undefined",
                                 "error", None] * 4 + ['"x"', "B + 1", 2 ** 60])
_CARVED_VALUES = st.sampled_from([0, 2, 4.5, None])  # (a table's carved resources are numbers)
_HOW = ["shared", "shared", "own", "unique", "direct", "my", "literal"]


def _start_ads(texts, slots):
    """Slot ads whose ``Requirements`` end in ``texts[which]``: the one node of that text
    (``shared``: ``START = node``; ``direct``: ``Requirements = node``; ``my``:
    ``Requirements = MY.START``), a parse of their own (``own``: the same text, one node per
    slot unless ExprTree gives one node to one text; ``unique``: a text of the slot's own),
    or ``START = true``."""
    nodes = [ExprTree(text) for text in texts]
    ads = []
    for i, (how, which, values) in enumerate(slots):
        ad = _grouped_ad(values)
        text, node = texts[which % len(texts)], nodes[which % len(nodes)]
        ad["Requirements"] = ExprTree("START")
        if how in ("shared", "my"):
            ad["START"] = node
            if how == "my":
                ad["Requirements"] = ExprTree("MY.START")
        elif how == "own":
            ad["START"] = ExprTree(text)
        elif how == "unique":
            ad["START"] = ExprTree(f"({text}) && {i + 1}")
        elif how == "direct":
            ad["Requirements"] = node
        else:
            ad["START"] = True
        ads.append(ad)
    return ads


@st.composite
def _desktop_expr(draw):
    """``START``'s kind of expression: two tests of slot values joined by ``&&`` or ``||``."""
    tests = [f"({draw(st.sampled_from(['A', 'B', 'A + B', 'A * 2', 'A / B', 'B - 1']))} "
             f"{draw(st.sampled_from(['<', '>', '>=', '==', '!=', '=?=']))} "
             f"{draw(st.sampled_from(['0', '1', '0.5', '-3', 'true', 'undefined', 'J']))})"
             for _ in range(2)]
    return f" {draw(st.sampled_from(['&&', '||']))} ".join(tests)


def _slot_requirements(ads, job):
    """``(column, evaluations)``: :meth:`SlotGroups.evaluate` of the slots' Requirements."""
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(ads)])
    settings = NegotiatorSettings()
    compiler = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
    calls = []

    def verdict(slot):
        calls.append(slot.name)
        return requirements_hold(slot.ad, job)
    return compiler.groups.evaluate(verdict, SLOT_REQUIREMENTS, job, bool).tolist(), calls


@example(texts=["(KeyboardIdle > 15 * 60) && (LoadAvg < 0.3)"],
         slots=[("shared", 0, {"KeyboardIdle": k, "LoadAvg": v})
                for k, v in [(1000, 0.1), (10, 0.1), (2000, 0.5), (901, 0.29), (900, 0.0)]],
         job={"J": 1, "K": None, "A": None})
@example(texts=["A && B", "A || B"],
         slots=[("shared", w, {"A": a, "B": b}) for w in (0, 1)
                for a in (True, False, "undefined", "error", 0, 2.5)
                for b in (True, False, "undefined", "error")],
         job={"J": None, "K": None, "A": None})
@example(texts=["A / B > 0", "A + B", "!A", "A == B", "A =?= B", "A ? B : J"],
         slots=[(how, w, {"A": a, "B": b}) for how in ("shared", "direct") for w in range(6)
                for a, b in [(1, 0), (0.0, 0), (-1.5, 0.0), (7, 2), (1e308, 1e308), (True, 1),
                             (0, -0.0), (2 ** 60, 1), ('"x"', 1)]],
         job={"J": "undefined", "K": None, "A": None})
@hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts=st.lists(st.one_of(_desktop_expr(), _expr(depth=2), _expr(depth=1), _expr()),
                      min_size=1, max_size=2),
       slots=st.lists(st.tuples(st.sampled_from(_HOW), st.integers(0, 1),
                                st.fixed_dictionaries({"A": _START_VALUES, "B": _START_VALUES,
                                                       "Cpus": _CARVED_VALUES,
                                                       "Memory": _CARVED_VALUES})),
                      min_size=4, max_size=16),
       job=st.fixed_dictionaries({n: _START_VALUES for n in ("J", "K", "A")}))
def test_slots_whose_requirements_end_in_one_shared_node_are_each_slots_verdict(texts, slots,
                                                                               job):
    """Slots whose ``Requirements`` chain ends in one expression node (shared: one ExprTree
    for every slot) are decided in one vectorised pass over their values (int, real,
    boolean, UNDEFINED, ERROR; a string, an expression or an integer beyond 2**53 keeps
    them slot by slot); nodes of one slot each (parsed apart), chains that do not end in
    a shared node, job values that are expressions: slot by slot. Every verdict is
    :func:`~htc.classad.match.requirements_hold`'s."""
    ads = _start_ads(texts, slots)
    job_ad = _grouped_ad(job)
    got, calls = _slot_requirements(ads, job_ad)
    assert got == [requirements_hold(ad, job_ad) for ad in ads]
    assert len(calls) <= len(ads)


_DESKTOP = "(KeyboardIdle > 15 * 60) && (LoadAvg < 0.3)"


def test_desktop_slots_sharing_one_start_node_evaluate_it_once_per_verdict():
    """12 desktop slots of one ``START`` node (ints and reals) and 4 of ``START = true``:
    three evaluations (true, the node's true, its false); each slot of its own parse of the
    text (no node shared): every one evaluated. The verdicts are ClassAd's either way."""
    idle = [2000, 100, 901, 900, 5000, 1200, 30, 7000, 950, 3000, 1000, 0]
    load = [0.1, 0.1, 0.29, 0.0, 0.3, 0.25, 0.9, 0.05, 0.31, 0.2, 0.0, 0.0]
    job = make_job(KeyboardIdle=0)  # (a name every slot defines: the slot's own is read)
    node = ExprTree(_DESKTOP)
    for own, evaluations in ((False, 3), (True, 12 + 1)):
        ads = [make_slot(f"slot1@m{i:02d}", KeyboardIdle=k, LoadAvg=v)
               for i, (k, v) in enumerate(zip(idle, load))]
        ads += [make_slot(f"slot1@t{i}", KeyboardIdle=5000, LoadAvg=0.9) for i in range(4)]
        for i, ad in enumerate(ads[:12]):
            ad["Start"] = ExprTree(f"{_DESKTOP} && {i + 1}") if own else node
        got, calls = _slot_requirements(ads, job)
        want = [requirements_hold(ad, job) for ad in ads]
        assert want[:12] == [k > 900 and v < 0.3 for k, v in zip(idle, load)]
        assert got == want and True in want[:12] and False in want[:12]
        assert len(calls) == evaluations


@hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(codes=st.lists(st.integers(0, 70), min_size=1, max_size=40), spread=st.integers(1, 71))
def test_groups_and_dense_codes_are_what_a_sort_gives(codes, spread):
    """:func:`~.vstatic._groups` gives ``np.unique``'s first rows and groups (few codes
    counted, many sorted), and :func:`~.vstatic._dense` keeps equal codes equal and
    different ones different, each below the count of codes present."""
    import numpy as np

    from htc.daemons.negotiator.vstatic import _dense, _groups

    codes = np.array([c % spread for c in codes], dtype=np.int64)
    _, want_first, want_group = np.unique(codes, return_index=True, return_inverse=True)
    first, group = _groups(codes, spread)
    assert first.tolist() == want_first.tolist() and group.tolist() == want_group.tolist()
    dense, count = _dense(codes, spread)
    assert count == len(set(codes.tolist())) and dense.max() < count
    assert [[a == b for b in dense.tolist()] for a in dense.tolist()] == [
        [a == b for b in codes.tolist()] for a in codes.tolist()]


@pytest.mark.parametrize("rows", [12, 5])  # 3 strings: each compared once / row by row
def test_strings_compared_with_a_constant_group_by_what_the_comparisons_give(rows):
    """A column of strings compared with one constant groups its rows by (folded equal,
    exactly equal): against ``"linux"``, ``LINUX`` and ``Linux`` together and ``WINDOWS``
    apart; against ``"Linux"``, all three apart (one is exactly it); against two constants,
    by both. The verdicts are each slot's."""
    ads = [make_slot(f"slot1@m{i:02d}", OpSys=("LINUX", "Linux", "WINDOWS")[i % 3])
           for i in range(rows)]
    table = SlotTable([Slot(ad, ad["Name"]) for ad in ads])
    settings = NegotiatorSettings()
    compiler = PlanCompiler(settings, IdleSearch(settings).literal_wants, table)
    job = make_job()
    for text, evaluations in [('TARGET.OpSys == "linux"', 2), ('TARGET.OpSys =?= "Linux"', 3),
                              ('TARGET.OpSys == "linux" && TARGET.OpSys =!= "Linux"', 3)]:
        expr, got, calls = _grouped(compiler, job, text)
        assert got == [expr.eval(job, ad) is True for ad in ads], text
        assert calls == evaluations, text


@hsettings(max_examples=150, deadline=None)
@given(st.lists(st.text("aAbBßẞİi\u00e9", min_size=0, max_size=4), min_size=1, max_size=12),
       st.text("aAbBßẞİi\u00e9", min_size=0, max_size=4), st.booleans())
@example(["ẞ", "ß", "Ab", "ab", "a"], "ß", True)  # (str.lower folds ẞ to ß, fold does not)
@example(["ẞ", "ß", "Ab", "ab", "a"], "aB", False)
def test_a_string_column_compared_with_a_constant_has_the_codes_of_its_comparisons(
        values, constant, many):
    """:meth:`SlotGroups._string_codes` of one constant gives equal codes to the rows whose
    pair (folded equal, exactly equal) is equal, different ones to different pairs, numbered
    by the pair, on both paths (few distinct strings: each compared once; many: row by row,
    only the strings as long as the constant folded): ASCII and non-ASCII letters, strings
    longer, shorter and as long as the constant."""
    from htc.classad.operators import fold
    from htc.daemons.negotiator.vstatic import _PAIR_CODE, SlotGroups

    if not many:  # (each string four times over: the few-distinct path)
        values = values * 4
    ads = [make_slot(f"slot1@m{i:02d}", FileSystemDomain=v) for i, v in enumerate(values)]
    groups = SlotGroups([Slot(ad, ad["Name"]) for ad in ads], ())
    codes, count = groups._string_codes("filesystemdomain", (constant,))
    pairs = [_PAIR_CODE[fold(v) == fold(constant), v == constant] for v in values]
    assert count == len(set(pairs))
    assert codes.tolist() == [sorted(set(pairs)).index(p) for p in pairs]
