"""A whole personal pool running real jobs: master, collector, negotiator, startd, schedd.

Jobs are real processes (``/bin/echo``, ``/bin/sh``) run by the startd's starters; the tests
wait for the events in each job's user log, read with ``htcondor2.JobEventLog`` (the real
HTCondor reader), and look at the outputs and the queue's history. The last test kills the
schedd with SIGKILL while 20 jobs run and checks that it reconnects to them and that every job
still completes exactly once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
from collections import Counter

import htcondor2
import pytest

from htc.daemons.execute_dir import SHARED_EXECUTE_ROOT
from htc.client import history
from htc.wire import messages as m
from poolutil import Pool, echo_job, wait_for

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


def test_kill_9_of_the_schedd_while_20_jobs_run_completes_every_job_exactly_once():
    n = 20
    pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", NUM_CPUS=str(n))
    try:
        pool.start()
        # Each job runs until the test drops the "go" file, so all 20 are running when the schedd
        # dies and still running when it comes back; they leave a line per start and per end.
        go = pool.work / "go"
        # Root's jobs on different slots run as different slot accounts (htc-slot<N>): the file
        # they all append to must be writable by each of them.
        (pool.work / "starts").touch(mode=0o666)
        (pool.work / "starts").chmod(0o666)
        job = (f"executable = /bin/sh\n"
               f"arguments = \"-c 'echo $(Process) >> {pool.work}/starts; "
               f"while [ ! -e {go} ]; do sleep 0.5; done; echo $(Process)'\"\n"
               f"output = {pool.work}/k.$(Process)\nlog = {pool.work}/k.log\n+JobLeaseDuration = 60\nqueue {n}\n")
        cluster = pool.submit(job).cluster_id
        log = pool.work / "k.log"
        pool.log_events(log, until=lambda evs: sum(e.type == T.EXECUTE for e in evs) == n, timeout=40)
        starts = pool.work / "starts"
        wait_for(lambda: len(starts.read_text().split()) == n, what=f"{n} jobs running")
        assert {a["JobStatus"] for a in pool.jobs(f"ClusterId == {cluster}", "JobStatus")} == {2}
        old = pool.status("SCHEDD").pid
        os.kill(old, signal.SIGKILL)
        pool.running_pid("SCHEDD", other_than=old)  # the master brings it back
        # It reconnects to every running job (JOB_RECONNECTED), and only then do the jobs end.
        pool.log_events(log, until=lambda evs: sum(e.type == T.JOB_RECONNECTED for e in evs) == n, timeout=40)
        go.touch()
        wait_for(lambda: len(finished(pool, cluster)) == n, timeout=40, what="every job in the history")
        events = htcondor2.JobEventLog(str(log)).events(stop_after=0)
        counts = Counter((e.proc, e.type) for e in events)
        for proc in range(n):
            assert counts[(proc, T.JOB_DISCONNECTED)] == 1, counts
            assert counts[(proc, T.JOB_RECONNECTED)] == 1, counts
            assert counts[(proc, T.EXECUTE)] == 1, counts
            assert counts[(proc, T.JOB_TERMINATED)] == 1, counts
            assert (pool.work / f"k.{proc}").read_text() == f"{proc}\n"
        assert sorted(int(p) for p in (pool.work / "starts").read_text().split()) == list(range(n))
        rows = finished(pool, cluster)
        assert {r["JobStatus"] for r in rows} == {4} and {r["NumJobStarts"] for r in rows} == {1}
        assert {r["ExitCode"] for r in rows} == {0}
    finally:
        pool.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root pool runs jobs as a slot user")
def test_a_root_pool_in_a_private_home_runs_jobs_and_a_failed_start_does_not_stall_it():
    """Root's default home (/root/.htc, like pytest's 0700 tmp dirs) is out of the slot user's
    reach: the startd makes sandboxes in a root-owned per-pool directory instead. A job whose
    start fails (its input is missing) is held, and its claim goes on to the next job: with one
    core, a claim left behind would stall the pool."""
    pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", NUM_CPUS="1")
    pool.root.chmod(0o700)  # nobody may enter: the home below it is as private as /root/.htc
    shared = SHARED_EXECUTE_ROOT / hashlib.sha256(str(pool.home.resolve()).encode()).hexdigest()[:16]
    try:
        pool.start()
        bad = pool.submit(f"executable = /bin/echo\ntransfer_input_files = missing.txt\n"
                          f"log = {pool.work}/bad.log\nqueue\n").cluster_id
        good = pool.submit(echo_job(pool)).cluster_id
        events = pool.log_events(pool.work / f"job.{good}.log", 3)
        assert [e.type for e in events] == [T.SUBMIT, T.EXECUTE, T.JOB_TERMINATED]
        assert (pool.work / f"out.{good}.0").read_text() == f"{good}.0\n"
        [held] = pool.jobs(f"ClusterId == {bad}", "JobStatus", "HoldReasonCode")
        assert held["JobStatus"] == 5 and held["HoldReasonCode"] == 13
        assert f"jobs run in {shared} instead" in (pool.home / "log" / "StartLog").read_text()
        # The claim is given back once nothing is left to run: the slot is free again.
        wait_for(lambda: [s["State"] for s in pool.slots()] == ["Unclaimed"], what="the slot to be free again")
        pool.stop()
        assert not shared.exists()  # the startd removes its empty per-pool directory when it stops
    finally:
        pool.stop()
        shutil.rmtree(shared, ignore_errors=True)
