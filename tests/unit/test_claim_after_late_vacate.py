"""A vacate that reaches a job after it ended by itself: the run is an exit (its result stands),
but the claim is ending all the same. The startd's exit report says so (``ClaimEnding``) and
the schedd does not offer that claim to its next idle job, which would only earn a refused
activation -- a SHADOW_EXCEPTION in an innocent job's log and a NumShadowExceptions it did
not deserve."""

from __future__ import annotations

from htc.daemons import core as c
from htc.daemons.schedd.shadow import ad_values
from htc.daemons.starter.records import ExitRecord, Usage
from htc.daemons.startd.events import StarterExited
from htc.daemons.startd.reports import CLAIM_ENDING, Contact, JobReports
from htc.eventlog.events import EventType
from htc.jobqueue import JobStatus
from htc.wire import messages as m
from tests.unit.test_schedd_core import h, job, run_first_job  # noqa: F401 (h: a fixture)

CLAIM = "slot1@exec#1#aa"


def _report(end_reason: str) -> m.JobExited:
    reports = JobReports(settings=None)
    reports.contacts[CLAIM] = Contact(CLAIM, "schedd", "schedd", "alice", shadow_address="shadow", job_id="1.0")
    out: list = []
    reports.exited(StarterExited(CLAIM, ExitRecord(0, None, False, False, False, Usage())), end_reason, out)
    [call] = [a for a in out if isinstance(getattr(a, "msg", None), m.JobExited)]
    return call.msg


def test_the_exit_report_of_a_job_whose_claim_is_ending_says_so():
    report = _report("preempted by a better claim")
    assert not report.vacated and report.exit_code == 0  # it ended by itself: an exit
    assert ad_values(report.usage_ad)[CLAIM_ENDING] == "preempted by a better claim"
    assert CLAIM_ENDING not in ad_values(_report("").usage_ad)  # a claim that goes on says nothing


def test_the_schedd_does_not_reuse_a_claim_whose_exit_report_says_it_is_ending(h):  # noqa: F811
    h.submit(job(queue="queue 2"))
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    before = len(h.actions)
    usage = f'[ RemoteUserCpu = 0.5; {CLAIM_ENDING} = "preempted by a better claim" ]'
    assert h.exited(claim_id, "1.0", exit_code=0, usage_ad=usage) == m.Ack()
    out = h.actions[before:]
    assert h.events(out) == [EventType.JOB_TERMINATED]  # the exit stands
    assert h.calls(m.ActivateClaim, out) == []  # 1.1 is not offered the going claim ...
    assert claim_id not in h.core.claims
    assert not [a for a in out if isinstance(a, c.Send) and isinstance(a.msg, m.ReleaseClaim)]  # (the startd ends it)
    assert h.status(1, 1) is JobStatus.IDLE  # ... it waits for the negotiator
    assert "NumShadowExceptions" not in h.queue.get_job((1, 1))
