"""A DAG's failures on a real pool: rescue DAGs, kill -9 of the manager, htc rm of the DAG job,
category throttles, and the DAG's node jobs in htc q."""

from __future__ import annotations

import os
import signal

import pytest

from dag_pool import DagDir, dag_pool, in_queue, wait_until
from htc.dag.manager.lockfile import read_lock
from htc.eventlog import events as ev

pytestmark = pytest.mark.slow

#: a node that waits for the file go.<node> (at most 120 s) before it records its run
WAITER = """#!/bin/sh
i=0
while [ ! -e "{work}/go.$1" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
touch "{work}/runs/$1.$(date +%s%N).$$"
"""


@pytest.fixture
def d(monkeypatch):
    with dag_pool() as pool:
        yield DagDir(pool, monkeypatch)


def waiter(d: DagDir) -> None:
    d.script("wait.sh", WAITER.format(work=d.work))
    d.write("wait.sub", f"executable = {d.work}/wait.sh\narguments = $(JOB)\nqueue\n")


def running(d: DagDir, dag: str, node: str) -> bool:
    return any(n == node and isinstance(e, ev.ExecuteEvent) for n, e in d.node_events(dag))


def test_a_failed_dag_writes_a_rescue_dag_and_a_resubmission_finishes_it(d):
    d.script("fix.sh", f'#!/bin/sh\ntouch "{d.work}/runs/$1.$(date +%s%N).$$"\n[ -e "{d.work}/fixed" ]\n')
    d.write("fix.sub", f"executable = {d.work}/fix.sh\narguments = $(JOB)\nqueue\n")
    d.write("res.dag", "JOB A node.sub\nJOB B fix.sub\nJOB C node.sub\nPARENT A CHILD B\nPARENT B CHILD C\n")
    d.submit("res.dag")
    d.wait("res.dag")
    assert d.exit_status("res.dag") == 1 and d.runs() == {"A": 1, "B": 1}
    rescue = (d.work / "res.dag.rescue001").read_text()
    assert "DONE A" in rescue and "DONE B" not in rescue
    (d.work / "fixed").write_text("")
    status, out, err = d.htc("dag", "submit", "res.dag")
    assert status == 0 and out.splitlines()[0] == "Running rescue DAG 1", out + err
    d.wait("res.dag", int(out.split("submitted to cluster ")[1].split(".")[0]))
    assert d.exit_status("res.dag") == 0
    assert d.runs() == {"A": 1, "B": 2, "C": 1}   # A, done before, did not run again


def test_kill_9_of_the_manager_recovers_without_running_a_node_twice(d):
    waiter(d)
    d.write("k.dag", "JOB A node.sub\nJOB B wait.sub\nJOB C node.sub\nPARENT A CHILD B\nPARENT B CHILD C\n")
    cluster = d.submit("k.dag")
    wait_until(lambda: running(d, "k.dag", "B"), what="node B running")
    lock = read_lock(str(d.work / "k.dag.lock"))
    assert lock is not None and lock.cluster == cluster
    os.kill(lock.pid, signal.SIGKILL)
    # the schedd requeues the manager job (on_exit_remove) and starts it again: it recovers
    wait_until(lambda: (l := read_lock(str(d.work / "k.dag.lock"))) is not None and l.pid != lock.pid,
               what="a new manager")
    wait_until(lambda: "RECOVERY" in d.dagman_out("k.dag"), what="recovery mode")
    (d.work / "go.B").write_text("")
    d.wait("k.dag")
    assert d.exit_status("k.dag") == 0
    assert d.runs() == {"A": 1, "B": 1, "C": 1}
    assert d.order("k.dag", ev.SubmitEvent) == ["A", "B", "C"]


def test_htc_rm_of_the_dag_job_removes_its_nodes_and_writes_the_rescue_dag(d):
    waiter(d)
    d.write("rm.dag", "JOB A wait.sub\nJOB B node.sub\nPARENT A CHILD B\n")
    cluster = d.submit("rm.dag")
    wait_until(lambda: running(d, "rm.dag", "A"), what="node A running")
    # htc q -dag shows the node's job under its DAG
    status, out, err = d.htc("q", "-nobatch", "-dag")
    lines = out.splitlines()
    dag_line = next(i for i, l in enumerate(lines) if l.split() and l.split()[0] == f"{cluster}.0")
    assert "|-A" in lines[dag_line + 1], out
    node_cluster = next(e.cluster for n, e in d.node_events("rm.dag") if n == "A")
    # a second manager of the same DAG is refused while this one runs
    status, out, err = d.htc("dag", "submit", "-f", "rm.dag")
    assert status != 0 and f"being run by another DAG manager (job {cluster}" in err, out + err
    # the manager put the DAG's progress in its job ad (DAGMAN_QUEUE_UPDATE_INTERVAL, and at start)
    [ad] = d.pool.jobs(f"ClusterId == {cluster}", "DAG_NodesTotal", "DAG_NodesQueued", "DAG_NodesUnready")
    assert (ad["DAG_NodesTotal"], ad["DAG_NodesQueued"], ad["DAG_NodesUnready"]) in ((2, 1, 1), (2, 0, 2))
    status, out, err = d.htc("dag", "status", str(cluster))   # by the manager job's id
    assert status == 0 and f"running (manager job {cluster}" in out, out + err
    assert "SUBMITTED      1  A" in out and "NOT_READY      1  B" in out, out
    status, out, err = d.htc("rm", str(cluster))
    assert status == 0, err
    d.wait("rm.dag")
    assert d.exit_status("rm.dag") == 2
    assert (d.work / "rm.dag.rescue001").exists()
    wait_until(lambda: not in_queue(d.pool, node_cluster), what="node A's job removed")
    assert any(n == "A" and isinstance(e, ev.JobAbortedEvent) for n, e in d.node_events("rm.dag"))
    assert d.runs() == {}


