"""Node status file, jobstate log lines, DOT file and metrics JSON, in HTCondor's formats."""

from __future__ import annotations

import json

from htc.dag.engine import (
    AppendJobstate, DagRun, JobEvent, Options, RemoveRequested, Start, Tick, WriteFile,
)
from htc.dag.engine.reports import classad_string, ctime, jobstate_internal, jobstate_line
from htc.dag.model import DotSpec, Node, NodeKind, NodeStatusSpec
from htc.eventlog import events as ev
from tests.dag_engine_sim import HOLD, Sim, dag_of, final, script

DIAMOND = "A->B A->C B->D C->D"


def status_files(sim, path="/d/status"):
    return [a.text for a in sim.of(WriteFile) if a.path == path]


def block(text, node):
    for part in text.split("[\n")[1:]:
        if f'  Node = "{node}";' in part:
            return part
    raise AssertionError(f"no block for {node}")


def with_status(spec=DIAMOND, min_update=0, always=False, **nodes):
    dag = dag_of(spec, **nodes)
    dag.node_status = NodeStatusSpec("/d/status", min_update, always)
    return dag


# --- helpers ----------------------------------------------------------------------------------
def test_ctime_is_c_ctime_in_utc():
    assert ctime(0) == "Thu Jan  1 00:00:00 1970"
    assert ctime(1704164645) == "Tue Jan  2 03:04:05 2024"
    assert ctime(1704941045) == "Thu Jan 11 02:44:05 2024"


def test_classad_string_escapes():
    assert classad_string('a "b" \\c') == '"a \\"b\\" \\\\c"'


def test_jobstate_line_formats():
    assert jobstate_line(1700000000.7, "A", "SUBMIT", "12.0", 3) == \
        "1700000000 A SUBMIT 12.0 - - 3"
    assert jobstate_internal(5, "DAGMAN_FINISHED 0") == "5 INTERNAL *** DAGMAN_FINISHED 0 ***"


# --- node status file ---------------------------------------------------------------------------
def test_status_file_blocks_and_final_state():
    sim = Sim(with_status(A={"done": True}), Options(dag_id=5), exits={"C": [1]})
    sim.go()
    last = status_files(sim)[-1]
    assert last.startswith('[\n  Type = "DagStatus";\n  DagFiles = {\n    "/d/test.dag"\n  };\n')
    assert '  DagStatus = 6; /* "STATUS_ERROR (failed)" */\n' in last
    for line in ("NodesTotal = 4;", "NodesDone = 2;", "NodesFutile = 1;", "NodesFailed = 1;",
                 "NodesQueued = 0;", "JobProcsIdle = 0; /* includes held */"):
        assert f"  {line}\n" in last
    assert block(last, "A").endswith(
        '  NodeStatus = 5; /* "STATUS_DONE" */\n  StatusDetails = "User defined as DONE";\n'
        "  RetryCount = 0;\n  JobProcsQueued = 0;\n  JobProcsHeld = 0;\n]\n")
    assert 'StatusDetails = "Job proc (101.0.0) failed with status 1";' in block(last, "C")
    assert 'StatusDetails = "Had an ancestor node fail";' in block(last, "D")
    assert last.endswith('  NextUpdate = 0; /* "none" */\n]\n')
    assert '[\n  Type = "StatusEnd";\n  EndTime = ' in last


def test_status_file_while_running():
    sim = Sim(with_status(min_update=30), auto=False)
    sim.go()
    first = status_files(sim)[0]
    assert '  DagStatus = 3; /* "STATUS_SUBMITTED ()" */\n' in first
    assert 'NodeStatus = 3; /* "STATUS_SUBMITTED" */' in block(first, "A")
    assert 'NodeStatus = 0; /* "STATUS_NOT_READY" */' in block(first, "B")
    assert "  NextUpdate = 1030; /* " in first


def test_status_file_success():
    sim = Sim(with_status())
    sim.go()
    assert '  DagStatus = 5; /* "STATUS_DONE (success)" */\n' in status_files(sim)[-1]


def test_status_file_respects_the_minimum_interval():
    sim = Sim(with_status(min_update=60), auto=False)
    sim.feed(Start())
    while sim.pending:
        sim.step()
    assert len(status_files(sim)) == 1
    sim.feed(sim.job_end(100, 0, 0))
    assert len(status_files(sim)) == 1
    assert sim.run.next_deadline() == 1060
    sim.t = 1060
    sim.feed(Tick())
    assert len(status_files(sim)) == 2


def test_status_file_always_update_ignores_the_interval():
    sim = Sim(with_status(min_update=0, always=True), auto=False)
    sim.go()
    n = len(status_files(sim))
    sim.feed(Tick())
    assert len(status_files(sim)) == n + 1


def test_status_file_after_rm_marks_running_nodes_error():
    sim = Sim(with_status(), auto=False)
    sim.go()
    sim.feed(RemoveRequested())
    last = status_files(sim)[-1]
    assert 'DagStatus = 6; /* "STATUS_ERROR (removed)" */' in last
    assert 'StatusDetails = "Was STATUS_SUBMITTED";' in block(last, "A")
    assert "NodesFailed = 1;" in last


def test_status_file_held_procs():
    sim = Sim(with_status("A"), exits={"A": [HOLD]})
    sim.go()
    assert "  JobProcsHeld = 1;\n" in block(status_files(sim)[-1], "A")


