"""Job policy: periodic_* and on_exit_* decisions, max_retries, the SYSTEM_PERIODIC_* knobs.

A core test: a queue in memory, jobs, and a number for ``now``.
"""

from __future__ import annotations

import pytest

from htc.errors import UsageError
from htc.eventlog.events import EventType
from htc.jobqueue import Action, ExitInfo, HoldReasonCode, JobQueue, JobStatus, SystemPolicy
from htc.jobqueue.testing import SimpleCluster

S = JobStatus
T0 = 1_700_000_000
BASE = {"Owner": '"alice"', "JobStatus": "1", "QDate": str(T0), "JobPrio": "0",
        "NumJobCompletions": "0", "Cmd": '"/bin/false"'}
# What condor_submit writes for max_retries = 2 (htcondor-semantics.md 2.7).
MAX_RETRIES = {"JobMaxRetries": "2", "OnExitRemove": "NumJobCompletions > JobMaxRetries || ExitCode =?= 0"}


def make(q, ad=None, n=1, per_proc=None):
    cid = q.next_cluster_id()
    q.submit(SimpleCluster(cid, {**BASE, **(ad or {})}, n, per_proc=per_proc), now=T0)
    return cid


@pytest.fixture
def queue():
    with JobQueue.open(":memory:") as q:
        yield q


def run(q, job, now=T0 + 10):
    q.set_status(job, S.RUNNING, now=now)


def test_no_policy_no_decisions(queue):
    make(queue, n=5)
    assert queue.evaluate_periodic(T0 + 1000) == []


def test_periodic_hold_with_reason_and_subcode_from_the_job(queue):
    cid = make(queue, {"PeriodicHold": "(CurrentTime - EnteredCurrentStatus) > 600",
                       "PeriodicHoldReason": 'strcat("ran too long: ", ProcId)',
                       "PeriodicHoldSubCode": "42"}, n=2)
    run(queue, (cid, 1), now=T0 + 500)
    assert queue.evaluate_periodic(T0 + 600) == []
    decisions = queue.evaluate_periodic(T0 + 700)
    assert [d.job_id for d in decisions] == [(cid, 0)]  # proc 1 entered Running at T0+500
    d = decisions[0]
    assert (d.action, d.reason, d.code, d.subcode, d.fired_by) == (
        Action.HOLD, "ran too long: 0", HoldReasonCode.JobPolicy, 42, "PeriodicHold")
    change = queue.apply(d, now=T0 + 700)
    assert change.event == EventType.JOB_HELD
    job = queue.get_job((cid, 0))
    assert (job["HoldReason"], job["HoldReasonCode"], job["HoldReasonSubCode"]) == (
        '"ran too long: 0"', "3", "42")


def test_default_reason_names_the_expression(queue):
    cid = make(queue, {"PeriodicRemove": "JobStatus == 1"})
    [d] = queue.evaluate_periodic(T0)
    assert d.action is Action.REMOVE
    assert d.reason == "The job attribute PeriodicRemove expression 'JobStatus == 1' evaluated to TRUE"
    change = queue.apply(d)
    assert change.left_queue and queue.history()[0]["RemoveReason"].startswith('"The job attribute')
    assert cid


def test_undefined_policy_holds_with_code_5_but_literal_undefined_is_false(queue):
    cid = make(queue, {"PeriodicHold": "NoSuchAttribute > 3"})
    make(queue, {"PeriodicHold": "undefined"})
    [d] = queue.evaluate_periodic(T0)
    assert d.job_id == (cid, 0) and d.action is Action.HOLD
    assert d.code == HoldReasonCode.JobPolicyUndefined
    assert d.reason.endswith("evaluated to UNDEFINED")


