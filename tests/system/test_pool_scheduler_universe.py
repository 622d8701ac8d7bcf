"""Scheduler-universe jobs on a personal pool: the schedd runs them itself.

The pool has no negotiator and no startd: a scheduler-universe job runs all the same, in its
Iwd, with its files, as DAGMan runs. Each test reads the job's log with ``htcondor2.JobEventLog``
(the real HTCondor reader) and looks at the queue and the history.
"""

from __future__ import annotations

import os
import pwd
import signal

import htcondor2
import psutil
import pytest

from htc.client import history
from htc.daemons.schedd.shadow import ad_text
from htc.jobqueue.ads import quote
from htc.wire import messages as m
from poolutil import Pool, wait_for

pytestmark = pytest.mark.slow

T = htcondor2.JobEventType


@pytest.fixture
def pool():
    # No cool-down after a non-zero exit (HTCondor's 300 s would make the requeue test wait).
    p = Pool("COLLECTOR, SCHEDD", SCHEDD_LOCAL_JOB_KILL_TIMEOUT="5", SCHEDULER_UNIVERSE_COOL_DOWN_DURATION="0")
    try:
        yield p.start()
    finally:
        p.stop()


def finished(pool: Pool, cluster: int) -> list[dict]:
    return history(f"ClusterId == {cluster}", path=pool.home / "spool" / "job_queue.db")


def script(pool: Pool, name: str, text: str) -> str:
    """A shell script in the pool's work directory (its path)."""
    path = pool.work / name
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return str(path)


def act(pool: Pool, action: m.JobAction, cluster: int) -> m.ActOnJobsReply:
    return pool.send(m.ActOnJobs(action=action, ids=(f"{cluster}.0",)))


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_scheduler_universe_job_runs_in_the_schedd_with_its_files_events_and_exit_code(pool):
    exe = script(pool, "hello.sh", 'echo "hello $1 $CONDOR_ID from $(pwd)"; cat; echo oops >&2; exit 3\n')
    (pool.work / "in.txt").write_text("input line\n")
    cluster = pool.submit(f"universe = scheduler\nexecutable = {exe}\narguments = world\ninput = in.txt\n"
                          "output = out.txt\nerror = err.txt\nlog = sched.log\n"
                          "submit_event_notes = DAG Node: A\nsubmit_event_user_notes = the user's note\n"
                          "dagman_log = nodes.log\nqueue\n").cluster_id
    events = pool.log_events(pool.work / "sched.log", 3)
    assert [e.type for e in events] == [T.SUBMIT, T.EXECUTE, T.JOB_TERMINATED]
    assert events[0]["LogNotes"] == "DAG Node: A" and events[0]["UserNotes"] == "the user's note"
    assert "sock=schedd" in events[1]["ExecuteHost"]
    assert events[2]["TerminatedNormally"] is True and events[2]["ReturnValue"] == 3
    assert (pool.work / "out.txt").read_text() == f"hello world {cluster}.0 from {pool.work}\ninput line\n"
    assert (pool.work / "err.txt").read_text() == "oops\n"
    # The DAG nodes log got the same events (each in the default DAGMan mask).
    nodes = pool.log_events(pool.work / "nodes.log", 3)
    assert [e.type for e in nodes] == [T.SUBMIT, T.EXECUTE, T.JOB_TERMINATED]
    assert nodes[0]["LogNotes"] == "DAG Node: A"
    wait_for(lambda: finished(pool, cluster), what="the job in the history")
    [row] = finished(pool, cluster)
    assert row["ExitCode"] == 3 and row["ExitBySignal"] is False and row["JobStatus"] == 4
    assert row["RemoteWallClockTime"] >= 0


def test_on_exit_remove_false_requeues_and_runs_the_job_again(pool):
    exe = script(pool, "count.sh", 'n=$(cat runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > runs; exit $n\n')
    cluster = pool.submit(f"universe = scheduler\nexecutable = {exe}\nlog = requeue.log\n"
                          "on_exit_remove = ExitCode >= 3\nqueue\n").cluster_id
    events = pool.log_events(pool.work / "requeue.log", 7)
    assert [e.type for e in events] == [T.SUBMIT, T.EXECUTE, T.JOB_EVICTED, T.EXECUTE, T.JOB_EVICTED,
                                        T.EXECUTE, T.JOB_TERMINATED]
    assert events[2]["TerminatedAndRequeued"] is True and events[2]["ReturnValue"] == 1
    assert events[6]["ReturnValue"] == 3
    assert (pool.work / "runs").read_text() == "3\n"
    wait_for(lambda: finished(pool, cluster), what="the job in the history")
    assert finished(pool, cluster)[0]["NumJobStarts"] == 3


