"""The simulator's models: owner activity, workload, scenarios and policies as knobs."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest

from htc.errors import UsageError
from htc.sim.owner import DAY, HOUR, OwnerModel, local_load
from htc.sim.scenario import UWCS_PREEMPTION_REQUIREMENTS, condor88, load, negotiator_settings
from htc.sim.workload import UserSpec, generate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sim_small.toml"


def test_local_load_follows_the_working_week():
    assert local_load(3 * HOUR) == 0.20  # Monday night
    assert local_load(14 * HOUR) == 0.50  # Monday afternoon peak
    assert local_load(4 * DAY + 18 * HOUR) == 0.35  # Friday evening
    assert local_load(5 * DAY + 14 * HOUR) == 0.17  # Saturday


def _availability(model: OwnerModel, stations: int, days: float, seed: int) -> float:
    rng = random.Random(seed)
    free = 0.0
    for _ in range(stations):
        st = model.station(rng)
        t, busy = 0.0, st.starts_busy
        while t < days * DAY:
            length = st.next_interval(rng, busy, t)
            if not busy:
                free += min(t + length, days * DAY) - t
            t, busy = t + length, not busy
    return free / (stations * days * DAY)


def test_the_owner_model_leaves_stations_free_about_three_quarters_of_the_time():
    for seed in (1, 2, 3):
        assert 0.70 <= _availability(OwnerModel(), 23, 30, seed) <= 0.80


def test_busy_intervals_keep_their_mean():
    st = OwnerModel().station(random.Random(5))
    rng = random.Random(6)
    draws = [st.next_interval(rng, True, 0.0) for _ in range(20000)]
    assert statistics.fmean(draws) == pytest.approx(45 * 60 * st.scale, rel=0.05)


def test_condor88_demands_have_the_papers_mean_and_median():
    sc = condor88(seed=1)
    demands = [j.demand / HOUR for seed in range(5)
               for j in generate(list(sc.users), sc.horizon, random.Random(seed))]
    assert 4.0 <= statistics.fmean(demands) <= 6.0
    assert statistics.median(demands) < 3.0
    assert min(demands) >= 0.25 and max(demands) <= 48


def test_light_users_submit_on_weekday_office_hours_in_small_batches():
    sc = condor88(seed=1)
    jobs = generate(list(sc.users), sc.horizon, random.Random(2))
    light = [j for j in jobs if j.cls == "light"]
    assert light and all(int(j.submit // DAY) % 7 < 5 and 9 <= (j.submit % DAY) / HOUR < 18
                         for j in light)
    batches: dict = {}
    for j in jobs:
        batches.setdefault((j.user, j.submit), []).append(j)
    sizes = {user: [len(b) for (u, _), b in batches.items() if u == user] for user in ("A", "L0")}
    assert all(50 <= n <= 80 for n in sizes["A"]) and all(1 <= n <= 5 for n in sizes["L0"])
    assert 700 <= len(jobs) <= 1400  # paper: nearly 1000


def test_a_fixed_schedule_submits_on_the_period():
    user = UserSpec("A", "heavy", 3, 3, period=10 * HOUR, first_batch=HOUR)
    jobs = generate([user], 30 * HOUR, random.Random(1))
    assert sorted({j.submit for j in jobs}) == [HOUR, 11 * HOUR, 21 * HOUR]


def test_policies_are_negotiator_knobs():
    assert negotiator_settings("HTCONDOR", {}).never_priority_preempts
    pre = negotiator_settings("HTCONDOR_PREEMPT", {"NEGOTIATOR_INTERVAL": 120})
    assert pre.preemption_requirements == UWCS_PREEMPTION_REQUIREMENTS and pre.interval == 120
    assert negotiator_settings("FIFO", {}).ignore_user_priorities
    assert negotiator_settings("UPDOWN", {"UPDOWN_CAP": 300}).updown.cap == 300
    assert negotiator_settings("HTCONDOR", {"PRIORITY_HALFLIFE": 60}).accountant.priority_halflife == 60
    with pytest.raises(UsageError, match="no knob 'NO_SUCH_KNOB'"):
        negotiator_settings("HTCONDOR", {"NO_SUCH_KNOB": 1})


def test_the_example_scenario_file_loads():
    sc = load(EXAMPLE, policy="FIFO", seed=4)
    assert (sc.name, sc.machines, sc.policy, sc.seed) == ("small", 8, "FIFO", 4)
    assert [u.name for u in sc.users] == ["A", "L0", "L1", "L2"]
    assert sc.users[0].period == 36 * HOUR and sc.users[1].window == (9.0, 18.0)
    assert sc.negotiator["NEGOTIATOR_INTERVAL"] == 120 and sc.horizon == 5 * DAY


def test_a_scenario_file_with_an_unknown_key_is_refused(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('machines = 3\nmachine_count = 4\n[[users]]\nname = "a"\n')
    with pytest.raises(UsageError, match="unknown key.*machine_count"):
        load(path)
    path.write_text('machines = 3\n[[users]]\nname = "a"\n')
    with pytest.raises(UsageError, match="unknown policy"):
        load(path, policy="NOPE")