def test_periodic_release_only_for_held_jobs_and_hold_has_precedence_over_remove(queue):
    cid = make(queue, {"PeriodicRelease": "NumHolds < 3", "PeriodicHold": "ProcId == 0",
                       "PeriodicRemove": "true"}, n=2)
    decisions = {d.job_id: d.action for d in queue.evaluate_periodic(T0)}
    assert decisions == {(cid, 0): Action.HOLD, (cid, 1): Action.REMOVE}
    queue.hold((cid, 0), "x")
    decisions = {d.job_id: d.action for d in queue.evaluate_periodic(T0)}
    assert decisions[(cid, 0)] is Action.RELEASE
    queue.apply(next(d for d in queue.evaluate_periodic(T0) if d.job_id == (cid, 0)))
    assert queue.get_job((cid, 0)).status == S.IDLE


def test_system_periodic_knobs():
    policy = SystemPolicy(periodic_hold="RequestMemory > 1000",
                          periodic_hold_reason='"too much memory"',
                          periodic_hold_subcode="7",
                          periodic_remove="NumHolds > 2",
                          periodic_release="HoldReasonCode == 26 && NoSuch > 1")
    with JobQueue.open(":memory:", system_policy=policy) as q:
        big = make(q, {"RequestMemory": "2048"})
        small = make(q, {"RequestMemory": "512", "NumHolds": "3"})
        decisions = {d.job_id: d for d in q.evaluate_periodic(T0)}
        d = decisions[(big, 0)]
        assert (d.action, d.reason, d.code, d.subcode, d.fired_by) == (
            Action.HOLD, "too much memory", HoldReasonCode.SystemPolicy, 7, "SYSTEM_PERIODIC_HOLD")
        assert decisions[(small, 0)].action is Action.REMOVE
        q.apply(d)
        # An undefined system expression never fires (unlike a job attribute).
        assert all(d.job_id != (big, 0) for d in q.evaluate_periodic(T0))
    with pytest.raises(UsageError):
        SystemPolicy(periodic_hold="((")


def test_grouped_evaluation_is_per_cluster_not_per_proc(queue):
    cid = make(queue, {"PeriodicRemove": "RequestMemory > 100", "RequestMemory": "50"}, n=2000)
    from htc.jobqueue.policy import PolicyEvaluator

    evaluator = PolicyEvaluator(queue.system_policy, T0)
    jobs = queue.query(f"ClusterId == {cid}")
    assert all(evaluator.periodic(j) is None for j in jobs)
    assert sum(e.evaluations for e in evaluator._evaluators.values()) <= 2


def test_normal_exit_completes_and_records_exit_attributes(queue):
    cid = make(queue)
    run(queue, (cid, 0))
    d = queue.on_exit((cid, 0), ExitInfo(exit_code=0), now=T0 + 20)
    assert d.action is Action.COMPLETE
    job = queue.get_job((cid, 0))
    assert (job["ExitCode"], job["ExitBySignal"], job["NumJobCompletions"]) == ("0", "false", "1")
    change = queue.apply(d, now=T0 + 20)
    assert change.event == EventType.JOB_TERMINATED and change.left_queue
    assert queue.history()[0]["ExitCode"] == "0"


def test_on_exit_remove_false_requeues(queue):
    cid = make(queue, {"OnExitRemove": "ExitCode == 0"})
    run(queue, (cid, 0))
    d = queue.on_exit((cid, 0), ExitInfo(exit_code=3))
    assert d.action is Action.REQUEUE
    assert d.reason == "The job attribute OnExitRemove expression 'ExitCode == 0' evaluated to FALSE"
    change = queue.apply(d)
    assert (change.new, change.event) == (S.IDLE, EventType.JOB_EVICTED)


def test_max_retries_requeues_until_the_retries_are_used(queue):
    cid = make(queue, MAX_RETRIES)
    actions = []
    for attempt in range(4):
        run(queue, (cid, 0), now=T0 + attempt)
        d = queue.on_exit((cid, 0), ExitInfo(exit_code=1), now=T0 + attempt)
        actions.append(d.action)
        queue.apply(d)
        if d.action is Action.COMPLETE:
            break
    # Exits 1 and 2 are retried; the third completion exceeds JobMaxRetries = 2.
    assert actions == [Action.REQUEUE, Action.REQUEUE, Action.COMPLETE]
    assert queue.history()[0]["NumJobCompletions"] == "3"


