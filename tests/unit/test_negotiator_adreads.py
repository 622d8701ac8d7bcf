"""columns.AdReads: a table's rows read once per name, shared by its columns and vstatic's groups.

What the shared reads give must be what reading the ads at each call gave: the same trees, the
same literal values and classes, the same columns and grouping keys in whatever order the
table and the groups ask, and the carved names read again after a carve.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.classad import ClassAd, ExprTree
from htc.daemons.negotiator.columns import AdReads, SlotTable
from htc.daemons.negotiator.slots import Slot
from htc.daemons.negotiator.vexpr import Unsupported, scalar
from htc.daemons.negotiator.vstatic import SlotGroups, _literal_key

_ABSENT = object()  # the ad does not define the name
_VALUES = [_ABSENT, True, False, 0, 7, -3, 2 ** 53, 2 ** 53 + 1, 1.5, -0.0, math.nan, "x", "X",
           ExprTree("A + 1"), ExprTree("undefined"), ExprTree("error"), ExprTree("{1, 2}")]
_NAMES = ("a", "b", "cpus")


def _ads(rows) -> list[ClassAd]:
    ads = []
    for row in rows:
        ad = ClassAd({"Memory": 1})
        for name, value in zip(_NAMES, row):
            if value is not _ABSENT:
                ad[name.upper()] = value
        ads.append(ad)
    return ads


def _old_literal_keys(exprs, lname) -> list:
    """SlotGroups._literal_keys as it read the ads before AdReads (the reference)."""
    nodes = [e.get(lname) for e in exprs]
    if any(n is not None and not hasattr(n, "value") for n in nodes) or None in nodes:
        if all(n is None for n in nodes):
            return [("absent",)] * len(nodes)
    else:
        values = [n.value for n in nodes]
        classes = {type(v) for v in values}
        if len(classes) == 1 and classes <= {str, int, bool}:
            return values
    return [_literal_key(node, i) for i, node in enumerate(nodes)]


def _column_or_refusal(table, lname):
    try:
        tags, values = table.column(lname)
    except Unsupported:
        return None
    return [(int(t), float(v)) for t, v in zip(tags, values)]


def _expected_column(ads, lname):
    """Each row's ``scalar`` of its literal (MISSING where it lacks the name); None: refused."""
    out = []
    for ad in ads:
        node = ad._exprs.get(lname)
        if node is None:
            out.append((5, 0.0))
            continue
        if node.__class__.__name__ != "Literal":
            return None
        try:
            out.append(scalar(node.value))
        except Unsupported:
            return None
    return out


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN (a column of NaN reads as itself)."""
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(
        x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x)
                   and math.isnan(y)) or (isinstance(x, tuple) and _same(list(x), list(y)))
        for x, y in zip(a, b))


@hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(st.tuples(*[st.sampled_from(_VALUES)] * 3), min_size=1, max_size=7))
def test_reads_are_each_rows_tree_and_its_literal_values(rows):
    """nodes(): each row's tree (None where absent), the ad's own node; values(): each row's
    literal value and their classes, None when a row lacks the name or holds an expression."""
    ads = _ads(rows)
    exprs = [ad._exprs for ad in ads]
    reads = AdReads(exprs)
    for _ in range(2):  # (a second read gives what the first did)
        for lname in (*_NAMES, "memory", "nowhere"):
            nodes = reads.nodes(lname)
            assert len(nodes) == len(ads)
            assert all(n is e.get(lname) for n, e in zip(nodes, exprs))
            read = reads.values(lname)
            if any(n is None or n.__class__.__name__ != "Literal" for n in nodes):
                assert read is None
                continue
            values, classes = read
            assert all(v is n.value for v, n in zip(values, nodes))
            assert classes == {type(n.value) for n in nodes}


@hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(st.tuples(*[st.sampled_from(_VALUES)] * 3), min_size=1, max_size=7),
       groups_first=st.booleans())
def test_the_tables_columns_and_the_groups_keys_are_what_reading_the_ads_gives(rows,
                                                                            groups_first):
    """One table's columns and its groups' keys, read through the shared reads in either
    order, are each row's scalar (or the refusal) and the keys the ads give read apart."""
    ads = _ads(rows)
    slots = [Slot(ad, f"s{i}") for i, ad in enumerate(ads)]
    try:
        table = SlotTable(slots)
    except Unsupported:  # (a Cpus that is not a number: no table; test_negotiator_vexpr)
        return
    groups = SlotGroups(table.slots, (), table.reads)
    exprs = [ad._exprs for ad in ads]
    for lname in ("a", "b", "memory", "nowhere"):
        if groups_first:
            keys = groups._literal_keys(lname)
            column = _column_or_refusal(table, lname)
        else:
            column = _column_or_refusal(table, lname)
            keys = groups._literal_keys(lname)
        assert _same(column, _expected_column(ads, lname))
        assert _same(keys, _old_literal_keys(exprs, lname))


@hsettings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(st.tuples(*[st.sampled_from([_ABSENT, 0, 7, 1.5, "x"])] * 2,
                               st.sampled_from([0, 8, 2.5])), min_size=1, max_size=6),
       row=st.integers(0, 5), cpus=st.sampled_from([1, 3.5, 2 ** 53 + 1]))
def test_a_carved_name_is_read_as_it_is_after_a_carve(rows, row, cpus):
    """Cpus, Memory and Disk change during a cycle (a carve replaces their trees): the reads
    give the new tree and value after it; the other names keep what they read."""
    ads = _ads(rows)
    reads = AdReads([ad._exprs for ad in ads])
    before = {lname: (list(reads.nodes(lname)), reads.values(lname)) for lname in _NAMES}
    row %= len(ads)
    ads[row]["Cpus"] = cpus
    nodes = reads.nodes("cpus")
    assert nodes[row] is ads[row]._exprs["cpus"]
    values, classes = reads.values("cpus")
    assert values[row] == cpus and type(values[row]) in classes
    assert classes == {type(ad._exprs["cpus"].value) for ad in ads}
    for lname in ("a", "b"):
        assert reads.nodes(lname) == before[lname][0]
        assert reads.values(lname) == before[lname][1]


def test_a_table_of_case_ones_shape_reads_a_name_once_for_its_column_and_its_groups():
    """The column and the groups' keys of one name come from one pass over the ads (the
    point of sharing: the second asks no ad)."""
    ads = [ClassAd({"Cpus": 4, "Memory": 8, "Arch": "X86_64", "KFlops": 100 + i % 3})
           for i in range(50)]
    table = SlotTable([Slot(ad, f"s{i}") for i, ad in enumerate(ads)])
    groups = SlotGroups(table.slots, (), table.reads)
    assert groups._literal_keys("kflops") == [100 + i % 3 for i in range(50)]
    for ad in ads:  # (a name no carve changes is not read again from the ads)
        ad._exprs["kflops"] = ad._exprs["arch"]
    assert np.array_equal(table.column("kflops")[1], [100 + i % 3 for i in range(50)])
    with pytest.raises(Unsupported):
        table.column("arch")
    assert groups._literal_keys("arch") == ["X86_64"] * 50
