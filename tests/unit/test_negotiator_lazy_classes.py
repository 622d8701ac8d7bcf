"""Slot classes are built on first use (:mod:`htc.daemons.negotiator.slots`): a cycle whose
requests all take the vector search builds none, and a cycle where a request the vector search
cannot take comes after vector matches (the classes are built from slots already carved or
taken) makes the matches of the scalar search and of the brute-force reference."""

from __future__ import annotations

import random

import pytest

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.classad import ExprTree
from htc.daemons.negotiator.slots import SlotPool
from htc.daemons.negotiator.vsearch import VectorSearch
from tests.negotiator_cycles import make_job, make_slot, run_cycle, run_cycle_with
from tests.unit.test_negotiator_reference import _brute_cycle, _outcome, _requests, _settings
from tests.unit.test_negotiator_vsearch import _pool


def _with_a_scalar_request(rnd: random.Random) -> dict:
    """Random requests, one of them (at a random place of a random submitter's list) with a
    ``RequestMemory`` expression: the vector search leaves that one to the class search."""
    requests = _requests(rnd)
    user = rnd.choice(sorted(requests))
    job = make_job(user.split("@")[0], RequestCpus=rnd.choice([1, 2]))
    job["RequestMemory"] = ExprTree(rnd.choice(["2 * 750", "500 + 500", "3000"]))
    items = requests[user]
    items.insert(rnd.randint(0, len(items)), (job, rnd.randint(1, 10)))
    return requests


def _scalar_cycle(slots, requests, settings):
    return run_cycle_with(VectorSearch, "enabled", False, slots, requests, settings)


@hsettings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_classes_built_after_vector_matches_make_the_matches_of_the_scalar_search(seed):
    rnd = random.Random(seed)
    slots, requests, settings = _pool(rnd), _with_a_scalar_request(rnd), _settings(rnd)
    fast, _ = run_cycle(slots, requests, settings=settings)
    scalar = _scalar_cycle(slots, requests, settings)
    assert _outcome(fast) == _outcome(scalar)
    assert [m.slot_ad for m in fast.matches] == [m.slot_ad for m in scalar.matches]
    assert fast.statistics.rejections_by_reason == scalar.statistics.rejections_by_reason
    assert _outcome(fast) == _outcome(_brute_cycle(slots, requests, settings))


def test_the_classes_are_built_after_vector_matches(monkeypatch):
    """The cycles above really class slots that vector turns carved or took first."""
    late = []
    real = SlotPool._classify

    def spy(self):
        late.append(any(slot.carves or slot.taken for slot in self.slots))
        real(self)
    monkeypatch.setattr(SlotPool, "_classify", spy)
    for seed in range(40):
        rnd = random.Random(seed)
        run_cycle(_pool(rnd), _with_a_scalar_request(rnd), settings=_settings(rnd))
    assert sum(late) >= 5


def test_a_cycle_of_vector_requests_builds_no_class():
    slots = [make_slot(f"slot1@m{n}", Cpus=8, Memory=8192, PartitionableSlot=True,
                       KeyboardIdle=n) for n in range(6)]
    requests = {"alice@x": [(make_job("alice"), 10)], "bob@x": [(make_job("bob"), 10)]}
    fast, _ = run_cycle(slots, requests)
    scalar = _scalar_cycle(slots, requests, None)
    assert len(fast.matches) == 20
    assert _outcome(fast) == _outcome(scalar)
    assert fast.statistics.slot_classes == 0
    assert scalar.statistics.slot_classes > 0


def test_a_pool_classes_its_free_slots_on_first_read():
    from htc.daemons.negotiator.slots import Slot

    pool = SlotPool((), set(), None, None)
    ads = [make_slot(f"slot1@m{n}", Memory=1024 * (1 + n % 2)) for n in range(4)]
    slots = [Slot(ad, ad["Name"]) for ad in ads]
    for slot in slots:
        pool.add(slot)
    pool.take(slots[0])
    assert pool.class_count == 0 and not pool.classed
    assert pool.free_slots() == slots[1:]
    classes = pool.classes  # (read: classed now, the taken slot left out)
    assert pool.classed and pool.class_count == len(classes) == 2  # by Memory: 2048, 1024
    assert [cls.best() for cls in classes] == [slots[1], slots[2]]
    assert slots[3].cls is classes[0] and slots[0].cls is None
    assert pool.avail_log == [0, 1] and pool.base_reps == [classes[0]]
    extra = Slot(make_slot("slot1@m0b", Memory=1024), "slot1@m0b")
    pool.add(extra)  # once the classes exist, a slot is classed as it is added
    assert extra.cls is classes[1] and classes[1].best() is extra  # (the first name)
    assert pool.avail_log == [0, 1, 1]


@pytest.mark.parametrize("classed", [False, True])
def test_add_all_adds_as_add_of_each_in_order(classed):
    from htc.daemons.negotiator.slots import Slot

    def pool_of(add_all: bool):
        pool = SlotPool((), set(), None, None)
        first = [Slot(make_slot(f"slot1@a{n}", Memory=1024 * (1 + n % 3)), f"slot1@a{n}")
                 for n in range(3)]
        for slot in first:
            pool.add(slot)
        if classed:
            pool.classes  # noqa: B018 - the read classes the pool
        more = [Slot(make_slot(f"slot1@b{n}", Memory=1024 * (1 + n % 4)), f"slot1@b{n}")
                for n in range(5)]
        if add_all:
            pool.add_all(more)
        else:
            for slot in more:
                pool.add(slot)
        return pool

    one, each = pool_of(True), pool_of(False)
    assert [s.name for s in one.slots] == [s.name for s in each.slots]
    assert one.classed == each.classed == classed
    if classed:
        assert [[m[2].name for m in c.members] for c in one.classes] == \
            [[m[2].name for m in c.members] for c in each.classes]
        assert one.avail_log == each.avail_log and len(one.classes) == 4