def peak_in_queue(d: DagDir, dag: str, nodes: set[str] | None = None) -> int:
    """The most node jobs (of ``nodes``) in the queue at once, from the nodes log."""
    live = peak = 0
    for node, event in d.node_events(dag):
        if nodes is not None and node not in nodes:
            continue
        if isinstance(event, ev.SubmitEvent):
            live += 1
            peak = max(peak, live)
        elif isinstance(event, (ev.JobTerminatedEvent, ev.JobAbortedEvent)):
            live -= 1
    return peak


def test_maxjobs_of_a_category_and_the_maxjobs_flag_are_never_exceeded(d):
    d.script("nap.sh", f'#!/bin/sh\ntouch "{d.work}/runs/$1.$(date +%s%N).$$"\nsleep 1\n')
    d.write("nap.sub", f"executable = {d.work}/nap.sh\narguments = $(JOB)\nqueue\n")
    slow = [f"S{i}" for i in range(4)]
    free = [f"F{i}" for i in range(4)]
    d.write("cat.dag", "".join(f"JOB {n} nap.sub\nCATEGORY {n} slow\n" for n in slow) + "MAXJOBS slow 1\n" +
            "".join(f"JOB {n} nap.sub\n" for n in free))
    cluster = d.submit("cat.dag")
    d.wait("cat.dag", cluster)
    assert d.exit_status("cat.dag") == 0 and d.runs() == dict.fromkeys(slow + free, 1)
    assert peak_in_queue(d, "cat.dag", set(slow)) == 1 and peak_in_queue(d, "cat.dag") > 1
    # htc dag submit -maxjobs 2 (condor_submit_dag's flag, passed to the manager) caps every node
    for path in (d.work / "runs").iterdir():
        path.unlink()
    cluster = d.submit("cat.dag", "-f", "-maxjobs", "2")
    d.wait("cat.dag", cluster)
    assert d.exit_status("cat.dag") == 0 and d.runs() == dict.fromkeys(slow + free, 1)
    assert peak_in_queue(d, "cat.dag") == 2 and peak_in_queue(d, "cat.dag", set(slow)) == 1


def test_halt_holds_back_new_nodes_resume_releases_them_and_a_halted_dag_stops(d):
    waiter(d)
    d.write("h.dag", "JOB A wait.sub\nJOB B wait.sub\nJOB C node.sub\nPARENT A CHILD B\nPARENT B CHILD C\n")
    cluster = d.submit("h.dag")
    wait_until(lambda: running(d, "h.dag", "A"), what="node A running")
    assert d.htc("dag", "halt", "h.dag")[0] == 0
    wait_until(lambda: "halted" in d.dagman_out("h.dag"), what="the manager to see the halt")
    assert d.htc("dag", "resume", "h.dag")[0] == 0   # resumed while A still runs: nothing lost
    wait_until(lambda: "resumed" in d.dagman_out("h.dag"), what="the manager to see the resume")
    (d.work / "go.A").write_text("")
    wait_until(lambda: running(d, "h.dag", "B"), what="node B running after the resume")
    # halted again: B finishes, C is not started, and the DAG stops with a rescue DAG
    assert d.htc("dag", "halt", "h.dag")[0] == 0
    wait_until(lambda: d.dagman_out("h.dag").count(".halt appeared)") >= 2, what="the second halt")
    (d.work / "go.B").write_text("")
    d.wait("h.dag", cluster)
    assert d.exit_status("h.dag") == 1 and d.runs() == {"A": 1, "B": 1}
    assert d.order("h.dag", ev.SubmitEvent) == ["A", "B"]
    assert "DONE B" in (d.work / "h.dag.rescue001").read_text()
    assert not (d.work / "h.dag.halt").exists()   # the halt was used up: a resubmission runs
    status, out, err = d.htc("dag", "submit", "h.dag")
    assert status == 0 and out.splitlines()[0] == "Running rescue DAG 1"
    d.wait("h.dag", int(out.split("submitted to cluster ")[1].split(".")[0]))
    assert d.exit_status("h.dag") == 0 and d.runs() == {"A": 1, "B": 1, "C": 1}


def test_hold_and_release_of_the_dag_job_stop_the_manager_and_recover(d):
    waiter(d)
    d.write("hr.dag", "JOB A node.sub\nJOB B wait.sub\nJOB C node.sub\nPARENT A CHILD B\nPARENT B CHILD C\n")
    cluster = d.submit("hr.dag")
    wait_until(lambda: running(d, "hr.dag", "B"), what="node B running")
    first = read_lock(str(d.work / "hr.dag.lock"))
    assert d.htc("hold", str(cluster))[0] == 0
    # the manager stops at once (SIGTERM) and keeps its lock file; B's job goes on
    wait_until(lambda: "Received SIGTERM" in d.dagman_out("hr.dag"), what="the manager to stop")
    assert (d.work / "hr.dag.lock").exists()
    (d.work / "go.B").write_text("")
    wait_until(lambda: any(n == "B" and isinstance(e, ev.JobTerminatedEvent) for n, e in d.node_events("hr.dag")),
               what="B to finish while the DAG is held")
    assert d.htc("release", str(cluster))[0] == 0
    d.wait("hr.dag", cluster)
    assert d.exit_status("hr.dag") == 0 and d.runs() == {"A": 1, "B": 1, "C": 1}
    assert "RECOVERY" in d.dagman_out("hr.dag") and first is not None
