"""A run's sizes evaluated ahead (:mod:`htc.daemons.negotiator.vsteps`): the steps of a slot
computed at once (``_whole_sequence``) are those of the one-step loop (``step_by_step``, one
``less_carve`` per step), value and type."""

from __future__ import annotations

from hypothesis import given, settings as hsettings, strategies as st

from htc.daemons.negotiator import vsteps


_SIZES = st.one_of(st.none(), st.integers(-5, 70_000), st.sampled_from([2**53, 2**53 + 1, 7.5]))
_CARVES = st.one_of(st.integers(1, 9).map(float), st.integers(1, 5000).map(float),
                    st.sampled_from([0, 0.0, 1, 3, 0.5, -1.0, 2.0**53, 2.0**54, float("inf"),
                                     float("nan"), 2**53 + 1]))


@hsettings(max_examples=1000, deadline=None)
@given(start=st.tuples(_SIZES, _SIZES, _SIZES), carve=st.tuples(_CARVES, _CARVES, _CARVES),
       most=st.sampled_from([1, 3, 64]))
def test_the_steps_at_once_are_the_steps_one_by_one(start, carve, most):
    saved, vsteps.MOST_STEPS = vsteps.MOST_STEPS, most
    try:
        got, expected = vsteps._sequence(start, carve), vsteps.step_by_step(start, carve, most)
    finally:
        vsteps.MOST_STEPS = saved
    assert repr(got) == repr(expected)  # (repr: NaN sizes compare, and 4 is not 4.0)


def test_whole_sizes_and_carves_take_the_steps_at_once():
    """Case 1's shape (integer sizes, ``1.0``-like carves) is computed at once, ending where
    the memory runs out; a half core is not (the loop steps it)."""
    steps, ended = vsteps._whole_sequence((8, 16384, 100_000), (1.0, 4096.0, 1000.0))
    assert steps == [(8, 16384, 100_000), (7, 12288, 99_000), (6, 8192, 98_000),
                     (5, 4096, 97_000)] and ended
    assert all(type(v) is int for step in steps for v in step)
    assert vsteps._whole_sequence((8, 16384, 100_000), (0.5, 4096.0, 1000.0)) is None


def test_a_carved_column_is_one_type_or_none():
    from htc.daemons.negotiator.vexpr import INT, MISSING, REAL

    tag, values = vsteps.carved_column((8, 7, 6))
    assert tag == INT and values.tolist() == [8.0, 7.0, 6.0]
    assert vsteps.carved_column([2.5, 1.5])[0] == REAL
    assert vsteps.carved_column((None, None))[0] == MISSING
    assert vsteps.carved_column((8, 7.0)) is None  # an int and a float: step by step
    assert vsteps.carved_column((1, True)) is None
    assert vsteps.carved_column((2**53 + 1, 2)) is None  # beyond what a float holds exactly
    assert vsteps.carved_column(("8",)) is None
