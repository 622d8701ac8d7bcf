"""``runs.limit_count`` (the steps a request's limits allow, per step of every run) inlines
``preemption.submitter_limit_permits``: it counts what the step-by-step test counts."""

from __future__ import annotations

from hypothesis import given, settings as hsettings, strategies as st

from htc.daemons.negotiator.preemption import submitter_limit_permits
from htc.daemons.negotiator.runs import limit_count

_AMOUNTS = st.one_of(st.floats(-2, 40, allow_nan=False), st.sampled_from(
    [0.0, 1.0, 1 / 3, 0.1, 29.999999, 30.0, 1e-7, float("inf"), float("nan")]))


def _stepped(most, cost, used, limit, used_u, limit_u):
    n = 0
    while n < most:
        if used >= limit or not submitter_limit_permits(used_u, limit_u, cost):
            break
        used += cost
        used_u += cost
        n += 1
    return n


@hsettings(max_examples=2000, deadline=None)
@given(most=st.integers(0, 70), cost=_AMOUNTS, used=_AMOUNTS, limit=_AMOUNTS, used_u=_AMOUNTS,
       limit_u=_AMOUNTS)
def test_the_limits_count_the_steps_of_the_step_by_step_test(most, cost, used, limit, used_u,
                                                             limit_u):
    assert limit_count(most, cost, used, limit, used_u, limit_u) == _stepped(
        most, cost, used, limit, used_u, limit_u)
