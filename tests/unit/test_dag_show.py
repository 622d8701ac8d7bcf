"""htc dag show's renderer: DOT text, pictures, and node states read from a run's files."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from htc.dag.model import Dag, Node, NodeKind, NodeStatusSpec, Script
from htc.dag.show import COLOURS, dot_text, node_states, register_show, render
from htc.errors import UsageError
from htc.eventlog import (
    EventLogWriter, ExecuteEvent, JobTerminatedEvent, PostScriptTerminatedEvent, PreSkipEvent, SubmitEvent,
)


def diamond(tmp_path: Path) -> Dag:
    dag = Dag(file=str(tmp_path / "diamond.dag"))
    for name in "ABCD":
        dag.add_node(Node(name=name, submit_file=str(tmp_path / "x.sub"), dir=str(tmp_path)))
    dag.add_node(Node(name="F", kind=NodeKind.FINAL, submit_file=str(tmp_path / "x.sub")))
    dag.add_edge("A", "B")
    dag.add_edge("A", "C")
    dag.add_edge("B", "D")
    dag.add_edge("C", "D", weak=True)
    return dag


def test_dot_text_has_every_node_and_edge_weak_ones_dashed_and_states_coloured(tmp_path):
    text = dot_text(diamond(tmp_path), {"A": "DONE", "B": "ERROR"})
    assert text.startswith('digraph "diamond.dag" {')
    assert '"A" [label="A\\nDONE", shape="ellipse", fillcolor="palegreen"];' in text
    assert f'fillcolor="{COLOURS["ERROR"]}"' in text
    assert '"A" -> "B";' in text and '"A" -> "C";' in text and '"B" -> "D";' in text
    assert '"C" -> "D" [style=dashed];' in text
    assert '"F" [label="F\\n(FINAL)", shape="doubleoctagon"];' in text
    assert text.rstrip().endswith("}")


def test_dot_text_quotes_names_that_dot_would_misread(tmp_path):
    dag = Dag(file=str(tmp_path / "q.dag"))
    dag.add_node(Node(name='run:0"x', noop=True))
    text = dot_text(dag)
    assert '"run:0\\"x" [label="run:0\\"x", shape="ellipse", style="filled,dashed"];' in text


def test_states_of_a_dag_that_never_ran_are_not_ready_or_done(tmp_path):
    dag = diamond(tmp_path)
    dag.nodes["A"].done = True
    assert node_states(dag) == {"A": "DONE", "B": "NOT_READY", "C": "NOT_READY", "D": "NOT_READY", "F": "NOT_READY"}


def _log(dag: Dag, *events) -> None:
    with EventLogWriter(dag.file + ".nodes.log") as log:
        log.write(*events)


def test_states_follow_the_nodes_log_through_its_dag_node_notes(tmp_path):
    dag = diamond(tmp_path)
    dag.nodes["C"].scripts["POST"] = Script("POST", "post.sh")
    _log(dag,
         SubmitEvent(cluster=10, log_notes="DAG Node: A"), ExecuteEvent(cluster=10),
         JobTerminatedEvent(cluster=10, return_value=0),
         SubmitEvent(cluster=11, log_notes="DAG Node: B"), JobTerminatedEvent(cluster=11, return_value=3),
         SubmitEvent(cluster=12, log_notes="DAG Node: C"), JobTerminatedEvent(cluster=12, return_value=0),
         SubmitEvent(cluster=13, log_notes="DAG Node: D"),
         SubmitEvent(cluster=99), JobTerminatedEvent(cluster=99, return_value=1))  # not a node's job
    assert node_states(dag) == {"A": "DONE", "B": "ERROR", "C": "POSTRUN", "D": "SUBMITTED", "F": "NOT_READY"}
    _log(dag, PostScriptTerminatedEvent(cluster=12, return_value=0, dag_node_name="C"))
    assert node_states(dag)["C"] == "DONE"


def test_a_multi_job_node_is_done_when_all_its_jobs_ended(tmp_path):
    dag = diamond(tmp_path)
    _log(dag, SubmitEvent(cluster=5, proc=0, log_notes="DAG Node: A"),
         SubmitEvent(cluster=5, proc=1, log_notes="DAG Node: A"), JobTerminatedEvent(cluster=5, proc=0))
    assert node_states(dag)["A"] == "SUBMITTED"
    _log(dag, JobTerminatedEvent(cluster=5, proc=1))
    assert node_states(dag)["A"] == "DONE"


def test_pre_skip_marks_the_node_done(tmp_path):
    dag = diamond(tmp_path)
    _log(dag, PreSkipEvent(cluster=-1, dag_node_name="B"))
    assert node_states(dag)["B"] == "DONE"


def test_the_rescue_dag_gives_done_and_failed_nodes_and_a_finished_run_makes_the_rest_futile(tmp_path):
    dag = diamond(tmp_path)
    Path(dag.file + ".rescue001").write_text("DONE B\n")
    Path(dag.file + ".rescue002").write_text(
        "# Rescue DAG file, created after running\n#   the diamond.dag DAG file\n# Nodes that failed: 1\n"
        "#   B,<ENDLIST>\n\nDONE A\n")
    assert node_states(dag) == {"A": "DONE", "B": "ERROR", "C": "NOT_READY", "D": "NOT_READY", "F": "NOT_READY"}
    Path(dag.file + ".dagman.out").write_text("... (condor_DAGMAN) pid 12 EXITING WITH STATUS 1\n")
    assert node_states(dag)["D"] == "FUTILE"
    assert node_states(dag)["C"] == "NOT_READY"  # not below B


def test_the_node_status_file_wins_when_the_dag_names_one(tmp_path):
    dag = diamond(tmp_path)
    status = tmp_path / "diamond.status"
    dag.node_status = NodeStatusSpec(str(status))
    _log(dag, SubmitEvent(cluster=10, log_notes="DAG Node: A"))
    status.write_text('[\n  Type = "DagStatus";\n  DagStatus = 3; /* "STATUS_SUBMITTED" */\n]\n'
                      '[\n  Type = "NodeStatus";\n  Node = "A";\n  NodeStatus = 5; /* "STATUS_DONE" */\n]\n'
                      '[\n  Type = "NodeStatus";\n  Node = "B";\n  NodeStatus = 4; /* "STATUS_POSTRUN" */\n]\n'
                      '[\n  Type = "StatusEnd";\n]\n')
    assert node_states(dag) == {"A": "DONE", "B": "POSTRUN", "C": "NOT_READY", "D": "NOT_READY", "F": "NOT_READY"}


def test_render_writes_dot_text(tmp_path):
    assert render(diamond(tmp_path), tmp_path / "g.dot", {"A": "DONE"}) == "dot"
    assert '"A" -> "B";' in (tmp_path / "g.dot").read_text()


def test_render_draws_a_png_with_matplotlib_when_graphviz_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no 'dot' program here
    assert render(diamond(tmp_path), tmp_path / "g.png", {"A": "DONE", "B": "ERROR"}) == "matplotlib"
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_register_show_adds_the_subcommand_with_its_options():
    parser = argparse.ArgumentParser()
    register_show(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(["show", "x.dag", "-o", "x.png"])
    assert (args.dag_file, args.output, args.no_states) == ("x.dag", "x.png", False)
    assert args.func.__name__ == "show"
    assert os.path.basename(parser.parse_args(["show", "y.dag"]).dag_file) == "y.dag"


def _htc(*argv: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from htc.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def test_htc_dag_show_prints_dot_with_states_or_without_and_draws_files(tmp_path, monkeypatch):
    (tmp_path / "d.dag").write_text("JOB A x.sub\nJOB B x.sub\nPARENT A CHILD B\n")
    (tmp_path / "d.dag.rescue001").write_text("# Nodes that failed: 1\n#   B,<ENDLIST>\nDONE A\n")
    status, out, _ = _htc("dag", "show", str(tmp_path / "d.dag"))
    assert status == 0
    assert '"A" [label="A\\nDONE"' in out and '"B" [label="B\\nERROR"' in out and '"A" -> "B";' in out
    status, out, _ = _htc("dag", "show", "--no-states", str(tmp_path / "d.dag"))
    assert status == 0 and '"A" [label="A", shape="ellipse"];' in out
    monkeypatch.setenv("PATH", str(tmp_path))  # no graphviz: matplotlib draws
    status, out, _ = _htc("dag", "show", str(tmp_path / "d.dag"), "-o", str(tmp_path / "d.svg"))
    assert status == 0
    assert out.strip() == f"{tmp_path / 'd.svg'}: 2 nodes, 1 edges (1 DONE, 1 ERROR), drawn with matplotlib"
    assert "<svg" in (tmp_path / "d.svg").read_text()


def test_noop_nodes_which_the_log_never_names_are_done_once_their_parents_are(tmp_path):
    dag = Dag(file=str(tmp_path / "n.dag"))
    for name in ("A", "J1", "J2", "B"):
        dag.add_node(Node(name=name, noop=name.startswith("J")))
    dag.add_node(Node(name="F", kind=NodeKind.FINAL, noop=True))
    dag.add_edge("A", "J1")
    dag.add_edge("J1", "J2")
    dag.add_edge("J2", "B")
    assert set(node_states(dag).values()) == {"NOT_READY"}  # never ran: nothing inferred
    _log(dag, SubmitEvent(cluster=1, log_notes="DAG Node: A"))
    assert node_states(dag) == {"A": "SUBMITTED", "J1": "NOT_READY", "J2": "NOT_READY", "B": "NOT_READY",
                                "F": "NOT_READY"}
    _log(dag, JobTerminatedEvent(cluster=1, return_value=0))
    assert node_states(dag) == {"A": "DONE", "J1": "DONE", "J2": "DONE", "B": "NOT_READY", "F": "NOT_READY"}
    Path(dag.file + ".dagman.out").write_text("(condor_DAGMAN) pid 1 EXITING WITH STATUS 0\n")
    assert node_states(dag)["F"] == "DONE"
