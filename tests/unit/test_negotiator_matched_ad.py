"""The ad a match offers for a partitionable slot (``htc.daemons.negotiator.matched_ad``): built
when first read, it is the copy of the slot's ad that the match would have taken, whatever the
slot went through after the match."""

from __future__ import annotations

import pytest

from htc.classad import ClassAd, ExprTree
from htc.daemons.negotiator.matched_ad import MatchedSlotAd, sizes_of
from htc.daemons.negotiator.slots import literal
from tests.unit.test_negotiator_core import make_job, make_slot, run_cycle


def _ad(**extra) -> ClassAd:
    ad = ClassAd({"Name": "slot1@p", "Cpus": 8, "Memory": 8192, "Disk": 100_000,
                  "PartitionableSlot": True, **extra})
    ad["Start"] = ExprTree("TARGET.RequestMemory < Memory")
    return ad


def _same(view: ClassAd, copy: ClassAd) -> None:
    assert view == copy and str(view) == str(copy) and repr(view) == repr(copy)
    assert list(view) == list(copy) and view.spellings == copy.spellings
    assert dict(view.items()) == dict(copy.items())


@pytest.mark.parametrize("numbers", [False, True])
def test_a_view_is_the_copy_taken_at_the_match(numbers):
    ad = _ad()
    copy = ad.copy()
    view = MatchedSlotAd(ad, (8, 8192, 100_000) if numbers else sizes_of(ad))
    for name, value in (("Cpus", 7), ("Memory", 4096.5), ("Disk", 1)):  # later carves
        ad[name] = value
    ad.table["cpus"] = literal(3)  # as a run sets its sizes
    _same(view, copy)
    assert view["Memory"] == 8192 and ad["Memory"] == 4096.5


def test_a_view_keeps_a_missing_resource_missing():
    ad = _ad()
    del ad["Disk"]
    copy = ad.copy()
    view = MatchedSlotAd(ad, sizes_of(ad))
    ad["Cpus"] = 1
    _same(view, copy)
    assert "Disk" not in view and view.get("Disk") is None


def test_a_view_is_built_once_and_then_is_an_ordinary_ad():
    ad = _ad()
    view = MatchedSlotAd(ad, sizes_of(ad))
    assert isinstance(view, ClassAd)
    assert view.copy() == ad.copy() and view["Cpus"] == 8
    table = view.table
    ad["Cpus"] = 2
    assert view.table is table and view["Cpus"] == 8
    view["Cpus"] = 5  # writes go to the view's own table, not to the slot's
    assert ad["Cpus"] == 2 and view["Cpus"] == 5
    with pytest.raises(AttributeError):
        view.no_such_attribute  # noqa: B018 - the lookup is the test
    assert ClassAd(view.unparse(exact=True)) == view


@pytest.mark.parametrize("runs", [False, True])
def test_each_match_offers_the_slot_as_it_was_before_its_carve(runs, monkeypatch):
    """Both ways a cycle matches (one job per search, and runs of jobs at once): every match's
    ad equals the slot's ad with the sizes it had before that match's carve."""
    from htc.daemons.negotiator.search import IdleSearch

    monkeypatch.setattr(IdleSearch, "runs", runs)
    slot = make_slot("slot1@p", Cpus=8, Memory=8192, Disk=80_000, PartitionableSlot=True)
    result, _ = run_cycle([slot], {"alice@x": [(make_job("alice", RequestDisk=1000), 6)]})
    assert len(result.matches) == 6
    for i, match in enumerate(result.matches):
        expected = slot.copy()
        cpus, memory, disk = (match.slot_ad[n] for n in ("Cpus", "Memory", "Disk"))
        assert (cpus, memory, disk) == (8 - i, 8192 - 1024 * i, 80_000 - 1024 * i)
        expected["Cpus"], expected["Memory"], expected["Disk"] = cpus, memory, disk
        _same(match.slot_ad, expected)
    assert slot["Cpus"] == 8  # the caller's ad is not the one carved


@pytest.mark.parametrize("carve", [(1.0, 1024.0, 1024.0), (2, 100, 0.5), (1.0, 0.25, 7)])
def test_carve_numbers_writes_what_evaluating_and_assigning_wrote(carve):
    from htc.daemons.negotiator.matched_ad import carve_numbers
    from htc.daemons.negotiator.slots import number, same_type

    for extra in ({}, {"Memory": 4096.0}, {"Disk": None}):
        fast = _ad(**{k: v for k, v in extra.items() if v is not None})
        if extra.get("Disk", 0) is None:
            del fast["Disk"]
        slow = fast.copy()
        for name, amount in zip(("Cpus", "Memory", "Disk"), carve):  # the general path
            have = number(slow, name)
            if have is not None:
                slow[name] = same_type(slow[name], have - amount)
        assert carve_numbers(fast, carve) is True
        _same(fast, slow)
        assert [type(fast.get(n)) for n in ("Cpus", "Memory", "Disk")] == \
            [type(slow.get(n)) for n in ("Cpus", "Memory", "Disk")]


def test_carve_numbers_leaves_an_expression_resource_to_the_evaluator():
    from htc.daemons.negotiator.matched_ad import carve_numbers

    ad = _ad()
    ad["Memory"] = ExprTree("4 * 1024")
    before = ad.copy()
    assert carve_numbers(ad, (1.0, 1024.0, 1024.0)) is False
    _same(ad, before)
