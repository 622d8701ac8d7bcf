"""``PendingSlots.record`` (``htc.daemons.negotiator.pending``): what a cycle's runs of matches
gave away, slot by slot, against a one-match-at-a-time reference over the runs' matches, over
random runs and two cycles; and the matches that lapse give back the same afterwards."""

from __future__ import annotations

import random
import pytest

from htc.classad import ClassAd, ExprTree
from htc.daemons.negotiator.match_runs import MatchRun, expand
from htc.daemons.negotiator.pending import PendingSlots
from htc.daemons.negotiator.preemption import PreemptState


def _reference_record(pending: PendingSlots, matches, machines, until: float) -> None:
    """The record of one match after another (what ``record`` did before it grouped them)."""
    ads = {ad.get("Name"): ad for ad in machines}
    for match in matches:
        ad = ads.get(match.slot_name)
        if ad is None:
            continue
        record = pending._slots.get(match.slot_name)
        if record is None:
            record = (pending._signature(ad), False, [0.0] * 3, 0)
        signature, whole, carved, _ = record
        if match.carved is None:
            whole = True
        else:
            carved = [have + more for have, more in zip(carved, match.carved)]
        pending._slots[match.slot_name] = (signature, whole, carved, until)
        pending._given.setdefault(match.slot_name, []).append(
            (match.claim_id, match.autocluster_id, match.carved))


def _runs(rnd: random.Random, cycle: int) -> list[MatchRun]:
    runs, seq = [], 0
    for _ in range(12):
        slot = f"slot1@n{rnd.randrange(8)}"  # n6 and n7 are not in the pool
        carved = None if rnd.random() < 0.2 else (rnd.choice([1.0, 2.0]), rnd.random() * 1e3, 0.1)
        count = 1 if carved is None else rnd.randrange(1, 5)
        claim = f"{slot}#claimed" if rnd.random() < 0.2 else None  # the slot's own, else minted
        runs.append(MatchRun("alice@x", "s", "<s>", rnd.randrange(3), ("1.0", "1.1"), 0, count, slot,
                             f"<{slot}>", claim, cycle, seq, ClassAd({"Name": slot}), None,
                             PreemptState.NONE, None, 1.0, carved))
        seq += count
    return runs


@pytest.mark.parametrize("seed", range(20))
def test_record_keeps_what_one_match_at_a_time_kept(seed):
    rnd = random.Random(seed)
    machines = [ClassAd({"Name": f"slot1@n{i}", "Cpus": 8, "Memory": 8192, "State": "Unclaimed",
                         "Activity": "Idle", **({"UpdateSequenceNumber": i} if i % 2 else {})})
                for i in range(6)]
    fast, slow, by_name = PendingSlots(), PendingSlots(), PendingSlots()
    for cycle, until in ((1, 20.0), (2, 40.0)):
        runs = _runs(rnd, cycle)
        matches = expand(runs)
        fast.record(runs, machines, until)
        # the ads by name, as the cycle hands them over (CycleResult.ads_by_name)
        by_name.record(runs, {ad["Name"]: ad for ad in machines}, until)
        _reference_record(slow, matches, machines, until)
        assert list(fast._slots.items()) == list(slow._slots.items())
        assert list(by_name._slots.items()) == list(slow._slots.items())
        assert fast._given.keys() == slow._given.keys()
        assert all(fast._matches(name) == slow._given[name] for name in slow._given)
        assert all(by_name._matches(name) == slow._given[name] for name in slow._given)
    for x in rnd.sample(matches, 6):  # matches lapse: each gives back the same in both
        assert fast.lapsed(x.slot_name, x.claim_id, x.autocluster_id) == \
            slow.lapsed(x.slot_name, x.claim_id, x.autocluster_id)
        assert list(fast._slots.items()) == list(slow._slots.items())
        assert fast._given == slow._given


