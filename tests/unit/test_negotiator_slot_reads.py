"""The cycle's readers of slot ads (:mod:`htc.daemons.negotiator.slotreads`: ``number``,
``slot_weight``, ``remote_user_of``; :class:`~htc.daemons.negotiator.slots.Slot`) read what
``ClassAd.get`` and evaluation say, through their shortcuts for literal values, on ads and on
plain mappings alike."""

from __future__ import annotations

import math
import random

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from htc.classad import ClassAd, ExprTree
from htc.daemons.negotiator.preemption import as_rank
from htc.daemons.negotiator.slotreads import number, remote_user_of, slot_weight
from htc.daemons.negotiator.slots import Slot

_USERS = ("PreemptingAccountingGroup", "PreemptingUser", "AccountingGroup", "RemoteUser")


def _number(ad, name, default=None):
    value = ad.get(name)
    if value is None:
        return default
    if isinstance(value, ExprTree):
        value = ad.eval(name)
    value = as_rank(value)
    return default if value is None else value


def _slot_weight(ad, use):
    if not use:
        return 1.0
    for name in ("SlotWeight", "Cpus"):
        value = _number(ad, name)
        if value is not None and value >= 0:
            return value
    return 1.0


def _remote_user(ad):
    state = str(ad.get("State", "")).lower()
    for attr in _USERS:
        value = ad.get(attr)
        if isinstance(value, str) and value:
            if state in ("claimed", "preempting", "matched") or attr.startswith("Preempting"):
                return value
    return None


def _ad(rnd: random.Random) -> dict:
    values = {"Name": "slot1@n1", "MyAddress": "<n1:9618>"}
    choices = {
        "Cpus": [8, 0, -2, 2.5, float("nan"), True, "8", ExprTree("4 * 2"), ExprTree("Foo"), None],
        "SlotWeight": [None, None, 3, -1, ExprTree("Cpus / 2"), "x"],
        "State": ["Unclaimed", "Claimed", "claimed", "Matched", "Preempting", None, 3],
        "PartitionableSlot": [None, True, False, 1],
        "SlotType": [None, "Partitionable", "Static", "partitionable"],
        "ClaimId": [None, "", "<c1>", 5],
    }
    if rnd.random() < 0.6:  # (else an idle slot's ad: none of them)
        for user in _USERS:
            choices[user] = [None, None, "", "u@x", 7, ExprTree('"e@x"')]
    for name, options in choices.items():
        value = rnd.choice(options)
        if value is not None:
            values[name] = value
    return values


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


@hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_the_readers_say_what_get_and_eval_say(seed):
    rnd = random.Random(seed)
    values = _ad(rnd)
    ad = ClassAd()
    for name, value in values.items():
        ad[name] = value
    plain = {k: v for k, v in values.items() if not isinstance(v, ExprTree)}
    for subject in (ad, plain):
        for use in (True, False):
            assert _same(slot_weight(subject, use), _slot_weight(subject, use))
        for name in ("Cpus", "SlotWeight", "State"):
            assert _same(number(subject, name, -7.0), _number(subject, name, -7.0))
        assert remote_user_of(subject) == _remote_user(subject)
    slot = Slot(ad, "slot1@n1")
    assert slot.remote_user == _remote_user(ad)
    assert slot.claimed == (_remote_user(ad) is not None)
    assert slot.partitionable == (ad.get("PartitionableSlot") is True
                                  or str(ad.get("SlotType", "")).lower() == "partitionable")


def test_the_readers_meet_claimed_and_weighted_ads():
    """The random ads above are not all idle and unweighted (the shortcuts' other side)."""
    rnd = random.Random(1)
    ads = [_ad(rnd) for _ in range(300)]
    assert sum(_remote_user(ad) is not None for ad in ads) > 30
    assert sum("SlotWeight" in ad for ad in ads) > 30
    assert sum(not any(u in ad for u in _USERS) for ad in ads) > 30


def test_each_claim_attribute_alone_names_the_user():
    for attr in _USERS:
        for state in ("Claimed", "Unclaimed"):
            ad = ClassAd({"State": state, attr: "u@x", "Cpus": 4})
            want = "u@x" if state == "Claimed" or attr.startswith("Preempting") else None
            assert remote_user_of(ad) == _remote_user(ad) == want
            assert Slot(ad, "slot1@n1").remote_user == want


def test_a_negative_zero_literal_is_not_shared_with_zero():
    """``literal`` shares one node per value, but -0.0 == 0.0 as a key: a carve that leaves
    -0.0 must print as -0.0, whichever of the two was asked for first."""
    from htc.classad.printing import unparse
    from htc.daemons.negotiator.slotreads import literal

    zero, negative = literal(0.0), literal(-0.0)
    assert unparse(zero) == "0.0" and unparse(negative) == "-0.0"
    assert literal(0.0) is zero and literal(0) is not zero  # ints keep their own nodes
