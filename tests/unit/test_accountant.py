"""Accountant: half-life decay, uncharged time, factors, submitter names, pie, order, snapshot."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htc.daemons.negotiator.accountant import Accountant, AccountantSettings
from htc.daemons.negotiator.fair_share import PieSlice, order_submitters, pie_slices, starvation_ratio
from htc.daemons.negotiator.submitters import accounting_group_of, submitter_name, submitter_of_job
from htc.errors import UsageError

HOUR = 3600.0
DAY = 86400.0


def hold(acct: Accountant, user: str, cores: int, start: float) -> None:
    """Give ``user`` ``cores`` one-core slots starting at ``start``."""
    for i in range(cores):
        acct.add_match(user, f"slot{i}@{user}", 1.0, start)


# ----------------------------------------------------------------- decay (fair-share.md §4.1)


def test_new_submitter_starts_at_the_minimum_priority():
    acct = Accountant(now=0.0)
    assert acct.real_priority("alice@x") == 0.5
    assert acct.effective_priority("alice@x") == 500.0  # DEFAULT_PRIO_FACTOR 1000


def test_hundred_cores_for_two_days_reach_about_75():
    # The manual's worked example: 0.5 -> 100 - 99.5 * 0.25 = 75.125 after 48 h.
    acct = Accountant(now=0.0)
    hold(acct, "a@x", 100, 0.0)
    for minute in range(1, 48 * 60 + 1):
        acct.update_priorities(minute * 60.0)
    assert acct.real_priority("a@x") == pytest.approx(75.125, rel=1e-9)


def test_idle_for_one_half_life_halves_the_priority():
    acct = Accountant(now=0.0)
    acct.set_real_priority("a@x", 10.0)
    acct.update_priorities(DAY)
    assert acct.real_priority("a@x") == pytest.approx(5.0)


def test_priority_never_drops_below_the_floor():
    acct = Accountant(now=0.0)
    acct.set_real_priority("a@x", 1.0)
    acct.update_priorities(10 * DAY)
    assert acct.real_priority("a@x") == 0.5


def test_half_life_setting_controls_the_decay():
    acct = Accountant(AccountantSettings(priority_halflife=600.0), now=0.0)
    acct.set_real_priority("a@x", 8.0)
    acct.update_priorities(1200.0)
    assert acct.real_priority("a@x") == pytest.approx(2.0)


@settings(max_examples=60, deadline=None)
@given(
    cores=st.integers(min_value=0, max_value=64),
    start=st.floats(min_value=0.5, max_value=500.0),
    steps=st.lists(st.floats(min_value=1.0, max_value=20_000.0), min_size=1, max_size=12),
)
def test_steady_usage_decays_the_same_however_often_it_is_updated(cores, start, steps):
    # RUP(t) = N + (RUP0 - N) * 0.5 ** (t/h) whatever the update times are.
    acct = Accountant(now=0.0)
    acct.set_real_priority("u@x", start)
    hold(acct, "u@x", cores, 0.0)
    t = 0.0
    for dt in steps:
        t += dt
        acct.update_priorities(t)
    # The trajectory is monotone towards N, so clamping at 0.5 per step equals clamping once.
    expected = max(0.5, cores + (start - cores) * 0.5 ** (t / DAY))
    assert acct.real_priority("u@x") == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_match_made_between_updates_is_charged_only_from_its_start():
    acct = Accountant(now=0.0)
    acct.update_priorities(0.0)
    acct.add_match("a@x", "slot1@n", 4.0, 30.0)  # half of the 60 s interval
    acct.update_priorities(60.0)
    aging = 0.5 ** (60.0 / DAY)
    # recent usage = 4 cores for half the interval = 2 on average
    assert acct.real_priority("a@x") == pytest.approx(0.5 * aging + 2.0 * (1 - aging))
    snap = acct.snapshot()["customers"]["a@x"]
    assert snap["weighted_accumulated_usage"] == pytest.approx(4.0 * 30.0)


def test_claim_that_ends_between_updates_is_charged_until_it_ends():
    acct = Accountant(now=0.0)
    acct.add_match("a@x", "slot1@n", 2.0, 0.0)
    acct.update_priorities(100.0)
    acct.remove_match("slot1@n", 130.0)
    acct.update_priorities(200.0)
    assert acct.weighted_resources_used("a@x") == 0.0
    assert acct.snapshot()["customers"]["a@x"]["weighted_accumulated_usage"] == pytest.approx(
        2.0 * 130.0
    )


def test_clock_going_backwards_charges_nothing():
    acct = Accountant(now=1000.0)
    hold(acct, "a@x", 10, 1000.0)
    acct.update_priorities(500.0)
    assert acct.real_priority("a@x") == 0.5
    assert acct.last_update_time == 500.0


def test_preemption_moves_the_charge_from_victim_to_winner():
    acct = Accountant(now=0.0)
    acct.add_match("heavy@x", "slot1@n", 1.0, 0.0)
    acct.add_match("light@x", "slot1@n", 1.0, 10.0)
    assert acct.weighted_resources_used("heavy@x") == 0.0
    assert acct.weighted_resources_used("light@x") == 1.0
    assert acct.match_of("slot1@n") == ("light@x", 1.0)


def test_check_matches_reconciles_with_the_slot_ads():
    acct = Accountant(now=0.0)
    acct.add_match("a@x", "slot1@n", 1.0, 0.0)
    acct.add_match("a@x", "slot2@n", 1.0, 0.0)
    acct.add_match("b@x", "slot3@n", 1.0, 0.0)
    # slot1 gone, slot3 now claimed by a, slot4 claimed by b and not yet known
    acct.check_matches({"slot2@n": ("a@x", 1.0), "slot3@n": ("a@x", 1.0),
                        "slot4@n": ("b@x", 2.0)}, 50.0)
    assert acct.weighted_resources_used("a@x") == 2.0
    assert acct.weighted_resources_used("b@x") == 2.0
    assert acct.match_of("slot1@n") is None


# ----------------------------------------------------------------- factors and names


def test_priority_factors_on_first_sight():
    acct = Accountant(AccountantSettings(
        local_domain="example.net",
        group_names=("group_physics", "group_physics.hep"),
        group_prio_factors={"group_physics.hep": 5.0},
    ))
    assert acct.priority_factor("alice@example.net") == 1000.0
    assert acct.priority_factor("nice-user.alice@example.net") == 1e10
    assert acct.priority_factor("mallory@elsewhere.org") == 1e7
    assert acct.priority_factor("group_physics.hep.einstein@example.net") == 5.0
    # a configured group without a factor falls back to the default
    assert acct.priority_factor("group_physics.bohr@example.net") == 1000.0


def test_everyone_is_local_without_a_local_domain():
    assert Accountant().priority_factor("mallory@elsewhere.org") == 1000.0


def test_set_priority_factor_is_kept_and_checked():
    acct = Accountant()
    acct.set_priority_factor("a@x", 2.0)
    assert acct.effective_priority("a@x") == 1.0
    with pytest.raises(UsageError, match="priority factor for a@x must be a number >= 1"):
        acct.set_priority_factor("a@x", 0.5)
    with pytest.raises(UsageError, match=">= 0.5"):
        acct.set_real_priority("a@x", 0.1)


def test_reset_usage_forgets_the_past():
    acct = Accountant(now=0.0)
    acct.set_real_priority("a@x", 40.0)
    acct.reset_usage("a@x")
    assert acct.real_priority("a@x") == 0.5


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, "alice@example.net"),
        ({"nice_user": True}, "nice-user.alice@example.net"),
        ({"accounting_group": "group_physics"}, "group_physics.alice@example.net"),
        ({"accounting_group": "group_physics", "accounting_group_user": "einstein"},
         "group_physics.einstein@example.net"),
    ],
)
def test_submitter_names_as_htcondor_forms_them(kwargs, expected):
    assert submitter_name("alice", "example.net", **kwargs) == expected


def test_submitter_name_rejects_bad_parts():
    with pytest.raises(UsageError, match="owner 'a@b' must be a non-empty name"):
        submitter_name("a@b", "example.net")


def test_submitter_of_job_reads_the_job_ad():
    dom = "example.net"
    alice = {"Owner": "alice", "User": "alice@example.net"}
    assert submitter_of_job(alice, dom) == "alice@example.net"
    assert submitter_of_job({"owner": "alice"}, dom) == "alice@example.net"
    grouped = {"Owner": "a", "AccountingGroup": "group_x.a"}
    assert submitter_of_job(grouped, dom) == "group_x.a@example.net"
    assert submitter_of_job({"Owner": "a", "NiceUser": True}, dom) == "nice-user.a@example.net"
    with pytest.raises(UsageError, match="no AccountingGroup, User or Owner"):
        submitter_of_job({"Cmd": "/bin/true"}, dom)


def test_accounting_group_is_the_longest_configured_prefix():
    groups = ("group_a", "Group_A.sub")
    assert accounting_group_of("group_a.sub.alice@x", groups) == "Group_A.sub"
    assert accounting_group_of("group_a.alice@x", groups) == "group_a"
    assert accounting_group_of("alice@x", groups) is None


def test_settings_are_checked():
    with pytest.raises(UsageError, match="PRIORITY_HALFLIFE must be a positive number"):
        AccountantSettings(priority_halflife=0)
    with pytest.raises(UsageError, match="GROUP_PRIO_FACTOR_g must be a positive number"):
        AccountantSettings(group_prio_factors={"g": -1.0})


# ----------------------------------------------------------------- pie and order


def test_shares_are_proportional_to_one_over_eup():
    slices = pie_slices({"a": 5.0, "b": 10.0}, {}, 30.0)
    assert slices["a"].share == pytest.approx(2 / 3)
    assert slices["b"].share == pytest.approx(1 / 3)
    assert slices["a"].limit == pytest.approx(20.0)
    assert slices["b"].limit == pytest.approx(10.0)


def test_manual_example_light_user_gets_150_times_the_heavy_share():
    # fair-share.md §4.2: A alone for 48 h at 100 cores (RUP ~75); B new at 0.5.
    acct = Accountant(now=0.0)
    hold(acct, "a@x", 100, 0.0)
    acct.update_priorities(48 * HOUR)
    eups = {u: acct.effective_priority(u) for u in ("a@x", "b@x")}
    slices = pie_slices(eups, {}, 100.0)
    assert slices["b@x"].share / slices["a@x"].share == pytest.approx(150.25, rel=1e-6)


def test_limits_subtract_what_a_submitter_already_holds():
    slices = pie_slices({"a": 500.0, "b": 500.0}, {"a": 80.0, "b": 20.0}, 100.0)
    assert slices["a"].limit == 0.0  # over its half: gains nothing
    assert slices["b"].limit == pytest.approx(30.0)


def test_huge_factors_stay_exact():
    slices = pie_slices({"nice": 0.5 * 1e10, "a": 500.0}, {}, 10.0)
    assert slices["a"].share == pytest.approx(1 / (1 + 1e-7))
    assert slices["nice"].share > 0


def test_pie_rejects_a_bad_eup():
    with pytest.raises(UsageError, match="effective priority of a must be a positive number"):
        pie_slices({"a": 0.0}, {}, 1.0)
    assert pie_slices({}, {}, 10.0) == {}


def test_order_is_by_eup_then_starvation_then_name():
    eups = {"heavy": 9000.0, "light": 500.0, "p": 700.0, "q": 700.0}
    slices = {
        "heavy": PieSlice(0.1, 0.0, 50.0),
        "light": PieSlice(0.5, 10.0, 0.0),
        "p": PieSlice(0.2, 1.0, 9.0),  # holds 90 % of its allocation
        "q": PieSlice(0.2, 9.0, 1.0),  # holds 10 %: goes before p
    }
    entries = [("heavy", "s1"), ("p", "s1"), ("q", "s2"), ("light", "s2"), ("light", "s1")]
    assert order_submitters(entries, eups, slices) == [
        ("light", "s1"), ("light", "s2"), ("q", "s2"), ("p", "s1"), ("heavy", "s1"),
    ]


def test_starvation_ratio():
    assert starvation_ratio(1.0, 3.0) == 0.25
    assert starvation_ratio(0.0, 0.0) == math.inf


# ----------------------------------------------------------------- persistence


def test_snapshot_round_trips_through_json():
    acct = Accountant(now=0.0)
    hold(acct, "a@x", 3, 0.0)
    acct.set_priority_factor("b@x", 7.0)
    acct.update_priorities(HOUR)
    acct.add_match("b@x", "slotz@n", 2.0, HOUR + 5)
    data = json.loads(json.dumps(acct.snapshot()))
    again = Accountant.restore(data)
    assert again.snapshot() == acct.snapshot()
    # and it keeps working identically
    acct.update_priorities(2 * HOUR)
    again.update_priorities(2 * HOUR)
    assert again.records() == acct.records()


def test_restore_rejects_foreign_data_with_advice():
    with pytest.raises(UsageError, match="version 7, expected 1; move the file aside"):
        Accountant.restore({"version": 7})
    with pytest.raises(UsageError, match="damaged"):
        Accountant.restore({"version": 1, "last_update_time": 0, "customers": {"a": {"x": 1}},
                            "matches": {}})


def test_records_are_sorted_best_first():
    acct = Accountant(now=0.0)
    hold(acct, "heavy@x", 50, 0.0)
    acct.add_match("light@x", "l1", 1.0, 0.0)
    acct.update_priorities(DAY)
    names = [r.name for r in acct.records()]
    assert names == ["light@x", "heavy@x"]
    top = acct.records()[0]
    assert top.effective_priority == pytest.approx(top.real_priority * 1000.0)
    assert top.weighted_resources_used == 1.0


def test_accounting_ads_are_what_htc_userprio_reads():
    acct = Accountant(AccountantSettings(group_names=("group_a",)), now=0.0)
    acct.add_match("group_a.bob@x", "s1", 2.0, 0.0)
    acct.update_priorities(HOUR)
    (ad,) = acct.accounting_ads({"group_a.bob@x": 0.25})
    assert ad["MyType"] == "Accounting" and ad["Name"] == "group_a.bob@x"
    assert ad["Priority"] == pytest.approx(acct.effective_priority("group_a.bob@x"))
    assert ad["WeightedAccumulatedUsage"] == pytest.approx(2.0 * HOUR)
    assert (ad["AccountingGroup"], ad["SubmitterShare"], ad["LastUsageTime"]) == (
        "group_a", 0.25, HOUR)
