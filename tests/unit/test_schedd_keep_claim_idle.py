"""KeepClaimIdle (``keep_claim_idle``; DAGMan's DAGMAN_HOLD_CLAIM_TIME): the schedd keeps the
claim of a job that ended Claimed/Idle for that many seconds, for the next job of the user (a
DAG node's child), even while other users' jobs wait -- and gives it back after."""

from __future__ import annotations

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.schedd.ends import keep_claim_idle
from htc.daemons.schedd.states import ClaimState
from htc.jobqueue import JobStatus
from htc.wire import messages as m
from tests.unit.test_schedd_core import BOB, Harness, job, run_first_job


def _released(out: list[c.Action]) -> list[str]:
    return [a.msg.claim_id for a in out if isinstance(a, c.Send) and isinstance(a.msg, m.ReleaseClaim)]


def _ended(h: Harness, claim_id: str, job_id: str) -> list[c.Action]:
    before = len(h.actions)
    h.exited(claim_id, job_id, exit_code=0)
    return h.actions[before:]


def test_keep_claim_idle_keeps_the_claim_for_the_next_submit_while_others_wait_then_releases_it():
    h = Harness()   # SCHEDD_CLAIM_LINGER 0: without KeepClaimIdle the claim goes at once
    h.start()
    h.submit(job("keep_claim_idle = 20"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    out = _ended(h, claim_id, "1.0")
    assert not _released(out) and h.core.claims[claim_id].state is ClaimState.IDLE
    assert h.core.next_deadline() <= h.now + 20.0
    # Bob's job cannot use alice's claim, and waits: the claim is kept all the same.
    before = len(h.actions)
    h.submit(job(), uid=BOB)
    assert not _released(h.actions[before:]) and claim_id in h.core.claims
    # Alice's next job (the node's child) starts on it at once: no negotiator, no new claim.
    h.now += 5
    before = len(h.actions)
    h.submit(job())
    out = h.actions[before:]
    [again] = h.calls(m.ActivateClaim, out)
    assert again.msg.claim_id == claim_id and ClassAd(again.msg.job_ad)["ClusterId"] == 3
    assert not h.calls(m.RequestClaim, out) and h.status(3) is JobStatus.RUNNING
    h.ack(again)
    # That job has no KeepClaimIdle and Bob waits: the claim goes back for the negotiator.
    assert _released(_ended(h, claim_id, "3.0")) == [claim_id] and h.core.claims == {}


def test_an_unused_kept_claim_is_released_after_keep_claim_idle_seconds():
    h = Harness(claim_linger=2.0)
    h.start()
    h.submit(job("keep_claim_idle = 20"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    assert not _released(_ended(h, claim_id, "1.0"))
    assert not _released(h.tick(h.now + 19.0))   # KeepClaimIdle beats a shorter SCHEDD_CLAIM_LINGER
    assert _released(h.tick(h.now + 1.5)) == [claim_id] and h.core.claims == {}


def test_without_keep_claim_idle_a_waiting_job_of_another_user_takes_the_slot_back():
    h = Harness(claim_linger=10.0)
    h.start()
    h.submit(job())
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    _ended(h, claim_id, "1.0")
    before = len(h.actions)
    h.submit(job(), uid=BOB)
    assert _released(h.actions[before:]) == [claim_id]


def test_keep_claim_idle_values():
    h = Harness()
    h.start()
    for text in ("keep_claim_idle = 20", "keep_claim_idle = 10 + 5", "", "+KeepClaimIdle = \"soon\"",
                 "keep_claim_idle = -3"):
        h.submit(job(text))
    assert [keep_claim_idle(h.queue.get_job((n, 0))) for n in range(1, 6)] == [20.0, 15.0, 0.0, 0.0, 0.0]
