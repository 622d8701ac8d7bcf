"""A request's next slots without a turn of ``negotiate_entry``
(:meth:`htc.daemons.negotiator.vsearch.VectorSearch.take` and its ``_next_turn``): the same
matches, claim ids, offered ads, accountant charges and rejections as one turn per slot, whole
cycle by whole cycle, with fewer turns."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.daemons.negotiator import vorder, vsearch, vsteps
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.updown import UpDownSettings
from htc.daemons.negotiator.vsearch import VectorSearch
from tests.negotiator_cycles import (assert_same_cycles, count_calls, cycle_matches, make_job,
                                     make_slot, run_cycle)
from tests.unit.test_negotiator_reference import _requests, _settings
from tests.unit.test_negotiator_vsearch import _big_pool, _pool


def _cycle(slots, requests, settings, chain: bool):
    saved = VectorSearch.chain
    VectorSearch.chain = chain
    try:
        return run_cycle(slots, requests, settings=settings, acct=Accountant(now=0.0),
                         now=600.0)
    finally:
        VectorSearch.chain = saved


def _same(slots, requests, settings):
    assert_same_cycles(_cycle(slots, requests, settings, chain=True),
                       _cycle(slots, requests, settings, chain=False))


@hsettings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_the_next_slots_of_a_request_are_those_of_one_turn_per_slot(seed):
    """Random pools, job shapes, ranks (some reading a carved resource), policies, and the
    placement throttle: a chain stops where a turn would decide otherwise (a limit, the
    budget, a slot used up by its first carve, a static slot)."""
    rnd = random.Random(seed)
    slots = _big_pool(rnd) if rnd.random() < 0.5 else _pool(rnd)
    settings = _settings(rnd)
    requests = {user: [(job, count * rnd.choice([1, 4, 8])) for job, count in reqs]
                for user, reqs in _requests(rnd).items()}
    if settings.updown_policy and rnd.random() < 0.5:
        settings = dataclasses.replace(
            settings, updown=UpDownSettings(placements_per_cycle=rnd.randint(1, 30)))
    _same(slots, requests, settings)


def test_short_queues_and_few_kept_steps_chain_as_one_turn_per_slot(monkeypatch):
    """Queues of two or three, a low limit of changes and few kept steps: the chain's turns
    take every path of the queue (made afresh, complete or not) as the turns do."""
    for seed in range(25):
        rnd = random.Random(seed)
        monkeypatch.setattr(vsearch, "QUEUE_LENGTH", rnd.choice([2, 3, 16]))
        monkeypatch.setattr(vsearch, "QUEUE_CHANGES_MOST", rnd.choice([1, 3, 64]))
        monkeypatch.setattr(vorder, "STALE_LIMIT", rnd.choice([2, 16, 1536]))
        monkeypatch.setattr(vsteps, "MOST_STEPS", rnd.choice([1, 3, 64]))
        requests = {user: [(job, count * 8) for job, count in reqs]
                    for user, reqs in _requests(rnd).items()}
        _same(_big_pool(rnd), requests, _settings(rnd))


def test_a_request_fills_its_slots_in_one_turn(monkeypatch):
    """Ten 4-core slots and 40 one-core jobs: one slot per turn takes ten turns of
    ``negotiate_entry`` (``VectorSearch.best``); the chain takes one, and makes the other
    nine itself, with the same matches."""
    turns = count_calls(monkeypatch, VectorSearch, "best")
    made = []
    real = VectorSearch.__init__

    def init(self, *args):
        real(self, *args)
        made.append(self)
    monkeypatch.setattr(VectorSearch, "__init__", init)
    slots = [make_slot(f"slot1@m{n}", Cpus=4, Memory=16384, PartitionableSlot=True)
             for n in range(10)]
    requests = {"alice@x": [(make_job("alice", exprs={"Rank": "TARGET.Memory"}), 40)]}
    results = {}
    for chain in (False, True):
        turns.clear()
        results[chain] = _cycle(slots, requests, None, chain)[0]
        assert len(results[chain].matches) == 40
        assert len(turns) == (1 if chain else 10)
        assert made[-1].chained_turns == (9 if chain else 0)
        assert made[-1].vector_turns == 10
    assert cycle_matches(results[True]) == cycle_matches(results[False])


def test_a_limit_stops_the_chain_where_a_turn_would(monkeypatch):
    """Two users of equal priority share 8 slots of 4 cores: each one's limit (its half of
    the pie) stops its chain, and the next spin's turns go on from there."""
    slots = [make_slot(f"slot1@m{n}", Cpus=4, Memory=16384, PartitionableSlot=True)
             for n in range(8)]
    requests = {"alice@x": [(make_job("alice"), 40)], "bob@x": [(make_job("bob"), 40)]}
    chained, _ = _cycle(slots, requests, None, chain=True)
    assert len(chained.matches) == 32
    assert chained.statistics.submitters_share_limited  # the limits did stop them
    _same(slots, requests, None)