def test_rm_sends_sigterm_and_the_job_leaves_with_aborted_once_its_process_is_gone(pool):
    exe = script(pool, "trap.sh", 'trap "echo got TERM > trapped; exit 0" TERM\necho $$ > pid\n'
                                  "while true; do sleep 0.1; done\n")
    cluster = pool.submit(f"universe = scheduler\nexecutable = {exe}\nlog = rm.log\nqueue\n").cluster_id
    pool.log_events(pool.work / "rm.log", 2)
    wait_for(lambda: (pool.work / "pid").exists() and (pool.work / "pid").read_text().strip(), what="the pid file")
    pid = int((pool.work / "pid").read_text())
    assert alive(pid)
    assert act(pool, m.JobAction.Remove, cluster).success == 1
    events = pool.log_events(pool.work / "rm.log", until=lambda evs: bool(evs) and evs[-1].type == T.JOB_ABORTED)
    assert (pool.work / "trapped").read_text() == "got TERM\n"
    assert not alive(pid)
    assert [e.type for e in events] == [T.SUBMIT, T.EXECUTE, T.JOB_EVICTED, T.JOB_ABORTED]
    wait_for(lambda: pool.jobs(f"ClusterId == {cluster}") == [], what="the job to leave the queue")
    assert finished(pool, cluster)[0]["JobStatus"] == 3


def test_a_job_ignoring_its_remove_kill_sig_is_killed_after_the_timeout(pool):
    exe = script(pool, "stubborn.sh", 'trap "echo got USR1 >> sigs" USR1\necho $$ > pid\n'
                                      "while true; do sleep 0.1; done\n")
    cluster = pool.submit(f"universe = scheduler\nexecutable = {exe}\nlog = stub.log\n"
                          "remove_kill_sig = SIGUSR1\nqueue\n").cluster_id
    pool.log_events(pool.work / "stub.log", 2)
    wait_for(lambda: (pool.work / "pid").exists() and (pool.work / "pid").read_text().strip(), what="the pid file")
    assert act(pool, m.JobAction.Remove, cluster).success == 1
    pool.log_events(pool.work / "stub.log", until=lambda evs: bool(evs) and evs[-1].type == T.JOB_ABORTED, timeout=30)
    assert "got USR1" in (pool.work / "sigs").read_text()
    assert not alive(int((pool.work / "pid").read_text()))


def test_hold_kills_the_process_and_release_runs_the_job_again(pool):
    exe = script(pool, "long.sh", "echo $$ >> pids\nwhile true; do sleep 0.1; done\n")
    cluster = pool.submit(f"universe = scheduler\nexecutable = {exe}\nlog = hold.log\nqueue\n").cluster_id
    log = pool.work / "hold.log"
    pool.log_events(log, 2)
    wait_for(lambda: (pool.work / "pids").exists() and (pool.work / "pids").read_text().strip(), what="a pid")
    first = int((pool.work / "pids").read_text().split()[0])
    assert act(pool, m.JobAction.Hold, cluster).success == 1
    pool.log_events(log, 3)
    wait_for(lambda: not alive(first), what="the held job's process to end")
    assert pool.jobs(f"ClusterId == {cluster}", "JobStatus")[0]["JobStatus"] == 5
    assert act(pool, m.JobAction.Release, cluster).success == 1
    events = pool.log_events(log, 5)
    assert [e.type for e in events] == [T.SUBMIT, T.EXECUTE, T.JOB_HELD, T.JOB_RELEASED, T.EXECUTE]
    wait_for(lambda: len((pool.work / "pids").read_text().split()) == 2, what="the second run")
    assert alive(int((pool.work / "pids").read_text().split()[1]))


def test_a_job_whose_executable_cannot_start_is_held_with_the_reason(pool):
    cluster = pool.submit(f"universe = scheduler\nexecutable = {pool.work}/missing.sh\nlog = miss.log\n"
                          "transfer_executable = false\nqueue\n").cluster_id
    events = pool.log_events(pool.work / "miss.log", 2)
    assert events[1].type == T.JOB_HELD
    assert "missing.sh' is missing or not executable" in events[1]["HoldReason"]
    [job] = pool.jobs(f"ClusterId == {cluster}", "JobStatus", "HoldReasonCode")
    assert job["JobStatus"] == 5 and job["HoldReasonCode"] == 6


def test_kill_9_of_the_schedd_kills_the_job_and_the_restarted_schedd_runs_it_again(pool):
    exe = script(pool, "forever.sh", "echo $$ >> pids\nwhile true; do sleep 0.1; done\n")
    pool.submit(f"universe = scheduler\nexecutable = {exe}\nlog = crash.log\nqueue\n")
    log = pool.work / "crash.log"
    pool.log_events(log, 2)
    pids = pool.work / "pids"
    wait_for(lambda: pids.exists() and pids.read_text().strip(), what="the job's pid")
    first = int(pids.read_text().split()[0])
    old = pool.status("SCHEDD").pid
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: not alive(first), what="the job's process to die with the schedd")
    pool.running_pid("SCHEDD", other_than=old)
    events = pool.log_events(log, until=lambda evs: sum(e.type == T.EXECUTE for e in evs) == 2, timeout=40)
    assert [e.type for e in events] == [T.SUBMIT, T.EXECUTE, T.EXECUTE]
    wait_for(lambda: len(pids.read_text().split()) == 2, what="the second run's pid")
    assert alive(int(pids.read_text().split()[1]))


