"""No acknowledged result is lost and no lost reply duplicates work: real schedds killed with
SIGKILL at the worst moments (issue 14, section 3).

* between the commit that ends a lane call (its history entry) and the write of its result
  file: the restarted schedd writes the result from the queue's outbox, and the future gets it;
* between the commit of a Submit and its reply: the client's retry, with the same submission
  id, gets the original cluster from the restarted schedd and nothing runs twice;
* between the commit of a job's end and the write of its TERMINATED event to the job's user
  log: the restarted schedd writes the event from the outbox, HTCondor's own reader
  (``htcondor2.JobEventLog``) sees the job end, and ``htc wait`` on the log returns;
* between the commit of the procs a late-materialization cluster adds and the write of their
  SUBMIT events: the restarted schedd writes them from the outbox, once, and the log tells of
  every proc of the cluster from its submit to its end;
* between the write of a job's (or a lane call's) TERMINATED event and the commit that takes
  it out of the outbox: the restarted schedd does not write it, nor the job's other events,
  a second time.

The crashes are real: the schedd's service kills itself with SIGKILL at that point when a flag
file named by an environment variable exists (``htc.daemons.schedd.service``), and the pool's
master restarts it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from durable_jobs import mark_run, runs
from executor_contract import double, wait_for
from executor_pool import ExecutorPool
from htc.daemons.schedd.service import (
    CRASH_AFTER_TERMINATED_EVENT_ENV,
    CRASH_BEFORE_CALL_FILES_ENV,
    CRASH_BEFORE_SUBMIT_EVENT_ENV,
    CRASH_BEFORE_SUBMIT_REPLY_ENV,
    CRASH_BEFORE_TERMINATED_EVENT_ENV,
)
from htc.executors import HTCExecutor
from htc.wire import messages as m
from poolutil import open_pool

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pool():
    flags = Path(tempfile.mkdtemp(prefix="htc-crash-flags-"))
    started = ExecutorPool()
    started.pool.env[CRASH_BEFORE_CALL_FILES_ENV] = str(flags / "before-call-files")
    started.pool.env[CRASH_BEFORE_SUBMIT_REPLY_ENV] = str(flags / "before-submit-reply")
    started.pool.env[CRASH_BEFORE_TERMINATED_EVENT_ENV] = str(flags / "before-terminated-event")
    started.pool.env[CRASH_AFTER_TERMINATED_EVENT_ENV] = str(flags / "after-terminated-event")
    started.pool.env[CRASH_BEFORE_SUBMIT_EVENT_ENV] = str(flags / "before-submit-event")
    started.flags = flags
    started.start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def scratch(pool):
    path = Path(tempfile.mkdtemp(dir=pool.pool.work))
    path.chmod(0o777)
    return path


def arm(pool, which: str) -> tuple[Path, int]:
    """Make the schedd kill itself at the next ``which``; return the flag and its pid now."""
    flag = pool.flags / which
    flag.touch()
    return flag, pool.pool.status("SCHEDD").pid


def test_a_lane_result_committed_just_before_a_kill_9_reaches_its_future(pool):
    ex = HTCExecutor(**pool.executor_args())
    try:
        assert ex.submit(double, 1).result(timeout=120) == 2  # a lane is up
        flag, old = arm(pool, "before-call-files")
        future = ex.submit(double, 21)
        # The schedd commits the call's end (history), then dies before it writes the result.
        wait_for(lambda: not flag.exists(), 120, "the schedd to die before it writes the result")
        pool.pool.running_pid("SCHEDD", other_than=old, timeout=60)
        # The restarted schedd writes it from the queue's outbox; the executor finds the job gone
        # from the queue with its result there.
        assert future.result(timeout=120) == 42
        assert pool.pool.jobs(f'HTCCallId == "{future.call_id}"') == []
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def test_a_jobs_end_committed_just_before_a_kill_9_reaches_its_user_log(pool, scratch):
    import htcondor2

    log = scratch / "ended.log"
    flag, old = arm(pool, "before-terminated-event")
    reply = pool.pool.submit(f'executable = /bin/sh\narguments = "-c \'exit 3\'"\nlog = {log}\nqueue\n')
    # The schedd commits the job's end (history), then dies before its TERMINATED is in the log.
    wait_for(lambda: not flag.exists(), 120, "the schedd to die before it writes the TERMINATED event")
    pool.pool.running_pid("SCHEDD", other_than=old, timeout=60)
    terminated = htcondor2.JobEventType.JOB_TERMINATED
    events = pool.pool.log_events(log, until=lambda evs: any(e.type == terminated for e in evs), timeout=120)
    [end] = [e for e in events if e.type == terminated]
    assert (end.cluster, end.proc, end["ReturnValue"]) == (reply.cluster_id, 0, 3)
    assert [e.type for e in events][:2] == [htcondor2.JobEventType.SUBMIT, htcondor2.JobEventType.EXECUTE]
    done = subprocess.run([sys.executable, "-m", "htc.cli.main", "wait", "-wait", "120", str(log)], env=pool.pool.env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert pool.pool.jobs(f"ClusterId == {reply.cluster_id}") == []
    assert [ad["ExitCode"] for ad in finished(pool, f"ClusterId == {reply.cluster_id}")] == [3]


def test_a_materialized_procs_submit_committed_just_before_a_kill_9_reaches_its_user_log(pool, scratch):
    import htcondor2

    log = scratch / "materialized.log"
    reply = pool.pool.submit(f"executable = /bin/true\nlog = {log}\nmax_materialize = 1\nqueue 2\n")
    submit, terminated = htcondor2.JobEventType.SUBMIT, htcondor2.JobEventType.JOB_TERMINATED
    pool.pool.log_events(log, until=lambda evs: any(e.type == submit for e in evs), timeout=60)  # 0's is written
    flag, old = arm(pool, "before-submit-event")
    # Proc 0 ends; the schedd commits proc 1 in its place, then dies before 1's SUBMIT is in the log.
    wait_for(lambda: not flag.exists(), 180, "the schedd to die before it writes the materialized proc's SUBMIT")
    pool.pool.running_pid("SCHEDD", other_than=old, timeout=60)
    events = pool.pool.log_events(log, until=lambda evs: sum(e.type == terminated for e in evs) == 2, timeout=180)
    assert {e.cluster for e in events} == {reply.cluster_id}
    assert sorted(e.proc for e in events if e.type == submit) == [0, 1]  # each once: 1's from the outbox
    assert sorted(e.proc for e in events if e.type == terminated) == [0, 1]
    done = subprocess.run([sys.executable, "-m", "htc.cli.main", "wait", "-wait", "120", str(log)], env=pool.pool.env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(int(ad["ProcId"]) for ad in finished(pool, f"ClusterId == {reply.cluster_id}")) == [0, 1]


def test_events_written_just_before_a_kill_9_are_not_written_again(pool, scratch):
    import htcondor2

    log = scratch / "written.log"
    flag, old = arm(pool, "after-terminated-event")
    reply = pool.pool.submit(f'executable = /bin/sh\narguments = "-c \'exit 4\'"\nlog = {log}\nqueue\n')
    # The schedd writes the job's TERMINATED, then dies before the outbox forgets it.
    wait_for(lambda: not flag.exists(), 120, "the schedd to die after it wrote the TERMINATED event")
    new = pool.pool.running_pid("SCHEDD", other_than=old, timeout=60)
    # The restarted schedd has written what its predecessor owed (before it serves anybody).
    pool.pool.jobs("true")
    assert pool.pool.status("SCHEDD").pid == new
    terminated = htcondor2.JobEventType.JOB_TERMINATED
    events = pool.pool.log_events(log, until=lambda evs: any(e.type == terminated for e in evs), timeout=60)
    assert [e["ReturnValue"] for e in events if e.type == terminated] == [4]
    job = f"({reply.cluster_id:03d}.000."
    assert [line[:3] for line in log.read_text().splitlines() if job in line] == ["000", "001", "005"]  # each once
    assert [ad["ExitCode"] for ad in finished(pool, f"ClusterId == {reply.cluster_id}")] == [4]


def test_a_lane_calls_end_written_just_before_a_kill_9_reaches_its_future_once(pool):
    ex = HTCExecutor(**pool.executor_args())
    try:
        assert ex.submit(double, 1).result(timeout=120) == 2  # a lane is up
        flag, old = arm(pool, "after-terminated-event")
        future = ex.submit(double, 22)
        wait_for(lambda: not flag.exists(), 120, "the schedd to die after it wrote the call's TERMINATED event")
        pool.pool.running_pid("SCHEDD", other_than=old, timeout=60)
        assert future.result(timeout=120) == 44
        pool.pool.jobs("true")  # the restarted schedd serves: what it owed is written
        assert pool.pool.jobs(f'HTCCallId == "{future.call_id}"') == []
        [ad] = finished(pool, f'HTCCallId == "{future.call_id}"')
        job = f"({int(ad['ClusterId']):03d}.{int(ad['ProcId']):03d}."
        lines = (Path(ex._spool.path) / "jobs.log").read_text().splitlines()
        assert [line[:3] for line in lines if job in line] == ["000", "001", "005"]  # each of its events once
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def test_a_submit_committed_just_before_a_kill_9_is_not_queued_again_by_the_retry(pool, scratch):
    ex = HTCExecutor(**pool.executor_args())
    try:
        assert ex.submit(double, 1).result(timeout=120) == 2
        flag, old = arm(pool, "before-submit-reply")
        futures = [ex.submit(mark_run, str(scratch), i) for i in range(20)]  # one batch, one Submit
        assert [f.result(timeout=180) for f in futures] == list(range(20))
        assert not flag.exists() and pool.pool.status("SCHEDD").pid != old  # it did die before replying
        assert runs(str(scratch)) == {i: 1 for i in range(20)}  # each call ran once
        session = f'HTCSession == "{ex.name}" && HTCFunction == "durable_jobs.mark_run"'
        assert pool.pool.jobs(session) == [] and len(finished(pool, session)) == 20  # one cluster of 20
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def test_htc_submit_retries_a_lost_reply_without_queueing_twice(pool):
    work = pool.pool.work
    (work / "one.sub").write_text("executable = /bin/true\nqueue 3\n")
    before = clusters(pool)
    flag, old = arm(pool, "before-submit-reply")
    done = subprocess.run([sys.executable, "-m", "htc.cli.main", "submit", "-terse", "one.sub"], cwd=work, env=pool.pool.env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert not flag.exists() and pool.pool.status("SCHEDD").pid != old  # it died instead of replying
    cluster = int(done.stdout.split(".")[0])
    # One cluster: the retry was answered with the first try's.
    assert clusters(pool) - before == {cluster}


def finished(pool, constraint: str) -> list:
    from htc.client import history

    return history(constraint, path=pool.pool.home / "spool" / "job_queue.db")


def clusters(pool) -> set[int]:
    """Every cluster id in the queue or the history."""
    return {int(ad["ClusterId"]) for ad in [*pool.pool.jobs("true", "ClusterId"), *finished(pool, "true")]}


def test_a_submit_sent_twice_with_one_id_queues_once_on_a_real_schedd():
    with open_pool("COLLECTOR, SCHEDD") as p:
        msg = m.Submit(cluster_ad='[ Cmd = "/bin/true"; Iwd = "/tmp" ]', proc_ads=("[ ]", "[ ]"),
                       submission_id="test:twice")
        first, again = p.send(msg), p.send(msg)
        assert isinstance(first, m.SubmitReply) and again == first
        assert len(p.jobs("true")) == 2


def test_kill_9_campaign_every_result_reaches_its_future_once():
    """Three kill -9s of the schedd during a 2,000-call burst (benchmarks/kill9_campaign.py):
    every future gets its own call's value; calls that ran twice are counted and printed
    (at least once for a call with side effects: docs/executor.md)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from kill9_campaign import trial

    campaign_pool = ExecutorPool().start()
    try:
        result = trial(campaign_pool, calls=2000, kills=3, deadline=900.0)
    finally:
        campaign_pool.stop()
    print(f"kill -9 campaign: {result.line()}")
    assert len(result.kills) == 3
    assert result.lost == 0 and result.delivered == 2000, result.errors


