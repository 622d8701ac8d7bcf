"""Holding a carved partitionable slot for its request gives exactly the results of re-classing it
at once (the optimisation of ``IdleSearch.hold``, issue #19 "Fast")."""

from __future__ import annotations

import random

import pytest

from htc.daemons.negotiator.search import IdleSearch
from htc.daemons.negotiator.vsearch import VectorSearch
from htc.daemons.negotiator.settings import DEFAULT_PRE_JOB_RANK, NegotiatorSettings
from tests.negotiator_cycles import claimed, make_job, make_slot, run_cycle


def _reclass_at_once(self, rs, slot, pool):
    self.flush()
    pool.reclass(slot)


def _pool_and_jobs(seed: int):
    rnd = random.Random(seed)
    slots = []
    for n in range(rnd.randint(3, 30)):
        slot = make_slot(f"slot1@m{n:02d}", Cpus=rnd.choice([2, 4, 8, 16]),
                         Memory=rnd.choice([2048, 8192, 32768]), Mips=rnd.randint(1, 5) * 100,
                         OpSys=rnd.choice(["LINUX"] * 5 + ["WINDOWS"]))
        if rnd.random() < 0.7:
            slot["PartitionableSlot"] = True
        elif rnd.random() < 0.5:
            slot = claimed(slot, rnd.choice(["a@x", "b@x"]))
        slots.append(slot)
    ranks = [{}, {"Rank": "TARGET.Mips"}, {"Rank": "-TARGET.Memory"}, {"Rank": "TARGET.Cpus"}]
    requests = {u: [(make_job(u.split("@")[0], exprs=rnd.choice(ranks),
                              RequestCpus=rnd.choice([1, 1, 2, 3]),
                              RequestMemory=rnd.choice([500, 1500, 3000])), rnd.randint(1, 12))
                    for _ in range(rnd.randint(1, 4))]
                for u in rnd.sample(["a@x", "b@x", "c@x"], rnd.randint(1, 3))}
    # with the default NEGOTIATOR_PRE_JOB_RANK the carved slot is usually best again (it is the
    # fuller one); without it, or preferring big slots, the job's Rank moves jobs elsewhere
    pre = rnd.choice([DEFAULT_PRE_JOB_RANK, None, "Cpus", "-Mips"])
    settings = NegotiatorSettings(preemption_requirements=rnd.choice(["False", "True"]),
                                  policy=rnd.choice(["HTCONDOR", "UPDOWN"]), pre_job_rank=pre)
    return slots, requests, settings


def _outcome(result):
    return [(m.submitter, m.autocluster_id, m.slot_name, m.carved, m.preemption)
            for m in result.matches]


@pytest.mark.parametrize("seed", range(40))
def test_holding_a_carved_slot_changes_no_match(seed, monkeypatch):
    monkeypatch.setattr(VectorSearch, "enabled", False)  # the scalar search's internals
    slots, requests, settings = _pool_and_jobs(seed)
    held, _ = run_cycle(slots, requests, settings=settings)
    monkeypatch.setattr(IdleSearch, "hold", _reclass_at_once)
    at_once, _ = run_cycle(slots, requests, settings=settings)
    assert _outcome(held) == _outcome(at_once)
    assert held.statistics.rejections_by_reason == at_once.statistics.rejections_by_reason