@pytest.mark.parametrize("ad", [
    ClassAd({"Name": "s", "UpdateSequenceNumber": 3, "DaemonStartTime": 10, "State": "Claimed"}),
    ClassAd({"Name": "s", "State": "Unclaimed", "Activity": "Idle", "Cpus": 4, "Memory": 2.5,
             "ClaimId": "c1"}),
    ClassAd({"Name": "s", "State": "Unclaimed", "Cpus": ExprTree("2 + 2"),
             "UpdateSequenceNumber": ExprTree("1 + 1")}),
    ClassAd({"Name": "s", "UpdateSequenceNumber": ExprTree("undefined"), "Disk": ExprTree("[a = 1]"),
             "Memory": ExprTree("{1, 2}")}),
    {"Name": "s", "UpdateSequenceNumber": 7, "DaemonStartTime": 1},
    {"Name": "s", "State": "Claimed", "Cpus": 1},
    # six literals and no update counter (the shortcut), and ads just beside it
    ClassAd({"Name": "s", "State": "Unclaimed", "Activity": "Idle", "Cpus": 8, "Memory": 16384,
             "Disk": 2.5e6, "ClaimId": "<c>"}),
    ClassAd({"State": "Claimed", "Activity": True, "Cpus": 1.0, "Memory": 0, "Disk": -1,
             "ClaimId": 3}),
    ClassAd({"State": "Unclaimed", "Activity": "Idle", "Cpus": 8, "Memory": 16384,
             "Disk": ExprTree("undefined"), "ClaimId": "<c>"}),
    ClassAd({"State": "Unclaimed", "Activity": "Idle", "Cpus": 8, "Memory": ExprTree("Cpus * 2"),
             "Disk": 1, "ClaimId": "<c>"}),
    ClassAd({"State": "Unclaimed", "Activity": "Idle", "Cpus": 8, "Memory": 1, "Disk": 1}),
    ClassAd({"State": "Unclaimed", "Activity": "Idle", "Cpus": 8, "Memory": 1,
             "Disk": ExprTree('relTime("1:00")'), "ClaimId": "<c>"}),  # (a literal get converts)
    ClassAd({"State": "Unclaimed", "Activity": "Idle", "Cpus": 8, "Memory": 1, "Disk": 1,
             "ClaimId": "<c>", "UpdateSequenceNumber": 4}),
    # a startd's report (the shortcut), and beside it
    ClassAd({"Name": "s", "UpdateSequenceNumber": 9, "DaemonStartTime": 1_700_000_000}),
    ClassAd({"Name": "s", "UpdateSequenceNumber": 9}),
    ClassAd({"Name": "s", "UpdateSequenceNumber": 9, "DaemonStartTime": ExprTree("1 + 1")}),
    ClassAd({"Name": "s", "UpdateSequenceNumber": 9,
             "DaemonStartTime": ExprTree('absTime("2020-01-01T00:00:00")')}),
    ClassAd({"Name": "s", "UpdateSequenceNumber": 'x', "DaemonStartTime": 2.5}),
])
def test_a_slots_signature_reads_what_fast_get_reads(ad):
    from htc.daemons.negotiator.slotreads import fast_get

    names = (("DaemonStartTime", "UpdateSequenceNumber")
             if fast_get(ad, "UpdateSequenceNumber") is not None
             else ("State", "Activity", "Cpus", "Memory", "Disk", "ClaimId"))
    assert PendingSlots._signature(ad) == tuple(fast_get(ad, name) for name in names)


def _reference_apply(pending: PendingSlots, machines, now: float) -> list:
    """``apply`` as it was: every value read and written with ``get`` and ``[]``."""
    from htc.daemons.negotiator.slotreads import fast_get

    if not pending._slots:
        return list(machines)
    out, seen = [], set()
    for ad in machines:
        name = fast_get(ad, "Name")
        seen.add(name)
        record = pending._slots.get(name)
        if record is None:
            out.append(ad)
            continue
        signature, whole, carved, until = record
        if now >= until or pending._signature(ad) != signature:
            pending._forget(name)
            out.append(ad)
            continue
        if whole:
            continue
        ad = ad.copy()
        for attr, amount in zip(("Cpus", "Memory", "Disk"), carved):
            have = ad.get(attr)
            if isinstance(have, (int, float)) and not isinstance(have, bool):
                ad[attr] = type(have)(have - amount) if isinstance(have, int) else have - amount
        cpus, memory = ad.get("Cpus", 1), ad.get("Memory", 1)
        if isinstance(cpus, (int, float)) and cpus < 1 \
                or isinstance(memory, (int, float)) and memory <= 0:
            continue
        out.append(ad)
    for name in [n for n in pending._slots if n not in seen]:
        pending._forget(name)
    return out


_SIZES = [8, 1, 0, 2.5, 0.5, -3, True, "8", float("nan"), 2 ** 62, ExprTree("4 * 2"),
          ExprTree('relTime("1:00")'), None]


@pytest.mark.parametrize("seed", range(30))
def test_apply_makes_what_get_and_setitem_made(seed):
    import math

    rnd = random.Random(seed)
    machines = []
    for i in range(30):
        values = {"Name": f"slot1@n{i}", "State": "Unclaimed", "Activity": "Idle"}
        for attr in ("Cpus", "Memory", "Disk"):
            value = rnd.choice(_SIZES)
            if value is not None:
                values[attr] = value
        if rnd.random() < 0.2:  # a plain mapping
            machines.append({k: v for k, v in values.items() if not isinstance(v, ExprTree)})
        else:
            ad = ClassAd()
            for k, v in values.items():
                ad[k] = v
            machines.append(ad)
    fast, slow = PendingSlots(), PendingSlots()
    for ad in machines[:25]:  # (the last five not pending)
        name = ad["Name"]
        carved = [rnd.choice([0.0, 1.0, 2.0, 0.25, 1e3, -1.0, 2.0 ** 60]) for _ in range(3)]
        until = rnd.choice([5.0, 50.0])
        signature = PendingSlots._signature(ad) if rnd.random() < 0.9 else ("other",)
        for p in (fast, slow):
            p._slots[name] = (signature, rnd.random() < 0.1, list(carved), until)
    fast._slots = dict(slow._slots)
    fast._slots["gone@n"] = slow._slots["gone@n"] = (("x",), False, [1.0, 0.0, 0.0], 50.0)
    got, want = fast.apply(machines, 10.0), _reference_apply(slow, machines, 10.0)

    def view(ad):
        return [(k, type(v).__name__, "nan" if isinstance(v, float) and math.isnan(v) else v)
                for k, v in dict(ad).items()]

    assert [view(ad) for ad in got] == [view(ad) for ad in want]
    assert [type(ad) for ad in got] == [type(ad) for ad in want]
    assert fast._slots == slow._slots and "gone@n" not in fast._slots
    # an ad apply leaves as it is comes out as itself, in both
    assert [any(a is m for m in machines) for a in got] == \
        [any(b is m for m in machines) for b in want]
