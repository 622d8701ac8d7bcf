"""kill -9 of a startd or a schedd under running work: the other side notices in seconds.

Real pools (a real master restarting what is killed), with ``ALIVE_INTERVAL`` at its default of
300 s: before claim watches, a startd killed under running jobs left them Running until the
next keep-alive (minutes), and a schedd killed under a lane burst left the slots Claimed/Busy by
its predecessor's lanes. Here the work is rescheduled and runs again within a deadline far
below those minutes (generous for a loaded machine), and the times measured are printed
(``pytest -s``) for the record.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

import htcondor2
import pytest
from htcondor2 import JobEventType as T

from executor_contract import double, gate
from executor_pool import ExecutorPool
from htc.executors import HTCExecutor
from poolutil import Pool, wait_for

pytestmark = pytest.mark.slow

#: HTCondor's default keep-alive interval: what a lost peer would cost without claim watches
REAL_ALIVE = {"ALIVE_INTERVAL": "300"}
#: seconds within which the work must be rescheduled (today's figure was ~300 s)
DEADLINE = 60.0


def _log_types(log: Path) -> list:
    if not log.exists():
        return []
    with htcondor2.JobEventLog(str(log)) as reader:
        return [(e.proc, e.type) for e in reader.events(stop_after=0)]


def test_kill_9_of_the_startd_under_running_jobs_reschedules_them_in_seconds():
    pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", **REAL_ALIVE)
    try:
        pool.start()
        go, starts = pool.work / "go", pool.work / "starts"
        # Root's jobs run as one slot account each (htc-slot<N>): the file both append to must
        # be writable by each of them.
        starts.touch(mode=0o666)
        starts.chmod(0o666)
        log = pool.work / "k.log"
        job = (f"executable = /bin/sh\n"
               f"arguments = \"-c 'echo $(Process) >> {starts}; "
               f"while [ ! -e {go} ]; do sleep 0.2; done; echo $(Process)'\"\n"
               f"output = {pool.work}/k.$(Process)\nlog = {log}\nqueue 2\n")
        cluster = pool.submit(job).cluster_id
        wait_for(lambda: len(starts.read_text().split()) == 2, timeout=60,
                 what="both jobs running")
        old = pool.status("STARTD").pid
        killed = time.monotonic()
        os.kill(old, signal.SIGKILL)

        def back_to_idle():
            types = _log_types(log)
            return all((p, T.JOB_RECONNECT_FAILED) in types for p in (0, 1))
        wait_for(back_to_idle, timeout=DEADLINE, what="both jobs noticed lost (JOB_RECONNECT_FAILED)")
        noticed = time.monotonic() - killed
        # They run again (on the startd the master restarted) and complete.
        wait_for(lambda: len(starts.read_text().split()) == 4, timeout=DEADLINE, what="both jobs started again")
        rerun = time.monotonic() - killed
        go.touch()
        # (The queue commits an exit before the schedd writes the user log: wait for the log.)
        wait_for(lambda: all((p, T.JOB_TERMINATED) in _log_types(log) for p in (0, 1)), timeout=DEADLINE,
                 what="both jobs done")
        assert not pool.jobs(f"ClusterId == {cluster}")
        print(f"\nstartd kill -9 under 2 jobs: lost run noticed after {noticed:.2f} s, running again after {rerun:.2f} s")
        counts = Counter(_log_types(log))
        for proc in (0, 1):
            assert counts[(proc, T.JOB_DISCONNECTED)] == 1, counts
            assert counts[(proc, T.JOB_RECONNECT_FAILED)] == 1, counts
            assert counts[(proc, T.EXECUTE)] == 2, counts
            assert counts[(proc, T.JOB_TERMINATED)] == 1, counts
            assert (pool.work / f"k.{proc}").read_text() == f"{proc}\n"
    finally:
        pool.stop()


@pytest.fixture
def xpool():
    started = ExecutorPool(**REAL_ALIVE).start()
    try:
        yield started
    finally:
        started.stop()


def test_kill_9_of_the_startd_under_lane_calls_requeues_them_in_seconds(xpool):
    scratch = Path(tempfile.mkdtemp(dir=xpool.pool.work))
    scratch.chmod(0o777)
    ex = HTCExecutor(**xpool.executor_args())
    try:
        gate_path = scratch / "open"
        # Two calls hold both lanes; the others wait for them.
        started = [scratch / f"started{i}" for i in range(2)]
        held = [ex.submit(gate, str(gate_path), i, str(started[i])) for i in range(2)]
        wait_for(lambda: all(p.exists() for p in started) and all(f.running() for f in held), timeout=120,
                 what="both calls running on their lanes")
        assert all(f.classad()["HTCLane"] is True for f in held)
        rest = [ex.submit(double, i) for i in range(6)]
        for p in started:
            p.unlink()
        old = xpool.pool.status("STARTD").pid
        killed = time.monotonic()
        os.kill(old, signal.SIGKILL)
        wait_for(lambda: all(f.evictions >= 1 for f in held), timeout=DEADLINE, what="both calls evicted")
        noticed = time.monotonic() - killed
        wait_for(lambda: all(p.exists() for p in started), timeout=DEADLINE, what="both calls running again")
        rerun = time.monotonic() - killed
        gate_path.touch()
        assert [f.result(timeout=DEADLINE) for f in held] == [0, 1]
        assert [f.result(timeout=DEADLINE) for f in rest] == [2 * i for i in range(6)]
        print(f"\nstartd kill -9 under 2 lane calls: eviction noticed after {noticed:.2f} s, "
              f"running again after {rerun:.2f} s")
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def test_kill_9_of_the_schedd_in_a_lane_burst_runs_the_calls_again_in_seconds(xpool):
    ex = HTCExecutor(**xpool.executor_args())
    pool = xpool.pool
    try:
        n = 400
        futures = [ex.submit(double, i) for i in range(n)]
        wait_for(lambda: sum(f.done() for f in futures) >= 40, timeout=120, what="the burst under way")
        old = pool.status("SCHEDD").pid
        os.kill(old, signal.SIGKILL)
        killed = time.monotonic()
        done_at_kill = sum(f.done() for f in futures)
        pool.running_pid("SCHEDD", other_than=old)
        restarted = time.monotonic()

        def progress():
            return sum(f.done() for f in futures) > done_at_kill + 10
        wait_for(progress, timeout=DEADLINE, what="calls completing again after the restart")
        resumed = time.monotonic()
        # Neither slot stays Claimed/Busy for a lane nobody follows while calls wait.
        assert [f.result(timeout=4 * DEADLINE) for f in futures] == [2 * i for i in range(n)]
        print(f"\nschedd kill -9 in a burst of {n} lane calls: restarted after {restarted - killed:.2f} s, "
              f"calls completing again {resumed - restarted:.2f} s after the restart")
        wait_for(lambda: all(s.get("State") != "Claimed" for s in pool.slots()), timeout=DEADLINE,
                 what="the slots released once the burst is done")
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def test_kill_9_of_the_schedd_under_lingering_lanes_frees_their_slots_in_seconds():
    """Lanes that wait for their user's next calls (SCHEDD_CLAIM_LINGER) hold no call: no job in
    the queue names their claims, so a restarted schedd cannot give them back. The startd sees
    the dead schedd's watches close and ends them, and the next calls run at once."""
    xpool = ExecutorPool(SCHEDD_CLAIM_LINGER="600", **REAL_ALIVE).start()
    pool = xpool.pool
    ex = HTCExecutor(**xpool.executor_args())
    try:
        assert sorted(ex.map(double, range(20))) == [2 * i for i in range(20)]
        wait_for(lambda: [(s.get("State"), s.get("Activity")) for s in pool.slots("SlotType =!= \"Partitionable\"")]
                 .count(("Claimed", "Busy")) >= 1, timeout=30, what="a lane lingering on its claim")
        old = pool.status("SCHEDD").pid
        os.kill(old, signal.SIGKILL)
        killed = time.monotonic()
        pool.running_pid("SCHEDD", other_than=old)
        restarted = time.monotonic()
        futures = [ex.submit(double, i) for i in range(4)]
        assert [f.result(timeout=DEADLINE) for f in futures] == [0, 2, 4, 6]
        print(f"\nschedd kill -9 under lingering lanes: restarted after {restarted - killed:.2f} s, "
              f"the next calls done {time.monotonic() - restarted:.2f} s after the restart")
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
        xpool.stop()
