"""The compiled column expressions of the vector search evaluate as ClassAd does (issue #19,
"Fast"): random expressions over random slot and job ads (integers, reals, booleans,
UNDEFINED and ERROR literals, missing attributes, mixed types in one column), each compiled
by :mod:`htc.daemons.negotiator.vexpr` (tagged) and :mod:`htc.daemons.negotiator.vtyped`
(typed), compared slot by slot with ``ExprTree.eval``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.classad import ClassAd, ExprTree
from htc.classad.values import Value
from htc.daemons.negotiator.columns import SlotTable
from htc.daemons.negotiator.slots import Slot
from htc.daemons.negotiator.vexpr import (Inexact, Unsupported, compile_vector, holds, ranks,
                                          scalar)
from htc.daemons.negotiator.vtyped import _beyond, _overflowed, compile_template, compile_typed

_VALUES = st.one_of(st.integers(-5, 5), st.sampled_from([0.0, 0.5, -2.5, 3.0, 1e308]),
                    st.booleans(), st.sampled_from(["undefined", "error", None]))
_SLOT_NAMES = ["A", "B", "Cpus", "Memory"]
_JOB_NAMES = ["J", "K", "A"]  # A: a name both ads may define


def _literal(v) -> str:
    if v is True or v is False:
        return "true" if v else "false"
    return repr(v) if not isinstance(v, str) else v


@st.composite
def _expr(draw, depth=0, calls=False):
    if depth > 3 or draw(st.integers(0, 3)) == 0:
        kind = draw(st.integers(0, 3))
        if kind == 0:
            v = draw(_VALUES)
            return "undefined" if v is None else _literal(v)
        name = draw(st.sampled_from(_SLOT_NAMES + _JOB_NAMES + ["X"]))
        return draw(st.sampled_from([name, f"TARGET.{name}", f"MY.{name}"]))
    op = draw(st.sampled_from(["+", "-", "*", "/", "<", "<=", ">", ">=", "==", "!=", "=?=",
                               "=!=", "&&", "||", "!", "neg", "?:"]
                              + (["isUndefined", "ifThenElse"] if calls else [])))
    sub = _expr(depth + 1, calls)
    if op == "!":
        return f"!({draw(sub)})"
    if op == "neg":
        return f"-({draw(sub)})"
    if op == "?:":
        return f"(({draw(sub)}) ? ({draw(sub)}) : ({draw(sub)}))"
    if op == "isUndefined":  # (also of the wrong number of arguments: ClassAd's ERROR)
        name = draw(st.sampled_from(["isUndefined", "ISUNDEFINED", "isundefined"]))
        return f"{name}({', '.join(draw(st.lists(sub, min_size=1, max_size=2)))})"
    if op == "ifThenElse":
        name = draw(st.sampled_from(["ifThenElse", "ifthenElse", "IFTHENELSE"]))
        return f"{name}({', '.join(draw(st.lists(sub, min_size=2, max_size=3)))})"
    return f"(({draw(sub)}) {op} ({draw(sub)}))"


@st.composite
def _ad(draw, names, uniform):
    values = {}
    for name in names:
        v = draw(uniform[name] if uniform else _VALUES)
        if v is not None:
            values[name] = v
    text = "; ".join(f"{k} = {_literal(v)}" for k, v in values.items())
    return ClassAd(f"[ {text} ]")


def _same(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] < 2:  # UNDEFINED, ERROR: no value
        return True
    return a[1] == b[1] or (math.isnan(a[1]) and math.isnan(b[1]))


def _check(text, slots, job, slot_is_my):
    expr = ExprTree(text)
    try:
        table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
    except Unsupported:
        return  # Cpus, Memory or Disk not a number: the search does not build a table then
    rows = table.rows()
    expected = []
    for ad in slots:
        value = expr.eval(ad, job) if slot_is_my else expr.eval(job, ad)
        try:
            expected.append(scalar(value))
        except Unsupported:
            return  # a type the compiler never sees (a string): nothing to compare
    try:
        tags, values = compile_vector(expr.node, job, slot_is_my)(rows)
    except (Unsupported, Inexact):
        tags = None
    if tags is not None:
        tags = np.broadcast_to(np.asarray(tags), (len(slots),))
        values = np.broadcast_to(np.asarray(values, dtype=float), (len(slots),))
        got = [(int(t), float(v)) for t, v in zip(tags, values)]
        assert all(_same(g, e) for g, e in zip(got, expected)), (text, got, expected)
        # what the search derives from the values
        held = holds((tags, values))
        assert list(held) == [e[0] >= 2 and e[1] != 0 for e in expected]
        ranked = ranks((tags, values), -1.0)
        assert all(_same((4, r), (4, e[1] if e[0] >= 2 and not math.isnan(e[1]) else -1.0))
                   for r, e in zip(ranked, expected))
    try:
        tag, fn = compile_typed(expr.node, job, slot_is_my, table)
        values = fn(rows)
    except (Unsupported, Inexact):
        return
    values = np.broadcast_to(np.asarray(values, dtype=float), (len(slots),))
    got = [(tag, float(v)) for v in values]
    assert all(_same(g, e) for g, e in zip(got, expected)), ("typed", text, got, expected)


@hsettings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_expr(), slots=st.lists(_ad(_SLOT_NAMES, None), min_size=1, max_size=6),
       job=_ad(_JOB_NAMES, None), slot_is_my=st.booleans())
def test_compiled_expressions_evaluate_as_classad_does(text, slots, job, slot_is_my):
    _check(text, slots, job, slot_is_my)


def test_a_real_divided_by_an_integer_negative_zero_is_minus_infinity():
    """``0 * J`` with ``J = -1`` is the integer 0 (numpy's -0.0): -2.5 / it is -infinity, as
    ClassAd says, not numpy's +infinity (then ERROR)."""
    slot = ClassAd({"A": 0, "Cpus": 0, "Memory": 0})
    job = ClassAd({"J": -1})
    assert ExprTree("-2.5 / (0 * J)").eval(job, slot) == -math.inf
    _check("-2.5 / (0 * J)", [slot], job, False)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("text", ["A * A", "A + A", "A - -A", "A / 0.5", "A * J",
                                  "(-A - A) - (-A - A)", "(-A - A) * 0.0", "-A - A"])
def test_a_real_overflow_is_computed_without_a_warning(text):
    """A real that overflows to +infinity is ClassAd's ERROR (the typed form raises Inexact
    and the tagged form gives ERROR); -infinity and NaN are values. Numpy computes them without
    a RuntimeWarning (here an error), and both forms still agree with ClassAd."""
    slots = [ClassAd({"A": 1e308, "Cpus": 1, "Memory": 1}), ClassAd({"A": 2.0, "Cpus": 1,
                                                                     "Memory": 1})]
    job = ClassAd({"J": 1e308})
    for slot_is_my in (True, False):
        _check(text, slots, job, slot_is_my)
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
    tag, fn = compile_typed(ExprTree(text).node, job, True, table)
    if ExprTree(text).eval(slots[0], job) is Value.Error:
        with pytest.raises(Inexact):
            fn(table.rows())
    else:
        fn(table.rows())  # -infinity or NaN: a value, computed quietly


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_clauses_comparison_overflows_quietly_and_raises():
    """A clause's comparison of numbers (``Template.test``, what a Requirements clause asks)
    runs its real arithmetic under the template's one errstate too: an overflow raises
    Inexact without a RuntimeWarning (here an error), and a value below it compares."""
    slots = [ClassAd({"A": 1e308, "Cpus": 1, "Memory": 4}), ClassAd({"A": 2.0, "Cpus": 1,
                                                                     "Memory": 4})]
    job = ClassAd({"J": 1})
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
    template = compile_template(ExprTree("Memory * A >= J").node, job, True, table)
    assert template.test is not None and not template.safe
    p = template.values(job)
    with pytest.raises(Inexact):
        template.test(table.rows(), p)
    assert list(template.test(table.rows(np.array([1])), p)) == [True]


def test_the_overflow_test_finds_plus_infinity_behind_a_nan():
    """_overflowed: +infinity anywhere (also where a NaN makes the maximum NaN), never
    -infinity, NaN or finite values alone; empty arrays and numbers too."""
    inf, nan = math.inf, math.nan
    for values, out in [([1.0, 2.0], False), ([-inf, 1.0], False), ([nan, 1.0], False),
                        ([nan, inf], True), ([inf, nan], True), ([1.0, inf], True),
                        ([-inf, nan, 3.0], False), ([], False)]:
        assert _overflowed(np.array(values, dtype=float)) is out, values
    assert _overflowed(np.array(inf)) and not _overflowed(np.array(-inf))
    assert _overflowed(inf) and _overflowed(np.float64(inf))
    assert not _overflowed(nan) and not _overflowed(-inf) and not _overflowed(1e308)


def test_the_integer_test_finds_a_magnitude_beyond_2_to_the_53():
    """_beyond: a value above 2**53 or below -2**53 anywhere; 2**53 itself is exact."""
    big = float(2 ** 53)
    for values, out in [([1.0, -big], False), ([big, 0.0], False), ([0.0, big + 2], True),
                        ([-(big + 2), 1.0], True), ([], False)]:
        assert _beyond(np.array(values, dtype=float)) is out, values
    assert _beyond(big + 2) and _beyond(-(big + 2)) and not _beyond(-big)
    assert _beyond(np.array(-(big + 2))) and not _beyond(np.array(big))


_UNIFORM = {"A": st.integers(-3, 3), "B": st.sampled_from([0.5, 2.0, -1.5]),
            "Cpus": st.integers(0, 8), "Memory": st.integers(0, 4096),
            "J": st.integers(-3, 3), "K": st.sampled_from([0.0, 1.5]), "X": st.none()}


@hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_expr(), slots=st.lists(_ad(_SLOT_NAMES, _UNIFORM), min_size=1, max_size=6),
       job=_ad(_JOB_NAMES, _UNIFORM), slot_is_my=st.booleans())
