"""The cycle's set-up (``cycle.read_slots`` and :class:`~htc.daemons.negotiator.slots.Slot`)
reads of every slot ad what ``ClassAd.get`` and ``fast_read`` read, through its shortcuts for
literal values: the reference below is the loop and the reads it replaced, name by name."""

from __future__ import annotations

import math
import random

import pytest

from htc.classad import ClassAd, ExprTree
from htc.daemons.negotiator.cycle import read_slots
from htc.daemons.negotiator.slotreads import as_classad, fast_read, remote_user_of, slot_weight
from htc.daemons.negotiator.slots import UNAVAILABLE_STATES, Slot

#: what Slot reads of an ad and sets by reading it (the rest are the cycle's own)
_READ = ("name", "ad", "state", "activity", "remote_user", "partitionable", "claim_id",
         "address", "weight")


def _reference_reads(ad, name) -> dict:
    """Slot.__init__'s reads as they were: fast_read of each name."""
    exprs = getattr(ad, "_exprs", None)
    claim = fast_read(exprs, ad, "claimid", "ClaimId")
    address = fast_read(exprs, ad, "myaddress", "MyAddress")
    if address is None:
        address = fast_read(exprs, ad, "startdipaddr", "StartdIpAddr", "")
    return {
        "name": name, "ad": ad,
        "state": str(fast_read(exprs, ad, "state", "State", "Unclaimed")),
        "activity": str(fast_read(exprs, ad, "activity", "Activity", "Idle")),
        "remote_user": remote_user_of(ad),
        "partitionable": fast_read(exprs, ad, "partitionableslot", "PartitionableSlot") is True
        or str(fast_read(exprs, ad, "slottype", "SlotType", "")).lower() == "partitionable",
        "claim_id": claim if isinstance(claim, str) and claim else None,
        "address": address if isinstance(address, str) else "",
    }


def _reference_loop(machine_ads, use_slot_weights):
    """The cycle's loop over the slot ads as it was (its slots' reads, the weights)."""
    slots, by_name, pool_weight, min_weight = [], {}, 0.0, math.inf
    for ad in machine_ads:
        ad = as_classad(ad)
        name = ad.get("Name")
        if not isinstance(name, str) or not name:
            continue
        by_name[name] = ad
        reads = _reference_reads(ad, name)
        reads["weight"] = slot_weight(ad, use_slot_weights)
        pool_weight += reads["weight"]
        min_weight = min(min_weight, reads["weight"])
        if reads["state"].lower() not in UNAVAILABLE_STATES:
            slots.append(reads)
    return slots, by_name, pool_weight, min_weight


_CHOICES = {
    "Name": ["slot1@n1", "slot1@n2", "slot2@n1", "", 5, ExprTree('strcat("slot3", "@n1")'), None],
    "State": ["Unclaimed", "Claimed", "Matched", "drained", "Owner", 3,
              ExprTree('"Pre" + "empting"'), ExprTree("undefined"), None],
    "Activity": ["Idle", "Busy", 1.5, ExprTree("Foo"), None],
    "PartitionableSlot": [True, False, 1, ExprTree("true"), None],
    "SlotType": ["Partitionable", "Static", "partitionable",
                 ExprTree('strcat("Partition", "able")'), None],
    "ClaimId": ["<c1>", "", 5, ExprTree('strcat("<c", "2>")'), None],
    "MyAddress": ["<n1:9618>", 7, ExprTree('strcat("<n9", ":1>")'), None],
    "StartdIpAddr": ["<n1:1>", None],
    "RemoteUser": ["u@x", "", None, None, None],
    "AccountingGroup": ["g.u@x", None, None, None],
    "Cpus": [8, 0, -2, 2.5, float("nan"), True, "8", ExprTree("4 * 2"), ExprTree("Foo"), None],
    "SlotWeight": [None, None, None, 3, -1, ExprTree("Cpus / 2"), "x"],
}


def _ads(rnd: random.Random, n: int) -> list:
    ads = []
    for _ in range(n):
        values = {k: rnd.choice(v) for k, v in _CHOICES.items()}
        values = {k: v for k, v in values.items() if v is not None}
        if rnd.random() < 0.2:  # a plain mapping (as_classad converts it)
            ads.append({k: v for k, v in values.items() if not isinstance(v, ExprTree)})
        else:
            ad = ClassAd()
            for k, v in values.items():
                ad[k] = v
            ads.append(ad)
    return ads


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float)
                      and math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("use_slot_weights", [True, False])
def test_read_slots_reads_what_the_loop_of_fast_reads_read(seed, use_slot_weights):
    ads = _ads(random.Random(seed), 40)
    slots, by_name, weight, least = read_slots(ads, use_slot_weights)
    want_slots, want_by_name, want_weight, want_least = _reference_loop(ads, use_slot_weights)
    got = [{f: getattr(slot, f) for f in _READ} for slot in slots]
    assert [g.pop("ad") for g in got] == [w.pop("ad") for w in want_slots]  # by identity
    assert len(got) == len(want_slots)
    for g, w in zip(got, want_slots):
        assert g.keys() == w.keys() and all(_same(g[k], w[k]) for k in g), (g, w)
    # a plain mapping is converted anew on each read: compare the converted ads' contents
    assert list(by_name) == list(want_by_name)
    assert all(dict(by_name[n]) == dict(want_by_name[n]) if isinstance(by_name[n], ClassAd)
               else by_name[n] is want_by_name[n] for n in by_name)
    assert _same(weight, want_weight) and _same(least, want_least)


def test_read_slots_meets_the_cases_the_shortcuts_skip():
    """The random ads above reach both sides of each shortcut."""
    ads = _ads(random.Random(1), 400)
    tables = [ad for ad in ads if isinstance(ad, ClassAd)]
    assert sum(not isinstance(ad, ClassAd) for ad in ads) > 40
    for name in ("Name", "State", "ClaimId", "MyAddress", "Cpus"):
        kinds = {type(ad.table.get(name.lower())).__name__ for ad in tables}
        assert {"Literal", "NoneType"} < kinds, (name, kinds)
    slots = read_slots(ads, True)[0]
    assert sum(s.partitionable for s in slots) > 20 and sum(not s.partitionable for s in slots) > 20
    assert sum(s.claim_id is not None for s in slots) > 20
    assert any(s.remote_user is not None for s in slots)


def test_no_named_ad_weighs_nothing():
    slots, by_name, weight, least = read_slots([ClassAd({"Cpus": 2}), {"Name": ""}], True)
    assert (slots, by_name, weight) == ([], {}, 0.0) and least is math.inf


def test_a_slot_of_a_plain_mapping_reads_it_with_get():
    ad = {"Name": "s", "State": "Claimed", "Activity": "Busy", "RemoteUser": "u@x",
          "SlotType": "Partitionable", "ClaimId": "<c>", "StartdIpAddr": "<n:1>"}
    slot = Slot(ad, "s")
    assert (slot.state, slot.activity, slot.remote_user, slot.partitionable, slot.claim_id,
            slot.address) == ("Claimed", "Busy", "u@x", True, "<c>", "<n:1>")
