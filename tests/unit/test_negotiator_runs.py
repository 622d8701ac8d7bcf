"""Runs (``htc.daemons.negotiator.runs``): one decision per (request x partitionable slot)
hands over k jobs, and the matches stay those of one job per search and of a brute-force
reference, on random pools of large partitionable slots and requests of many jobs, with
expressions the monotonicity analysis can prove and ones it cannot."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.classad import ClassAd, ExprTree
from htc.daemons.negotiator.runs import CONST, DEC, INC, direction
from htc.daemons.negotiator.search import IdleSearch
from htc.daemons.negotiator.vsearch import VectorSearch
from htc.daemons.negotiator.settings import DEFAULT_PRE_JOB_RANK, NegotiatorSettings
from tests.negotiator_cycles import (claimed, count_calls, make_job, make_slot, run_cycle,
                                          run_cycle_with)
from tests.unit.test_negotiator_reference import _brute_cycle, _outcome


def _slot_and_job():
    slot = make_slot("slot1@a", Cpus=16, Memory=32768, Disk=1_000_000, PartitionableSlot=True)
    job = make_job("alice", RequestMemory=1024)
    return slot, job


def _dir(text: str, slot_is_my: bool = False):
    slot, job = _slot_and_job()
    node = ExprTree(text).node
    return direction(node, slot, job, slot) if slot_is_my else direction(node, job, slot, slot)


def test_direction_of_the_usual_expressions():
    assert _dir("TARGET.Memory >= RequestMemory") == INC
    assert _dir("TARGET.Cpus >= RequestCpus && TARGET.Disk >= RequestDisk") == INC
    assert _dir("TARGET.Memory < 4000") == DEC
    assert _dir("TARGET.Memory") == INC
    assert _dir("-TARGET.Cpus") == DEC
    assert _dir('TARGET.Arch == "X86_64"') == CONST
    assert _dir(DEFAULT_PRE_JOB_RANK, slot_is_my=True) == DEC  # the smaller slot is preferred
    assert _dir("Memory / 1024", slot_is_my=True) == INC
    assert _dir("Memory / -2", slot_is_my=True) == DEC


def test_direction_refuses_what_it_cannot_prove():
    assert _dir("TARGET.Cpus % 2 == 0") is None
    assert _dir("TARGET.Memory - 1000 * TARGET.Cpus") is None  # both shrink: no sign
    assert _dir("TARGET.Memory * TARGET.KFlops") is None  # a factor read from the ad
    assert _dir("TARGET.Memory == 4096") is None
    assert _dir('eval("TARGET.Memory") > 0') is None
    assert _dir("ifThenElse(TARGET.Cpus > 4, 1, 0)") is None


def _pool(rnd: random.Random):
    starts = ["True", "True", 'TARGET.Owner != "carol"', "TARGET.RequestMemory <= Memory / 2",
              "Cpus % 3 != 0", "TARGET.RequestCpus < 3 || Cpus >= 8"]
    slots = []
    for n in range(rnd.randint(1, 8)):
        slot = make_slot(f"slot1@m{n:02d}", Cpus=rnd.choice([4, 16, 32, 64]),
                         Memory=rnd.choice([8192, 32768, 131072]),
                         Disk=rnd.choice([100_000, 1_000_000, 10_000_000]),
                         KFlops=rnd.choice([1000, 2000]),
                         Arch=rnd.choice(["X86_64"] * 4 + ["aarch64"]),
                         exprs={"Start": rnd.choice(starts)})
        if rnd.random() < 0.85:
            slot["PartitionableSlot"] = True
        elif rnd.random() < 0.5:
            slot = claimed(slot, rnd.choice(["alice@x", "bob@x"]))
        slots.append(slot)
    return slots


def _requests(rnd: random.Random):
    reqs = ["", " && TARGET.Memory >= 2 * RequestMemory", " && TARGET.Disk >= RequestDisk",
            " && TARGET.Cpus >= RequestCpus + 1", " && TARGET.Cpus % 2 == 0",
            " && TARGET.Memory < 60000", " && TARGET.Memory - 1000 * TARGET.Cpus > 2000"]
    ranks = [{}, {"Rank": "TARGET.Memory"}, {"Rank": "-TARGET.Cpus"}, {"Rank": "TARGET.KFlops"},
             {"Rank": "TARGET.Memory - 2000 * TARGET.Cpus"}, {"Rank": "TARGET.Cpus > 8"}]
    shapes = [dict(exprs={"Requirements": "TARGET.OpSys == \"LINUX\"" + rnd.choice(reqs),
                          **rnd.choice(ranks)},
                   RequestCpus=rnd.choice([1, 1, 2, 3]),
                   RequestMemory=rnd.choice([500, 1500, 3000, 7000]),
                   RequestDisk=rnd.choice([1000, 50_000]))
              for _ in range(rnd.randint(1, 3))]
    users = rnd.sample(["alice@x", "bob@x", "carol@x", "dave@x"], rnd.randint(1, 4))
    return {u: [(make_job(u.split("@")[0], **rnd.choice(shapes)), rnd.randint(1, 120))
                for _ in range(rnd.randint(1, 2))]
            for u in users}


def _settings(rnd: random.Random) -> NegotiatorSettings:
    pre = rnd.choice([DEFAULT_PRE_JOB_RANK, DEFAULT_PRE_JOB_RANK, None, "Cpus", "-Memory",
                      "Memory - 1000 * Cpus", "TARGET.RequestMemory - Memory"])
    return NegotiatorSettings(preemption_requirements=rnd.choice(["False", "True"]),
                              policy=rnd.choice(["HTCONDOR", "HTCONDOR", "UPDOWN"]),
                              pre_job_rank=pre)


def _without_runs(slots, requests, settings):
    return run_cycle_with(IdleSearch, "runs", False, slots, requests, settings)


@hsettings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_runs_match_single_steps_and_the_reference(seed):
    rnd = random.Random(seed)
    slots, requests, settings = _pool(rnd), _requests(rnd), _settings(rnd)
    with_runs, _ = run_cycle(slots, requests, settings=settings)
    single = _without_runs(slots, requests, settings)
    assert _outcome(with_runs) == _outcome(single)
    assert [(m.job_id, m.claim_id, str(m.slot_ad), m.weight) for m in with_runs.matches] == \
        [(m.job_id, m.claim_id, str(m.slot_ad), m.weight) for m in single.matches]
    assert with_runs.statistics.rejections_by_reason == single.statistics.rejections_by_reason
    slow = _brute_cycle(slots, requests, settings)
    assert _outcome(with_runs) == _outcome(slow)


@pytest.mark.parametrize("vector", [False, True])
def test_a_run_hands_over_many_jobs_at_once(monkeypatch, vector):
    """A 64-core slot and 40 one-core jobs: one search, then one run of 39 (fails without runs),
    by the scalar search and by the columns (:mod:`.vsearch`, which commit the first carve and
    the run at once: :meth:`~.vsearch.VectorSearch.take`, 40)."""
    monkeypatch.setattr(VectorSearch, "enabled", vector)
    counted = []
    spied = "take" if vector else "extend"
    real = getattr(VectorSearch, spied)

    def spy(*args):
        n = real(*args)
        counted.append(sum(k for k, _cost in n) if vector else n)  # (take: per slot)
        return n

    monkeypatch.setattr(VectorSearch, spied, spy)
    searches = count_calls(monkeypatch, VectorSearch if vector else IdleSearch, "best")
    slot = make_slot("slot1@big", Cpus=64, Memory=262144, PartitionableSlot=True)
    job = make_job("alice", exprs={"Rank": "TARGET.Memory"})
    result, acct = run_cycle([slot], {"alice@x": [(job, 40)]})
    assert len(result.matches) == 40
    assert max(counted) == (40 if vector else 39) and len(searches) == 1
    assert [m.slot_ad["Cpus"] for m in result.matches] == list(range(64, 24, -1))
    assert acct.weighted_resources_used("alice@x") == 40


def test_a_run_stops_at_the_submitter_limit():
    """Two users split a 10-core slot by fair share; runs do not let one take the other's half."""
    slot = make_slot("slot1@p", Cpus=10, Memory=40960, PartitionableSlot=True)
    requests = {"alice@x": [(make_job("alice"), 20)], "bob@x": [(make_job("bob"), 20)]}
    result, _ = run_cycle([slot], requests)
    single = _without_runs([slot], requests, NegotiatorSettings())
    assert _outcome(result) == _outcome(single)
    by_user = [m.submitter for m in result.matches]
    assert by_user.count("alice@x") == 5 and by_user.count("bob@x") == 5


def test_slot_ad_offered_is_the_slot_before_each_carve():
    slot = make_slot("slot1@p", Cpus=8, Memory=8192, PartitionableSlot=True)
    result, _ = run_cycle([slot], {"alice@x": [(make_job("alice"), 8)]})
    assert [m.slot_ad["Memory"] for m in result.matches] == [8192 - 1024 * i for i in range(8)]
    assert isinstance(result.matches[0].slot_ad, ClassAd)
