"""Fitting a job to a partitionable class by arithmetic (``htc.daemons.negotiator.fitting``)
decides as reading the class's ad does, and a lane's first heap holds no class of a base the
lane excludes."""

from __future__ import annotations

from hypothesis import given, settings as hsettings, strategies as st

from htc.classad import ExprTree
from htc.daemons.negotiator.search import IdleSearch
from htc.daemons.negotiator.vsearch import VectorSearch
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slots import Slot, SlotClass
from tests.negotiator_cycles import make_job, make_slot, run_cycle

_AMOUNT = st.one_of(st.none(), st.integers(0, 70_000),
                    st.floats(0, 70_000, allow_nan=False, allow_infinity=False))


def _class(cpus, memory, disk) -> SlotClass:
    attrs = {name: value for name, value in (("Cpus", cpus), ("Memory", memory), ("Disk", disk))
             if value is not None}
    ad = make_slot("slot1@a", PartitionableSlot=True)
    for name in ("Cpus", "Memory", "Disk"):
        del ad[name]
    for name, value in attrs.items():
        ad[name] = value
    slot = Slot(ad, "slot1@a")
    return SlotClass(0, (0, cpus, memory, disk), slot, job_reads=())


@hsettings(max_examples=300, deadline=None)
@given(cpus=_AMOUNT, memory=_AMOUNT, disk=_AMOUNT,
       want_cpus=st.sampled_from([1, 2, 3, 1.5, 8]),
       want_memory=st.one_of(st.integers(0, 70_000), st.floats(0, 70_000, allow_nan=False)),
       want_disk=st.integers(0, 70_000))
def test_fitting_a_class_by_arithmetic_decides_as_reading_its_ad(cpus, memory, disk, want_cpus,
                                                                 want_memory, want_disk):
    cls = _class(cpus, memory, disk)
    assert cls.res is not None  # numeric literals or missing: arithmetic applies
    job = make_job("alice", RequestCpus=want_cpus, RequestMemory=want_memory,
                   RequestDisk=want_disk)
    by_ad = IdleSearch(NegotiatorSettings()).fits(job, cls.ad)
    by_numbers = IdleSearch(NegotiatorSettings()).fits_class(job, cls)
    assert by_numbers == by_ad


def test_an_expression_resource_or_request_is_evaluated():
    cls = _class(8, 4096, 100_000)
    cls.ad["Memory"] = ExprTree("2048 * 2")
    cls.res = None
    job = make_job("alice", RequestMemory=4096)
    assert IdleSearch(NegotiatorSettings()).fits_class(job, cls) is not None
    job = make_job("alice", exprs={"RequestMemory": "TARGET.Cpus * 1024"})
    assert IdleSearch(NegotiatorSettings()).literal_wants(job) is None
    assert IdleSearch(NegotiatorSettings()).fits_class(job, _class(8, 4096, None)) is None
    assert IdleSearch(NegotiatorSettings()).fits_class(job, _class(4, 4096, None)) is not None


def test_a_lanes_first_heap_leaves_out_the_bases_it_excludes(monkeypatch):
    monkeypatch.setattr(VectorSearch, "enabled", False)  # the scalar search's internals
    heaps = []
    real = IdleSearch._start_heap

    def spy(self, rs, pool):
        real(self, rs, pool)
        heaps.append({pool.classes[cid].ad["Arch"] for _key, cid in rs.lane.heap})

    monkeypatch.setattr(IdleSearch, "_start_heap", spy)
    slots = [make_slot(f"slot1@arm{n:02d}", Arch="aarch64", PartitionableSlot=True)
             for n in range(5)]
    slots += [make_slot(f"slot1@x86{n:02d}", PartitionableSlot=True) for n in range(3)]
    requests = {"alice@x": [(make_job("alice", exprs={
        "Requirements": 'TARGET.Arch == "X86_64" && TARGET.Memory >= RequestMemory'}), 2)]}
    result, _ = run_cycle(slots, requests)
    assert len(result.matches) == 2
    assert heaps == [{"X86_64"}]


def test_a_remembered_request_is_never_another_jobs():
    """The literal requests are remembered by ``id(job)``: a job made after another one was
    dropped (CPython gives it the dropped job's address, hence its id, at once) gets its own
    request, not the dropped job's; and an entry under a job's id that belongs to another job
    is not taken for it."""
    search = IdleSearch(NegotiatorSettings())
    for memory in range(1024, 1024 + 64 * 128, 128):
        job = make_job("alice", RequestMemory=memory)
        assert search.literal_wants(job) == (1.0, float(memory), 1024.0)
        del job
    other, job = make_job("bob", RequestMemory=4096), make_job("alice", RequestMemory=8192)
    search._wants[id(job)] = (other, search.literal_wants(other))
    assert search.literal_wants(job) == (1.0, 8192.0, 1024.0)
    assert search.fits(job, make_slot("slot1@a", Memory=4096)) is None