def test_uniform_columns_take_the_typed_form_and_agree(text, slots, job, slot_is_my):
    """Columns of one type each (a real pool's): the typed form applies, and agrees."""
    _check(text, slots, job, slot_is_my)


@hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_expr(calls=True), slots=st.lists(_ad(_SLOT_NAMES, None), min_size=1, max_size=6),
       uniform=st.lists(_ad(_SLOT_NAMES, _UNIFORM), min_size=1, max_size=6),
       job=_ad(_JOB_NAMES, _UNIFORM), slot_is_my=st.booleans())
def test_the_calls_of_the_default_post_job_rank_evaluate_as_classad_does(text, slots, uniform,
                                                                         job, slot_is_my):
    """isUndefined and ifThenElse (any case, any number of arguments) in the typed form: as
    ExprTree.eval says, over columns of mixed types and of one type."""
    _check(text, slots, job, slot_is_my)
    _check(text, uniform, job, slot_is_my)


def test_the_calls_raise_what_classad_gives_error():
    """isUndefined of an operand that is ERROR on a row (UNDEFINED on the others' types, an
    integer division by zero beside) is false there: the typed form raises Inexact, not true;
    a call of the wrong number of arguments (ClassAd's ERROR) is not compiled."""
    slots = [ClassAd({"A": 0, "Cpus": 1, "Memory": 1}), ClassAd({"A": 2, "Cpus": 1, "Memory": 1})]
    job = ClassAd({"J": 1})
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
    expr = ExprTree("isUndefined((J / A) + X)")
    assert [expr.eval(ad, job) for ad in slots] == [False, True]
    tag, fn = compile_typed(expr.node, job, True, table)
    with pytest.raises(Inexact):
        fn(table.rows())
    for text in ("ifThenElse(true, 1)", "ifThenElse(true, 1, 2, 3)", "isUndefined()",
                 "isUndefined(X, X)", "isError(X)"):
        assert ExprTree(text).eval(slots[0], job) in (Value.Error, False), text
        with pytest.raises(Unsupported):
            compile_typed(ExprTree(text).node, job, True, table)


