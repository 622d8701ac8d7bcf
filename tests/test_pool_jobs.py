"""A whole personal pool running real jobs: master, collector, negotiator, startd, schedd.

Jobs are real processes (``/bin/echo``, ``/bin/sh``) run by the startd's starters; the tests
wait for the events in each job's user log, read with ``htcondor2.JobEventLog`` (the real
HTCondor reader), and look at the outputs and the queue's history. The last test kills the
schedd with SIGKILL while jobs run and checks that every job still completes exactly once.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

import htcondor2
import pytest

from test_pool_schedd import Pool, echo_job, wait_for

from htc.schedd_client import history
from htc.wire import messages as m

pytestmark = pytest.mark.slow

T = htcondor2.JobEventType


@pytest.fixture
def pool():
    p = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD")
    try:
        yield p.start()
    finally:
        p.stop()


def by_job(events) -> dict[int, list]:
    out: dict[int, list] = {}
    for event in events:
        out.setdefault(event.proc, []).append(event)
    return out


def finished(pool: Pool, cluster: int) -> list[dict]:
    return history(f"ClusterId == {cluster}", path=pool.home / "spool" / "job_queue.db")


def test_echo_jobs_run_complete_and_reuse_their_claim(pool):
    reply = pool.submit(echo_job(pool, queue="queue 3"))
    cluster = reply.cluster_id
    events = pool.log_events(pool.work / f"job.{cluster}.log", 9)
    jobs = by_job(events)
    assert sorted(jobs) == [0, 1, 2]
    for proc, evs in jobs.items():
        assert [e.type for e in evs] == [T.SUBMIT, T.EXECUTE, T.JOB_TERMINATED]
        term = evs[-1]
        assert term["TerminatedNormally"] is True and term["ReturnValue"] == 0
        assert (pool.work / f"out.{cluster}.{proc}").read_text() == f"{cluster}.{proc}\n"
    # Two cores, three jobs: some dynamic slot ran two of them, so a claim was reused (a new
    # claim would have carved a new slot with a new name).
    slots = [jobs[p][1]["SlotName"] for p in jobs]
    assert len(set(slots)) < 3, slots
    rows = finished(pool, cluster)
    assert sorted(r["ProcId"] for r in rows) == [0, 1, 2] and {r["JobStatus"] for r in rows} == {4}
    assert pool.jobs(f"ClusterId == {cluster}") == []


def test_exit_policy_retries_and_signals(pool):
    job = (f"executable = /bin/sh\narguments = \"-c 'exit 3'\"\nmax_retries = 1\n"
           f"log = {pool.work}/retry.log\nqueue\n")
    cluster = pool.submit(job).cluster_id
    events = pool.log_events(pool.work / "retry.log", 5)
    assert [e.type for e in events] == [T.SUBMIT, T.EXECUTE, T.JOB_EVICTED, T.EXECUTE, T.JOB_TERMINATED]
    assert events[2]["TerminatedAndRequeued"] is True and events[4]["ReturnValue"] == 3
    [row] = finished(pool, cluster)
    assert row["NumJobCompletions"] == 2 and row["ExitCode"] == 3

    killed = (f"executable = /bin/sh\narguments = \"-c 'kill -9 $$'\"\nlog = {pool.work}/signal.log\nqueue\n")
    cluster = pool.submit(killed).cluster_id
    events = pool.log_events(pool.work / "signal.log", 3)
    assert events[-1].type == T.JOB_TERMINATED and events[-1]["TerminatedBySignal"] == 9


def test_suspend_continue_hold_then_remove_a_running_job(pool):
    job = (f"executable = /bin/sh\narguments = \"-c 'sleep 30'\"\nlog = {pool.work}/hold.log\nqueue\n")
    cluster = pool.submit(job).cluster_id
    log = pool.work / "hold.log"
    pool.log_events(log, 2)  # SUBMIT, EXECUTE
    ids = (f"{cluster}.0",)
    assert pool.send(m.ActOnJobs(action=m.JobAction.Suspend, ids=ids)).success == 1
    pool.log_events(log, 3)
    assert pool.jobs(f"ClusterId == {cluster}", "JobStatus")[0]["JobStatus"] == 7
    assert pool.send(m.ActOnJobs(action=m.JobAction.Continue, ids=ids)).success == 1
    pool.log_events(log, 4)
    assert pool.send(m.ActOnJobs(action=m.JobAction.Hold, ids=ids)).success == 1
    assert pool.send(m.ActOnJobs(action=m.JobAction.Remove, ids=ids)).success == 1
    events = pool.log_events(log, 6)
    assert [e.type for e in events] == [T.SUBMIT, T.EXECUTE, T.JOB_SUSPENDED, T.JOB_UNSUSPENDED, T.JOB_HELD,
                                        T.JOB_ABORTED]
    wait_for(lambda: finished(pool, cluster), what="the removed job in the history")
    # The starter is gone and has cleaned up its sandbox.
    wait_for(lambda: not list(pool.home.joinpath("execute").iterdir()), what="the sandbox to go")


def test_kill_9_of_the_schedd_while_jobs_run_completes_every_job_exactly_once(pool):
    n = 4
    job = (f"executable = /bin/sh\narguments = \"-c 'sleep 2; echo $(Process)'\"\n"
           f"output = {pool.work}/k.$(Process)\nlog = {pool.work}/k.log\n+JobLeaseDuration = 60\nqueue {n}\n")
    cluster = pool.submit(job).cluster_id
    # Wait until some job runs, then kill the schedd without warning.
    events = pool.log_events(pool.work / "k.log", n + 1)
    assert events[-1].type == T.EXECUTE
    old = pool.status("SCHEDD").pid
    os.kill(old, signal.SIGKILL)
    pool.running_pid("SCHEDD", other_than=old)  # the master brings it back
    wait_for(lambda: len(finished(pool, cluster)) == n, timeout=25, what="every job in the history")
    events = htcondor2.JobEventLog(str(pool.work / "k.log")).events(stop_after=0)
    counts = Counter((e.proc, e.type) for e in events)
    assert sum(n for (proc, kind), n in counts.items() if kind == T.JOB_DISCONNECTED) >= 1, counts
    for proc in range(n):
        assert counts[(proc, T.JOB_TERMINATED)] == 1, counts
        assert counts[(proc, T.EXECUTE)] == 1, counts
        assert (pool.work / f"k.{proc}").read_text() == f"{proc}\n"
    rows = finished(pool, cluster)
    assert {r["JobStatus"] for r in rows} == {4} and {r["NumJobStarts"] for r in rows} == {1}
