"""Job time limits: ``allowed_execute_duration`` (the startd, HoldReasonCode 47 JobExecuteExceeded)
and ``allowed_job_duration`` (the schedd's shadow, 46 JobDurationExceeded).

First the sans-IO pieces with a fake clock -- the startd core's timer, its wire adapter's exit
report, the schedd core's shadow -- then a real pool: a ``sleep`` job that outlives its limit is
held with the right code, its process is gone, and the user log (read with ``htcondor2``) has the
held event; a job within its limits completes.
"""

from __future__ import annotations

import htcondor2
import psutil
import pytest

from tests.unit import test_schedd_core as sc
from tests.unit import test_startd_core as core
from tests.service import test_startd_service as svc
from htc.classad import ClassAd, ExprTree
from htc.daemons import core as c
from htc.daemons.startd import events as ev
from htc.daemons.schedd.shadow import job_duration_limit
from htc.daemons.startd.core import execute_limit
from htc.daemons.startd.states import Activity, State
from htc.daemons.startd.events import StarterExited, StarterStarted
from htc.daemons.starter.service import ExitRecord, Usage
from htc.daemons.timefmt import format_time_short
from htc.eventlog.events import EventType
from htc.jobqueue import HoldReasonCode, JobStatus
from htc.wire import messages as m
from poolutil import Pool, wait_for

T = htcondor2.JobEventType
EXECUTE_EXCEEDED = int(HoldReasonCode.JobExecuteExceeded)  # 47
DURATION_EXCEEDED = int(HoldReasonCode.JobDurationExceeded)  # 46


def test_hold_codes_are_htcondors():
    # condor_holdcodes.h: JobDurationExceeded = 46, JobExecuteExceeded = 47.
    assert (DURATION_EXCEEDED, EXECUTE_EXCEEDED) == (46, 47)


@pytest.mark.parametrize("seconds, text", [(2, "0:00:02"), (65, "0:01:05"), (72000, "20:00:00"),
                                           (3 * 86400, "3+00:00:00"), (90061, "1+01:01:01"), (2.9, "0:00:02")])
def test_durations_print_as_htcondor_prints_them_in_hold_reasons(seconds, text):
    assert format_time_short(seconds) == text


# --------------------------------------------------------------------------- the startd core


@pytest.mark.parametrize("value, limit", [(10, 10.0), (2.5, 2.5), (0, None), (-3, None), ("ten", None),
                                          (True, None), (None, None), (ExprTree("2 * 3"), 6.0),
                                          (ExprTree("undefined"), None), (float("inf"), None)])
def test_only_a_positive_number_is_an_execute_limit(value, limit):
    job = dict(core.JOB) if value is None else dict(core.JOB, AllowedExecuteDuration=value)
    assert execute_limit(job) == limit


def limited_job(limit, **kw):
    return dict(core.JOB, AllowedExecuteDuration=limit, **kw)


def test_a_job_past_its_execute_limit_is_held_once_and_its_claim_stays():
    s = core.make(polling_interval=1000, update_interval=1000)
    cid, name, _ = core.run_job(s, core.T0, job=limited_job(10))
    assert s.next_deadline() == core.T0 + 10  # the limit is a timer of its own
    assert core.of(s.handle(ev.Tick(), core.T0 + 9.9), ev.HoldJob) == []
    out = s.handle(ev.Tick(), core.T0 + 10)
    (hold,) = core.of(out, ev.HoldJob)
    assert (hold.slot, hold.claim_id, hold.code, hold.subcode) == (name, cid, 47, 0)
    assert hold.reason == "The job exceeded allowed execute duration of 0:00:10"
    # The slot does not move for it; the job is killed and the claim kept for its schedd.
    assert core.where(s) == (State.CLAIMED, Activity.BUSY)
    assert core.of(out, ev.ClaimEnded) == [] and core.of(out, ev.VacateJob) == []
    assert core.of(s.handle(ev.Tick(), core.T0 + 20), ev.HoldJob) == []  # once
    assert s.next_deadline() > core.T0 + 20
    s.handle(ev.JobExited(cid), core.T0 + 21)
    assert core.where(s) == (State.CLAIMED, Activity.IDLE)
    # The next job on the claim has its own limit (none here).
    s.handle(ev.ActivateClaim(cid, core.JOB), core.T0 + 22)
    assert core.of(s.handle(ev.Tick(), core.T0 + 500), ev.HoldJob) == []