def test_the_typed_form_takes_the_default_post_job_rank():
    """HTCondor's NEGOTIATOR_POST_JOB_RANK (ifThenElse, isUndefined) compiles typed, a REAL
    of the values ClassAd gives, KFlops defined on every slot, or on none and by the job. Where
    neither defines it, ifThenElse's branches are of two types (1000 and UNDEFINED): outside
    the typed subset (the search evaluates it per group of slots)."""
    from htc.daemons.negotiator.settings import DEFAULT_POST_JOB_RANK

    expr = ExprTree(DEFAULT_POST_JOB_RANK)
    slots = [ClassAd({"Cpus": 8, "Memory": 4096, "SlotID": 1})]
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
    with pytest.raises(Unsupported):
        compile_typed(expr.node, ClassAd({"RequestCpus": 1}), True, table)
    for job, kflops, first in (({}, (2100000, 1500000), 2100000 - 1),
                               ({"KFlops": 7}, (None, None), 7 - 1)):
        job = ClassAd({"RequestCpus": 1} | job)
        slots = [ClassAd({"Cpus": 8, "Memory": 4096, "SlotID": i + 1} | (
            {} if k is None else {"KFlops": k})) for i, k in enumerate(kflops)]
        table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
        tag, fn = compile_typed(expr.node, job, True, table)
        assert list(fn(table.rows())) == [expr.eval(ad, job) for ad in slots]
        assert expr.eval(slots[0], job) == first


