"""A vector turn's carve and the run after it are committed at once
(:meth:`htc.daemons.negotiator.vsearch.VectorSearch.take`): the same matches, claim ids, offered
ads and accountant charges as the carve (``make_match``) followed by its run
(:meth:`~htc.daemons.negotiator.vsearch.VectorSearch.extend`), whole cycle by whole cycle."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.cycle import _Cycle
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.updown import UpDownSettings
from htc.daemons.negotiator.vsearch import VectorSearch
from tests.negotiator_cycles import (assert_same_cycles, count_calls, make_job, make_slot,
                                     run_cycle)
from tests.unit.test_negotiator_reference import _requests, _settings
from tests.unit.test_negotiator_vsearch import _pool


def _cycle(slots, requests, settings, fold: bool):
    saved = VectorSearch.take
    if not fold:
        VectorSearch.take = lambda *args: []  # every carve by make_match, its run by extend
    try:
        return run_cycle(slots, requests, settings=settings, acct=Accountant(now=0.0),
                         now=600.0)
    finally:
        VectorSearch.take = saved


@hsettings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_a_carve_and_its_run_at_once_make_what_they_make_one_after_the_other(seed):
    rnd = random.Random(seed)
    slots, requests, settings = _pool(rnd), _requests(rnd), _settings(rnd)
    if settings.updown_policy and rnd.random() < 0.5:  # a run cut by the placements left
        settings = dataclasses.replace(
            settings, updown=UpDownSettings(placements_per_cycle=rnd.randint(1, 6)))
    assert_same_cycles(_cycle(slots, requests, settings, fold=True),
                       _cycle(slots, requests, settings, fold=False))


def test_a_partitionable_slot_takes_one_commit_per_request(monkeypatch):
    """A 64-core slot, 60 one-core jobs and a 4-core one: each request's first carve and run
    are one commit (no make_match), the 4-core job's carve too: it leaves 0 cores, and no
    step can follow a carve that uses the slot up and no longer fits it."""
    made, taken = [], []
    real_make, real_take = _Cycle.make_match, VectorSearch.take

    def make_match(self, *args):
        made.append(args[2].name)
        return real_make(self, *args)

    def take(self, *args):
        n = real_take(self, *args)
        taken.append(sum(k for k, _cost in n))  # (the matches made, per slot)
        return n

    monkeypatch.setattr(_Cycle, "make_match", make_match)
    monkeypatch.setattr(VectorSearch, "take", take)
    slot = make_slot("slot1@big", Cpus=64, Memory=262144, PartitionableSlot=True)
    many = make_job("alice", exprs={"Rank": "TARGET.Memory"})
    last = make_job("alice", RequestCpus=4)
    result, acct = run_cycle([slot], {"alice@x": [(many, 60), (last, 1)]})
    assert len(result.matches) == 61
    assert taken == [60, 1] and made == []
    assert [m.slot_ad["Cpus"] for m in result.matches] == list(range(64, 4, -1)) + [4]
    assert [m.claim_id for m in result.matches] == [f"slot1@big#0.{i}" for i in range(61)]
    assert acct.weighted_resources_used("alice@x") == 64


def test_the_placement_throttle_cuts_one_commit_at_its_budget(monkeypatch):
    """UPDOWN with 10 placements per cycle: one turn, and one commit of the 10 (a budget
    counted one short would stop the run early and need a second turn for the last)."""
    turns = count_calls(monkeypatch, VectorSearch, "best")
    slot = make_slot("slot1@big", Cpus=64, Memory=262144, PartitionableSlot=True)
    settings = NegotiatorSettings(policy="UPDOWN",
                                  updown=UpDownSettings(placements_per_cycle=10))
    result, _ = run_cycle([slot], {"alice@x": [(make_job("alice"), 40)]}, settings=settings)
    assert len(result.matches) == 10 and len(turns) == 1
