"""A cycle's matches as runs (``htc.daemons.negotiator.match_runs``): the runs of a cycle expand
to exactly the matches one decision per job makes (jobs, claim ids, offered ads, in order), and
the adapter's messages from the runs are those it makes from the expanded matches, one by one."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.daemons import core as c
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.adapter import NegotiatorDaemon
from htc.daemons.negotiator.cycle import negotiate_cycle
from htc.daemons.negotiator.events import NotifyMatches
from htc.daemons.negotiator.match_runs import MatchRun, Steps, expand
from htc.daemons.negotiator.matched_ad import MatchedSlotAd, texts
from htc.daemons.negotiator.search import IdleSearch
from htc.daemons.negotiator.settings import NegotiatorServiceSettings, NegotiatorSettings
from htc.daemons.negotiator.submitters import SubmitterAd
from htc.daemons.negotiator.vsearch import VectorSearch
from tests.negotiator_cycles import make_job, make_slot, run_cycle
from tests.unit.test_negotiator_reference import _requests, _settings
from tests.unit.test_negotiator_vsearch import _big_pool, _pool


def _cycle(slots, requests, settings, runs: bool):
    """A cycle with runs and the slot columns (``runs``), or one decision per job: the scalar
    search without runs, each match made alone (``make_match``, a run of one)."""
    saved = IdleSearch.runs, VectorSearch.enabled
    IdleSearch.runs = VectorSearch.enabled = runs
    try:
        return run_cycle(slots, requests, settings=settings, acct=Accountant(now=0.0), now=600.0)[0]
    finally:
        IdleSearch.runs, VectorSearch.enabled = saved


def _made(result):
    """Every value of every match (the slot ad by its text and its table)."""
    return [(*m[:8], str(m.slot_ad), repr(m.slot_ad), *m[9:]) for m in result.matches]


def _random_cycle(seed: int):
    rnd = random.Random(seed)
    slots = _big_pool(rnd) if rnd.random() < 0.5 else _pool(rnd)
    requests = {user: [(job, count * rnd.choice([1, 4, 8])) for job, count in reqs]
                for user, reqs in _requests(rnd).items()}
    return slots, requests, _settings(rnd)


@hsettings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_the_runs_expand_to_the_matches_of_one_decision_per_job(seed):
    slots, requests, settings = _random_cycle(seed)
    result = _cycle(slots, requests, settings, runs=True)
    single = _cycle(slots, requests, settings, runs=False)
    assert not result.skipped and not single.skipped
    assert all(run.count == 1 for run in single.runs)
    assert _made(result) == _made(single)
    assert sum(run.count for run in result.runs) == result.statistics.matches == len(result.matches)
    assert all(run.sizes is None or len(run.sizes) == run.count for run in result.runs)
    assert result.matches is result.matches  # expanded once
    assert expand(result.runs) == result.matches


def test_a_run_of_many_jobs_is_one_record():
    """Forty one-core jobs on ten 4-core slots: a run per slot, each its four claim ids minted
    in order, the request's job ids in order, the slot's size before each carve."""
    slots = [make_slot(f"slot1@n{i}", Cpus=4, Memory=4096, PartitionableSlot=True) for i in range(10)]
    ids = tuple(f"1.{k}" for k in range(40))
    request = ResourceRequest(1, make_job(RequestCpus=1, RequestMemory=1024), 40, ids)
    result = negotiate_cycle(slots, [SubmitterAd("alice", "s", "<s>", 40, 0)], {("s", "alice"): [request]},
                             Accountant(now=0.0), NegotiatorSettings(), 0.0, cycle=3)
    assert [run.count for run in result.runs] == [4] * 10
    assert [m.job_id for m in result.matches] == list(ids)
    first = result.matches[:4]
    assert len({m.slot_name for m in first}) == 1
    assert [m.claim_id for m in first] == [f"{first[0].slot_name}#3.{k}" for k in range(4)]
    assert [m.slot_ad["Cpus"] for m in first] == [4, 3, 2, 1]


def _daemon(inform_startd: bool) -> NegotiatorDaemon:
    settings = NegotiatorServiceSettings(core=NegotiatorSettings(), accountant_file=Path("/nonexistent"),
                                         inform_startd=inform_startd, collector="<cm:9618>")
    return NegotiatorDaemon(settings, None, 0.0)


def _seen(out):
    return [(a.to, a.msg, a.timeout) if isinstance(a, c.Send) else (a.text, a.level) for a in out]


@hsettings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), inform_startd=st.booleans())
def test_the_messages_of_the_runs_are_those_of_their_matches_one_by_one(seed, inform_startd):
    slots, requests, settings = _random_cycle(seed)
    result = _cycle(slots, requests, settings, runs=True)
    from_runs = _daemon(inform_startd)._translate(list(map(NotifyMatches, result.runs)))
    one_by_one = _daemon(inform_startd)._translate(
        [NotifyMatches(MatchRun.of(m)) for m in result.matches])
    assert _seen(from_runs) == _seen(one_by_one)
    sends = [a for a in from_runs if isinstance(a, c.Send)]
    assert len(sends) == len(result.matches) * (2 if inform_startd else 1)
    assert [a.msg.claim_id for a in sends[::2 if inform_startd else 1]] == \
        [m.claim_id for m in result.matches]


@hsettings(max_examples=200, deadline=None)
@given(start=st.tuples(st.integers(-5, 2**53), st.integers(-5, 2**53), st.integers(-5, 2**53)),
       carve=st.tuples(st.integers(1, 9), st.integers(1, 2**40), st.integers(1, 3)),
       count=st.integers(0, 12), index=st.integers(-14, 14),
       cut=st.tuples(st.integers(-14, 14) | st.none(), st.integers(-14, 14) | st.none(),
                     st.sampled_from((None, 1, 2, -1))))
def test_steps_read_as_the_list_of_each_steps_sizes(start, carve, count, index, cut):
    """A fill's run sizes (``Steps``) read as the list of ``start - j * carve`` tuples it
    stands for: its length, items (negative indexes too, IndexError past either end),
    slices, iteration (again), equality with the list (both ways) and with other lists."""
    steps = Steps(start, carve, count)
    sizes = [tuple(h - j * k for h, k in zip(start, carve)) for j in range(count)]
    assert len(steps) == count
    assert list(steps) == sizes and list(steps) == sizes
    assert steps == sizes and sizes == steps and not steps != sizes
    assert steps == tuple(sizes) and steps == Steps(start, carve, count)
    assert steps != [*sizes, start] and (not sizes or steps != sizes[1:]) and steps != "abc"
    assert all(v.__class__ is int for size in steps for v in size)
    if -count <= index < count:
        assert steps[index] == sizes[index]
    else:
        with pytest.raises(IndexError):
            steps[index]
    assert steps[slice(*cut)] == sizes[slice(*cut)]
    assert [MatchedSlotAd(_AD, have)["Cpus"] for have in steps] == [h[0] for h in sizes]
    assert texts(_AD, steps) == texts(_AD, sizes)


_AD = make_slot("slot1@n1", Cpus=16, Memory=65536, Disk=10_000, PartitionableSlot=True)