def test_the_typed_form_takes_the_default_pre_job_rank():
    from htc.daemons.negotiator.settings import DEFAULT_PRE_JOB_RANK

    slots = [ClassAd({"Cpus": c, "Memory": m, "Rank": 0.0}) for c, m in ((8, 4096), (2, 512))]
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
    job = ClassAd({"RequestCpus": 1})
    tag, fn = compile_typed(ExprTree(DEFAULT_PRE_JOB_RANK).node, job, True, table)
    assert list(fn(table.rows())) == [
        ExprTree(DEFAULT_PRE_JOB_RANK).eval(ad, job) for ad in slots]


@hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(values=st.lists(st.one_of(
    st.sampled_from([None, True, False, 0, 1, -7, 2 ** 53, -(2 ** 53), 2 ** 53 + 1, 0.5, -0.0,
                     "undefined", "error", '"x"', "A + 1"])), min_size=1, max_size=8),
    first=st.sampled_from([None, 3, 2.5, True, '"x"']))
def test_a_column_is_each_slots_scalar_value(values, first):
    """The slot table's column of a name: per row the literal's ``scalar`` (MISSING where the
    slot lacks it), or Unsupported when one slot holds what ``scalar`` refuses (a string, an
    expression, an integer beyond 2**53), however the column was built."""
    texts = [first] + values
    ads = [ClassAd(f"[ Cpus = 1; Memory = 1{'' if v is None else f'; A = {v}'} ]")
           for v in texts]
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(ads)])
    expected = []
    for ad in ads:
        node = ad._exprs.get("a")
        if node is None:
            expected.append((5, 0.0))
            continue
        try:
            expected.append(scalar(ad["A"]) if node.__class__.__name__ == "Literal" else None)
        except Unsupported:
            expected.append(None)
    if None in expected:
        with pytest.raises(Unsupported):
            table.column("a")
        return
    tags, column = table.column("a")
    assert tags.dtype == np.int8
    assert [(int(t), float(v)) for t, v in zip(tags, column)] == expected


@hsettings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(values=st.lists(st.tuples(*[st.sampled_from([None, 0, 8, 2 ** 53 + 1, 1.5, -0.0, True,
                                                    '"x"', "A + 1"])] * 3),
                       min_size=1, max_size=6))
def test_the_tables_carved_resources_are_read_row_by_row_or_at_once_alike(values):
    """``SlotTable.res``: each slot's Cpus, Memory and Disk as numbers (NaN where missing),
    whether every row is a literal number (read at once) or not (row by row); a slot whose
    resource is not a number (a boolean, a string, an expression) is refused by name."""
    ads = []
    for row in values:
        parts = [f"{name} = {v}" for name, v in zip(("Cpus", "Memory", "Disk"), row)
                 if v is not None]
        ads.append(ClassAd(f"[ {'; '.join(parts)} ]"))
    slots = [Slot(ad, f"s{i}") for i, ad in enumerate(ads)]
    bad = next((f"s{i}" for i, row in enumerate(values) for v in row
                if v is True or isinstance(v, str)), None)
    if bad is not None:
        with pytest.raises(Unsupported, match=f"^{bad}: "):
            SlotTable(slots)
        return
    table = SlotTable(slots)
    expected = [[math.nan if v is None else float(v) for v in row] for row in values]
    assert np.array_equal(table.res, np.array(expected).T.reshape(3, len(values)),
                          equal_nan=True)


