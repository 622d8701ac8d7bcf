"""NEGOTIATOR_POLICY = UPDOWN: the 1988 schedule index, its order and its preemption."""

from __future__ import annotations

import pytest

from htc.classad import ClassAd
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.core import Negotiator
from htc.daemons.negotiator.events import PoolAds, RequestsReceived, SaveAccountant, Wakeup
from htc.daemons.negotiator.preemption import PreemptState
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slotreads import claimed_resources
from htc.daemons.negotiator.updown import (UpDownIndex, UpDownSettings, order_by_index,
                                           poll_counts)
from htc.daemons.negotiator.submitters import SubmitterAd
from htc.errors import UsageError
from tests.negotiator_cycles import claimed, make_job, make_slot, matched, run_cycle

UD = UpDownSettings()
MIN = 60.0
UPDOWN = NegotiatorSettings(policy="UPDOWN")


def _poll(idx: UpDownIndex, minutes: float, running=None, queued=None, settings=UD):
    now = (idx.last_update_time or 0.0) + minutes * MIN
    idx.update(now, running or {}, queued or {}, settings)


def _started(*, settings=UD) -> UpDownIndex:
    idx = UpDownIndex()
    idx.update(0.0, {}, {}, settings)  # the first poll only starts the clock
    return idx


# ----------------------------------------------------------------- the arithmetic (§5.3)


def test_one_running_job_for_an_hour_raises_the_index_by_sixty():
    idx = _started()
    _poll(idx, 60, running={"heavy": 1})
    assert idx.index("heavy") == 60.0
    _poll(idx, 30, running={"heavy": 2}, queued={"heavy": 1})  # running wins over waiting
    assert idx.index("heavy") == 120.0


def test_waiting_lowers_the_index_without_a_floor():
    idx = _started()
    _poll(idx, 10, queued={"light": 1})
    assert idx.index("light") == -10.0
    _poll(idx, 1000, queued={"light": 1})
    assert idx.index("light") == -1010.0


def test_an_idle_entity_is_clamped_to_the_cap_then_forgets_in_ten_hours():
    idx = _started()
    idx.set_index("heavy", 900.0)
    _poll(idx, 2)
    assert idx.index("heavy") == 600.0
    _poll(idx, 300)
    assert idx.index("heavy") == 300.0
    _poll(idx, 300)
    assert idx.index("heavy") == 0.0
    assert "heavy" not in idx.indices()  # forgotten: back where every entity starts


def test_a_negative_index_recovers_to_zero_and_no_further():
    idx = _started()
    idx.set_index("light", -30.0)
    _poll(idx, 20)
    assert idx.index("light") == -10.0
    _poll(idx, 20)
    assert idx.index("light") == 0.0


def test_the_first_poll_and_a_clock_going_back_change_nothing():
    idx = UpDownIndex()
    idx.update(100.0, {"a": 3}, {}, UD)
    assert idx.index("a") == 0.0
    idx.update(50.0, {"a": 3}, {}, UD)
    assert idx.index("a") == 0.0
    idx.update(50.0 + 120, {"a": 3}, {}, UD)
    assert idx.index("a") == 6.0


def test_the_update_prio_rule_counts_users_minus_running_each_cycle():
    rule = UpDownSettings(rule="UPDATE_PRIO", entity="SCHEDD")
    subs = [SubmitterAd("a@x", "station1", idle_jobs=3, running_jobs=2),
            SubmitterAd("b@x", "station1", idle_jobs=1),
            SubmitterAd("c@x", "station2", running_jobs=4)]
    running, queued = poll_counts(subs, rule)
    assert (running, queued) == ({"station1": 2, "station2": 4}, {"station1": 2})
    idx = UpDownIndex()
    idx.update(0.0, running, queued, rule)
    idx.update(1.0, running, queued, rule)
    # Condor 4's Prio + Users - Running per cycle (higher better), kept as lower-is-better
    assert idx.indices() == {"station1": 0.0, "station2": 8.0}


def test_settings_are_checked():
    with pytest.raises(UsageError, match="UPDOWN_RULE"):
        UpDownSettings(rule="SOMETHING")
    with pytest.raises(UsageError, match="UPDOWN_UNIT"):
        UpDownSettings(unit=0)
    with pytest.raises(UsageError, match="NEGOTIATOR_POLICY"):
        NegotiatorSettings(policy="LOTTERY")
    assert NegotiatorSettings(policy="updown").policy == "UPDOWN"


# ----------------------------------------------------------------- order and allocation


def _acct(**indices) -> Accountant:
    acct = Accountant(now=0.0)
    for name, value in indices.items():
        acct.updown.set_index(f"{name}@x", value)
    return acct


