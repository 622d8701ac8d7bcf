"""The simulator's engine: the real negotiator on a simulated pool (short runs, seconds)."""

from __future__ import annotations

import pytest

from htc.sim import engine
from htc.sim.engine import Simulation
from htc.sim.owner import DAY, HOUR, OwnerModel
from htc.sim.report import summary
from htc.sim.scenario import Scenario
from htc.sim.workload import UserSpec


def _ci(policy: str, seed: int = 3) -> Scenario:
    heavy = UserSpec("A", "heavy", 24, 24, period=36 * HOUR, first_batch=2 * HOUR,
                     demand_median=2.7 * HOUR)
    light = tuple(UserSpec(f"L{i}", "light", 1, 3, mean_gap=4 * HOUR, window=(9, 18),
                           demand_median=1.5 * HOUR) for i in range(3))
    return Scenario("ci", 6, 3 * DAY, (heavy, *light), policy=policy, seed=seed,
                    negotiator={"NEGOTIATOR_INTERVAL": 300}, drain=10 * DAY)


@pytest.fixture(scope="module")
def fair_and_fifo():
    return {p: summary(Simulation(_ci(p)).run()) for p in ("HTCONDOR", "FIFO", "UPDOWN")}


def test_light_users_wait_far_less_than_the_heavy_user(fair_and_fifo):
    s = fair_and_fifo["HTCONDOR"]
    light, heavy = s["classes"]["light"], s["classes"]["heavy"]
    assert light["jobs"] > 5 and heavy["jobs"] == 48
    assert heavy["mean_wait_ratio"] >= 5 * light["mean_wait_ratio"]
    assert light["allocation_wait"] < heavy["allocation_wait"] / 5


def test_fifo_makes_light_users_wait_behind_the_heavy_user(fair_and_fifo):
    fair, fifo = fair_and_fifo["HTCONDOR"], fair_and_fifo["FIFO"]
    assert fifo["classes"]["light"]["mean_wait_ratio"] >= 3 * fair["classes"]["light"]["mean_wait_ratio"]
    # same seed, same pool and workload whatever the policy
    assert fifo["jobs"] == fair["jobs"]
    assert fifo["available_hours"] == pytest.approx(fair["available_hours"])


def test_updown_orders_by_index_and_preempts_for_light_users(fair_and_fifo):
    updown, fair = fair_and_fifo["UPDOWN"], fair_and_fifo["HTCONDOR"]
    light, heavy = updown["classes"]["light"], updown["classes"]["heavy"]
    assert heavy["mean_wait_ratio"] >= 5 * light["mean_wait_ratio"]
    assert light["allocation_wait"] < fair["classes"]["light"]["allocation_wait"]
    assert updown["priority_preemptions"] > 0 and fair["priority_preemptions"] == 0


def test_every_job_completes_with_its_cpu_delivered_once(fair_and_fifo):
    for s in fair_and_fifo.values():
        assert s["completed"] == s["jobs"]
        assert s["cpu_exact"]
        assert s["owner_vacates"] > 0  # owners did come back and stay
        assert 0 < s["remote_hours"] <= s["available_hours"]


def _dedicated(policy: str, users: tuple[UserSpec, ...], machines: int = 2) -> Scenario:
    return Scenario("t", machines, 12 * HOUR, users, policy=policy, owner=OwnerModel(enabled=False),
                    negotiator={"NEGOTIATOR_INTERVAL": 120}, drain=2 * DAY)


def test_priority_preemption_gives_a_light_user_a_heavy_users_machine():
    heavy = UserSpec("A", "heavy", 4, 4, period=DAY, demand_median=10 * HOUR,
                     demand_sigma=0.01, demand_min=HOUR)
    # at 6 h A's EUP (2 cores for 6 h, half-life 1 day: 738) is more than 1.2x B's (500)
    light = UserSpec("B", "light", 1, 1, period=DAY, first_batch=6 * HOUR,
                     demand_median=HOUR, demand_sigma=0.01, demand_min=0.5 * HOUR)
    without = Simulation(_dedicated("HTCONDOR", (heavy, light))).run()
    with_ = Simulation(_dedicated("HTCONDOR_PREEMPT", (heavy, light))).run()
    b_without = next(j for j in without.schedd.jobs.values() if j.spec.user == "B")
    b_with = next(j for j in with_.schedd.jobs.values() if j.spec.user == "B")
    assert without.priority_preemptions == 0
    assert b_without.first_start - b_without.spec.submit > 3 * HOUR  # waits for a heavy job to end
    assert with_.priority_preemptions == 1
    assert b_with.first_start - b_with.spec.submit <= 120.0 + 1  # the next cycle preempts
    victim = next(j for j in with_.schedd.jobs.values() if j.preemptions)
    assert victim.spec.user == "A"
    assert abs(victim.delivered - victim.spec.demand) < 1e-6  # checkpointed, nothing lost
    assert summary(with_)["cpu_exact"]


def _one_machine_one_job(owner_back: float, owner_away: float) -> Simulation:
    user = UserSpec("A", "heavy", 1, 1, period=DAY, demand_median=2 * HOUR, demand_sigma=0.01,
                    demand_min=HOUR)
    sim = Simulation(_dedicated("HTCONDOR", (user,), machines=1))
    m = sim.machines[0]
    sim._at(owner_back, engine._OWNER, m)  # the owner comes back ...
    sim._at(owner_back + owner_away, engine._OWNER, m)  # ... and leaves again
    return sim.run()


def test_a_short_owner_visit_suspends_the_job_and_it_resumes():
    sim = _one_machine_one_job(HOUR, 120.0)
    job = next(iter(sim.schedd.jobs.values()))
    assert job.vacates == 0 and job.placements == 1
    assert job.finished == pytest.approx(job.spec.demand + 120.0, abs=31.0)  # + the poll delay
    assert sim.machines[0].available_seconds == pytest.approx(12 * HOUR - 120.0)


def test_an_owner_who_stays_gets_the_job_vacated_and_it_moves_back_later():
    sim = _one_machine_one_job(HOUR, 3 * HOUR)
    job = next(iter(sim.schedd.jobs.values()))
    assert job.vacates == 1 and job.placements == 2
    # suspended at 1 h, vacated after 5 minutes (polls every 30 s), placed again at 4 h
    assert job.finished == pytest.approx(4 * HOUR + job.spec.demand - HOUR, abs=130.0)
    assert abs(job.delivered - job.spec.demand) < 1e-6