@hsettings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(values=st.lists(st.tuples(*[st.sampled_from([None, 0, 8, -3, 2 ** 53, 2 ** 53 + 1, 1.5,
                                                    -0.0])] * 3),
                       min_size=1, max_size=6),
       carve=st.tuples(st.integers(0, 5), st.sampled_from([1, 2.5, 2 ** 53 + 1])))
def test_the_carved_columns_are_each_slots_scalar_value_before_and_after_a_carve(values, carve):
    """``Cpus``, ``Memory`` and ``Disk`` columns (made with ``res`` when every row is a literal
    number) hold each row's ``scalar`` as the column of any other name does (Unsupported for an
    integer beyond 2**53), and after a carve and ``update`` what a fresh table reads."""
    def ads_of(rows):
        out = []
        for row in rows:
            parts = [f"{name} = {v}" for name, v in zip(("Cpus", "Memory", "Disk"), row)
                     if v is not None]
            out.append(ClassAd(f"[ {'; '.join(parts)} ]"))
        return out

    def check(table, ads, fresh=True, refused=()):
        """Check the three columns; return the names refused (which stay refused)."""
        out = set()
        for lname in ("cpus", "memory", "disk"):
            if lname in refused:
                with pytest.raises(Unsupported):
                    table.column(lname)
                out.add(lname)
                continue
            expected = []
            for ad in ads:
                node = ad._exprs.get(lname)
                try:
                    expected.append((5, 0.0) if node is None else scalar(node.value))
                except Unsupported:
                    expected.append(None)
            if None in expected:
                with pytest.raises(Unsupported):
                    table.column(lname)
                out.add(lname)
                continue
            tags, column = table.column(lname)
            assert tags.dtype == np.int8 and column.dtype == float
            assert [(int(t), float(v)) for t, v in zip(tags, column)] == expected
            if fresh:  # (after a carve a column once mixed may stay marked mixed)
                uniform = table.uniform(lname)
                assert uniform == (int(tags[0]) if (tags == tags[0]).all() else None)
        return out

    ads = ads_of(values)
    slots = [Slot(ad, f"s{i}") for i, ad in enumerate(ads)]
    table = SlotTable(slots)
    refused = check(table, ads)
    row, amount = carve[0] % len(ads), carve[1]
    slots[row].ad["Cpus"] = amount  # (a carve writes a literal number)
    try:
        table.update(slots[row])
    except Unsupported:  # (update reads all three of the row)
        assert any(isinstance(v, int) and v > 2 ** 53 for v in (amount, *values[row][1:]))
        return
    check(table, ads, fresh=False, refused=refused)
    fresh = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(ads)])
    check(fresh, ads)


@hsettings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(slots=st.lists(_ad(_SLOT_NAMES, _UNIFORM), min_size=1, max_size=6), data=st.data())
def test_a_typed_read_of_a_column_is_its_values_over_the_rows(slots, data):
    """vtyped._values: the values of Rows.column (every row, some rows, carved resources
    replaced), without the tags."""
    from htc.daemons.negotiator.vtyped import _values

    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(slots)])
    index = np.array(data.draw(st.lists(st.integers(0, len(slots) - 1), max_size=6)), dtype=int)
    carved = {lname: (np.full(index.size, 3, dtype=np.int8),
                      np.arange(index.size, dtype=float) + k)
              for k, lname in enumerate(("cpus", "memory", "disk"))}
    for rows in (table.rows(), table.rows(index), table.rows(index, carved)):
        for lname in ("a", "b", "cpus", "memory"):
            want = rows.column(lname)[1]
            got = _values(rows, lname)
            assert np.array_equal(got, want, equal_nan=True) and got.shape == want.shape
