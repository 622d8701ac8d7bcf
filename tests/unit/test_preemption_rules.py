"""Preemption rules as properties (issue #19): never a higher-priority user's job, RANK
preemption, retirement honoured, no thrashing -- for HTCondor's policy and for UPDOWN."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.preemption import PreemptState, Rejection, decide_preemption
from htc.daemons.negotiator.settings import UWCS_PREEMPTION_REQUIREMENTS, NegotiatorSettings
from htc.daemons.negotiator.slotreads import claimed_resources
from htc.daemons.negotiator.updown import updown_may_preempt
from tests.negotiator_cycles import claimed, make_job, make_slot, run_cycle

USERS = ["u0@x", "u1@x", "u2@x", "u3@x"]
_rank = st.one_of(st.none(), st.floats(-10, 10, allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(USERS), st.one_of(st.none(), st.sampled_from(USERS)), _rank, _rank,
       st.booleans(), st.floats(0, 1000), st.booleans(), st.booleans())
def test_the_decision_table_holds_for_any_inputs(me, remote, new, current, preq, retire, early,
                                                 only_rank):
    calls = []

    def requirements():
        calls.append(1)
        return preq

    v = decide_preemption(submitter=me, remote_user=remote, new_rank=new, current_rank=current,
                          preemption_requirements=requirements, retirement_remaining=retire,
                          consider_early_preemption=early, only_rank=only_rank)
    assert (v.state is None) != (v.rejection is None)
    if remote is None:
        assert v.state is (None if only_rank else PreemptState.NONE)
        return
    if retire > 0 and not early:  # retirement honoured: never a candidate
        assert v.rejection is Rejection.RETIREMENT
        return
    rank_better = new is not None and current is not None and new > current
    if rank_better:  # RANK preemption needs no policy and ignores the submitter's limit
        assert v.state is PreemptState.RANK and not calls
        return
    if v.state is PreemptState.PRIORITY:
        assert remote != me and preq and not only_rank
        assert new is not None and current is not None and new >= current
    else:
        assert v.state is None


@st.composite
def _pools(draw):
    """Busy slots of random users with random priorities, plus requests of random users."""
    eups = {u: draw(st.floats(0.5, 100)) for u in USERS}
    n = draw(st.integers(1, 6))
    slots = []
    for i in range(n):
        user = draw(st.sampled_from(USERS))
        slots.append(claimed(make_slot(f"slot1@n{i}"), user, EnteredCurrentState=0,
                             JobStart=draw(st.integers(0, 500))))
    wanting = draw(st.lists(st.sampled_from(USERS), min_size=1, max_size=3, unique=True))
    return eups, slots, wanting


@settings(max_examples=60, deadline=None)
@given(_pools(), st.sampled_from(["HTCONDOR", "UPDOWN"]))
def test_no_job_of_a_better_priority_user_is_ever_preempted_for_priority(pool, policy):
    eups, slots, wanting = pool
    acct = Accountant(now=0.0)
    for user, value in eups.items():
        acct.set_real_priority(user, value)
        acct.updown.set_index(user, value)
    acct.check_matches(claimed_resources(slots), 0.0)
    settings_ = NegotiatorSettings(policy=policy,
                                   preemption_requirements=UWCS_PREEMPTION_REQUIREMENTS)
    requests = {u: [(make_job(u.split("@")[0]), 3)] for u in wanting}
    result, acct = run_cycle(slots, requests, acct=acct, settings=settings_, now=7200.0)
    for m in result.matches:
        if m.preemption is PreemptState.PRIORITY:
            assert m.preempted_user != m.submitter
            if policy == "UPDOWN":
                assert eups[m.preempted_user] > eups[m.submitter]
            else:  # UWCS: the victim's EUP is more than 1.2 x worse, as the cycle saw them
                # (two hours of decay and usage since the priorities were set: compare the
                # accountant's figures at the cycle, not the starting ones)
                prio = acct.effective_priority
                assert prio(m.preempted_user) > 1.2 * prio(m.submitter)


@settings(max_examples=300, deadline=None)
@given(st.floats(0.5, 1e6), st.floats(0.5, 1e6), st.floats(-1e4, 1e4), st.floats(-1e4, 1e4))
def test_preemption_never_thrashes(eup_a, eup_b, si_a, si_b):
    """If A may take B's slot for priority, B may not take it straight back."""
    uwcs = lambda victim, winner: victim > winner * 1.2  # noqa: E731 - the UWCS comparison
    assert not (uwcs(eup_b, eup_a) and uwcs(eup_a, eup_b))
    assert not (updown_may_preempt(si_a, si_b) and updown_may_preempt(si_b, si_a))
    assert not updown_may_preempt(si_a, si_a)


def test_a_preempted_user_cannot_preempt_back_in_the_next_cycle():
    acct = Accountant(now=0.0)
    acct.set_real_priority("heavy@x", 50.0)
    slot = claimed(make_slot("slot1@n0"), "heavy@x", EnteredCurrentState=0)
    acct.check_matches(claimed_resources([slot]), 0.0)
    policy = NegotiatorSettings(preemption_requirements=UWCS_PREEMPTION_REQUIREMENTS)
    result, acct = run_cycle([slot], {"light@x": [(make_job("light"), 1)]}, acct=acct,
                             settings=policy, now=7200.0)
    assert [m.preempted_user for m in result.matches] == ["heavy@x"]
    taken = claimed(make_slot("slot1@n0"), "light@x", EnteredCurrentState=0)
    result, _ = run_cycle([taken], {"heavy@x": [(make_job("heavy"), 1)]}, acct=acct,
                          settings=policy, now=2 * 7200.0)
    assert result.matches == ()
    assert result.statistics.rejections_by_reason == {"preemption requirements": 1}
