"""A 54-node DAG of splices and SUBDAG EXTERNAL nodes (the shapes of the conformance files
job_dagman_subdag-A-upper.dag and job_dagman_splice-cat.dag) runs on a real pool: each
SUBDAG node is a nested DAG manager job whose .condor.sub the manager writes as
``condor_submit_dag -no_submit`` does."""

from __future__ import annotations

import pytest

from dag_pool import DagDir, dag_pool
from htc.eventlog import events as ev

pytestmark = pytest.mark.slow

#: a fan-out/fan-in of 10 nodes, spliced in several times
FAN = ("JOB top node.sub\n" + "".join(f"JOB m{i} node.sub\nCATEGORY m{i} mid\n" for i in range(8)) +
       "JOB bot node.sub\nPARENT top CHILD " + " ".join(f"m{i}" for i in range(8)) +
       "\nPARENT " + " ".join(f"m{i}" for i in range(8)) + " CHILD bot\nMAXJOBS mid 2\n")
#: 21 nodes: two splices of FAN in a row, then one node
LOWER = "SPLICE P fan.dag\nSPLICE Q fan.dag\nJOB last node.sub\nPARENT P CHILD Q\nPARENT Q CHILD last\n"
#: job_dagman_subdag-A-upper.dag's shape, plus a splice after D
UPPER = ("Job A node.sub\nSUBDAG EXTERNAL B lower1.dag\nSubdag external C lower2.dag\nJob D node.sub\n"
         "SPLICE U fan.dag\nPARENT A CHILD B C\nPARENT B C CHILD D\nPARENT D CHILD U\n")


@pytest.fixture
def d(monkeypatch):
    with dag_pool() as pool:
        yield DagDir(pool, monkeypatch)


def test_splices_and_subdags_run_every_node_once(d):
    d.write("fan.dag", FAN)
    d.write("lower1.dag", LOWER)
    d.write("lower2.dag", LOWER)
    d.write("upper.dag", UPPER)
    cluster = d.submit("upper.dag")
    d.wait("upper.dag", cluster, timeout=400)
    assert d.exit_status("upper.dag") == 0, d.dagman_out("upper.dag")
    runs = d.runs()
    assert sum(runs.values()) == 54
    assert runs["A"] == runs["D"] == runs["U+top"] == runs["U+m7"] == 1
    assert runs["P+top"] == runs["Q+bot"] == runs["last"] == 2   # once in each subdag
    # the nested managers were jobs of the upper DAG, with their own files
    for lower in ("lower1.dag", "lower2.dag"):
        assert "universe\t= scheduler" in (d.work / f"{lower}.condor.sub").read_text()
        assert d.exit_status(lower) == 0
    order = d.order("upper.dag", ev.SubmitEvent)
    assert order[0] == "A" and set(order[1:3]) == {"B", "C"} and order[3] == "D"
    # MAXJOBS mid 2 held inside each spliced fan
    for dag in ("lower1.dag", "upper.dag"):
        live = peak = 0
        for node, event in d.node_events(dag):
            if "+m" not in node:
                continue
            live += isinstance(event, ev.SubmitEvent) - isinstance(event, ev.JobTerminatedEvent)
            peak = max(peak, live)
        assert peak <= 2
