"""A run of carves charged as one entry (``Accountant.add_carves``, :mod:`.match_records`)
leaves the accountant bit for bit as ``add_match`` of each carve name in turn: the customers'
sums, the records, their order (``check_matches`` releases them in it), the snapshot."""

from __future__ import annotations

import json
import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from htc.daemons.negotiator.accountant import Accountant, _added_all
from htc.daemons.negotiator.slotreads import added

_SLOTS = ("s1@n", "s2@n")
_WEIGHTS = (1.0, 2.0, 0.5, 0.1, 3, 1e300)
_TIMES = (0.0, 1.0, 0.5, 7.25, 1e-9, 3)
_customer = st.sampled_from(("a@x", "b@x"))
_weight = st.integers(0, len(_WEIGHTS) - 1).map(_WEIGHTS.__getitem__)
_time = st.integers(0, len(_TIMES) - 1).map(_TIMES.__getitem__)
_step = st.one_of(
    st.tuples(st.just("carves"), _customer, st.sampled_from(_SLOTS), st.integers(0, 6),
              st.integers(0, 5), _weight, _time),
    st.tuples(st.just("match"), _customer, st.sampled_from(("s1@n", "s1@n#carve2", "s2@n#carve0",
                                                            "other")), _weight, _time),
    st.tuples(st.just("remove"), st.sampled_from(("s1@n#carve1", "s2@n#carve3", "other")), _time),
    st.tuples(st.just("check"), st.sampled_from(({}, {"other": ("a@x", 1.0)},
                                                  {"s1@n#carve0": ("a@x", 2.0)},
                                                  {"s2@n#carve1": ("b@x", 1.0), "x": ("a@x", 1.0)})),
              _time),
    st.tuples(st.just("read"), st.sampled_from(("s1@n#carve0", "s2@n#carve4", "other"))),
)


def _apply(acct: Accountant, step, runs: bool) -> object:
    kind = step[0]
    if kind == "carves":
        _, customer, slot, first, count, weight, now = step
        if runs:
            acct.add_carves(customer, slot, first, count, weight, now)
        else:
            for i in range(count):
                acct.add_match(customer, f"{slot}#carve{first + i}", weight, now)
    elif kind == "match":
        acct.add_match(*step[1:])
    elif kind == "remove":
        acct.remove_match(*step[1:])
    elif kind == "check":
        acct.check_matches(*step[1:])
    else:
        return acct.match_of(step[1])
    return None


def _state(acct: Accountant):
    snap = acct.snapshot()
    return (json.dumps(snap, sort_keys=True), [vars(c) for c in acct._customers.values()],
            [(name, m.customer, m.weight, m.start_time) for name, m in acct._matches.items()])


@settings(max_examples=300, deadline=None)
@given(st.lists(_step, max_size=14), st.sampled_from((None, 0.0, 0.25)))
def test_runs_of_carves_charge_as_their_carves_one_by_one(steps, start):
    one, runs = Accountant(now=start), Accountant(now=start)
    for step in steps:
        assert _apply(runs, step, True) == _apply(one, step, False)
        assert json.dumps(runs.snapshot(), sort_keys=True) == json.dumps(one.snapshot(),
                                                                          sort_keys=True)
        assert runs.saved().text() == json.dumps(one.snapshot(), sort_keys=True)  # (the file's)
    assert _state(runs) == _state(one)


def test_a_cycle_of_runs_is_one_entry_each_until_read_by_name():
    acct = Accountant(now=0.0)
    acct.add_carves("a@x", "s1@n", 0, 3, 1.0, 1.0)
    acct.add_carves("a@x", "s2@n", 0, 2, 1.0, 1.0)
    acct.add_carves("a@x", "s1@n", 3, 1, 1.0, 1.0)
    records = acct._records
    assert len(records._tail) == 3 and not records._charged  # no name made yet
    assert list(acct.snapshot()["matches"]) == [
        "s1@n#carve0", "s1@n#carve1", "s1@n#carve2", "s2@n#carve0", "s2@n#carve1", "s1@n#carve3"]
    assert not records._charged  # the snapshot wrote them without expanding
    acct.check_matches({"s1@n_1": ("a@x", 4.0)}, 2.0)  # the dynamic slot replaces the carves
    assert list(acct._matches) == ["s1@n_1"] and not records._tail
    assert acct.weighted_resources_used("a@x") == 4.0


