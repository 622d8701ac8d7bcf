"""Matchmaking helpers: symmetric match and Rank, checked against classad2 on many slot ads."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from htc.classad import ClassAd, ExprTree
from htc.classad.match import best_match, match_many, rank, requirements_hold, symmetric_match

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import classad_bench  # noqa: E402  (its realistic job and machine ads)


def test_symmetric_match_binds_target_both_ways():
    job = ClassAd('[Owner = "alice"; RequestMemory = 2048; '
                  'Requirements = TARGET.Memory >= MY.RequestMemory; Rank = Memory]')
    slot = ClassAd('[Memory = 4096; Requirements = TARGET.Owner == "alice" && '
                   'RequestMemory <= Memory]')
    assert requirements_hold(job, slot) and requirements_hold(slot, job)
    assert symmetric_match(job, slot)
    assert rank(job, slot) == 4096.0  # unqualified Memory falls back to the slot
    slot["Memory"] = 1024
    assert not symmetric_match(job, slot)


def test_rank_of_non_numbers_is_zero_and_missing_requirements_never_match():
    job = ClassAd('[Requirements = true; Rank = "high"]')
    slot = ClassAd('[Requirements = true]')
    assert rank(job, slot) == 0.0
    assert rank(slot, job) == 0.0
    assert not symmetric_match(ClassAd("[Rank = 1]"), slot)


def test_match_many_agrees_with_classad2_and_with_pairwise_helpers():
    classad2 = pytest.importorskip("classad2")
    classad2.parseOne("[a = 1]")
    texts = classad_bench.machine_texts(400, seed=3)
    job = ClassAd(classad_bench.JOB)
    machines = [ClassAd(t) for t in texts]
    got = match_many(job, machines)
    pairwise = [(m, rank(job, m)) for m in machines if symmetric_match(job, m)]
    assert [(id(m), r) for m, r in got] == [(id(m), r) for m, r in pairwise]
    their_job = classad2.ClassAd(classad_bench.JOB)
    rank_expr = classad2.ExprTree("MY.Rank")
    want = []
    for i, t in enumerate(texts):
        m = classad2.ClassAd(t)
        if their_job.symmetricMatch(m):
            want.append((i, float(rank_expr.eval(their_job, m))))
    index = {id(m): i for i, m in enumerate(machines)}
    assert [(index[id(m)], r) for m, r in got] == want
    assert len(want) > 50  # the workload really exercises both outcomes
    best = best_match(job, machines)
    assert best is not None and best[1] == max(r for _, r in want)


def test_cycles_inside_requirements_do_not_match():
    job = ClassAd("[Requirements = Requirements]")
    slot = ClassAd("[Requirements = true]")
    assert not symmetric_match(job, slot)
    assert ExprTree("MY.Requirements").eval(job, slot) is not True