def test_submitters_go_in_ascending_index_and_there_is_no_pie():
    slots = [make_slot(f"slot1@n{i}") for i in range(4)]
    acct = _acct(heavy=100.0, light=-10.0)
    acct.set_real_priority("light@x", 1000.0)  # its EUP is far worse: UPDOWN does not care
    jobs = {"heavy@x": [(make_job("heavy"), 10)], "light@x": [(make_job("light"), 3)]}
    result, _ = run_cycle(slots, jobs, acct=acct, settings=UPDOWN)
    assert [s for s, _ in matched(result)] == ["light@x"] * 3 + ["heavy@x"]
    result, _ = run_cycle(slots, jobs, acct=_acct(heavy=100.0, light=-10.0))
    assert [s for s, _ in matched(result)].count("light@x") == 2  # HTCONDOR: equal halves


def test_order_ties_break_by_name_then_schedd():
    idx = UpDownIndex()
    idx.set_index("b", -1.0)
    assert order_by_index([("c", "s2"), ("a", "s1"), ("b", "s1"), ("a", "s0")], idx, UD) == [
        ("b", "s1"), ("a", "s0"), ("a", "s1"), ("c", "s2")]


def test_the_placement_throttle_limits_matches_per_entity_per_cycle():
    slots = [make_slot(f"slot1@n{i}") for i in range(6)]
    settings = NegotiatorSettings(policy="UPDOWN", updown=UpDownSettings(placements_per_cycle=1))
    jobs = {"a@x": [(make_job("a"), 3)], "b@x": [(make_job("b"), 3)]}
    result, _ = run_cycle(slots, jobs, settings=settings)
    assert sorted(s for s, _ in matched(result)) == ["a@x", "b@x"]


# ----------------------------------------------------------------- preemption


def _heavy_pool(acct: Accountant, starts=(100, 400, 300, 200)):
    slots = [claimed(make_slot(f"slot1@n{i}"), "heavy@x", JobStart=t)
             for i, t in enumerate(starts)]
    acct.check_matches(claimed_resources(slots), 0.0)
    return slots


def test_a_waiting_light_user_preempts_the_heavy_users_newest_jobs():
    acct = _acct(heavy=500.0, light=-4.0)
    slots = _heavy_pool(acct)
    # PREEMPTION_REQUIREMENTS is False (HTCondor's default): UPDOWN does not read it
    result, acct = run_cycle(slots, {"light@x": [(make_job("light"), 2)]}, acct=acct,
                             settings=UPDOWN, now=1000.0)
    assert [m.preemption for m in result.matches] == [PreemptState.PRIORITY] * 2
    assert (result.statistics.rank_preemptions, result.statistics.priority_preemptions) == (0, 2)
    assert [m.slot_name for m in result.matches] == ["slot1@n1", "slot1@n2"]  # latest starts
    assert {m.preempted_user for m in result.matches} == {"heavy@x"}
    assert acct.weighted_resources_used("light@x") == 2.0


def test_the_victim_is_the_entity_with_the_largest_index():
    acct = _acct(heavy=500.0, medium=50.0, light=0.0)
    slots = [claimed(make_slot("slot1@a"), "medium@x", JobStart=900),
             claimed(make_slot("slot1@b"), "heavy@x", JobStart=10)]
    acct.check_matches(claimed_resources(slots), 0.0)
    result, _ = run_cycle(slots, {"light@x": [(make_job("light"), 1)]}, acct=acct,
                          settings=UPDOWN, now=1000.0)
    assert [(m.slot_name, m.preempted_user) for m in result.matches] == [("slot1@b", "heavy@x")]


@pytest.mark.parametrize("light_index", [500.0, 600.0])
def test_no_preemption_without_a_strict_index_inversion(light_index):
    acct = _acct(heavy=500.0, light=light_index)
    slots = _heavy_pool(acct)
    result, _ = run_cycle(slots, {"light@x": [(make_job("light"), 1)]}, acct=acct,
                          settings=UPDOWN, now=1000.0)
    assert result.matches == ()
    assert result.statistics.rejections_by_reason == {"preemption requirements": 1}


def test_an_idle_machine_is_taken_before_any_preemption_even_if_the_job_ranks_it_lower():
    acct = _acct(heavy=500.0, light=-4.0)
    slots = _heavy_pool(acct) + [make_slot("slot1@free", Mips=1)]
    job = make_job("light", exprs={"Rank": "-TARGET.Mips"})  # prefers the busy Mips=100 slots
    result, _ = run_cycle(slots, {"light@x": [(job, 1)]}, acct=acct, settings=UPDOWN, now=1000.0)
    assert matched(result) == [("light@x", "slot1@free")]