def test_the_execute_limit_counts_wall_clock_time_suspension_included():
    p = core.Switches(WANT_SUSPEND=True)
    s = core.make(p)
    cid, _, _ = core.run_job(s, core.T0, job=limited_job(60))
    p.v["SUSPEND"] = True
    s.handle(ev.Tick(), core.T0 + 5)
    assert core.where(s) == (State.CLAIMED, Activity.SUSPENDED)
    (hold,) = core.of(s.handle(ev.Tick(), core.T0 + 60), ev.HoldJob)
    assert hold.claim_id == cid and hold.reason.endswith("0:01:00")


def test_a_job_already_being_evicted_is_left_to_the_eviction():
    s = core.make()
    cid, name, _ = core.run_job(s, core.T0, job=limited_job(30))
    s.handle(ev.Vacate(name), core.T0 + 5)
    assert core.where(s) == (State.PREEMPTING, Activity.VACATING)
    assert core.of(s.handle(ev.Tick(), core.T0 + 31), ev.HoldJob) == []


def test_a_job_without_a_limit_runs_on():
    s = core.make()
    core.run_job(s, core.T0, job=limited_job(0))
    assert core.of(s.handle(ev.Tick(), core.T0 + 1000), ev.HoldJob) == []  # within the claim lease
    assert core.where(s) == (State.CLAIMED, Activity.BUSY)


# --------------------------------------------------------------------------- the startd's wire adapter


def activate(daemon, claim_id: str, job: str, now: float) -> None:
    daemon.handle(c.Received(m.ActivateClaim(claim_id=claim_id, job_ad=job, shadow_address="sh"), conn_id=2), now)


def test_the_adapter_kills_the_job_and_its_exit_report_asks_for_the_hold(tmp_path):
    daemon, _ = svc.adapter(tmp_path)
    claim_id = svc.claim_static_slot(daemon, svc.T0 + 1)
    # An expression over the job: evaluated in the job's scope (RequestCpus = 2 -> 4 s).
    job = '[ ClusterId = 3; ProcId = 0; Cmd = "/bin/sleep"; RequestCpus = 2; AllowedExecuteDuration = RequestCpus * 2 ]'
    activate(daemon, claim_id, job, svc.T0 + 2)
    daemon.handle(StarterStarted(claim_id), svc.T0 + 2)
    assert daemon.next_deadline() <= svc.T0 + 6
    out = daemon.handle(c.Tick(), svc.T0 + 6)
    (kill,) = [a for a in out if isinstance(a, ev.KillJob)]
    assert kill.claim_id == claim_id and not [a for a in out if isinstance(a, ev.HoldJob)]
    out = daemon.handle(StarterExited(claim_id, ExitRecord(None, 9, False, False, True, Usage())), svc.T0 + 7)
    (report,) = [a for a in out if hasattr(a, "msg") and isinstance(a.msg, m.JobExited)]
    assert report.to == "sh" and report.msg.vacated
    assert (report.msg.hold_code, report.msg.hold_subcode) == (47, 0)
    assert report.msg.hold_reason == "The job exceeded allowed execute duration of 0:00:04"
    assert daemon.startd.slots[f"slot1@{svc.MACHINE}"].activity is Activity.IDLE  # the claim stays


def test_a_job_that_ended_by_itself_before_the_kill_is_not_held(tmp_path):
    daemon, _ = svc.adapter(tmp_path)
    claim_id = svc.claim_static_slot(daemon, svc.T0 + 1)
    job = '[ ClusterId = 3; ProcId = 0; Cmd = "/bin/true"; RequestCpus = 1; AllowedExecuteDuration = 1 ]'
    activate(daemon, claim_id, job, svc.T0 + 2)
    daemon.handle(c.Tick(), svc.T0 + 3)
    out = daemon.handle(StarterExited(claim_id, ExitRecord(0, None, False, False, False, Usage())), svc.T0 + 3)
    (report,) = [a for a in out if hasattr(a, "msg") and isinstance(a.msg, m.JobExited)]
    assert report.msg.exit_code == 0 and report.msg.hold_code is None


