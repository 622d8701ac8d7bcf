"""A request's fill decided in one vectorised pass (:mod:`htc.daemons.negotiator.vfill`): the
same matches, claim ids, offered ads, accountant charges and rejections as the one-step loop
(``VectorSearch.fill`` off), whole cycle by whole cycle."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.daemons.negotiator import vfill, vorder
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.updown import UpDownSettings
from htc.daemons.negotiator.vsearch import VectorSearch
from tests.negotiator_cycles import assert_same_cycles, make_job, make_slot, run_cycle
from tests.unit.test_negotiator_reference import _settings

_RANKS = [{}, {"Rank": "TARGET.Memory"}, {"Rank": "-TARGET.Memory"}, {"Rank": "TARGET.Cpus"},
          {"Rank": "-TARGET.Cpus"}, {"Rank": "TARGET.KFlops"},
          {"Rank": "TARGET.Memory / 1024 - TARGET.Cpus"}, {"Rank": "TARGET.Disk / 1000"}]
_REQS = ["", " && TARGET.Memory >= 2 * RequestMemory", " && TARGET.Cpus >= RequestCpus + 1",
         ' && TARGET.Arch == "X86_64"', " && (TARGET.KFlops > 1500 || TARGET.Memory > 4000)"]


def _pool(rnd: random.Random, floats: bool):
    """Static and partitionable slots; sizes ints, or now and then floats (the one-step
    loop's, whole or not)."""
    starts = ["True", "True", "TARGET.RequestCpus < 3", "KFlops > 1000"]
    if rnd.random() < 0.1:
        starts.append("TARGET.RequestMemory <= Memory / 2")  # (the scalar search's then)
    slots = []
    for n in range(rnd.randint(5, 60)):
        size = dict(Cpus=rnd.choice([1, 2, 4, 8, 16]), Memory=rnd.choice([1024, 4096, 16384]),
                    Disk=rnd.choice([10_000, 1_000_000]))
        if floats and rnd.random() < 0.3:
            name = rnd.choice(["Cpus", "Memory", "Disk"])
            size[name] = size[name] + rnd.choice([0.0, 0.5])
        slot = make_slot(f"slot1@m{n:02d}", **size, KFlops=rnd.choice([1000, 2000]),
                         Arch=rnd.choice(["X86_64"] * 4 + ["aarch64"]),
                         exprs={"Start": rnd.choice(starts)})
        if rnd.random() < 0.8:
            slot["PartitionableSlot"] = True
        slots.append(slot)
    return slots


def _requests(rnd: random.Random, floats: bool):
    shapes = []
    for _ in range(rnd.randint(1, 4)):
        cpus, memory = rnd.choice([1, 1, 2, 3]), rnd.choice([500, 1024, 3000])
        if floats and rnd.random() < 0.3:
            cpus, memory = rnd.choice([(cpus + 0.5, memory), (cpus, memory + 0.25)])
        shapes.append(dict(exprs={"Requirements": 'TARGET.OpSys == "LINUX"' + rnd.choice(_REQS),
                                  **rnd.choice(_RANKS)},
                           RequestCpus=cpus, RequestMemory=memory,
                           RequestDisk=rnd.choice([0, 1000, 50_000])))
    users = rnd.sample(["alice@x", "bob@x", "carol@x", "dave@x"], rnd.randint(1, 4))
    return {u: [(make_job(u.split("@")[0], **rnd.choice(shapes)), rnd.randint(1, 60))
                for _ in range(rnd.randint(1, 3))]
            for u in users}


def _cycle(slots, requests, settings, fill: bool, fewest: int = 1):
    """One cycle with the fill on or off (``fewest``: :data:`~.vfill.FEWEST_JOBS`, the jobs
    a request must have left for a fill: 1, every request, unless a test says)."""
    saved = VectorSearch.fill, vfill.FEWEST_JOBS
    VectorSearch.fill, vfill.FEWEST_JOBS = fill, fewest
    try:
        return run_cycle(slots, requests, settings=settings, acct=Accountant(now=0.0),
                         now=600.0)
    finally:
        VectorSearch.fill, vfill.FEWEST_JOBS = saved


def _same(slots, requests, settings, fewest: int = 1):
    assert_same_cycles(_cycle(slots, requests, settings, fill=True, fewest=fewest),
                       _cycle(slots, requests, settings, fill=False))


def _random_case(seed: int):
    rnd = random.Random(seed)
    floats = rnd.random() < 0.3
    slots, requests, settings = _pool(rnd, floats), _requests(rnd, floats), _settings(rnd)
    settings = dataclasses.replace(settings, use_slot_weights=rnd.random() < 0.7)
    if settings.updown_policy and rnd.random() < 0.5:  # UPDOWN's budget cuts a fill
        settings = dataclasses.replace(
            settings, updown=UpDownSettings(placements_per_cycle=rnd.randint(1, 30)))
    return slots, requests, settings


def _filled_cycles(monkeypatch, count: int) -> None:
    """Fill ``count`` random cycles with small and large stale limits and windows (many looks,
    re-sorts and barrier passes), for a test that checks each look on the way."""
    for seed in range(count):
        rnd = random.Random(seed)
        monkeypatch.setattr(vorder, "STALE_LIMIT", rnd.choice([2, 16, 1536]))
        monkeypatch.setattr(vfill, "MOST_ROWS", rnd.choice([1, 3, 256]))
        _cycle(*_random_case(seed), fill=True)


@hsettings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_a_fill_in_one_pass_makes_what_the_one_step_loop_makes(seed):
    """Random pools (static and partitionable slots, int and float sizes), ranks that read
    Memory or Cpus either way, several users whose limits stop them mid-request, slot
    weights on and off, UPDOWN's budget."""
    _same(*_random_case(seed), fewest=random.Random(seed).choice([1, 1, 1, 8, 32]))


def test_small_windows_make_many_passes_and_the_same_matches(monkeypatch):
    """A window of one to three rows or a few elements: many passes stop at their barrier,
    and the next pass goes on from there; the loop is left some requests."""
    outcomes = []
    real = vfill.decide

    def spy(*args):
        found = real(*args)
        outcomes.append(found is not None and (found[2] or "last"))
        return found
    monkeypatch.setattr(vfill, "decide", spy)
    for seed in range(60):
        rnd = random.Random(seed)
        monkeypatch.setattr(vfill, "MOST_ROWS", rnd.choice([1, 2, 3, 256]))
        monkeypatch.setattr(vfill, "MOST_ELEMENTS", rnd.choice([1, 4, 16384]))
        _same(*_random_case(seed))
    # passes stopped at their barrier and followed by another, last passes, and requests the
    # loop was left
    assert outcomes.count(True) > 50 and outcomes.count("last") > 50
    assert outcomes.count(False) > 5


def test_a_fill_interleaves_slots_whose_rank_falls_as_they_shrink():
    """Rank = TARGET.Memory: each carve makes a slot worse, so the fill goes round the slots
    of equal memory one job at a time, and a limit cuts it mid-request."""
    slots = [make_slot(f"slot1@m{n}", Cpus=8, Memory=8192 * (1 + n % 3), PartitionableSlot=True)
             for n in range(9)]
    requests = {"alice@x": [(make_job("alice", exprs={"Rank": "TARGET.Memory"}), 80)],
                "bob@x": [(make_job("bob", exprs={"Rank": "-TARGET.Cpus"}), 80)]}
    settings = NegotiatorSettings(pre_job_rank=None)  # (the default prefers small slots)
    filled, _ = _cycle(slots, requests, settings, fill=True)
    assert len(filled.matches) == 72
    alice = [m.slot_name for m in filled.matches if m.submitter == "alice@x"]
    assert alice[:6] == ["slot1@m2", "slot1@m5", "slot1@m8"] * 2  # the 24 GB slots, by name
    assert 36 <= len(alice) < 72 and "alice@x" in filled.statistics.submitters_share_limited
    _same(slots, requests, settings)


def test_a_look_as_arrays_is_the_look_as_a_list(monkeypatch):
    """:meth:`~.vorder.SharedOrder.ranked_arrays` gives the rows, keys and completeness that
    :meth:`~.vorder.SharedOrder.ranked` gives, and moves the cursor alike (stale rows and
    fresh ones, re-sorts, every want)."""

    looks = []
    real = vorder.SharedOrder.ranked_arrays

    def both(self, cursor, mask, want):
        twin = vorder.Cursor(cursor.order)
        twin.sorting, twin.pos = cursor.sorting, cursor.pos
        listed, listed_complete = self.ranked(twin, mask, want)
        found, complete = real(self, cursor, mask, want)
        rows, pre, jr, post, names = (part.tolist() for part in found)
        assert listed == list(zip(rows, zip(pre, jr, post, names)))
        assert (complete, cursor.pos, cursor.sorting) == (listed_complete, twin.pos,
                                                         twin.sorting)
        looks.append(len(rows))
        return found, complete
    monkeypatch.setattr(vorder.SharedOrder, "ranked_arrays", both)
    _filled_cycles(monkeypatch, 30)
    assert len(looks) > 30 and max(looks) > 3


def test_a_row_logged_twice_is_one_stale_row():
    """:meth:`~.vorder.SharedOrder.sync` takes the rows logged since its last look as stale
    rows once each (a row logged twice, or stale already, is not a second candidate), and
    the used-up rows as stale but no candidates."""


    class _Table:
        slots = [None] * 6
        log: list = []
        alive = np.ones(6, dtype=bool)
        name_rank = np.arange(6)

        def rows(self, idx):
            return idx

    table = _Table()
    order = vorder.SharedOrder(table, lambda rows, n: (-rows.astype(float), np.zeros(n),
                                                       np.zeros(n)))
    table.log += [4, 1, 4, 4, 2]
    table.alive[2] = False
    order.sync()
    assert sorted(order.stale_rows.tolist()) == [1, 4]
    assert order.stale.tolist() == [False, True, True, False, True, False]
    table.log += [1, 3, 3]
    order.sync()
    assert sorted(order.stale_rows.tolist()) == [1, 3, 4]


def test_a_look_served_from_the_last_look_is_a_look_afresh(monkeypatch):
    """A turn looks wide enough for the fill after it (:func:`~.vfill.look_width`), and the
    fill's first look is served from it (:meth:`~.vorder.SharedOrder._look`): what it serves
    is what a walk afresh finds, rows, keys, completeness and the cursor."""


    served = []
    real = vorder.SharedOrder._look

    def both(self, cursor, mask, want, wider=0):
        twin = vorder.Cursor(cursor.order)
        twin.sorting, twin.pos = cursor.sorting, cursor.pos
        walked = self._walk(twin, mask, want, None)
        last = self._last
        best, every_stale, fresh = real(self, cursor, mask, want, wider)
        served.append(self._last is last)
        assert (cursor.pos, cursor.sorting) == (twin.pos, twin.sorting)
        assert np.array_equal(fresh, walked[7]) and every_stale == (walked[6] <= want)
        assert (best is None) == (walked[5] is None)
        if best is not None:
            assert all(np.array_equal(a, b) for a, b in zip(best, walked[5]))
        return best, every_stale, fresh
    monkeypatch.setattr(vorder.SharedOrder, "_look", both)
    _filled_cycles(monkeypatch, 20)
    assert any(served) and not all(served)


def test_a_pass_cut_row_by_row_is_the_pass_cut_step_by_step(monkeypatch):
    """Where each row's key only gets better as it shrinks (the default pre-job rank), a pass
    is its rows in order, cut row by row (:func:`~.vfill._row_blocks`); with that path off,
    the merge by sorting and the cuts step by step make the same cycles. Both paths run."""
    paths = {"rows": 0, "sorted": 0}
    real_rows, real_sorted = vfill._row_blocks, vfill._merged

    def rows(*args):
        paths["rows"] += 1
        return real_rows(*args)

    def merged(*args):
        paths["sorted"] += 1
        return real_sorted(*args)
    monkeypatch.setattr(vfill, "_row_blocks", rows)
    monkeypatch.setattr(vfill, "_merged", merged)
    for seed in range(40):
        case = _random_case(seed)
        with_rows = _cycle(*case, fill=True)
        with monkeypatch.context() as off:
            off.setattr(vfill, "_improving", lambda parts, starts: False)
            assert_same_cycles(with_rows, _cycle(*case, fill=True))
    assert paths["rows"] > 30 and paths["sorted"] > 30


def test_a_fill_that_uses_every_slot_up_stops_there():
    """Partitionable slots only, more jobs than they hold: the fill's pass uses every slot up
    (its cut at ``cycle.free``) and the loop's next turn finds none."""
    slots = [make_slot(f"slot1@m{n}", Cpus=4, Memory=4096, PartitionableSlot=True)
             for n in range(5)]
    requests = {"alice@x": [(make_job("alice"), 40)], "bob@x": [(make_job("bob"), 40)]}
    filled, _ = _cycle(slots, requests, NegotiatorSettings(), fill=True)
    assert len(filled.matches) == 20
    assert {m.slot_name for m in filled.matches} == {f"slot1@m{n}" for n in range(5)}
    _same(slots, requests, NegotiatorSettings())


def test_a_key_improving_at_every_step_is_told_apart_part_by_part():
    """:func:`~.vfill._improving`: each row's key, part by part (higher first), at least as
    good at each step as at the one before; a fall from one row to the next does not count."""
    improving = vfill._improving
    starts = np.array([0, 3])  # (two rows: steps 0-2 and 3-4)
    rise, flat = np.array([1., 2, 3, 0, 5]), np.array([7., 7, 7, 7, 7])
    assert improving([rise], starts) and improving([], starts)
    assert improving([flat, rise], starts)  # (the first part equal: the next decides)
    assert not improving([flat, rise[::-1]], starts)
    assert not improving([np.array([1., 1, 3, 4, 5]), np.array([0., -1, 0, 0, 0])], starts)
    assert improving([np.array([1., 2, 2, 4, 5]), np.array([0., 9, 9, 0, 0])], starts)
    assert not improving([np.array([1., 2, 2, 4, 5]), flat, np.array([0., 9, 8, 0, 0])], starts)
    assert not improving([np.array([2., 1, 3, 4, 5]), -rise], starts)


def test_the_row_cuts_are_the_step_cuts():
    """:func:`~.vfill._row_blocks` cuts a pass whose steps come row by row as
    :func:`~.vfill._element_blocks` cuts them step by step: the jobs left, the slots used up
    (``free``), the limit (``used``, ``used_u`` before each step); random rows, some whose
    sequence ends early (``nok``), some used up at their last step."""
    rnd = random.Random(7)
    cuts = set()
    for _ in range(3000):
        m = rnd.randint(1, 6)
        rows = np.array(rnd.sample(range(20), m), dtype=np.intp)
        n = np.array([rnd.randint(1, 5) for _ in range(m)])
        used_up = np.array([rnd.random() < 0.6 for _ in range(m)])
        jobs = rnd.randint(1, 25)
        steps = np.minimum(n, jobs)
        nok = np.array([rnd.choice([s, s, rnd.randint(0, s)]) for s in steps.tolist()])
        k = np.array([1, 512, 100])
        h = np.array([[rnd.randint(8, 32) for _ in range(m)], [8192] * m, [10_000] * m])
        cost = np.array([rnd.choice([1.0, 0.5, 3.0]) for _ in range(20)])
        used, used_u = rnd.choice([(0.0, 0.0), (2.5, 2.5), (1.0, 0.0)])
        limit, limit_u = rnd.choice([1e9, 6.0, 12.5]), rnd.choice([1e9, 5.0, 0.0])
        free, barred = rnd.randint(1, m + 2), rnd.random() < 0.5
        starts = np.cumsum(steps) - steps
        seg = np.repeat(np.arange(m), steps)
        step = np.arange(int(steps.sum())) - starts[seg]
        merged = np.flatnonzero(step < nok[seg])
        at = (h[:, seg] - step * k[:, None]).astype(float)
        by_steps = vfill._element_blocks(merged, barred and merged.size < jobs, seg, step, n,
                                         used_up, rows[seg], at, k, jobs, free, cost, used,
                                         limit, used_u, limit_u)
        by_rows = vfill._row_blocks(rows, h, k, nok, n, used_up, barred, jobs, free, cost,
                                    used, limit, used_u, limit_u)
        assert by_rows == by_steps
        ends = np.cumsum(nok)[used_up & (nok == n)]  # (where each used-up row's steps end)
        taken = 0 if by_steps is None else sum(block[4] for block in by_steps[0])
        if ends.size >= free and ends[free - 1] <= jobs:
            cuts.add("free" if taken == ends[free - 1] else "limit")
        else:
            cuts.add("jobs" if taken == jobs else "limit or the steps")
    assert cuts == {"jobs", "free", "limit", "limit or the steps"}