def test_retirement_and_consider_preemption_are_honoured_under_updown():
    acct = _acct(heavy=500.0, light=-4.0)
    slots = [claimed(s, "heavy@x", RetirementTimeRemaining=600) for s in _heavy_pool(acct)]
    jobs = {"light@x": [(make_job("light"), 1)]}
    result, _ = run_cycle(slots, jobs, acct=acct, settings=UPDOWN, now=1000.0)
    assert result.statistics.rejections_by_reason == {"retirement": 1}
    off = NegotiatorSettings(policy="UPDOWN", consider_preemption=False)
    result, _ = run_cycle(_heavy_pool(acct), jobs, acct=acct, settings=off, now=1000.0)
    assert result.matches == ()


def test_stations_as_entities_share_one_index_and_are_found_by_client_machine():
    settings = NegotiatorSettings(policy="UPDOWN", updown=UpDownSettings(entity="SCHEDD"))
    acct = Accountant(now=0.0)
    acct.updown.set_index("busy-station", 300.0)
    acct.updown.set_index("quiet-station", -5.0)
    slots = [claimed(make_slot("slot1@n0"), "heavy@x", ClientMachine="busy-station")]
    acct.check_matches(claimed_resources(slots), 0.0)
    jobs = {("quiet-station", "light@x"): [(make_job("light"), 1)]}
    result, _ = run_cycle(slots, jobs, acct=acct, settings=settings, now=10.0)
    assert [m.preempted_user for m in result.matches] == ["heavy@x"]


# ----------------------------------------------------------------- through the core, persisted


def _cycle(neg: Negotiator, now: float, subs, requests=()):
    neg.handle(Wakeup(), now)
    slots = tuple(make_slot(f"slot{i + 1}@h") for i in range(2))
    actions = neg.handle(PoolAds(neg.cycle, slots, tuple(subs)), now)
    for (schedd, name), reqs in requests:
        actions = neg.handle(RequestsReceived(neg.cycle, schedd, name, reqs), now)
    return actions


def test_the_core_updates_the_index_each_cycle_and_saves_it():
    neg = Negotiator(UPDOWN, now=0.0)
    heavy = ClassAd({"Name": "heavy@x", "ScheddName": "s1", "IdleJobs": 0, "RunningJobs": 3})
    light = ClassAd({"Name": "light@x", "ScheddName": "s2", "IdleJobs": 1, "RunningJobs": 0})
    req = ResourceRequest(1, make_job("light"), 1)
    _cycle(neg, 0.0, [heavy, light], [(("s2", "light@x"), (req,))])
    actions = _cycle(neg, 120.0, [heavy, light], [(("s2", "light@x"), (req,))])
    assert neg.accountant.updown.indices() == {"heavy@x": 6.0, "light@x": -2.0}
    (save,) = [a for a in actions if isinstance(a, SaveAccountant)]
    back = Accountant.restore(save.snapshot)
    assert back.updown.indices() == {"heavy@x": 6.0, "light@x": -2.0}
    assert back.updown.last_update_time == 120.0


def test_the_htcondor_policy_leaves_the_index_alone():
    neg = Negotiator(NegotiatorSettings(), now=0.0)
    heavy = ClassAd({"Name": "heavy@x", "ScheddName": "s1", "IdleJobs": 0, "RunningJobs": 3})
    _cycle(neg, 0.0, [heavy])
    _cycle(neg, 120.0, [heavy])
    assert neg.accountant.updown.indices() == {}


def test_a_snapshot_without_an_index_still_loads_and_a_damaged_one_is_refused():
    snap = Accountant(now=5.0).snapshot()
    del snap["updown"]
    assert Accountant.restore(snap).updown.indices() == {}
    snap["updown"] = {"index": "nonsense"}
    with pytest.raises(UsageError, match="Up-Down index .* damaged"):
        Accountant.restore(snap)


def test_the_policy_knobs_come_from_the_param_table(tmp_path):
    from htc.config import load_config

    cfg = tmp_path / "htc_config"
    cfg.write_text("NEGOTIATOR_POLICY = UPDOWN\nUPDOWN_CAP = 300\nUPDOWN_ENTITY = schedd\n"
                   "UPDOWN_PLACEMENTS_PER_CYCLE = 1\nUPDOWN_RULE = UPDATE_PRIO\nUPDOWN_UNIT = 30\n")
    config = load_config("NEGOTIATOR", env={"HTC_CONFIG": str(cfg), "HTC_HOME": str(tmp_path)})
    settings = NegotiatorSettings.from_config(config)
    assert settings.updown_policy and not settings.never_priority_preempts
    assert settings.updown == UpDownSettings(cap=300.0, unit=30.0, entity="SCHEDD",
                                             rule="UPDATE_PRIO", placements_per_cycle=1)