def test_an_executor_waits_for_a_schedd_the_master_is_still_restarting():
    """The master's restart backoff (13 s here, minutes in a pool that crashed often) may
    outlast the executor's patience (``lost_after``, 3 s here): the executor asks the master
    and keeps waiting while it says the schedd is coming back."""
    from htc.executors.pool import PoolBackend

    slow = ExecutorPool(MASTER_BACKOFF_CONSTANT="12").start()
    try:
        args = slow.executor_args()
        ex = HTCExecutor(backend=PoolBackend(args.pop("pool"), lost_after=3.0), **args)
        try:
            assert ex.submit(double, 1).result(timeout=120) == 2
            old = slow.pool.status("SCHEDD").pid
            os.kill(old, signal.SIGKILL)
            wait_for(lambda: slow.pool.status("SCHEDD").state == "Backoff", 20, "the master to back off")
            began = time.monotonic()
            future = ex.submit(double, 21)  # its Submit waits for the schedd to come back
            assert future.result(timeout=180) == 42
            assert time.monotonic() - began > 3.0  # longer than lost_after: it did wait on the master's word
            assert slow.pool.status("SCHEDD").pid != old
        finally:
            ex.shutdown(wait=True, cancel_futures=True)
    finally:
        slow.stop()


def test_attach_finds_finished_calls_the_journal_does_not_name_in_the_history():
    """A client killed right after its Submit was answered never wrote down its calls' jobs:
    attach looks for them in the queue and, once they have finished, in the history -- it
    does not submit them again. (A pool of its own: the kill tests above leave the claims of
    lanes that were idle when the schedd died claimed until their lease runs out.)"""
    from htc.executors import attach, forget

    own = ExecutorPool().start()
    try:
        scratch = Path(tempfile.mkdtemp(dir=own.pool.work))
        scratch.chmod(0o777)
        _attach_after_a_lost_journal(own, scratch, attach, forget)
    finally:
        own.stop()


def _attach_after_a_lost_journal(pool, scratch, attach, forget):
    ex = HTCExecutor(name="durable-attach", **pool.executor_args())
    futures = [ex.submit(mark_run, str(scratch), i) for i in range(5)]
    assert [f.result(timeout=120) for f in futures] == list(range(5))
    ex.shutdown(wait=False)  # (a named session: its results stay for attach)
    journal = ex._spool.path / "journal.jsonl"
    lines = [line for line in journal.read_text().splitlines() if '"op": "job"' not in line
             and '"op":"job"' not in line]
    journal.write_text("".join(line + "\n" for line in lines))
    again = attach("durable-attach", **pool.executor_args())
    try:
        assert [f.result(timeout=120) for f in again.futures] == list(range(5))
        assert runs(str(scratch)) == {i: 1 for i in range(5)}  # none ran again
    finally:
        again.shutdown(wait=True)
        forget("durable-attach")
