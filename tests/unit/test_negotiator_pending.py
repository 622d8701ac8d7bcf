"""``PendingSlots.record`` (``htc.daemons.negotiator.pending``): what a cycle's matches gave away,
slot by slot, against a one-match-at-a-time reference, over random matches and two cycles."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from htc.classad import ClassAd
from htc.daemons.negotiator.pending import PendingSlots


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


@pytest.mark.parametrize("seed", range(20))
def test_record_keeps_what_one_match_at_a_time_kept(seed):
    rnd = random.Random(seed)
    machines = [ClassAd({"Name": f"slot1@n{i}", "Cpus": 8, "Memory": 8192, "State": "Unclaimed",
                         "Activity": "Idle", **({"UpdateSequenceNumber": i} if i % 2 else {})})
                for i in range(6)]
    fast, slow = PendingSlots(), PendingSlots()
    for cycle, until in ((1, 20.0), (2, 40.0)):
        matches = [SimpleNamespace(
            slot_name=f"slot1@n{rnd.randrange(8)}",  # n6 and n7 are not in the pool
            carved=None if rnd.random() < 0.2 else (rnd.choice([1.0, 2.0]), rnd.random() * 1e3, 0.1),
            claim_id=f"c{cycle}.{k}", autocluster_id=rnd.randrange(3)) for k in range(30)]
        fast.record(matches, machines, until)
        _reference_record(slow, matches, machines, until)
        assert list(fast._slots.items()) == list(slow._slots.items())
        assert fast._given == slow._given
