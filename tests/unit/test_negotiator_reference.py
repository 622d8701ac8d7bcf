"""The negotiator's idle-slot search gives the matches of a brute-force reference (issue #19,
"Fast"): shared lanes, held partitionable slots with their carve plans, slot classes and the
clause caches change the cost of a cycle, never its decisions.

The reference (:func:`_brute_best`) looks at every free slot for every job: both
``Requirements``, the carve, the three ranks and the slot name, evaluated afresh each time, the
best first; it replaces ``IdleSearch.best`` while the same cycle runs again, so the fair-share
order, the submitters' limits, preemption and carving are the cycle's own in both runs.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.classad.match import rank, symmetric_match
from htc.daemons.negotiator.preemption import submitter_limit_permits
from htc.daemons.negotiator.search import IdleSearch
from htc.daemons.negotiator.settings import DEFAULT_PRE_JOB_RANK, NegotiatorSettings
from htc.daemons.negotiator.slotreads import eval_rank
from htc.daemons.negotiator.slots import SlotPool
from htc.daemons.negotiator.vsearch import VectorSearch
from tests.negotiator_cycles import claimed, make_job, make_slot, run_cycle

_original_add, _original_add_all = SlotPool.add, SlotPool.add_all


def _recording_add(self, slot):
    """SlotPool.add that also keeps every idle slot, for the reference to scan."""
    _everything(self).append(slot)
    _original_add(self, slot)


def _recording_add_all(self, slots):
    """SlotPool.add_all that also keeps every idle slot (the cycle adds them at once)."""
    _everything(self).extend(slots)
    _original_add_all(self, slots)


_ALL: dict[int, list] = {}  # id(pool) -> its idle slots, while the reference runs


def _everything(pool) -> list:
    return _ALL.setdefault(id(pool), [])


def _brute_best(self, rs, pool, used, limit):
    """Every free slot, evaluated afresh, best key first (what ``IdleSearch.best`` must equal)."""
    job = rs.job
    found = []
    for slot in _everything(pool):
        if slot.taken or not symmetric_match(job, slot.ad):
            continue
        carve = self.fits(job, slot.ad) if slot.partitionable else None
        if slot.partitionable and carve is None:
            continue
        parts = (eval_rank(self.pre_rank, slot.ad, job), rank(job, slot.ad),
                 eval_rank(self.post_rank, slot.ad, job))
        found.append((self.key(parts, slot), slot, carve))
    found.sort(key=lambda c: c[0])
    limited = False
    for key, slot, carve in found:
        cost = self.cost(slot, carve)
        if submitter_limit_permits(used, limit, cost):
            return (key, slot, cost, carve), True, limited
        limited = True
    return None, bool(found), limited


def _pool(rnd: random.Random):
    starts = ["True", "True", 'TARGET.Owner != "carol"', "TARGET.RequestMemory <= Memory / 2",
              "KeyboardIdle > 600", "TARGET.RequestCpus < 3 || Cpus >= 8"]
    slots = []
    for n in range(rnd.randint(2, 24)):
        slot = make_slot(f"slot1@m{n:02d}", Cpus=rnd.choice([1, 2, 4, 8, 16]),
                         Memory=rnd.choice([1024, 2048, 8192, 32768]),
                         Disk=rnd.choice([10_000, 100_000, 1_000_000]),
                         KFlops=rnd.choice([1000, 2000]), KeyboardIdle=rnd.choice([0, 3600]),
                         Arch=rnd.choice(["X86_64"] * 4 + ["aarch64"]),
                         exprs={"Start": rnd.choice(starts)})
        kind = rnd.random()
        if kind < 0.6:
            slot["PartitionableSlot"] = True
        elif kind < 0.8:
            slot = claimed(slot, rnd.choice(["alice@x", "bob@x", "dave@x"]))
        slots.append(slot)
    return slots


def _requests(rnd: random.Random):
    reqs = ["", ' && TARGET.Arch == "X86_64"', " && TARGET.Memory >= 2 * RequestMemory",
            " && TARGET.Disk >= RequestDisk", " && TARGET.Cpus >= RequestCpus + 1",
            " && (TARGET.KFlops > 1500 || TARGET.Memory > 4000)"]
    ranks = [{}, {"Rank": "TARGET.Memory"}, {"Rank": "-TARGET.Cpus"}, {"Rank": "TARGET.KFlops"},
             {"Rank": "TARGET.Disk / 1000 + TARGET.Memory"}]
    shapes = [dict(exprs={"Requirements": "TARGET.OpSys == \"LINUX\"" + rnd.choice(reqs),
                          **rnd.choice(ranks)},
                   RequestCpus=rnd.choice([1, 1, 2, 3]), RequestMemory=rnd.choice([500, 1500, 3000]),
                   RequestDisk=rnd.choice([1000, 50_000]))
              for _ in range(rnd.randint(1, 4))]
    users = rnd.sample(["alice@x", "bob@x", "carol@x", "dave@x"], rnd.randint(1, 4))
    # users share shapes, so that requests share lanes
    return {u: [(make_job(u.split("@")[0], **rnd.choice(shapes)), rnd.randint(1, 15))
                for _ in range(rnd.randint(1, 3))]
            for u in users}


def _settings(rnd: random.Random) -> NegotiatorSettings:
    pre = rnd.choice([DEFAULT_PRE_JOB_RANK, None, "Cpus", "-Memory", "TARGET.RequestMemory - Memory"])
    return NegotiatorSettings(preemption_requirements=rnd.choice(["False", "True"]),
                              policy=rnd.choice(["HTCONDOR", "HTCONDOR", "UPDOWN"]),
                              pre_job_rank=pre)


def _outcome(result):
    return [(m.submitter, m.autocluster_id, m.slot_name, m.carved, m.preemption)
            for m in result.matches]


@hsettings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_the_search_matches_the_brute_force_reference(seed):
    rnd = random.Random(seed)
    slots, requests, settings = _pool(rnd), _requests(rnd), _settings(rnd)
    fast, _ = run_cycle(slots, requests, settings=settings)
    slow = _brute_cycle(slots, requests, settings)
    assert _outcome(fast) == _outcome(slow)
    assert fast.statistics.rejections_by_reason == slow.statistics.rejections_by_reason


def _brute_cycle(slots, requests, settings):
    """The cycle with the brute-force search, one job per search (no runs)."""
    saved = IdleSearch.best, SlotPool.add, SlotPool.add_all, IdleSearch.runs, VectorSearch.enabled
    IdleSearch.best, IdleSearch.runs = _brute_best, False
    SlotPool.add, SlotPool.add_all = _recording_add, _recording_add_all
    VectorSearch.enabled = False  # the reference is the scalar search's
    try:
        _ALL.clear()
        slow, _ = run_cycle(slots, requests, settings=settings)
    finally:
        (IdleSearch.best, SlotPool.add, SlotPool.add_all, IdleSearch.runs,
         VectorSearch.enabled) = saved
        _ALL.clear()
    return slow


def test_the_reference_is_exercised():
    """The reference really replaces the search (a broken reference would agree with nothing)."""
    rnd = random.Random(7)
    slots = [make_slot("slot1@a", Cpus=8, Memory=8192, PartitionableSlot=True),
             make_slot("slot1@b", Cpus=1, Memory=2048)]
    requests = {"alice@x": [(make_job("alice"), 5)]}
    calls = []

    def spy(self, rs, pool, used, limit):
        calls.append(rs)
        return _brute_best(self, rs, pool, used, limit)

    saved = IdleSearch.best, SlotPool.add, SlotPool.add_all, VectorSearch.enabled
    IdleSearch.best, SlotPool.add, SlotPool.add_all = spy, _recording_add, _recording_add_all
    VectorSearch.enabled = False
    try:
        result, _ = run_cycle(slots, requests, settings=_settings(rnd))
    finally:
        IdleSearch.best, SlotPool.add, SlotPool.add_all, VectorSearch.enabled = saved
        _ALL.clear()
    assert calls and len(result.matches) == 5
