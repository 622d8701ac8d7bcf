"""A silent startd (a cut link) leaves its job *disconnected*, as HTCondor's shadow does: the
schedd writes JOB_DISCONNECTED, keeps the claim for the job lease, and either the startd answers
within it (JOB_RECONNECTED) or the job goes back to Idle (JOB_RECONNECT_FAILED) to be matched
anew; a late exit report of the old run (the link back) changes nothing."""

from __future__ import annotations

import pytest

from htc.eventlog.events import EventType
from htc.jobqueue import JobStatus
from htc.wire import messages as m
from test_schedd_claim_watches import watched
from test_schedd_core import Harness

LEASE = 20.0


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.start()
    return harness


def cut(h: Harness):
    """A running job whose startd's link is cut: the watch closes (SSH keepalive), and asking
    again times out (the host is silent). Returns the claim id and the actions of the silence."""
    claim_id, watch = watched(h, f"job_lease_duration = {LEASE:g}")
    [again] = h.calls(m.ClaimKeepAlive, h.fail(watch, "closed", "SSH connection lost: not responding to keepalive"))
    h.now += 1.0
    return claim_id, h.fail(again, "timeout", "connecting to the shared port took over 3 s")


def test_a_silent_startd_disconnects_the_job_and_the_lease_end_reschedules_it(h):
    start = h.now
    claim_id, out = cut(h)
    assert h.events(out) == [EventType.JOB_DISCONNECTED]
    assert h.status(1, 0) is JobStatus.RUNNING and claim_id in h.core.claims
    # Asked again every reconnect_retry seconds; each silence writes nothing more.
    for _ in range(3):
        [retry] = h.calls(m.ClaimKeepAlive, h.tick(h.core.next_deadline()))
        assert h.events(h.fail(retry, "timeout", "no route to host")) == []
        assert h.status(1, 0) is JobStatus.RUNNING
    # The lease ends (counted from the last answered watch): the job is Idle again, at once new work.
    out = h.tick(start + LEASE + 0.01)
    assert h.events(out) == [EventType.JOB_RECONNECT_FAILED]
    assert h.status(1, 0) is JobStatus.IDLE and h.core.claims == {} and h.core.shadows == {}
    later = h.tick(h.now + 0.01)
    assert any(isinstance(a.msg, m.Reschedule) for a in out + later if hasattr(a, "msg"))
    # The link comes back and the old startd reports the run it killed (or that ended): ignored.
    reply = h.exited(claim_id, "1.0", exit_code=0)
    assert isinstance(reply, m.Ack) and reply.detail == "already recorded"
    assert h.status(1, 0) is JobStatus.IDLE and EventType.JOB_TERMINATED not in h.events()


def test_a_startd_that_answers_within_the_lease_reconnects_the_job(h):
    claim_id, out = cut(h)
    assert h.events(out) == [EventType.JOB_DISCONNECTED]
    [retry] = h.calls(m.ClaimKeepAlive, h.tick(h.core.next_deadline()))
    out = h.ack(retry)  # the link is back
    assert h.events(out) == [EventType.JOB_RECONNECTED]
    [watch] = h.calls(m.ClaimKeepAlive, out)
    assert watch.msg.watch > 0 and h.status(1, 0) is JobStatus.RUNNING
    assert not h.core.claims[claim_id].disconnected
    # Its exit report is the one termination.
    assert isinstance(h.exited(claim_id, "1.0", exit_code=0), m.Ack)
    assert h.events().count(EventType.JOB_TERMINATED) == 1 and h.status(1, 0) is None


def test_a_silent_startd_that_then_says_it_lost_the_claim_fails_the_reconnect_once(h):
    claim_id, out = cut(h)
    [retry] = h.calls(m.ClaimKeepAlive, h.tick(h.core.next_deadline()))
    out = h.fail(retry, "not_found", "startd holds no claim")
    assert h.events(out) == [EventType.JOB_RECONNECT_FAILED]  # disconnected was written already
    assert h.status(1, 0) is JobStatus.IDLE