# --- jobstate log -----------------------------------------------------------------------------
def test_jobstate_log_lines():
    dag = dag_of("A", A={"scripts": {"PRE": script("PRE"), "POST": script("POST")}})
    dag.jobstate_log = "/d/jobstate.log"
    sim = Sim(dag, Options(dag_id=12))
    sim.go()
    lines = [a.line.split(" ", 1)[1] for a in sim.of(AppendJobstate)]
    assert lines == ["INTERNAL *** DAGMAN_STARTED 12.0 ***",
                     "A PRE_SCRIPT_STARTED - - - 1",
                     "A PRE_SCRIPT_SUCCESS - - - 1",
                     "A SUBMIT 100.0 - - 1",
                     "A JOB_TERMINATED 100.0 - - 1",
                     "A JOB_SUCCESS 0 - - 1",
                     "A POST_SCRIPT_STARTED 100.0 - - 1",
                     "A POST_SCRIPT_SUCCESS 100.0 - - 1",
                     "INTERNAL *** DAGMAN_FINISHED 0 ***"]


def test_jobstate_failures_and_sequence_numbers():
    dag = dag_of("A B", A={"retry": 1})
    dag.jobstate_log = "/d/js"
    sim = Sim(dag, exits={"A": [2, 0]})
    sim.go()
    lines = [a.line.split(" ", 1)[1] for a in sim.of(AppendJobstate)]
    assert "A JOB_FAILURE 2 - - 1" in lines
    assert "B SUBMIT 101.0 - - 2" in lines
    assert "A SUBMIT 102.0 - - 3" in lines          # a retry gets a new number


def test_no_jobstate_lines_without_jobstate_log():
    sim = Sim(dag_of("A"))
    sim.go()
    assert not sim.of(AppendJobstate)


# --- DOT --------------------------------------------------------------------------------------
def test_dot_file_at_start():
    dag = dag_of("A->B")
    dag.dot = DotSpec("/d/dag.dot")
    run = DagRun(dag)
    out = run.handle(Start(), 0)
    dot = [a for a in out if isinstance(a, WriteFile)][0]
    assert dot.path == "/d/dag.dot"
    assert dot.text == ('digraph DAG {\n    label="DAGMan Job status at Thu Jan  1 00:00:00 '
                        '1970";\n\n    "A" [shape=ellipse label="A (I)"];\n'
                        '    "B" [shape=ellipse label="B (I)"];\n\n    "A" -> "B";\n}\n')


def test_dot_update_tracks_states_and_include_text():
    dag = dag_of("A->B")
    dag.dot = DotSpec("/d/dag.dot", update=True, include="/d/inc.dot")
    sim = Sim(dag, Options(dot_include_text="size=1;\n"))
    sim.go()
    texts = [a.text for a in sim.of(WriteFile) if a.path == "/d/dag.dot"]
    assert len(texts) > 2
    assert '"A" [shape=ellipse label="A (I)"];' in texts[0]
    assert '"A" [shape=ellipse label="A (R)" peripheries=2];' in texts[1]
    assert '"B" [shape=ellipse label="B (Done)" style=bold];' in texts[-1]
    assert ("// Beginning of commands included from /d/inc.dot.\nsize=1;\n"
            "// End of commands included from /d/inc.dot.\n\n") in texts[0]


def test_dot_dont_overwrite_numbers_files():
    dag = dag_of("A")
    dag.dot = DotSpec("/d/dag.dot", update=True, overwrite=False)
    sim = Sim(dag)
    sim.go()
    paths = [a.path for a in sim.of(WriteFile) if "dag.dot" in a.path]
    assert paths[:2] == ["/d/dag.dot.0", "/d/dag.dot.1"]


def test_dot_error_node_is_a_box():
    dag = dag_of("A")
    dag.dot = DotSpec("/d/dag.dot", update=True)
    sim = Sim(dag, exits={"A": [1]})
    sim.go()
    assert '"A" [shape=box label="A (E)"];' in \
        [a.text for a in sim.of(WriteFile) if a.path == "/d/dag.dot"][-1]


# --- metrics ----------------------------------------------------------------------------------
def test_metrics_json():
    dag = final(dag_of("A->B C"))
    dag.add_node(Node("S", kind=NodeKind.SERVICE, submit_file="s", dir="/d"))
    dag.add_node(Node("G", kind=NodeKind.SUBDAG, submit_file="g.dag", dir="/d"))
    sim = Sim(dag, Options(dag_id=33, rescue_used=2), exits={"A": [1], "S": [HOLD]})
    sim.go()
    text = [a.text for a in sim.of(WriteFile) if a.path == "/d/test.dag.metrics"][0]
    assert text.startswith('{\n    "client":"condor_dagman",\n    "version":"')
    m = json.loads(text)
    assert m["type"] == "metrics" and m["metrics_version"] == 2
    assert m["exitcode"] == 0 and m["dagman_id"] == "33" and m["rescue_dag_number"] == 2
    assert m["has_final_node"] is True
    assert (m["nodes"], m["nodes_failed"], m["nodes_succeeded"]) == (4, 1, 2)
    assert (m["dag_nodes"], m["dag_nodes_succeeded"]) == (1, 1)
    assert m["service_nodes"] == 1 and m["DagStatus"] == 2
    assert m["total_nodes"] == 5 and m["total_nodes_run"] == 4
    assert m["duration"] == m["end_time"] - m["start_time"]
    assert text.endswith('    "DagStatus":2\n}\n')


def test_jobstate_event_names_are_ulog_names():
    dag = dag_of("A")
    dag.jobstate_log = "/d/js"
    sim = Sim(dag, auto=False)
    sim.go()
    sim.feed(JobEvent(ev.ExecuteEvent(cluster=100)))
    sim.feed(JobEvent(ev.JobHeldEvent(cluster=100)))
    names = [a.line.split()[2] for a in sim.of(AppendJobstate)]
    assert names[-2:] == ["EXECUTE", "JOB_HELD"]
