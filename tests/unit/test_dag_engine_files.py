"""The engine runs real DAG files (HTCondor's test suite, htcondor2.dags output) as DAGMan does."""

from __future__ import annotations

from pathlib import Path

import pytest

from htc.dag.engine import DagRun, Exit, NodeStatus, Options, SubmitNode, WriteFile
from htc.dag.engine.rescue import apply_rescue
from htc.dag.parser import parse_dag, parse_dag_text
from htc.errors import UsageError
from tests.dag_engine_sim import Sim

CONFORMANCE = Path("/work/shared/conformance/dagman")
HERE = Path(__file__).resolve().parents[2]
FILES = sorted(CONFORMANCE.glob("htcondor-tests/*.dag")) + sorted(
    CONFORMANCE.glob("htcondor2-dags/*/*.dag"))


def runnable():
    """Every conformance DAG file the parser takes and that does not say REJECT."""
    out = []
    for path in FILES:
        try:
            dag = parse_dag(path)
        except UsageError:
            continue                      # a file meant to be refused (parser's own tests)
        if dag.reject is None and "splice" not in path.name.split("-")[-1]:
            out.append((path, dag))
    return out


RUNNABLE = runnable()


def test_most_conformance_files_are_runnable():
    assert len(FILES) >= 20
    assert len(RUNNABLE) >= 15, [p.name for p, _ in RUNNABLE]


@pytest.mark.parametrize("path", [p for p, _ in RUNNABLE], ids=lambda p: p.name)
def test_every_node_runs_after_its_parents_and_the_dag_ends(path):
    dag = parse_dag(path)
    sim = Sim(dag, Options(dag_id=1))
    order: list[str] = []
    original = sim.run.handle

    def watch(event, now):
        out = original(event, now)
        for a in out:
            if isinstance(a, SubmitNode):
                for parent in dag.parents(a.node):
                    assert sim.run.node_status(parent) in (NodeStatus.DONE, NodeStatus.ERROR)
                order.append(a.node)
        return out

    sim.run.handle = watch
    exit = sim.go()
    assert exit is not None
    aborts_on_success = any(n.abort_status == 0 for n in dag.nodes.values())
    if not aborts_on_success:
        assert exit.code == 0, (path.name, sim.run.counts())
        for name, node in dag.nodes.items():
            assert sim.run.node_status(name) is NodeStatus.DONE, name
            if not node.done:
                assert name in order, name


def test_abort_a_file_aborts_with_return_0_when_c_exits_5():
    dag = parse_dag(CONFORMANCE / "htcondor-tests/job_dagman_abort-A.dag")
    sim = Sim(dag, exits={"C": [5]})
    assert sim.go() == Exit(0, 0)
    assert sim.submits == ["A", "B", "C"]               # RETRY 3 is overridden
    assert sim.run.node_status("D") is NodeStatus.FUTILE


def test_final_a_file_runs_final_with_dag_status_after_a_failure():
    dag = parse_dag(CONFORMANCE / "htcondor-tests/job_dagman_final-A.dag")
    sim = Sim(dag, exits={"A_A": [1]})
    assert sim.go() == Exit(0, 2)
    assert [a for (n, k, a) in sim.scripts if n == "A_C" and k == "PRE"] == \
        [["A_C", "Pre", "2", "1", "0"]]
    assert [a for (n, k, a) in sim.scripts if n == "A_C" and k == "POST"] == \
        [["A_C", "Post", "2", "1", "0"]]
    assert sim.run.node_status("A_B") is NodeStatus.FUTILE


def test_pre_skip_a_file_skips_the_jobs():
    dag = parse_dag(CONFORMANCE / "htcondor-tests/job_dagman_pre_skip-A.dag")
    sim = Sim(dag, script_exits={("A", "PRE"): [2], ("B", "PRE"): [2]})
    assert sim.go() == Exit(0, 0)
    assert sim.submits == []


def test_unlessexit_file_does_not_retry_on_3():
    dag = parse_dag(CONFORMANCE / "htcondor-tests/job_dagman_unlessexit.dag")
    sim = Sim(dag, script_exits={("NODERET", "POST"): [3, 0]})
    assert sim.go().code == 1
    assert sim.submits == ["NODERET"]
    sim = Sim(parse_dag(CONFORMANCE / "htcondor-tests/job_dagman_unlessexit.dag"),
              script_exits={("NODERET", "POST"): [4, 0]})
    assert sim.go().code == 0 and sim.submits == ["NODERET", "NODERET"]


def test_node_prio_file_submits_by_priority():
    dag = parse_dag(CONFORMANCE / "htcondor-tests/job_dagman_node_prio.dag")
    sim = Sim(dag, Options(max_jobs=1))
    sim.go()
    ready_at_start = [n for n in dag.nodes if not dag.parents(n)]
    firsts = [n for n in sim.submits if n in ready_at_start]
    prios = [dag.nodes[n].priority for n in firsts]
    assert prios == sorted(prios, reverse=True)


def test_rescue_of_a_parsed_file_round_trips(tmp_path):
    text = "JOB A a.sub\nJOB B b.sub\nJOB C c.sub\nPARENT A CHILD B C\nRETRY B 2\n"
    dag = parse_dag_text(text, str(tmp_path / "r.dag"))
    sim = Sim(dag, Options(reset_retries_upon_rescue=False), exits={"B": [1, 1, 1]})
    assert sim.go().code == 1
    rescue = [a for a in sim.of(WriteFile) if a.path.endswith(".rescue001")][0]
    assert "DONE A\n# 2 of 2 retries already performed; 0 remaining\nRETRY B 0\nDONE C\n" \
        in rescue.text
    again = parse_dag_text(text, str(tmp_path / "r.dag"))
    apply_rescue(again, rescue.text, rescue.path)
    sim = Sim(again, exits={"B": [1]})
    assert sim.go().code == 1 and sim.submits == ["B"]     # no retries left


def test_reject_dag_is_refused():
    dag = parse_dag(CONFORMANCE / "htcondor-tests/job_dagman_reject-1.dag")
    assert dag.reject is not None
    with pytest.raises(UsageError, match=r"job_dagman_reject-1.dag:\d+: .*REJECT"):
        DagRun(dag)