def test_removing_a_job_with_other_job_remove_requirements_removes_the_matching_jobs(pool):
    exe = script(pool, "dagman.sh", "while true; do sleep 0.1; done\n")
    boss = pool.submit(f"universe = scheduler\nexecutable = {exe}\nlog = boss.log\n"
                       '+OtherJobRemoveRequirements = "DAGManJobId =?= $(Cluster)"\nqueue\n').cluster_id
    pool.log_events(pool.work / "boss.log", 2)
    nodes = pool.submit(f"executable = /bin/true\nlog = nodes.log\n+DAGManJobId = {boss}\nqueue 2\n").cluster_id
    other = pool.submit("executable = /bin/true\nqueue\n").cluster_id
    assert act(pool, m.JobAction.Remove, boss).success == 1
    events = pool.log_events(pool.work / "nodes.log", 4)
    assert [e.type for e in events] == [T.SUBMIT, T.SUBMIT, T.JOB_ABORTED, T.JOB_ABORTED]
    assert f"fired when job ({boss}.0) was removed" in events[2]["Reason"]
    wait_for(lambda: pool.jobs(f"ClusterId == {boss} || ClusterId == {nodes}") == [], what="all of them to go")
    assert [a["ClusterId"] for a in pool.jobs("", "ClusterId")] == [other]


def test_a_local_universe_job_runs_the_same_way(pool):
    cluster = pool.submit("universe = local\nexecutable = /bin/echo\narguments = local $(Cluster)\n"
                          "output = local.out\nlog = local.log\nqueue\n").cluster_id
    events = pool.log_events(pool.work / "local.log", 3)
    assert [e.type for e in events] == [T.SUBMIT, T.EXECUTE, T.JOB_TERMINATED]
    assert (pool.work / "local.out").read_text() == f"local {cluster}\n"


_WHO_AM_I = ("import ctypes, os; libc = ctypes.CDLL(None); sig = ctypes.c_int(); "
             "libc.prctl(2, ctypes.byref(sig), 0, 0, 0); print(os.getuid(), sig.value)")  # 2: PR_GET_PDEATHSIG


@pytest.mark.skipif(os.geteuid() != 0, reason="run the tests as root, as CI does")
def test_a_root_schedd_runs_the_job_as_its_owner_and_it_dies_with_the_schedd(pool):
    uid = pwd.getpwnam("nobody").pw_uid
    description = (f"universe = scheduler\nexecutable = /usr/bin/python3\narguments = \"-c '{_WHO_AM_I}'\"\n"
                   "output = who.out\nlog = who.log\nqueue\n")
    attrs = {"SubmitDescription": quote(description), "SubmitIwd": quote(str(pool.work)), "Owner": quote("nobody")}
    reply = pool.send(m.Submit(cluster_ad=ad_text(attrs), proc_ads=("[ ]",)))
    events = pool.log_events(pool.work / "who.log", 3)
    assert events[2].type == T.JOB_TERMINATED and events[2]["ReturnValue"] == 0
    # It ran as nobody, and PR_SET_PDEATHSIG (SIGKILL) survived the switch to nobody.
    assert (pool.work / "who.out").read_text() == f"{uid} {int(signal.SIGKILL)}\n"
    assert (pool.work / "who.out").stat().st_uid == uid
    assert finished(pool, reply.cluster_id)[0]["Owner"] == "nobody"


def test_a_schedd_that_stops_cleanly_kills_the_jobs_process_group_and_its_successor_reruns_it(pool):
    exe = script(pool, "family.sh", "sleep 1000 &\necho $$ $! >> pids\nwhile true; do sleep 0.1; done\n")
    pool.submit(f"universe = scheduler\nexecutable = {exe}\nlog = family.log\nqueue\n")
    pids = pool.work / "pids"
    wait_for(lambda: pids.exists() and pids.read_text().strip(), what="the job's pids")
    main_pid, child = (int(p) for p in pids.read_text().split())
    old = pool.status("SCHEDD").pid
    pool.send(m.DaemonsOff(daemons=("SCHEDD",)), address="master")
    wait_for(lambda: not alive(main_pid) and not alive(child), what="the job and its background child to go")
    pool.send(m.DaemonsOn(daemons=("SCHEDD",)), address="master")
    pool.running_pid("SCHEDD", other_than=old)
    wait_for(lambda: len(pids.read_text().split()) == 4, timeout=30, what="the job's second run")
