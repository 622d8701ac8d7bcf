"""The ad a match offers for a partitionable slot (``htc.daemons.negotiator.matched_ad``): built
when first read, it is the copy of the slot's ad that the match would have taken, whatever the
slot went through after the match."""

from __future__ import annotations

import pytest

from htc.classad import ClassAd, ExprTree
from htc.classad.ast import Literal
from htc.classad.printing import print_new
from htc.daemons.negotiator.matched_ad import MatchedSlotAd, sizes_of
from htc.daemons.negotiator.slotreads import literal
from tests.negotiator_cycles import make_job, make_slot, run_cycle


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
    from htc.daemons.negotiator.slotreads import number, same_type

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


def _text_of_a_fresh_copy(view: MatchedSlotAd) -> str:
    """What the view's text must be: the table a copy at the match would have had, printed."""
    return str(ClassAd.copy(view))  # (copying reads the table: the view is built)


def test_a_views_text_read_first_is_the_copys_text():
    """``str()`` of a view not read yet is made from the slot ad's text (matched_ad._Text),
    with every kind of size: numbers equal to each other, a float, an expression, a missing
    one; and attributes the printer lays out over lines or quotes."""
    ad = _ad(Cpus=4, Disk=4, Memory=4.5, Lists=[1, [2, 3]], Nested=ClassAd({"x": 1}))
    ad["'odd name'"] = "a\nb"
    ad["Requirements"] = ExprTree('Cpus >= 1 && (Arch == "X86_64" || Memory > 1e3)')
    plain = ad.copy()
    del plain["Disk"]
    for source, sizes in ((ad, (4, 4.5, 4)), (ad, (2, 4, 4)), (ad, sizes_of(ad)),
                          (ad, (ExprTree("1 + 1")._node, 2048, 7.25)), (plain, (3, 8, None))):
        view = MatchedSlotAd(source, sizes)
        text = str(view)
        assert text == _text_of_a_fresh_copy(MatchedSlotAd(source, sizes))
        assert str(view) == text and ClassAd(text) == view
    for cpus in range(8, 0, -1):  # a run: many views of one slot ad as it shrinks
        view = MatchedSlotAd(ad, (cpus, 512.0 * cpus, cpus))
        ad["Cpus"], ad["Memory"], ad["Disk"] = cpus - 1, 512.0 * (cpus - 1), cpus - 1
        assert str(view) == _text_of_a_fresh_copy(view)


def test_a_views_text_forgets_its_slot_ad_with_it(monkeypatch):
    import gc

    from htc.daemons.negotiator import matched_ad

    ad = _ad()
    str(MatchedSlotAd(ad, (1, 2, 3)))
    assert id(ad) in matched_ad._Text._kept
    key = id(ad)
    del ad
    gc.collect()
    assert key not in matched_ad._Text._kept
    # a printer that lays an ad out otherwise: the view is printed whole, as any ad
    monkeypatch.setattr(matched_ad._Text, "_HEAD", "\n[")
    ad = _ad()
    view = MatchedSlotAd(ad, (1, 2, 3))
    assert str(view) == _text_of_a_fresh_copy(MatchedSlotAd(ad, (1, 2, 3)))
    assert matched_ad._Text._kept[id(ad)].parts is None and matched_ad._Text.of(ad) is None
    key = id(ad)
    del ad, view
    gc.collect()
    assert key not in matched_ad._Text._kept


def test_a_views_text_with_its_sizes_in_another_order_or_of_other_kinds():
    """The carved three in an order other than Cpus, Memory, Disk, and sizes that print apart
    though they compare equal (1 and 1.0, 0 and 0.0, a literal node of each). (Not -0.0:
    slotreads.literal shares one node for 0.0 and -0.0, so a view's table prints -0.0 as 0.0.)"""
    ad = ClassAd({"Disk": 7, "Name": "slot1@p", "Memory": 2.5, "Arch": "X86_64", "Cpus": 3})
    for sizes in ((1, 1.0, 0.0), (1.0, 0.0, 1), (literal(2), literal(0), literal(1e300)),
                  (Literal(True), 0, ExprTree("Memory - 1")._node), (3, 2.5, 7)):
        view = MatchedSlotAd(ad, sizes)
        assert str(view) == _text_of_a_fresh_copy(MatchedSlotAd(ad, sizes))
        assert str(view) == str(view)
    first = MatchedSlotAd(ad, (3, 2.5, 7))
    read = MatchedSlotAd(ad, (3, 2.5, 7))
    assert read["Cpus"] == 3  # read: printed from its own table from now on
    ad["Cpus"] = 1
    assert str(read) == str(first) == _text_of_a_fresh_copy(MatchedSlotAd(ad, (3, 2.5, 7)))


def test_the_layout_is_tried_once_not_once_per_slot_ad(monkeypatch):
    """Each cycle ad's text is printed once (its _Text), not twice: whether a _Text prints as
    ClassAd.__str__ is tried on the probe ad once per layout. The views' texts stay the copies'."""
    from htc.daemons.negotiator import matched_ad

    calls = []
    monkeypatch.setattr(matched_ad._Text, "_layouts", {})
    monkeypatch.setattr(matched_ad, "print_new", lambda *a, **k: calls.append(1) or print_new(*a, **k))
    ads = [_ad(Machine=f"n{i}", Lists=[i, [i]]) for i in range(20)]
    for ad in ads:
        view = MatchedSlotAd(ad, (2, 1024, 7.5))
        assert str(view) == _text_of_a_fresh_copy(MatchedSlotAd(ad, (2, 1024, 7.5)))
    assert len(calls) == 1 and all(matched_ad._Text._kept[id(ad)].parts is not None for ad in ads)


def test_a_views_text_where_the_ad_holds_the_mark_of_a_hole(monkeypatch):
    """_Text cuts the ad's text where a NUL marks each carved size: a NUL of the ad's own (in a
    string, in a quoted name) is printed as an escape, so the cut is the same and the views'
    texts stay the copies'; were one printed as it is, the views would be printed whole."""
    from htc.daemons.negotiator import matched_ad

    ad = _ad(Note="a\x00b")
    ad["'odd\x00name'"] = 1
    for sizes in ((2, 1024, 7.5), (1, 2.0, 3)):
        view = MatchedSlotAd(ad, sizes)
        assert str(view) == _text_of_a_fresh_copy(MatchedSlotAd(ad, sizes))
    assert matched_ad._Text._kept[id(ad)].parts is not None
    monkeypatch.setattr(matched_ad._Text, "_prefixes", {})
    monkeypatch.setattr(matched_ad, "quote_name", lambda name: name + "\x00")
    ad = _ad()
    assert matched_ad._Text(ad).parts is None
    view = MatchedSlotAd(ad, (2, 1024, 7.5))
    assert str(view) == _text_of_a_fresh_copy(MatchedSlotAd(ad, (2, 1024, 7.5)))
