"""The vector search (slot columns, :mod:`htc.daemons.negotiator.vsearch`) makes the matches of
the scalar search and of the brute-force reference, whole cycle by whole cycle (issue #19,
"Fast"): random pools of partitionable and static slots without preemption candidates (so
that the columns take them), random job shapes, ranks and policies."""

from __future__ import annotations

import gc
import random
import weakref

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.vsearch import VectorSearch
from tests.negotiator_cycles import make_job, make_slot, run_cycle
from tests.unit.test_negotiator_reference import _brute_cycle, _outcome, _requests, _settings


def _pool(rnd: random.Random):
    starts = ["True", "True", 'TARGET.Owner != "carol"', "KeyboardIdle > 600",
              "TARGET.RequestCpus < 3"]
    if rnd.random() < 0.2:
        starts.append("TARGET.RequestMemory <= Memory / 2")  # reads a carved resource
    slots = []
    for n in range(rnd.randint(2, 24)):
        slot = make_slot(f"slot1@m{n:02d}", Cpus=rnd.choice([1, 2, 4, 8, 16]),
                         Memory=rnd.choice([1024, 2048, 8192, 32768]),
                         Disk=rnd.choice([10_000, 100_000, 1_000_000]),
                         KFlops=rnd.choice([1000, 2000]), KeyboardIdle=rnd.choice([0, 3600]),
                         Arch=rnd.choice(["X86_64"] * 4 + ["aarch64"]),
                         exprs={"Start": rnd.choice(starts)})
        if rnd.random() < 0.7:
            slot["PartitionableSlot"] = True
        slots.append(slot)
    return slots


_TURNS = []


def _counting(monkeypatch):
    real = VectorSearch._best

    def spy(self, *args):
        found = real(self, *args)
        _TURNS.append(1)
        return found
    monkeypatch.setattr(VectorSearch, "_best", spy)


@hsettings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_the_columns_make_the_matches_of_the_scalar_search_and_the_reference(seed):
    rnd = random.Random(seed)
    slots, requests, settings = _pool(rnd), _requests(rnd), _settings(rnd)
    fast, _ = run_cycle(slots, requests, settings=settings)
    saved = VectorSearch.enabled
    VectorSearch.enabled = False
    try:
        scalar, _ = run_cycle(slots, requests, settings=settings)
    finally:
        VectorSearch.enabled = saved
    assert not fast.skipped and not scalar.skipped  # no request was left out by an error
    assert _outcome(fast) == _outcome(scalar)
    assert [m.slot_ad for m in fast.matches] == [m.slot_ad for m in scalar.matches]
    assert fast.statistics.rejections_by_reason == scalar.statistics.rejections_by_reason
    slow = _brute_cycle(slots, requests, settings)
    assert _outcome(fast) == _outcome(slow)


def test_the_columns_are_exercised(monkeypatch):
    """The random pools above really go through the vector turns (most requests compile)."""
    _TURNS.clear()
    _counting(monkeypatch)
    for seed in range(30):
        rnd = random.Random(seed)
        run_cycle(_pool(rnd), _requests(rnd), settings=_settings(rnd))
    assert len(_TURNS) > 100


def test_a_pool_with_preemption_candidates_is_left_to_the_scalar_search(monkeypatch):
    from tests.negotiator_cycles import claimed

    _TURNS.clear()
    _counting(monkeypatch)
    slots = [make_slot("slot1@a", Cpus=8, Memory=8192, PartitionableSlot=True),
             claimed(make_slot("slot1@b", Cpus=1, Memory=2048), "bob@x")]
    settings = NegotiatorSettings(preemption_requirements="True")
    result, _ = run_cycle(slots, {"alice@x": [(make_job("alice"), 3)]}, settings=settings)
    assert len(result.matches) == 3 and not _TURNS


def test_a_clause_of_a_huge_integer_holds_in_both_searches():
    """HTCondor takes a non-zero number as true in Requirements, however large: a clause the
    columns evaluate slot by slot (a function call) and that gives an integer beyond 2**53
    must hold there too, as it does in the scalar search."""
    huge = 2**53 + 1
    job = make_job("alice",
                   exprs={"Requirements": f'ifThenElse(TARGET.Arch == "X86_64", {huge}, 0)'})
    slots = [make_slot("slot1@a", Cpus=4, Memory=8192, Arch="X86_64"),
             make_slot("slot1@b", Cpus=4, Memory=8192, Arch="aarch64")]
    fast, _ = run_cycle(slots, {"alice@x": [(job, 2)]})
    saved = VectorSearch.enabled
    VectorSearch.enabled = False
    try:
        scalar, _ = run_cycle(slots, {"alice@x": [(job, 2)]})
    finally:
        VectorSearch.enabled = saved
    assert [m.slot_name for m in scalar.matches] == ["slot1@a"]
    assert [m.slot_name for m in fast.matches] == ["slot1@a"]


