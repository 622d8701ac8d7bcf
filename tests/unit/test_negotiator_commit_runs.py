"""``commit_runs`` (``htc.daemons.negotiator.runs``): a request's runs on several slots
committed in one pass leave the cycle as ``commit_run`` of each, one after the other: the same
MatchRuns, accountant charges, slot sizes and weights, taken slots and counters; and
``commit_fill`` (a fill's blocks) leaves it as ``commit_runs`` of them."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import numpy as np
import pytest

from htc.classad import ClassAd, ExprTree
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.match_runs import Steps
from htc.daemons.negotiator.runs import commit_fill, commit_run, commit_runs, steps_from
from htc.daemons.negotiator.slotreads import literal
from htc.daemons.negotiator.slots import Slot


class _Pool:
    def __init__(self):
        self.taken = []

    def take(self, slot):
        slot.taken = True
        self.taken.append(slot.name)


def _world(rnd: random.Random, seed_ads: list[dict], weights: bool):
    slots = [Slot(ClassAd(dict(ad)), ad["Name"]) for ad in seed_ads]
    cycle = SimpleNamespace(runs=[], matched=3, claim_seq=5, acct=Accountant(now=0.0), now=10.5,
                            cycle=4, s=SimpleNamespace(use_slot_weights=weights), free=len(slots))
    search = SimpleNamespace(taken_count=2, run_jobs=1)
    entry = SimpleNamespace(ad=SimpleNamespace(name="a@x", schedd="s", schedd_address="<s>"))
    rs = SimpleNamespace(entry=entry, request=SimpleNamespace(autocluster_id=7,
                                                              job_ids=("1.0", "1.1", "1.2")),
                         matched=1, remaining=200)
    return slots, cycle, search, rs, _Pool()


def _ad(rnd: random.Random, i: int) -> dict:
    ad = {"Name": f"slot1@n{i}", "State": "Unclaimed", "MyAddress": f"<n{i}>",
          "Cpus": rnd.choice([4, 8, 16, 6.0]), "Memory": rnd.choice([4096, 8192, 3000.5])}
    if rnd.random() < 0.7:
        ad["Disk"] = rnd.choice([10_000, 5000.0])
    if rnd.random() < 0.2:
        ad["SlotWeight"] = ExprTree("Cpus * 2")
    if rnd.random() < 0.2:
        ad["ClaimId"] = f"claim{i}"
    return ad


def _size(slot):
    return tuple(slot.ad.get(name) for name in ("Cpus", "Memory", "Disk"))


def _state(slots, cycle, search, rs, pool):
    runs = [(*run[:12], *run[13:]) for run in cycle.runs]  # (the slot's ad: compared below)
    return (runs, [(s.carves, s.weight, s.taken, str(s.ad)) for s in slots],
            json.dumps(cycle.acct.snapshot(), sort_keys=True),
            (cycle.matched, cycle.claim_seq, cycle.free, search.taken_count, search.run_jobs,
             rs.matched, rs.remaining, pool.taken))


@pytest.mark.parametrize("seed", range(40))
def test_runs_committed_at_once_are_the_runs_committed_one_by_one(seed):
    rnd = random.Random(seed)
    seed_ads = [_ad(rnd, i) for i in range(rnd.randint(1, 4))]
    weights = rnd.random() < 0.8
    one = _world(rnd, seed_ads, weights)
    batch = _world(rnd, seed_ads, weights)
    blocks, made = [], []
    for _ in range(rnd.randint(1, 6)):
        i = rnd.randrange(len(seed_ads))
        slot = one[0][i]
        if slot.taken:
            continue
        carve = (rnd.choice([1, 2, 1.5]), rnd.choice([1024, 512.25]), rnd.choice([100, 0]))
        cost = rnd.choice([1.0, 2.0, 0.5])
        states = steps_from(_size(slot), rnd.randint(1, 9), cost, carve, 0.0, 1e9, 0.0, 1e9,
                            None)
        if not states:
            continue
        first = rnd.random() < 0.5
        made.append(commit_run(one[1], one[2], one[3], one[4], slot, cost, carve, list(states),
                               first))
        blocks.append((batch[0][i], cost, carve, list(states), first))
    assert commit_runs(batch[1], batch[2], batch[3], batch[4], blocks) == made
    assert _state(*batch) == _state(*one)
    assert [str(run.slot_ad) for run in batch[1].runs] == [str(run.slot_ad) for run in one[1].runs]


def test_no_blocks_commit_nothing():
    rnd = random.Random(1)
    world = _world(rnd, [_ad(rnd, 0)], True)
    before = _state(*world)
    assert commit_runs(world[1], world[2], world[3], world[4], []) == []
    assert _state(*world) == before


@pytest.mark.parametrize("seed", range(20))
def test_sizes_left_given_by_the_caller_are_the_sizes_less_carve_leaves(seed):
    """A fill's case: whole-number sizes and carves, the sizes after each block's last carve
    given as ``h - n * c`` (vfill.commit's arithmetic), as less_carve of the last state."""
    rnd = random.Random(seed)
    seed_ads = [dict(_ad(rnd, i), Cpus=rnd.choice([8, 64]), Memory=rnd.choice([8192, 65536]),
                     Disk=rnd.choice([10_000, 100_000])) for i in range(rnd.randint(1, 4))]
    weights = rnd.random() < 0.8
    one = _world(rnd, seed_ads, weights)
    given = _world(rnd, seed_ads, weights)
    blocks, left = [], []
    for _ in range(rnd.randint(1, 6)):
        i = rnd.randrange(len(seed_ads))
        slot = one[0][i]
        if slot.taken:
            continue
        carve = (rnd.choice([1, 2, 3]), rnd.choice([1024, 1000]), rnd.choice([100, 1]))
        states = steps_from(_size(slot), rnd.randint(1, 9), 1.0, carve, 0.0, 1e9, 0.0, 1e9,
                            None)
        if not states:
            continue
        h, n = states[0], len(states)
        commit_run(one[1], one[2], one[3], one[4], slot, 1.0, carve, list(states), True)
        blocks.append((given[0][i], 1.0, carve, list(states), True))
        left.append([h[j] - n * carve[j] for j in range(3)])
    made = commit_runs(given[1], given[2], given[3], given[4], blocks, left)
    assert made == [len(block[3]) for block in blocks]
    assert _state(*given) == _state(*one)
    assert [str(s.ad) for s in given[0]] == [str(s.ad) for s in one[0]]


@pytest.mark.parametrize("seed", range(40))
def test_a_fills_blocks_committed_by_commit_fill_are_commit_runs_of_them(seed):
    """vfill.commit's case: whole-number sizes and carves, every block a turn's carve, its
    states a Steps, the sizes it leaves an integer array; a slot may come back in a later
    block. commit_fill leaves what commit_runs leaves: runs (their sizes equal), charges,
    ads, weights, taken slots in order, counters."""
    rnd = random.Random(seed)
    seed_ads = [dict(_ad(rnd, i), Cpus=rnd.choice([1, 4, 7, 64]),
                     Memory=rnd.choice([1024, 8192, 65536]),
                     Disk=rnd.choice([100, 10_000, 100_000])) for i in range(rnd.randint(1, 5))]
    weights = rnd.random() < 0.8
    one = _world(rnd, seed_ads, weights)
    fill = _world(rnd, seed_ads, weights)
    carve = (rnd.choice([1, 2, 3]), rnd.choice([1024, 1000]), rnd.choice([100, 1]))
    blocks, slots, counts, costs, states, left = [], [], [], [], [], []
    for _ in range(rnd.randint(1, 8)):
        i = rnd.randrange(len(seed_ads))
        slot = one[0][i]
        if slot.taken:
            continue
        cost = rnd.choice([1.0, 2.0, 0.5, 8.0])
        steps = steps_from(_size(slot), rnd.randint(1, 30), cost, carve, 0.0, 1e9, 0.0, 1e9, None)
        if not steps:
            continue
        h, n = steps[0], len(steps)
        # (the slot's ad as the block leaves it: the next block of the slot starts there)
        commit_runs(one[1], one[2], one[3], one[4], [(slot, cost, carve, list(steps), True)])
        blocks.append((slot, cost, carve, list(steps), True))
        slots.append(fill[0][i])
        counts.append(n)
        costs.append(cost)
        states.append(Steps(h, carve, n))
        left.append([h[j] - n * carve[j] for j in range(3)])
    if not slots:
        return
    commit_fill(fill[1], fill[2], fill[3], fill[4], slots, carve, counts, costs, states,
                np.array(left, dtype=np.int64).T)
    assert _state(*fill) == _state(*one)
    assert [list(run.sizes) for run in fill[1].runs] == [list(run.sizes) for run in one[1].runs]
    assert [str(s.ad) for s in fill[0]] == [str(s.ad) for s in one[0]]
    assert [str(run.slot_ad) for run in fill[1].runs] == [str(run.slot_ad) for run in one[1].runs]
    # (the sizes written as literal's shared nodes, the very ones commit_runs writes)
    for ours, theirs in zip(fill[0], one[0]):
        for name in ("cpus", "memory", "disk") if ours in slots else ():
            assert ours.ad._exprs[name] is theirs.ad._exprs[name]


@pytest.mark.parametrize("seen", [False, True])
def test_commit_fill_writes_the_sizes_as_literals_shared_nodes(seen):
    """The sizes a fill leaves are written as ``literal``'s shared node of each, whether
    ``literal`` made it before (looked up in its table) or not (made and kept there)."""
    rnd = random.Random(7 + seen)
    big = 10**12 + rnd.randrange(10**9) * 8  # (whole numbers no other test writes)
    ad = {"Name": "slot1@n0", "State": "Unclaimed", "MyAddress": "<n0>", "Cpus": big + 6,
          "Memory": big + 7000, "Disk": big + 900}
    slots, cycle, search, rs, pool = _world(rnd, [ad], True)
    left = [big + 4, big + 5000, big + 800]  # (two carves of (1, 1000, 50))
    if seen:
        made = [literal(v) for v in left]
    commit_fill(cycle, search, rs, pool, slots, (1, 1000, 50), [2], [1.0],
                [Steps((big + 6, big + 7000, big + 900), (1, 1000, 50), 2)],
                np.array([left], dtype=np.int64).T)
    nodes = [slots[0].ad._exprs[name] for name in ("cpus", "memory", "disk")]
    assert [node.value for node in nodes] == left
    assert all(node is literal(v) for node, v in zip(nodes, left))
    if seen:
        assert all(node is m for node, m in zip(nodes, made))
    assert slots[0].weight == float(big + 4)
