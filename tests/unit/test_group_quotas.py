"""Hierarchical group quotas: quota arithmetic (with properties), surplus, and the cycle."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htc.daemons.negotiator.accountant import AccountantSettings
from htc.daemons.negotiator.groups import (ROOT, GroupSettings, allocate, assign_quotas,
                                           build_tree, group_order)
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.errors import UsageError
from tests.negotiator_cycles import make_job, make_slot, run_cycle


def _tree(names, **kw):
    return build_tree(names, GroupSettings(**kw))


def _quotas(root):
    return {n.name: round(n.quota, 9) for n in root.walk()}


# ----------------------------------------------------------------- quotas


def test_static_quotas_are_given_and_the_root_keeps_the_rest():
    root = _tree(["a", "b"], static_quotas={"a": 30, "b": 20})
    assign_quotas(root, 100)
    assert _quotas(root) == {ROOT: 50.0, "a": 30.0, "b": 20.0}


def test_static_quotas_beyond_the_parent_are_scaled_down_in_proportion():
    root = _tree(["a", "b"], static_quotas={"a": 300, "b": 100})
    assign_quotas(root, 100)
    assert _quotas(root) == {ROOT: 0.0, "a": 75.0, "b": 25.0}


def test_dynamic_quotas_share_what_the_static_ones_left():
    root = _tree(["a", "b", "c"], static_quotas={"a": 40}, dynamic_quotas={"b": 0.5, "c": 0.25})
    assign_quotas(root, 100)
    assert _quotas(root) == {ROOT: 15.0, "a": 40.0, "b": 30.0, "c": 15.0}
    over = _tree(["b", "c"], dynamic_quotas={"b": 1.0, "c": 1.0})  # fractions summing > 1
    assign_quotas(over, 10)
    assert _quotas(over) == {ROOT: 0.0, "b": 5.0, "c": 5.0}


def test_subgroups_divide_their_parents_quota():
    root = _tree(["phys.theory", "phys", "chem"], static_quotas={"phys": 60, "chem": 40},
                 dynamic_quotas={"phys.theory": 0.5})
    assign_quotas(root, 100)
    assert _quotas(root) == {ROOT: 0.0, "chem": 40.0, "phys": 30.0, "phys.theory": 30.0}
    assert [c.name for c in root.children] == ["chem", "phys"]


def test_bad_group_settings_are_refused():
    with pytest.raises(UsageError, match="GROUP_QUOTA_DYNAMIC_b"):
        GroupSettings(dynamic_quotas={"b": 1.5})
    with pytest.raises(UsageError, match="GROUP_SORT_EXPR"):
        GroupSettings(sort_expr="GroupQuota >")
    with pytest.raises(UsageError, match="twice"):
        build_tree(["a", "A"], GroupSettings())


# Quota trees: a few top-level groups, some with subgroups; each static or dynamic.
_names = st.lists(st.sampled_from(["a", "b", "c", "a.x", "a.y", "b.z"]), unique=True, max_size=6)


@st.composite
def _configs(draw):
    names = draw(_names)
    static, dynamic = {}, {}
    for name in names:
        if draw(st.booleans()):
            static[name] = draw(st.floats(0, 200, allow_nan=False))
        else:
            dynamic[name] = draw(st.floats(0, 1))
    surplus = {n: draw(st.booleans()) for n in names}
    return names, GroupSettings(static_quotas=static, dynamic_quotas=dynamic,
                                accept_surplus_by_group=surplus)


@settings(max_examples=200, deadline=None)
@given(_configs(), st.floats(0, 1000, allow_nan=False))
def test_quotas_never_create_or_lose_slots(config, pool):
    names, gs = config
    root = build_tree(names, gs)
    assign_quotas(root, pool)
    assert all(n.quota >= 0 for n in root.walk())
    assert sum(n.quota for n in root.walk()) == pytest.approx(pool, rel=1e-9, abs=1e-9)
    for node in root.walk():
        if node.children:  # children together never get more than their parent had
            assert sum(c.subtree_quota for c in node.children) <= node.subtree_quota * (1 + 1e-9) + 1e-9


@settings(max_examples=200, deadline=None)
@given(_configs(), st.floats(0, 1000, allow_nan=False), st.data())
def test_allocation_respects_requests_quotas_and_the_pool(config, pool, data):
    names, gs = config
    root = build_tree(names, gs)
    requested = {n.name: data.draw(st.floats(0, 300, allow_nan=False)) for n in root.walk()}
    allocated = allocate(root, pool, requested)
    total = sum(allocated.values())
    assert total <= pool * (1 + 1e-9) + 1e-6
    for node in root.walk():
        got = allocated[node.name]
        assert -1e-9 <= got <= requested[node.name] + 1e-6
        # a group that refuses surplus gets no more than its subtree's quota (its own children's
        # unused quota comes back to it: HTCondor shares a subtree's surplus within it first)
        if not node.accept_surplus:
            assert got <= node.subtree_quota + 1e-6
    # nothing useful is left idle: while a group that may take surplus (it and every group above
    # it accept surplus) still wants slots, every slot goes to someone
    open_path = {ROOT: True}
    for node in root.walk():
        for child in node.children:
            open_path[child.name] = open_path[node.name] and child.accept_surplus
    wanting = [n for n in root.walk()
               if requested[n.name] - allocated[n.name] > 1e-6 and open_path[n.name]]
    if wanting and total < pool - 1e-6:
        pytest.fail(f"{pool - total} slots unallocated while {[n.name for n in wanting]} want more")


def test_surplus_goes_to_groups_that_accept_it_in_proportion_to_quota():
    gs = GroupSettings(static_quotas={"a": 20, "b": 10, "c": 70}, accept_surplus=True)
    root = build_tree(["a", "b", "c"], gs)
    got = allocate(root, 100, {"a": 100, "b": 100, "c": 10})
    assert got == pytest.approx({ROOT: 0.0, "a": 60.0, "b": 30.0, "c": 10.0})
    refuse = GroupSettings(static_quotas={"a": 20, "b": 10, "c": 70},
                           accept_surplus_by_group={"b": False}, accept_surplus=True)
    got = allocate(build_tree(["a", "b", "c"], refuse), 100, {"a": 100, "b": 100, "c": 10})
    assert got == pytest.approx({ROOT: 0.0, "a": 80.0, "b": 10.0, "c": 10.0})


def test_without_surplus_a_group_gets_its_quota_only():
    root = build_tree(["a", "b"], GroupSettings(static_quotas={"a": 50, "b": 50}))
    assert allocate(root, 100, {"a": 100, "b": 0}) == {ROOT: 0.0, "a": 50.0, "b": 0.0}


def test_group_sort_expr_orders_by_usage_over_quota_with_the_root_last():
    root = build_tree(["a", "b"], GroupSettings(static_quotas={"a": 10, "b": 10}))
    allocate(root, 30, {})
    usage = {"a": 8.0, "b": 2.0, ROOT: 0.0}
    for node in root.walk():
        node.usage = usage[node.name]
    assert [n.name for n in group_order(root, GroupSettings())] == ["b", "a", ROOT]
    by_name = GroupSettings(sort_expr='AccountingGroup == "a" ? 0 : 1')
    assert [n.name for n in group_order(root, by_name)][0] == "a"


# ----------------------------------------------------------------- in the cycle


def _group_settings(**kw) -> NegotiatorSettings:
    return NegotiatorSettings(accountant=AccountantSettings(group_names=("group_a", "group_b")),
                              groups=GroupSettings(**kw))


def _jobs(a: int, b: int):
    return {"group_a.alice@x": [(make_job("alice"), a)], "group_b.bob@x": [(make_job("bob"), b)]}


def _by_submitter(result):
    out = {}
    for m in result.matches:
        out[m.submitter] = out.get(m.submitter, 0) + 1
    return out


def test_groups_get_their_static_quotas():
    slots = [make_slot(f"slot1@n{i}") for i in range(8)]
    result, _ = run_cycle(slots, _jobs(10, 10),
                          settings=_group_settings(static_quotas={"group_a": 6, "group_b": 2}))
    assert _by_submitter(result) == {"group_a.alice@x": 6, "group_b.bob@x": 2}


def test_an_idle_groups_quota_goes_to_others_only_with_accept_surplus():
    slots = [make_slot(f"slot1@n{i}") for i in range(8)]
    quotas = {"group_a": 4, "group_b": 4}
    result, _ = run_cycle(slots, _jobs(10, 1), settings=_group_settings(static_quotas=quotas))
    assert _by_submitter(result) == {"group_a.alice@x": 4, "group_b.bob@x": 1}
    result, _ = run_cycle(slots, _jobs(10, 1),
                          settings=_group_settings(static_quotas=quotas, accept_surplus=True))
    assert _by_submitter(result) == {"group_a.alice@x": 7, "group_b.bob@x": 1}


def test_a_group_that_matches_nothing_hands_its_allocation_on_in_the_next_round():
    slots = [make_slot(f"slot1@n{i}") for i in range(6)]
    jobs = _jobs(10, 10)
    jobs["group_b.bob@x"] = [(make_job("bob", OpSys_wanted=1, exprs={
        "Requirements": 'TARGET.OpSys == "WINDOWS"'}), 10)]
    quotas = {"group_a": 3, "group_b": 3}
    result, _ = run_cycle(slots, jobs, settings=_group_settings(static_quotas=quotas,
                                                                  accept_surplus=True))
    assert _by_submitter(result) == {"group_a.alice@x": 6}
    one_round = _group_settings(static_quotas=quotas, accept_surplus=True, max_allocation_rounds=1)
    result, _ = run_cycle(slots, jobs, settings=one_round)
    assert _by_submitter(result) == {"group_a.alice@x": 3}


def test_group_knobs_come_from_the_configuration(tmp_path):
    from htc.config import load_config

    cfg = tmp_path / "htc_config"
    cfg.write_text("GROUP_NAMES = group_a, group_b\nGROUP_QUOTA_group_a = 10\n"
                   "GROUP_QUOTA_DYNAMIC_group_b = 0.25\nGROUP_ACCEPT_SURPLUS = True\n"
                   "GROUP_ACCEPT_SURPLUS_group_b = False\nGROUP_PRIO_FACTOR_group_a = 20\n"
                   "GROUP_QUOTA_MAX_ALLOCATION_ROUNDS = 2\n")
    config = load_config("NEGOTIATOR", env={"HTC_CONFIG": str(cfg), "HTC_HOME": str(tmp_path)})
    s = NegotiatorSettings.from_config(config)
    assert s.groups.static_quotas == {"group_a": 10.0}
    assert s.groups.dynamic_quotas == {"group_b": 0.25}
    assert s.groups.surplus_for("group_a") and not s.groups.surplus_for("group_b")
    assert s.groups.max_allocation_rounds == 2
    assert s.accountant.group_prio_factors == {"group_a": 20.0}
    from htc.daemons.negotiator.accountant import Accountant
    assert Accountant(s.accountant).priority_factor("group_a.alice@x") == 20.0
    bad = tmp_path / "bad"
    bad.write_text("GROUP_NAMES = g\nGROUP_QUOTA_g = lots\n")
    config = load_config("NEGOTIATOR", env={"HTC_CONFIG": str(bad), "HTC_HOME": str(tmp_path)})
    with pytest.raises(UsageError, match="GROUP_QUOTA_g = 'lots' is not a number"):
        NegotiatorSettings.from_config(config)
