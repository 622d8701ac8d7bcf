"""Slot bases and per-base verdicts (``htc.daemons.negotiator.bases``, issue #19 "Fast"):
a partitionable slot keeps its base as it shrinks, a lane passes over the bases a clause or
``START`` excludes without evaluating anything per class, resource comparisons are decided by
arithmetic -- and the matches stay those of the brute-force reference."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.classad import ClassAd, ExprTree, Undefined
from htc.daemons.negotiator import slots as slots_module
from htc.daemons.negotiator.bases import resource_comparison
from htc.daemons.negotiator.search import IdleSearch
from htc.daemons.negotiator.vsearch import VectorSearch
from htc.daemons.negotiator.settings import DEFAULT_PRE_JOB_RANK, NegotiatorSettings
from htc.daemons.negotiator.slots import SlotPool
from tests.negotiator_cycles import claimed, make_job, make_slot, run_cycle
from tests.unit.test_negotiator_reference import _brute_cycle, _outcome

# ---------------------------------------------------------------------------------------------
# resource comparisons by arithmetic

_VALUES = st.one_of(st.integers(-2**40, 2**40), st.floats(allow_nan=False, allow_infinity=False,
                                                          width=64),
                    st.sampled_from([None, True, "big", 0, 1, 1.0, 2**53 + 1]),
                    st.sampled_from(["expr:Cpus * 2", "expr:RequestCpus + 1"]))
_OPERANDS = st.sampled_from(["TARGET.Memory", "RequestMemory", "MY.RequestMemory", "(TARGET.Memory)",
                             "1024", "2.5", "TARGET.Cpus", "Undefined", "TARGET.Gpus"])


def _put(ad: ClassAd, name: str, value) -> None:
    if value is None:
        return  # missing
    if isinstance(value, str) and value.startswith("expr:"):
        ad[name] = ExprTree(value[5:])
    else:
        ad[name] = value


@hsettings(max_examples=300, deadline=None)
@given(op=st.sampled_from(["<", "<=", ">", ">=", "==", "+"]), left=_OPERANDS, right=_OPERANDS,
       memory=_VALUES, request=_VALUES, cpus=_VALUES)
def test_a_resource_comparison_decides_as_classad_evaluation_does(op, left, right, memory,
                                                                  request, cpus):
    slot, job = ClassAd({"Name": "slot1@a"}), ClassAd({"Owner": "alice"})
    _put(slot, "Memory", memory)
    _put(slot, "Cpus", cpus)
    _put(job, "RequestMemory", request)
    _put(job, "RequestCpus", cpus)
    expr = ExprTree(f"{left} {op} {right}")
    decide = resource_comparison(expr)
    if op not in ("<", "<=", ">", ">=") or "TARGET." not in left + right:
        assert decide is None  # not a resource comparison: left to evaluation
    if decide is None:
        return
    value = decide(job, slot)
    if value is not None:  # None: not decided by arithmetic (the search evaluates it)
        assert value is expr.eval(job, slot)


def test_a_comparison_it_cannot_decide_is_left_to_evaluation():
    slot, job = make_slot("slot1@a", Memory=4096), make_job("alice")
    assert resource_comparison(ExprTree("TARGET.Memory >= 2 * RequestMemory")) is None
    assert resource_comparison(ExprTree('TARGET.Arch == "X86_64"')) is None
    decide = resource_comparison(ExprTree("TARGET.Memory >= RequestMemory"))
    assert decide(job, slot) is True
    job["RequestMemory"] = ExprTree("TARGET.Memory + 1")  # an expression: evaluated instead
    assert decide(job, slot) is None
    assert ExprTree("TARGET.Memory >= RequestMemory").eval(job, slot) is False
    del slot["Memory"]
    assert decide(make_job("alice"), slot) is None  # missing: UNDEFINED, evaluated
    assert ExprTree("TARGET.Memory >= RequestMemory").eval(make_job("alice"), slot) is Undefined


# ---------------------------------------------------------------------------------------------
# bases


def test_a_shrunk_partitionable_slot_keeps_its_base_and_is_rekeyed_without_closures(monkeypatch):
    monkeypatch.setattr(VectorSearch, "enabled", False)  # the scalar search's internals
    pools, closures = [], []
    real_reclass, real_closure = SlotPool.reclass, slots_module.closure

    def reclass(self, slot):
        before = len(closures)
        real_reclass(self, slot)
        assert len(closures) == before  # the base is kept: no references followed again
        # (the pool as it is now: the cycle closes it at the end)
        pools.append((len(self.classes), len(self.base_reps), {cls.base for cls in self.classes}))

    def closure(ad, roots):
        closures.append(1)
        return real_closure(ad, roots)

    monkeypatch.setattr(SlotPool, "reclass", reclass)
    monkeypatch.setattr(slots_module, "closure", closure)
    slot = make_slot("slot1@p", Cpus=16, Memory=65536, PartitionableSlot=True)
    # two users: the slot carved for one is re-classed when the other asks
    requests = {"alice@x": [(make_job("alice"), 3)], "bob@x": [(make_job("bob"), 3)]}
    result, _ = run_cycle([slot], requests)
    assert len(result.matches) == 6 and pools
    classes, base_reps, bases = pools[-1]
    assert classes > 1 and base_reps == 1
    assert bases == {0}


def test_a_lane_passes_over_the_bases_a_clause_excludes_without_per_class_work(monkeypatch):
    """30 aarch64 slots and jobs that want X86_64: the Arch clause is decided once per base,
    for every lane, and no aarch64 class is looked at again by any of the lanes."""
    monkeypatch.setattr(VectorSearch, "enabled", False)  # the scalar search's internals
    looked = []
    real = IdleSearch._job_accepts

    def spy(self, rs, cls, clauses=None):
        looked.append(cls.ad["Arch"])
        return real(self, rs, cls, clauses)

    monkeypatch.setattr(IdleSearch, "_job_accepts", spy)
    slots = [make_slot(f"slot1@arm{n:02d}", Arch="aarch64", Cpus=8, Memory=16384,
                       PartitionableSlot=True) for n in range(30)]
    slots.append(make_slot("slot1@x86", Cpus=64, Memory=262144, PartitionableSlot=True))
    requirements = 'TARGET.Arch == "X86_64" && TARGET.Memory >= RequestMemory'
    requests = {f"user{u}@x": [(make_job(f"user{u}", RequestMemory=512 * (u + 1),
                                         exprs={"Requirements": requirements}), 4)]
                for u in range(6)}  # six job shapes: six lanes
    result, _ = run_cycle(slots, requests)
    assert len(result.matches) == 24
    assert {m.slot_name for m in result.matches} == {"slot1@x86"}
    assert "aarch64" not in looked


# ---------------------------------------------------------------------------------------------
# the brute-force reference, on pools where many slots share a base


def _pool(rnd: random.Random):
    starts = ["True", 'TARGET.Owner != "carol"', "TARGET.RequestMemory <= Memory / 2",
              "KeyboardIdle > 600", "Cpus >= 4 || TARGET.RequestCpus < 2"]
    configs = [dict(Arch=rnd.choice(["X86_64", "X86_64", "aarch64"]),
                    KFlops=rnd.choice([1000, 2000]), KeyboardIdle=rnd.choice([0, 3600]),
                    exprs={"Start": rnd.choice(starts)})
               for _ in range(rnd.randint(1, 3))]
    slots = []
    for n in range(rnd.randint(2, 20)):
        config = rnd.choice(configs)
        slot = make_slot(f"slot1@m{n:02d}", Cpus=rnd.choice([1, 2, 4, 8, 16]),
                         Memory=rnd.choice([1024, 2048, 8192, 32768]),
                         Disk=rnd.choice([10_000, 100_000]), **config)
        if rnd.random() < 0.75:
            slot["PartitionableSlot"] = True
        elif rnd.random() < 0.5:
            slot = claimed(slot, rnd.choice(["alice@x", "bob@x"]))
        slots.append(slot)
    return slots


def _requests(rnd: random.Random):
    clauses = ["TARGET.Memory >= RequestMemory", "RequestDisk <= TARGET.Disk",
               "TARGET.Cpus > 2.5", "TARGET.Gpus >= 0", "(TARGET.KFlops)",
               'TARGET.Arch == "X86_64"', "TARGET.Memory >= 2 * RequestMemory",
               "TARGET.KFlops > 1500 || TARGET.Memory > 4000", "MY.RequestCpus <= TARGET.Cpus"]
    ranks = [{}, {"Rank": "TARGET.Memory"}, {"Rank": "TARGET.KFlops"}, {"Rank": "-TARGET.Cpus"}]
    shapes = []
    for _ in range(rnd.randint(1, 4)):
        requirements = " && ".join(['TARGET.OpSys == "LINUX"']
                                   + rnd.sample(clauses, rnd.randint(0, 3)))
        shapes.append(dict(exprs={"Requirements": requirements, **rnd.choice(ranks)},
                           RequestCpus=rnd.choice([1, 1, 2]),
                           RequestMemory=rnd.choice([500, 1500, 3000]),
                           RequestDisk=rnd.choice([1000, 50_000])))
    users = rnd.sample(["alice@x", "bob@x", "carol@x", "dave@x"], rnd.randint(1, 4))
    return {u: [(make_job(u.split("@")[0], **rnd.choice(shapes)), rnd.randint(1, 20))
                for _ in range(rnd.randint(1, 3))]
            for u in users}


@hsettings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_bases_give_the_matches_of_the_brute_force_reference(seed):
    rnd = random.Random(seed)
    slots, requests = _pool(rnd), _requests(rnd)
    settings = NegotiatorSettings(
        preemption_requirements=rnd.choice(["False", "True"]),
        policy=rnd.choice(["HTCONDOR", "HTCONDOR", "UPDOWN"]),
        pre_job_rank=rnd.choice([DEFAULT_PRE_JOB_RANK, None, "-Memory"]))
    fast, _ = run_cycle(slots, requests, settings=settings)
    slow = _brute_cycle(slots, requests, settings)
    assert _outcome(fast) == _outcome(slow)
    assert fast.statistics.rejections_by_reason == slow.statistics.rejections_by_reason
