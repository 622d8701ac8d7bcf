"""Properties of the accountant (issue #19): decay, factors, and invariance to the order and
timing of updates and claims."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from htc.daemons.negotiator.accountant import Accountant, AccountantSettings
from htc.daemons.negotiator.fair_share import pie_slices

DAY = 86400.0
_times = st.floats(0, 10 * DAY, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(st.floats(0.5, 1e4), st.floats(1.0, 30 * DAY), st.floats(60.0, 10 * DAY))
def test_an_idle_submitter_decays_exponentially_to_the_floor(start, idle, halflife):
    acct = Accountant(AccountantSettings(priority_halflife=halflife), now=0.0)
    acct.set_real_priority("a@x", start)
    acct.update_priorities(idle)
    assert acct.real_priority("a@x") == pytest.approx(max(0.5, start * 0.5 ** (idle / halflife)))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 64), st.floats(0.5, 500), st.lists(_times, min_size=1, max_size=8))
def test_steady_usage_gives_the_same_priority_however_the_updates_fall(cores, start, cuts):
    """Aging is multiplicative and exact: one update or many over the same span agree."""
    end = 10 * DAY + 1
    one, many = Accountant(now=0.0), Accountant(now=0.0)
    for acct in (one, many):
        acct.set_real_priority("a@x", start)
        for i in range(cores):
            acct.add_match("a@x", f"slot{i}", 1.0, 0.0)
    for t in sorted(cuts):
        many.update_priorities(t)
    one.update_priorities(end)
    many.update_priorities(end)
    assert many.real_priority("a@x") == pytest.approx(one.real_priority("a@x"), rel=1e-9)


_claims = st.lists(st.tuples(st.floats(0, 1000), st.floats(0, 1000), st.sampled_from([1.0, 2.0, 8.0])),
                   min_size=1, max_size=10)


@settings(max_examples=150, deadline=None)
@given(_claims, st.lists(st.floats(0, 1000), max_size=6), st.randoms(use_true_random=False))
def test_every_second_of_every_claim_is_charged_once_whatever_the_order(claims, updates, rnd):
    """Accumulated usage is sum(weight x held time), whatever the interleaving of claims
    starting, ending and priority updates."""
    events = []
    for i, (a, b, w) in enumerate(claims):
        start, end = min(a, b), max(a, b)
        events.append((start, 0, "add", i, w))
        events.append((end, 1, "remove", i, w))
    events += [(t, 2, "update", None, None) for t in updates]
    rnd.shuffle(events)
    events.sort(key=lambda e: (e[0], e[1]))  # time order; same-time ties in any order
    acct = Accountant(now=0.0)
    for t, _, kind, i, w in events:
        if kind == "add":
            acct.add_match("a@x", f"slot{i}", w, t)
        elif kind == "remove":
            acct.remove_match(f"slot{i}", t)
        else:
            acct.update_priorities(t)
    acct.update_priorities(1001.0)
    expected = sum(w * abs(b - a) for a, b, w in claims)
    (record,) = acct.records()
    assert record.weighted_accumulated_usage == pytest.approx(expected, rel=1e-9, abs=1e-6)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.tuples(st.floats(0.5, 1e3), st.floats(1, 1e6)),
                       min_size=1), st.floats(1, 1e4))
@example({"a": (1.00390625, 33.0), "b": (33.0, 1.00390625)}, 9391.552478622327)  # (a tie that flips)
def test_factors_scale_eup_and_common_scaling_changes_no_order_or_share(users, scale):
    acct, scaled = Accountant(now=0.0), Accountant(now=0.0)
    for name, (rup, factor) in users.items():
        for a, f in ((acct, factor), (scaled, factor * scale)):
            a.set_real_priority(f"{name}@x", rup)
            a.set_priority_factor(f"{name}@x", f)
    for name, (rup, factor) in users.items():
        assert acct.effective_priority(f"{name}@x") == pytest.approx(rup * factor)
    # the same order, but for EUPs tied within rounding (1.00390625 x 33 and 33 x 1.00390625
    # tie; times a common scale they may differ in the last bit, either way)
    eups = {r.name: r.effective_priority for r in acct.records()}
    order, where = [r.name for r in acct.records()], {r.name: i for i, r in enumerate(scaled.records())}
    assert sorted(order) == sorted(where)
    for i, x in enumerate(order):
        for y in order[i + 1:]:
            assert eups[y] <= eups[x] * (1 + 1e-12) or where[x] < where[y], (x, y)
    shares = pie_slices(eups, {}, 100.0)
    scaled_shares = pie_slices({r.name: r.effective_priority for r in scaled.records()}, {}, 100.0)
    for name in eups:
        assert shares[name].share == pytest.approx(scaled_shares[name].share, rel=1e-9)
    assert math.fsum(p.share for p in shares.values()) == pytest.approx(1.0)
    # a better (lower) EUP never gets a smaller share
    ordered = sorted(eups, key=eups.get)
    assert all(shares[a].share >= shares[b].share * (1 - 1e-12) for a, b in zip(ordered, ordered[1:]))


def test_setaccum_sets_the_accumulated_usage_through_the_core():
    from htc.daemons.negotiator.core import Negotiator
    from htc.daemons.negotiator.events import PublishAccounting, SetAccumulatedUsage
    from htc.errors import UsageError

    neg = Negotiator(now=0.0)
    actions = neg.handle(SetAccumulatedUsage("a@x", 7200.0), 1.0)
    (publish,) = [a for a in actions if isinstance(a, PublishAccounting)]
    (ad,) = publish.ads
    assert (ad["Name"], ad["WeightedAccumulatedUsage"], ad["LastUpdate"]) == ("a@x", 7200.0, 0.0)
    with pytest.raises(UsageError, match="zero or more seconds"):
        neg.accountant.set_accumulated_usage("a@x", -1.0)


_batch = st.lists(st.tuples(st.sampled_from(["a@x", "b@x"]), st.integers(0, 12)), min_size=0,
                  max_size=12)


@settings(max_examples=150, deadline=None)
@given(_batch, st.lists(st.integers(0, 12), max_size=10), st.sampled_from([0.5, 1.0, 3.0, 0.1]),
       st.floats(0, 1000), st.booleans())
def test_add_matches_charges_exactly_as_add_match_one_by_one(held, run, weight, now, fresh):
    """A run's batch charge (``add_matches``) leaves the accountant bit for bit as the same
    ``add_match`` calls in turn, also when some resources are held already (by the submitter
    or by another, which the charge moves)."""
    one, batch = (Accountant(now=None if fresh else 0.0) for _ in range(2))
    for acct in (one, batch):
        for customer, i in held:
            acct.add_match(customer, f"slot{i}", 2.0, now / 2)
    resources = [f"slot{i}" for i in run]
    for resource in resources:
        one.add_match("a@x", resource, weight, now)
    batch.add_matches("a@x", resources, weight, now)
    assert batch.snapshot() == one.snapshot()
    assert [batch.match_of(r) for r in resources] == [one.match_of(r) for r in resources]


# (indices into values that compare equal but print differently: sampled_from would not keep
# 1 and 1.0 apart)
_WEIGHTS, _STARTS = (1, 1.0, 2.0, 0.0, -0.0, 0, math.nan), (5, 5.0, 0.0, -0.0, 0)
_charge = st.tuples(st.sampled_from(["a@x", "b@x"]),
                    st.integers(0, len(_WEIGHTS) - 1).map(_WEIGHTS.__getitem__),
                    st.integers(0, len(_STARTS) - 1).map(_STARTS.__getitem__))


@settings(max_examples=150, deadline=None)
@given(st.lists(_charge, max_size=12), st.booleans())
def test_the_snapshot_writes_every_match_as_it_was_charged(charges, batched):
    """Matches charged alike share one record (``Accountant._record``); the snapshot's text
    names each resource's own customer, weight and start, with their types and signs (1 is not
    1.0, -0.0 is not 0.0)."""
    acct = Accountant(now=0.0)
    for i, (customer, weight, now) in enumerate(charges):
        if batched:
            acct.add_matches(customer, [f"slot{i}#carve0", f"slot{i}#carve1"], weight, now)
        else:
            acct.add_match(customer, f"slot{i}#carve0", weight, now)
            acct.add_match(customer, f"slot{i}#carve1", weight, now)
    want = {f"slot{i}#carve{k}": {"customer": customer, "weight": weight, "start_time": now}
            for i, (customer, weight, now) in enumerate(charges) for k in (0, 1)}
    assert json.dumps(acct.snapshot()["matches"], sort_keys=True) == json.dumps(want, sort_keys=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.5, 1e12), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_the_pie_does_not_depend_on_the_order_of_the_submitters(eups, rnd):
    """The cycle hands pie_slices its submitters in a set's order, which changes with the hash
    seed from one process to the next: the shares must not."""
    named = {f"u{i}@x": eup for i, eup in enumerate(eups)}
    shuffled = list(named.items())
    rnd.shuffle(shuffled)
    assert pie_slices(named, {}, 1000.0) == pie_slices(dict(shuffled), {}, 1000.0)