def test_a_static_slot_between_runs_names_no_carve():
    acct = Accountant(now=0.0)
    acct.add_carves("a@x", "s1@n", 0, 2, 1.0, 1.0)
    acct.add_match("b@x", "static@n", 1.0, 1.0)
    acct.add_carves("a@x", "s2@n", 0, 2, 1.0, 1.0)
    acct.add_match("b@x", "static2@n", 1.0, 1.0)
    assert acct.match_of("static@n") == ("b@x", 1.0)
    records = acct._records
    assert len(records._tail) == 4 and not records._charged  # still no carve named
    assert list(acct.snapshot()["matches"]) == [
        "s1@n#carve0", "s1@n#carve1", "static@n", "s2@n#carve0", "s2@n#carve1", "static2@n"]
    acct.check_matches({"static2@n": ("b@x", 1.0), "static@n": ("c@x", 1.0)}, 2.0)
    assert list(acct._matches) == ["static2@n", "static@n"]  # (kept, then the one moved)
    assert acct.match_of("static@n") == ("c@x", 1.0)


def test_a_run_over_a_carve_charged_already_goes_one_by_one():
    acct = Accountant(now=0.0)
    acct.add_carves("a@x", "s1@n", 0, 3, 1.0, 1.0)
    acct.add_carves("b@x", "s1@n", 2, 2, 1.0, 1.0)  # carve 2 moves to b@x
    assert acct.match_of("s1@n#carve2") == ("b@x", 1.0)
    assert acct._customers["a@x"].resources_used == 2
    assert acct._customers["b@x"].resources_used == 2


_VALUES = (0.0, -0.0, 1.0, -3.0, 2.0 ** 52, 2.0 ** 53 - 8, 0.1, 5, 0, 2 ** 60, True, math.inf,
           math.nan)
_STEPS = (0.0, -0.0, 1.0, -1.0, 2.0, 0.1, 2.0 ** 40, 1, 0, -2, 3 ** 40, True, math.nan)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, len(_VALUES) - 1).map(_VALUES.__getitem__),
       st.integers(0, len(_STEPS) - 1).map(_STEPS.__getitem__), st.integers(0, 40))
def test_added_is_one_addition_after_another(value, step, count):
    want = value
    for _ in range(count):
        want += step
    got = added(value, step, count)
    assert repr(got) == repr(want) and type(got) is type(want)


def _check_one_by_one(acct: Accountant, claimed: dict, now: float) -> None:
    """``check_matches`` as it was written, one record at a time (the reference)."""
    charged = acct._matches
    for resource in list(charged):
        want = claimed.get(resource)
        if want is None or want[0] != charged[resource].customer:
            acct.remove_match(resource, now)
    for resource, (customer, weight) in claimed.items():
        if resource not in charged:
            acct.add_match(customer, resource, weight, now)


_CLAIM_WEIGHTS = (1.0, 1, 2.0, 0.1, 0.0, -0.0, 0, math.nan, 1e300, 3)
_claims = st.dictionaries(
    st.sampled_from(("s1@n_1", "s1@n_2", "s2@n_1", "s2@n_2", "s2@n_3", "static@n", "other",
                     "s1@n#carve0", "s2@n#carve1")),
    st.tuples(_customer, st.integers(0, len(_CLAIM_WEIGHTS) - 1).map(_CLAIM_WEIGHTS.__getitem__)),
    max_size=9)


@settings(max_examples=400, deadline=None)
@given(st.lists(_step, max_size=10), st.lists(_claims, min_size=1, max_size=3),
       st.sampled_from((None, 0.0, 0.25)))
@example(steps=[("carves", "a@x", "s1@n", 0, 1, 1e300, 1.0),   # (0.1 x 3 vanish in 1e300...
                ("carves", "a@x", "s2@n", 0, 3, 0.1, 1.0)],   # ...so their release clamps at 0)
         checks=[{}], start=0.0)