def test_job_exited_hold_fields_are_optional_on_the_wire():
    plain = m.JobExited(claim_id="c", job_id="1.0", exit_code=0)
    assert b"hold" not in m.encode(plain)  # an older peer reads it as before
    assert m.decode(m.encode(plain)) == plain and plain.hold_code is None
    held = m.JobExited(claim_id="c", job_id="1.0", vacated=True, hold_code=47, hold_reason="too long")
    assert m.decode(m.encode(held)) == held
    with pytest.raises(m.MessageInvalid, match="hold_reason"):
        m.JobExited(claim_id="c", job_id="1.0", vacated=True, hold_code=47)


# --------------------------------------------------------------------------- the schedd's shadow


def test_the_shadow_holds_a_job_whose_exit_report_asks_for_it_and_reuses_the_claim():
    h = sc.Harness()
    h.start()
    h.submit(sc.job(queue="queue 2"))
    claim_id, activate = sc.run_first_job(h)
    h.ack(activate)
    before = len(h.actions)
    reason = "The job exceeded allowed execute duration of 0:00:02"
    assert h.exited(claim_id, "1.0", vacated=True, hold_code=47, hold_reason=reason) == m.Ack()
    out = h.actions[before:]
    job = h.queue.get_job((1, 0))
    assert h.status(1, 0) is JobStatus.HELD
    assert (job["HoldReasonCode"], job["HoldReasonSubCode"], job["HoldReason"]) == ("47", "0", f'"{reason}"')
    [held] = [e for a in out if hasattr(a, "events") for e in a.events]
    assert held.type is EventType.JOB_HELD and held.code == 47 and held.subcode == 0 and held.reason == reason
    # The slot is fine: the claim runs the next idle job at once.
    [again] = h.calls(m.ActivateClaim, out)
    assert again.msg.claim_id == claim_id and ClassAd(again.msg.job_ad)["ProcId"] == 1


def test_the_shadow_holds_a_run_past_its_allowed_job_duration_and_vacates_it():
    h = sc.Harness()
    h.start()
    h.submit(sc.job("allowed_job_duration = 30"))
    claim_id, activate = sc.run_first_job(h)
    started = h.now
    h.ack(activate)
    assert h.core.next_deadline() <= started + 30
    before = len(h.actions)
    h.tick(started + 29)
    assert h.status(1, 0) is JobStatus.RUNNING and h.calls(m.Vacate, h.actions[before:]) == []
    out = h.tick(started + 30)
    job = h.queue.get_job((1, 0))
    assert h.status(1, 0) is JobStatus.HELD and job["HoldReasonCode"] == "46" and job["HoldReasonSubCode"] == "0"
    assert job["HoldReason"] == '"The job exceeded allowed job duration of 0:00:30"'
    assert h.events(out) == [EventType.JOB_HELD]
    [vacate] = h.calls(m.Vacate, out)
    assert vacate.msg.claim_id == claim_id
    assert h.calls(m.Vacate, h.tick(started + 60)) == []  # once
    h.ack(vacate)
    h.exited(claim_id, "1.0", vacated=True)
    assert h.status(1, 0) is JobStatus.HELD and h.core.shadows == {}
    assert h.events().count(EventType.JOB_HELD) == 1
    # Released, it runs again from scratch with a fresh allowance.
    assert h.request(m.ActOnJobs(action=m.JobAction.Release, ids=("1.0",))).success == 1
    assert h.status(1, 0) is JobStatus.IDLE


def test_a_restarted_schedd_keeps_the_runs_allowed_job_duration():
    h = sc.Harness()
    h.start()
    h.submit(sc.job("allowed_job_duration = 100"))
    claim_id, activate = sc.run_first_job(h)
    started = h.now
    h.ack(activate)
    h2 = sc.restarted(h)
    assert h2.core.shadows[(1, 0)].duration_deadline == started + 100  # not restarted from zero
    h2.tick(started + 100)
    assert h2.status(1, 0) is JobStatus.HELD and h2.queue.get_job((1, 0))["HoldReasonCode"] == "46"


@pytest.mark.parametrize("text, limit", [("allowed_job_duration = 30", 30.0), ("allowed_job_duration = 0", None),
                                         ("allowed_job_duration = -1", None), ('allowed_job_duration = "x"', None),
                                         ("allowed_job_duration = RequestCpus * 7", 7.0), ("", None)])
def test_allowed_job_duration_is_a_positive_number_in_the_jobs_scope(text, limit):
    h = sc.Harness()
    h.start()
    h.submit(sc.job(text))
    assert job_duration_limit(h.queue.get_job((1, 0))) == limit


