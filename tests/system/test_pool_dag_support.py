"""What the DAG manager needs from the schedd, on a personal pool: a scheduler-universe job that
finds its pool and submits node jobs (with ``DAGManJobId``, ``dagman_log`` and the ``DAG Node:``
notes), node events in the nodes log as HTCondor writes them, ``htc q`` grouping a DAG job with
its nodes, and ``htc rm`` of the DAG job removing its nodes (OtherJobRemoveRequirements).
"""

from __future__ import annotations

import sys
from pathlib import Path

import htcondor2
import pytest

from htc.cli.main import main
from htc.wire import messages as m
from poolutil import Pool, wait_for

pytestmark = pytest.mark.slow

T = htcondor2.JobEventType
HTC = Path(sys.executable).parent / "htc"


@pytest.fixture
def pool(monkeypatch):
    p = Pool("COLLECTOR, SCHEDD")
    monkeypatch.setenv("HTC_HOME", str(p.home))
    monkeypatch.delenv("HTC_CONFIG", raising=False)
    try:
        yield p.start()
    finally:
        p.stop()


def test_a_scheduler_universe_job_submits_node_jobs_to_its_own_pool(pool):
    # Like DAGMan: the job gets nothing of the schedd's environment but HTC_HOME (HTCondor passes
    # the schedd's address file), and submits its node with the attributes DAGMan sets.
    (pool.work / "node.sub").write_text(
        "universe = local\nexecutable = /bin/echo\narguments = node A\noutput = node.out\n"
        "log = node.log\ndagman_log = dag.nodes.log\nsubmit_event_notes = DAG Node: A\n"
        '+DAGManNodesMask = "0,1,2,4,5,7,9,10,11,12,13,16,17,24,27"\n+DAGNodeName = "A"\nqueue\n')
    boss = pool.work / "dagman.sh"
    boss.write_text(f'#!/bin/sh\n{HTC} submit -a "+DAGManJobId = ${{CONDOR_ID%.*}}" node.sub || exit 1\n'
                    "while [ ! -s node.out ]; do sleep 0.1; done\nexit 0\n")
    boss.chmod(0o755)
    cluster = pool.submit(f"universe = scheduler\nexecutable = {boss}\nlog = dag.dagman.log\n"
                          "error = dagman.err\nqueue\n").cluster_id
    events = pool.log_events(pool.work / "dag.dagman.log", 3, timeout=40)
    assert [e.type for e in events] == [T.SUBMIT, T.EXECUTE, T.JOB_TERMINATED], (pool.work / "dagman.err").read_text()
    assert events[2]["ReturnValue"] == 0
    nodes = pool.log_events(pool.work / "dag.nodes.log", 3)
    assert [e.type for e in nodes] == [T.SUBMIT, T.EXECUTE, T.JOB_TERMINATED]
    assert nodes[0]["LogNotes"] == "DAG Node: A"
    assert (pool.work / "node.out").read_text() == "node A\n"
    from htc.client import history
    [node] = history(f"DAGManJobId == {cluster}", path=pool.home / "spool" / "job_queue.db")
    assert node["DAGNodeName"] == "A"


def run(capsys, *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    return status, capsys.readouterr().out


def test_htc_q_groups_the_dag_job_with_its_nodes_and_rm_of_it_removes_them(pool, capsys):
    boss = pool.work / "dagman.sh"
    boss.write_text("#!/bin/sh\nwhile true; do sleep 0.1; done\n")
    boss.chmod(0o755)
    dag = pool.submit(f"universe = scheduler\nexecutable = {boss}\nlog = dag.dagman.log\n"
                      '+OtherJobRemoveRequirements = "DAGManJobId =?= $(Cluster)"\nqueue\n').cluster_id
    pool.log_events(pool.work / "dag.dagman.log", 2)
    for name in ("A", "B"):  # no startd: the nodes stay idle
        pool.submit(f"executable = /bin/true\nlog = dag.nodes.log\n+DAGManJobId = {dag}\n"
                    f'+DAGNodeName = "{name}"\nsubmit_event_notes = DAG Node: {name}\nqueue\n')
    status, out = run(capsys, "q")
    assert status == 0
    rows = [line for line in out.splitlines() if f"DAG: {dag}" in line]
    assert len(rows) == 1, out
    assert f"{dag + 1}.0 ... {dag + 2}.0" in rows[0], out
    status, out = run(capsys, "rm", str(dag))
    assert status == 0
    events = pool.log_events(pool.work / "dag.nodes.log", 4)
    assert [e.type for e in events] == [T.SUBMIT, T.SUBMIT, T.JOB_ABORTED, T.JOB_ABORTED]
    assert [e["LogNotes"] for e in events[:2]] == ["DAG Node: A", "DAG Node: B"]
    pool.log_events(pool.work / "dag.dagman.log", until=lambda evs: bool(evs) and evs[-1].type == T.JOB_ABORTED)
    wait_for(lambda: pool.jobs("", "ClusterId") == [], what="the DAG job and its nodes to leave the queue")
    assert pool.send(m.QueryJobs(constraint="")).ads == ()


def test_getenv_and_environment_reach_the_job_and_nothing_else_of_the_schedd(pool, capsys, monkeypatch):
    monkeypatch.setenv("DAG_TEST_WANTED", "from the submitter")
    monkeypatch.setenv("DAG_TEST_UNWANTED", "not this")
    monkeypatch.chdir(pool.work)
    exe = pool.work / "env.sh"
    exe.write_text('#!/bin/sh\necho "$DAG_TEST_WANTED|$DAG_TEST_UNWANTED|$SET_HERE|$CONDOR_ID|$HTC_HOME"\n')
    exe.chmod(0o755)
    (pool.work / "env.sub").write_text("universe = scheduler\nexecutable = env.sh\ngetenv = DAG_TEST_WANTED\n"
                                       'environment = "SET_HERE=yes"\noutput = env.out\nlog = env.log\nqueue\n')
    status, out = run(capsys, "submit", "env.sub")
    assert status == 0, out
    pool.log_events(pool.work / "env.log", 3)
    assert (pool.work / "env.out").read_text() == f"from the submitter||yes|1.0|{pool.home}\n"