def test_max_retries_stops_at_success_and_default_expression_without_on_exit_remove(queue):
    cid = make(queue, MAX_RETRIES)
    run(queue, (cid, 0))
    assert queue.on_exit((cid, 0), ExitInfo(exit_code=0)).action is Action.COMPLETE
    bare = make(queue, {"JobMaxRetries": "1"})  # no OnExitRemove: the submit default applies
    run(queue, (bare, 0))
    assert queue.on_exit((bare, 0), ExitInfo(exit_code=9)).action is Action.REQUEUE


def test_on_exit_hold_with_reason_and_signal_exit(queue):
    cid = make(queue, {"OnExitHold": "ExitBySignal == true",
                       "OnExitHoldReason": 'strcat("killed by signal ", ExitSignal)',
                       "OnExitHoldSubCode": "ExitSignal"})
    run(queue, (cid, 0))
    d = queue.on_exit((cid, 0), ExitInfo(exit_signal=9, core_dumped=True))
    assert (d.action, d.reason, d.code, d.subcode) == (
        Action.HOLD, "killed by signal 9", HoldReasonCode.JobPolicy, 9)
    job = queue.get_job((cid, 0))
    assert (job["ExitSignal"], job["ExitCode"], job["JobCoreDumped"]) == ("9", "undefined", "true")
    assert queue.apply(d).new == S.HELD


def test_periodic_rules_win_over_exit_rules_and_undefined_on_exit_holds(queue):
    a = make(queue, {"PeriodicRemove": "ExitCode == 5", "OnExitHold": "true"})
    b = make(queue, {"OnExitRemove": "Bogus == 1"})
    run(queue, (a, 0))
    run(queue, (b, 0))
    assert queue.on_exit((a, 0), ExitInfo(exit_code=5)).action is Action.REMOVE
    d = queue.on_exit((b, 0), ExitInfo(exit_code=0))
    assert (d.action, d.code) == (Action.HOLD, HoldReasonCode.JobPolicyUndefined)


def test_exit_and_apply_decides_on_the_ad_the_exit_leaves_and_records_it_in_one_step(queue):
    usage = {"RemoteWallClockTime": "12.5", "LastRemoteHost": '"slot1@exec"'}
    done = make(queue, MAX_RETRIES)
    run(queue, (done, 0))
    decision, change = queue.exit_and_apply((done, 0), ExitInfo(exit_code=0), now=T0 + 20, attrs=usage)
    assert decision.action is Action.COMPLETE and change.left_queue and change.event == EventType.JOB_TERMINATED
    [hist] = queue.history()
    assert (hist["ExitCode"], hist["NumJobCompletions"], hist["RemoteWallClockTime"], hist["LastRemoteHost"],
            hist["JobStatus"], hist["CompletionDate"]) == ("0", "1", "12.5", '"slot1@exec"', "4", str(T0 + 20))
    # A retried exit: the policy saw ExitCode 1 and NumJobCompletions 1; the job is idle with them.
    again = make(queue, MAX_RETRIES)
    run(queue, (again, 0))
    decision, change = queue.exit_and_apply((again, 0), ExitInfo(exit_code=1), attrs=usage)
    assert decision.action is Action.REQUEUE and change.new == S.IDLE and not change.left_queue
    job = queue.get_job((again, 0))
    assert (job["ExitCode"], job["NumJobCompletions"], job["RemoteWallClockTime"]) == ("1", "1", "12.5")
    held = make(queue, {"OnExitHold": "ExitBySignal == true"})
    run(queue, (held, 0))
    decision, change = queue.exit_and_apply((held, 0), ExitInfo(exit_signal=9))
    assert (decision.action, change.new) == (Action.HOLD, S.HELD)
    assert queue.get_job((held, 0))["ExitSignal"] == "9"
    with pytest.raises(UsageError, match="HELD"):
        queue.exit_and_apply((held, 0), ExitInfo(exit_code=0))


def test_only_running_jobs_exit(queue):
    cid = make(queue)
    with pytest.raises(UsageError, match="IDLE"):
        queue.on_exit((cid, 0), ExitInfo(exit_code=0))