# --------------------------------------------------------------------------- a real pool


@pytest.fixture
def pool():
    p = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD")
    try:
        yield p.start()
    finally:
        p.stop()


def sleeps(pool: Pool, seconds: int) -> list[psutil.Process]:
    """The pool's ``sleep <seconds>`` job processes (they run in its EXECUTE, under its root)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cmd, cwd = proc.info["cmdline"] or [], proc.info["cwd"] or ""
        if len(cmd) == 2 and cmd[-1] == str(seconds) and cwd.startswith(str(pool.root)):
            found.append(proc)
    return found


def kinds(events) -> list:
    """The event types, without the image-size updates a running job may add."""
    return [e.type for e in events if e.type != T.IMAGE_SIZE]


def sleep_job(pool: Pool, seconds: int, log: str, extra: str) -> str:
    return f"executable = /bin/sleep\narguments = {seconds}\nlog = {pool.work}/{log}\n{extra}\nqueue\n"


def held_by(pool: Pool, cluster: int, log: str, code: int, reason: str) -> None:
    events = pool.log_events(pool.work / log, until=lambda evs: any(e.type == T.JOB_HELD for e in evs), timeout=60)
    assert kinds(events) == [T.SUBMIT, T.EXECUTE, T.JOB_HELD]
    [held] = [e for e in events if e.type == T.JOB_HELD]
    assert held["HoldReasonCode"] == code and held["HoldReasonSubCode"] == 0 and held["HoldReason"] == reason
    [ad] = pool.jobs(f"ClusterId == {cluster}", "JobStatus", "HoldReasonCode", "HoldReasonSubCode", "HoldReason")
    assert (ad["JobStatus"], ad["HoldReasonCode"], ad["HoldReasonSubCode"]) == (5, code, 0)
    assert ad["HoldReason"] == reason


@pytest.mark.slow
def test_allowed_execute_duration_holds_a_sleeping_job_with_code_47_and_kills_it(pool):
    # An expression counts: RequestCpus is 1, so the limit is 2 seconds.
    cluster = pool.submit(sleep_job(pool, 37, "exec.log", "allowed_execute_duration = RequestCpus * 2")).cluster_id
    held_by(pool, cluster, "exec.log", 47, "The job exceeded allowed execute duration of 0:00:02")
    wait_for(lambda: not sleeps(pool, 37), timeout=30, what="the held job's sleep to be gone")
    wait_for(lambda: not list(pool.home.joinpath("execute").iterdir()), timeout=30, what="the sandbox to go")
    # Released, it runs again from scratch -- and is held again.
    assert pool.send(m.ActOnJobs(action=m.JobAction.Release, ids=(f"{cluster}.0",))).success == 1
    events = pool.log_events(pool.work / "exec.log",
                             until=lambda evs: [e.type for e in evs].count(T.JOB_HELD) == 2, timeout=60)
    assert kinds(events) == [T.SUBMIT, T.EXECUTE, T.JOB_HELD, T.JOB_RELEASED, T.EXECUTE, T.JOB_HELD]
    wait_for(lambda: not sleeps(pool, 37), timeout=30, what="the held job's sleep to be gone")


@pytest.mark.slow
def test_allowed_job_duration_holds_a_sleeping_job_with_code_46_and_kills_it(pool):
    cluster = pool.submit(sleep_job(pool, 39, "job.log", "allowed_job_duration = 2")).cluster_id
    held_by(pool, cluster, "job.log", 46, "The job exceeded allowed job duration of 0:00:02")
    wait_for(lambda: not sleeps(pool, 39), timeout=30, what="the held job's sleep to be gone")
    wait_for(lambda: not list(pool.home.joinpath("execute").iterdir()), timeout=30, what="the sandbox to go")


@pytest.mark.slow
def test_a_job_within_its_limits_completes(pool):
    extra = "allowed_execute_duration = 120\nallowed_job_duration = 120"
    pool.submit(sleep_job(pool, 1, "ok.log", extra))
    events = pool.log_events(pool.work / "ok.log", until=lambda evs: T.JOB_TERMINATED in kinds(evs), timeout=60)
    assert kinds(events) == [T.SUBMIT, T.EXECUTE, T.JOB_TERMINATED]
    assert events[-1]["TerminatedNormally"] is True and events[-1]["ReturnValue"] == 0
