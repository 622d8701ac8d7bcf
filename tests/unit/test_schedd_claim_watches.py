"""The schedd core's claim watches (htc.daemons.schedd.claims): a startd whose held keep-alive
fails with ``closed`` is asked again at once, and a lost one gives its job back in one step."""

from __future__ import annotations

import pytest

from htc.eventlog.events import EventType
from htc.jobqueue import JobStatus
from htc.wire import messages as m
from test_schedd_core import Harness, job, restarted, run_first_job, running_job


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.start()
    return harness


def watched(h: Harness, text: str = "") -> tuple[str, object]:
    """A running job; return its claim id and the claim's watch (the held keep-alive)."""
    h.submit(job(text))
    claim_id, activate = run_first_job(h)
    out = h.ack(activate)
    out += h.tick(h.now + 0.01)
    [watch] = h.calls(m.ClaimKeepAlive, out)
    assert watch.msg.claim_id == claim_id and watch.msg.watch > 0
    return claim_id, watch


def test_a_watch_closed_then_nobody_listening_gives_the_job_back_at_once(h):
    claim_id, watch = watched(h)
    out = h.fail(watch, "closed", "startd closed the connection instead of answering")
    [again] = h.calls(m.ClaimKeepAlive, out)  # asked again at once, without waiting for a timer
    assert h.status(1, 0) is JobStatus.RUNNING
    out = h.fail(again, "unreachable", "no startd daemon is listening")
    assert h.status(1, 0) is JobStatus.IDLE
    assert h.events(out) == [EventType.JOB_DISCONNECTED, EventType.JOB_RECONNECT_FAILED]
    assert h.core.claims == {} and h.core.shadows == {}
    # Idle again is new work: the ads and a Reschedule go out now, not SCHEDD_MIN_INTERVAL later.
    assert h.core.next_deadline() <= h.now + 0.01
    assert any(isinstance(a.msg, m.Reschedule) for a in h.tick(h.now + 0.01) if hasattr(a, "msg"))


def test_a_watch_closed_then_closed_again_on_a_stale_connection_is_asked_again_at_once(h):
    claim_id, watch = watched(h)
    [again] = h.calls(m.ClaimKeepAlive, h.fail(watch, "closed"))
    h.now += 0.01
    [third] = h.calls(m.ClaimKeepAlive, h.fail(again, "closed", "startd closed the connection instead of answering"))
    out = h.fail(third, "unreachable", "no startd daemon is listening")
    assert h.status(1, 0) is JobStatus.IDLE
    assert h.events(out) == [EventType.JOB_DISCONNECTED, EventType.JOB_RECONNECT_FAILED]


def test_a_watch_closed_then_a_restarted_startd_that_forgot_the_claim(h):
    claim_id, watch = watched(h)
    [again] = h.calls(m.ClaimKeepAlive, h.fail(watch, "closed"))
    out = h.fail(again, "not_found", "startd holds no claim")
    assert h.status(1, 0) is JobStatus.IDLE
    assert h.events(out) == [EventType.JOB_DISCONNECTED, EventType.JOB_RECONNECT_FAILED]


def test_a_watch_closed_by_a_startd_that_is_still_there_changes_nothing(h):
    claim_id, watch = watched(h)
    [again] = h.calls(m.ClaimKeepAlive, h.fail(watch, "closed"))
    out = h.ack(again)
    [third] = h.calls(m.ClaimKeepAlive, out)
    assert third.msg.watch > 0 and h.events(out) == []
    assert h.status(1, 0) is JobStatus.RUNNING and h.core.claims[claim_id].broken_at is None
    # Closed again, then silence: a startd that is only slow keeps the job until the lease ends.
    [fourth] = h.calls(m.ClaimKeepAlive, h.fail(third, "closed"))
    out = h.fail(fourth, "timeout", "no answer")
    assert h.calls(m.ClaimKeepAlive, out) == [] and h.status(1, 0) is JobStatus.RUNNING
    assert h.core.next_deadline() == pytest.approx(h.now + 2.0)


def test_an_unanswered_watch_without_a_close_waits_for_the_lease(h):
    claim_id, watch = watched(h)
    out = h.fail(watch, "unreachable", "no startd")  # never connected: nothing says it died
    assert h.status(1, 0) is JobStatus.RUNNING and h.calls(m.ClaimKeepAlive, out) == []
    [retry] = h.calls(m.ClaimKeepAlive, h.tick(h.now + 2.0))
    assert retry.msg.watch > 0


def test_a_restarted_schedd_watches_a_claim_once_it_reconnected():
    h = Harness()
    h.start()
    claim_id = running_job(h)
    h2 = restarted(h)
    [reconnect] = h2.calls(m.ClaimKeepAlive)
    assert reconnect.msg.watch == 0.0  # the reconnect itself
    [watch] = h2.calls(m.ClaimKeepAlive, h2.ack(reconnect))
    assert watch.msg.claim_id == claim_id and watch.msg.watch > 0