def test_a_job_whose_requirements_is_a_plain_value_matches_in_both_searches():
    """``Requirements = True`` (a value, not an expression) holds everywhere, ``False``
    nowhere, and no request is left out by an error in either search."""
    slots = [make_slot("slot1@a", Cpus=4, Memory=8192, PartitionableSlot=True),
             make_slot("slot1@b", Cpus=2, Memory=4096)]
    for value, expected in ((True, 3), (False, 0), (1, 3), (0, 0)):
        job = make_job("alice")
        job["Requirements"] = value
        results = []
        for enabled in (True, False):
            saved = VectorSearch.enabled
            VectorSearch.enabled = enabled
            try:
                results.append(run_cycle(slots, {"alice@x": [(job, 3)]})[0])
            finally:
                VectorSearch.enabled = saved
        for result in results:
            assert not result.skipped, result.skipped
            assert len(result.matches) == expected
        fast, scalar = results
        assert [m.slot_name for m in fast.matches] == [m.slot_name for m in scalar.matches]


def test_a_literal_requirements_is_matched_by_the_columns(monkeypatch):
    """``Requirements = true`` (a literal, no clauses): the columns' plan takes it (a bug made
    its compile raise, and every such request was skipped, the simulator's jobs among them)."""
    _TURNS.clear()
    _counting(monkeypatch)
    job = make_job("alice")
    job["Requirements"] = True
    slots = [make_slot("slot1@a", Cpus=4, Memory=8192, PartitionableSlot=True)]
    result, _ = run_cycle(slots, {"alice@x": [(job, 3)]})
    assert not result.skipped
    assert [m.slot_name for m in result.matches] == ["slot1@a"] * 3 and _TURNS


def _big_pool(rnd: random.Random):
    """Forty to a hundred slots, mostly partitionable: a request fills many one after another."""
    slots = []
    for n in range(rnd.randint(40, 100)):
        slot = make_slot(f"slot1@m{n:03d}", Cpus=rnd.choice([2, 4, 8, 16]),
                         Memory=rnd.choice([2048, 8192, 32768]),
                         Disk=rnd.choice([100_000, 1_000_000]),
                         KFlops=rnd.choice([1000, 2000]), KeyboardIdle=rnd.choice([0, 3600]),
                         Arch=rnd.choice(["X86_64"] * 4 + ["aarch64"]),
                         exprs={"Start": rnd.choice(["True", "KeyboardIdle > 600"])})
        if rnd.random() < 0.9:
            slot["PartitionableSlot"] = True
        slots.append(slot)
    return slots


def test_the_queue_of_candidates_makes_the_matches_of_the_scalar_search(monkeypatch):
    """A request's turns after its first take their best slot from the queue of the turn
    before (:class:`~htc.daemons.negotiator.vorder.Queue`), brought up to date with the rows
    changed since; short queues and a low limit of changes make every path of it run (taken
    up, made afresh when too short or too much changed, complete or not), and few kept steps
    (:mod:`~htc.daemons.negotiator.vsteps`) runs longer than what was evaluated ahead."""
    from htc.daemons.negotiator import vorder, vsearch, vsteps

    monkeypatch.setattr(VectorSearch, "fill", False)  # (the one-step loop's queue paths)
    takes = []
    real_take = vorder.Queue.take

    def counting_take(self, *args):
        takes.append(1)
        return real_take(self, *args)
    monkeypatch.setattr(vorder.Queue, "take", counting_take)
    for seed in range(40):
        rnd = random.Random(seed)
        monkeypatch.setattr(vsearch, "QUEUE_LENGTH", rnd.choice([2, 3, 5, 16]))
        monkeypatch.setattr(vsearch, "QUEUE_CHANGES_MOST", rnd.choice([1, 3, 64]))
        monkeypatch.setattr(vorder, "STALE_LIMIT", rnd.choice([2, 16, 1536]))  # re-sorts too
        monkeypatch.setattr(vsteps, "MOST_STEPS", rnd.choice([1, 3, 64]))  # runs past the kept
        slots, settings = _big_pool(rnd), _settings(rnd)
        requests = {user: [(job, count * 8) for job, count in reqs]
                    for user, reqs in _requests(rnd).items()}
        fast, _ = run_cycle(slots, requests, settings=settings)
        monkeypatch.setattr(VectorSearch, "enabled", False)
        scalar, _ = run_cycle(slots, requests, settings=settings)
        monkeypatch.setattr(VectorSearch, "enabled", True)
        assert _outcome(fast) == _outcome(scalar), seed
        assert [m.slot_ad for m in fast.matches] == [m.slot_ad for m in scalar.matches]
        assert fast.statistics.rejections_by_reason == scalar.statistics.rejections_by_reason
    assert len(takes) > 200


def test_the_cycle_leaves_its_search_to_reference_counting():
    """The slot table, the shared orders and the search do not refer to each other in a
    cycle (a shared order's keys are the plan's rank functions, not a closure over the
    search): with the collector off, they are freed when the cycle returns."""
    tables, searches = [], []
    real = VectorSearch._table

    def spy(self, pool):
        table = real(self, pool)
        if table is not None:
            tables.append(weakref.ref(table))
            searches.append(weakref.ref(self))
        return table

    slots = [make_slot(f"slot1@m{n}", Cpus=8, Memory=16384, PartitionableSlot=True)
             for n in range(6)]
    requests = {"alice@x": [(make_job("alice"), 20)],
                "bob@x": [(make_job("bob", exprs={"Rank": "TARGET.Memory"}), 10)]}
    VectorSearch._table = spy
    enabled = gc.isenabled()
    gc.disable()
    try:
        result, _ = run_cycle(slots, requests)
        assert len(result.matches) == 30 and tables
        assert all(ref() is None for ref in tables + searches)
    finally:
        VectorSearch._table = real
        if enabled:
            gc.enable()