def test_check_matches_charges_and_releases_as_one_record_at_a_time(steps, checks, start):
    """The reconciliation releases a run of carves and charges the claims alike in one go
    (``_release``, ``add_matches``): the same sums, records and order as one by one."""
    ours, ref = Accountant(now=start), Accountant(now=start)
    for step in steps:
        if step[0] != "check":
            _apply(ours, step, True)
            _apply(ref, step, False)
    for k, claimed in enumerate(checks):
        now = 10.0 + k
        ours.update_priorities(now)
        ref.update_priorities(now)
        ours.check_matches(claimed, now)
        _check_one_by_one(ref, claimed, now)
        assert repr(_state(ours)) == repr(_state(ref))  # (repr: NaN, -0.0 and 1 vs 1.0 too)


_RUN_WEIGHTS = (1.0, 1, 2.0, 0.5, 0.1, 0.0, -0.0, 0, math.nan, 1e300, 3)
_batch = st.tuples(
    st.just("batch"), _customer,
    st.lists(st.tuples(st.sampled_from(_SLOTS + ("s3@n",)), st.integers(0, 6), st.integers(0, 4),
                       st.integers(0, len(_RUN_WEIGHTS) - 1).map(_RUN_WEIGHTS.__getitem__)),
             max_size=6),
    st.sampled_from(_TIMES + (math.nan,)))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_step, _batch, _batch), max_size=10), st.sampled_from((None, 0.0, 0.25)))
@example(steps=[("batch", "a@x", [("s1@n", 0, 2, 1.0), ("s2@n", 0, 1, 0.5),
                                  ("s1@n", 1, 2, 1.0), ("s3@n", 0, 3, 2.0)], 1.0)], start=None)
def test_a_requests_runs_at_once_charge_as_add_carves_run_by_run(steps, start):
    """``add_carve_runs`` (``commit_runs``' one call per request) leaves the accountant as
    ``add_carves`` of each run in turn: the runs kept alike, the sums (added in the same
    order: weights differ per run), the records, the snapshot's text."""
    ours, ref = Accountant(now=start), Accountant(now=start)
    for step in steps:
        if step[0] == "batch":
            _, customer, runs, now = step
            ours.add_carve_runs(customer, runs, now)
            for slot, first, count, weight in runs:
                ref.add_carves(customer, slot, first, count, weight, now)
        else:
            assert repr(_apply(ours, step, True)) == repr(_apply(ref, step, True))
        assert repr(ours._records._tail) == repr(ref._records._tail)  # (before any naming)
        assert _sharing(ours) == _sharing(ref)  # (the same records shared: record's rule)
        assert ours.saved().text() == ref.saved().text()
        assert repr([(n, vars(c)) for n, c in ours._customers.items()]) == repr(
            [(n, vars(c)) for n, c in ref._customers.items()])
        assert repr(ours.last_update_time) == repr(ref.last_update_time)
    assert repr(_state(ours)) == repr(_state(ref))  # (repr: NaN, -0.0 and 1 vs 1.0 too)


def _sharing(acct: Accountant) -> list[int]:
    """Which tail entries share a record object: each one's first entry of that object."""
    ids = [id(entry[-1]) for entry in acct._records._tail]
    return [ids.index(i) for i in ids]


_SUMMANDS = (0.0, -0.0, 1.0, -1.0, 3.0, 0.5, 1, 2.0 ** 52, -(2.0 ** 52), 2.0 ** 53,
             2.0 ** 51 + 1, -(2.0 ** 51), 1e300, math.nan, math.inf, 7.25, 0.1, -2.0)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(_SUMMANDS),
       st.lists(st.tuples(st.sampled_from(_SUMMANDS), st.integers(1, 5)), max_size=6))
@example(1.0, [(1.0, 1), (2.0 ** 53, 1)])  # (at once: 1 + 2**53 rounds, one by one it does not)
@example(-0.0, [(-0.0, 2)])
@example(0.1, [(1.0, 1), (-1.0, 1)])  # (a fraction rounds off on the way)
def test_a_runs_charges_summed_at_once_are_added_one_after_another(value, steps):
    """``_added_all`` (``add_carve_runs``' sums) is ``added`` of each step in turn, to the bit."""
    summands, counts = [s for s, _ in steps], [c for _, c in steps]
    one = value
    for step, count in steps:
        one = added(one, step, count)
    assert repr(_added_all(value, summands, counts)) == repr(one)
