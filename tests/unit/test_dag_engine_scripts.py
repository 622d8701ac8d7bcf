"""PRE / POST / HOLD scripts: who decides, PRE_SKIP, DEFER, the $ macros, $RETURN values."""

from __future__ import annotations

from htc.dag.engine import (
    JobEvent, NodeStatus, Options, RunScript, ScriptExited, Tick, WriteNodeEvent,
)
from htc.dag.engine.noderun import NodeRun
from htc.dag.engine.scripts import DagCounts, expand_args
from htc.eventlog import events as ev
from tests.dag_engine_sim import ABORT, HOLD, SUBMIT_FAIL, Sim, dag_of, script

ALL = ["$JOB", "$NODE", "$RETRY", "$MAX_RETRIES", "$DAG_STATUS", "$FAILED_COUNT",
       "$FUTILE_COUNT", "$DONE_COUNT", "$QUEUED_COUNT", "$NODE_COUNT", "$DAGID"]
POST_ONLY = ["$JOBID", "$CLUSTERID", "$JOB_COUNT", "$SUCCESS", "$RETURN", "$EXIT_CODES",
             "$EXIT_CODE_COUNTS", "$EXIT_CODE_LIST", "$PRE_SCRIPT_RETURN", "$JOB_ABORT_COUNT"]


def scripted(spec="A", **node):
    return dag_of(spec, A={"scripts": node.pop("scripts"), **node})


def args_of(sim, node, kind):
    return [a for (n, k, a) in sim.scripts if n == node and k == kind]


# --- who decides ------------------------------------------------------------------------------
def test_pre_runs_before_the_job_and_post_after():
    sim = Sim(scripted(scripts={"PRE": script("PRE"), "POST": script("POST")}))
    sim.go()
    kinds = [type(a).__name__ + ":" + getattr(a, "kind", "") for a in sim.actions
             if type(a).__name__ in ("RunScript", "SubmitNode")]
    assert kinds == ["RunScript:PRE", "SubmitNode:", "RunScript:POST"]
    assert sim.exit.code == 0


def test_failed_pre_fails_the_node_without_job_or_post():
    sim = Sim(scripted(scripts={"PRE": script("PRE"), "POST": script("POST")}),
              script_exits={("A", "PRE"): [4]})
    assert sim.go().code == 1
    assert sim.submits == [] and not args_of(sim, "A", "POST")
    assert sim.run.nodes["A"].retval == 4


def test_pre_killed_by_a_signal_returns_minus_the_signal():
    sim = Sim(scripted(scripts={"PRE": script("PRE")}), script_exits={("A", "PRE"): [-15]})
    sim.go()
    assert sim.run.nodes["A"].retval == -15
    assert "signal 15" in sim.run.nodes["A"].error


def test_post_success_turns_a_failed_job_into_success():
    sim = Sim(scripted(scripts={"POST": script("POST")}), exits={"A": [1]})
    assert sim.go().code == 0
    assert sim.status("A") == NodeStatus.DONE


def test_post_failure_turns_a_successful_job_into_failure():
    sim = Sim(scripted(scripts={"POST": script("POST")}), script_exits={("A", "POST"): [2]})
    assert sim.go().code == 1
    assert sim.run.nodes["A"].retval == 2


def test_always_run_post_runs_post_after_a_failed_pre_with_return_minus_1004():
    dag = scripted(scripts={"PRE": script("PRE"), "POST": script("POST", "$RETURN",
                                                                   "$PRE_SCRIPT_RETURN")})
    sim = Sim(dag, Options(always_run_post=True), script_exits={("A", "PRE"): [3]})
    assert sim.go().code == 0                    # the POST (0) ran last: it decides
    assert args_of(sim, "A", "POST") == [["-1004", "3"]]
    assert sim.submits == []


def test_without_always_run_post_post_is_skipped_after_a_failed_pre():
    dag = scripted(scripts={"PRE": script("PRE"), "POST": script("POST")})
    sim = Sim(dag, Options(always_run_post=False), script_exits={("A", "PRE"): [3]})
    assert sim.go().code == 1
    assert not args_of(sim, "A", "POST")


def test_pre_skip_marks_the_node_done_and_skips_job_and_post():
    dag = scripted("A->B", scripts={"PRE": script("PRE"), "POST": script("POST")}, pre_skip=7)
    sim = Sim(dag, script_exits={("A", "PRE"): [7]})
    assert sim.go().code == 0
    assert sim.submits == ["B"]
    assert not args_of(sim, "A", "POST")
    logged = [a.event for a in sim.of(WriteNodeEvent)]
    assert isinstance(logged[0], ev.PreSkipEvent) and logged[0].dag_node_name == "A"


def test_pre_skip_other_value_is_a_plain_failure():
    dag = scripted(scripts={"PRE": script("PRE")}, pre_skip=7)
    sim = Sim(dag, script_exits={("A", "PRE"): [8]})
    assert sim.go().code == 1


def test_post_end_is_written_to_the_nodes_log():
    sim = Sim(scripted(scripts={"POST": script("POST")}), script_exits={("A", "POST"): [3]})
    sim.go()
    event = [a.event for a in sim.of(WriteNodeEvent)][0]
    assert isinstance(event, ev.PostScriptTerminatedEvent)
    assert (event.cluster, event.return_value, event.dag_node_name) == (100, 3, "A")


def test_post_script_event_coming_back_from_the_log_is_ignored():
    dag = dag_of("A->B", A={"scripts": {"POST": script("POST")}})
    sim = Sim(dag, auto=False)
    sim.go()
    sim.feed(sim.job_end(100, 0, 0))
    sim.step()                                    # the POST ends: A is done, B submitted
    echo = [a.event for a in sim.of(WriteNodeEvent)][0]
    assert sim.status("A") == NodeStatus.DONE and sim.submits == ["A", "B"]
    sim.feed(JobEvent(echo))
    sim.feed(JobEvent(ev.PostScriptTerminatedEvent(cluster=100, return_value=1,
                                                   dag_node_name="A")))
    assert sim.status("A") == NodeStatus.DONE
    assert sim.run.counts()["failed"] == 0


def test_hold_script_runs_when_a_job_is_held_and_its_result_is_ignored():
    dag = scripted(scripts={"HOLD": script("HOLD", "$JOB")})
    sim = Sim(dag, exits={"A": [HOLD]}, script_exits={("A", "HOLD"): [9]})
    sim.go()
    assert args_of(sim, "A", "HOLD") == [["A"]]
    assert sim.status("A") == NodeStatus.SUBMITTED      # DAGMan waits for the held job
    assert sim.exit is None


def test_pre_and_post_run_in_the_node_directory_with_debug_settings():
    pre = script("PRE", debug_file="/d/pre.out", debug_stream="ALL")
    sim = Sim(scripted(scripts={"PRE": pre}))
    sim.go()
    run = sim.of(RunScript)[0]
    assert (run.cwd, run.executable, run.debug_file, run.debug_stream) == \
        ("/d", "/bin/s", "/d/pre.out", "ALL")


# --- DEFER ------------------------------------------------------------------------------------
def test_defer_reruns_the_script_after_the_delay():
    pre = script("PRE", defer_status=5, defer_time=30)
    sim = Sim(scripted(scripts={"PRE": pre}), script_exits={("A", "PRE"): [5, 5, 0]},
              auto=True)
    sim.feed(__import__("htc.dag.engine", fromlist=["Start"]).Start())
    start = sim.t
    sim.step()                                   # PRE exits 5: deferred
    assert sim.status("A") == NodeStatus.PRERUN
    assert sim.run.next_deadline() == start + 30
    sim.go()
    assert len(args_of(sim, "A", "PRE")) == 3
    assert sim.exit.code == 0


def test_tick_before_the_defer_time_does_not_rerun():
    pre = script("PRE", defer_status=5, defer_time=30)
    sim = Sim(scripted(scripts={"PRE": pre}), script_exits={("A", "PRE"): [5]})
    sim.feed(__import__("htc.dag.engine", fromlist=["Start"]).Start())
    sim.step()
    sim.t += 10
    sim.feed(Tick())
    assert len(args_of(sim, "A", "PRE")) == 1


def test_deferred_scripts_do_not_count_against_max_pre():
    dag = dag_of("A B", A={"scripts": {"PRE": script("PRE", defer_status=5, defer_time=100)}},
                 B={"scripts": {"PRE": script("PRE")}})
    sim = Sim(dag, Options(max_pre=1), script_exits={("A", "PRE"): [5, 0]})
    sim.go(max_steps=6)
    assert args_of(sim, "B", "PRE")              # B's PRE ran while A's waited


def test_post_defer():
    post = script("POST", defer_status=1, defer_time=10)
    sim = Sim(scripted(scripts={"POST": post}), script_exits={("A", "POST"): [1, 0]})
    assert sim.go().code == 0
    assert len(args_of(sim, "A", "POST")) == 2


# --- macros -----------------------------------------------------------------------------------
def test_all_script_macros_in_post():
    dag = scripted("A->B", scripts={"POST": script("POST", *ALL, *POST_ONLY)}, retry=2)
    sim = Sim(dag, Options(dag_id=77), procs={"A": 3}, exits={"A": [[0, 3, 3]]},
              script_exits={("A", "POST"): [0]})
    sim.go()
    got = dict(zip(ALL + POST_ONLY, args_of(sim, "A", "POST")[0]))
    assert got["$JOB"] == got["$NODE"] == "A"
    assert got["$RETRY"] == "0" and got["$MAX_RETRIES"] == "2"
    assert got["$DAG_STATUS"] == "0" and got["$FAILED_COUNT"] == "0"
    assert got["$NODE_COUNT"] == "2" and got["$DAGID"] == "77"
    assert got["$DONE_COUNT"] == "0" and got["$QUEUED_COUNT"] == "0"
    assert got["$CLUSTERID"] == "100" and got["$JOBID"] == "100.2"
    assert got["$JOB_COUNT"] == "3"
    assert got["$SUCCESS"] == "False" and got["$RETURN"] == "3"
    assert got["$PRE_SCRIPT_RETURN"] == "-1"


def test_exit_code_macros_list_removed_procs_as_empty():
    dag = scripted(scripts={"POST": script("POST", "$EXIT_CODES", "$EXIT_CODE_COUNTS",
                                           "$EXIT_CODE_LIST", "$JOB_ABORT_COUNT")})
    sim = Sim(dag, procs={"A": 4}, exits={"A": [[2, 0, 2, ABORT]]})
    sim.go()
    codes, counts, listed, aborted = args_of(sim, "A", "POST")[0]
    assert codes == "0,2" and counts == "0:1,2:2"
    assert listed.split(",")[3] == "" and aborted in ("1", "2")


def test_post_only_macros_stay_literal_in_pre():
    sim = Sim(scripted(scripts={"PRE": script("PRE", *POST_ONLY, "$JOB")}))
    sim.go()
    assert args_of(sim, "A", "PRE")[0] == POST_ONLY + ["A"]


def test_macros_are_replaced_only_as_whole_words_and_ignore_case():
    sim = Sim(scripted(scripts={"PRE": script("PRE", "x=$JOB", "$job", "$JOBX", "$$JOB")}))
    sim.go()
    assert args_of(sim, "A", "PRE")[0] == ["x=$JOB", "A", "$JOBX", "$$JOB"]


def test_unknown_macro_is_passed_through_with_a_warning():
    run = NodeRun("A", 0)
    warn: list[str] = []
    out = expand_args(["$FOO", "$RETURN"], "PRE", run, 0, DagCounts(0, 0, 0, 0, 0, 1, 0), warn)
    assert out == ["$FOO", "$RETURN"]
    assert any("unrecognized macro $FOO" in w for w in warn)
    assert any("$RETURN macro should not be used as a PRE" in w for w in warn)


def test_return_is_minus_signal_for_a_killed_job():
    sim = Sim(scripted(scripts={"POST": script("POST", "$RETURN")}), exits={"A": [-11]})
    sim.go()
    assert args_of(sim, "A", "POST") == [["-11"]]


def test_return_is_minus_1002_for_a_removed_job():
    sim = Sim(scripted(scripts={"POST": script("POST", "$RETURN")}), exits={"A": [ABORT]})
    sim.go()
    assert args_of(sim, "A", "POST") == [["-1002"]]


def test_return_is_minus_1001_when_submission_fails():
    dag = scripted(scripts={"POST": script("POST", "$RETURN")})
    sim = Sim(dag, Options(max_submit_attempts=1), exits={"A": [SUBMIT_FAIL]})
    sim.go()
    assert args_of(sim, "A", "POST") == [["-1001"]]


def test_return_is_0_when_all_procs_succeed_and_success_true():
    sim = Sim(scripted(scripts={"POST": script("POST", "$RETURN", "$SUCCESS")}),
              procs={"A": 2})
    sim.go()
    assert args_of(sim, "A", "POST") == [["0", "True"]]


def test_pre_script_return_seen_by_post_is_the_pre_exit():
    dag = scripted(scripts={"PRE": script("PRE"), "POST": script("POST", "$PRE_SCRIPT_RETURN")})
    sim = Sim(dag)
    sim.go()
    assert args_of(sim, "A", "POST") == [["0"]]


def test_counts_macros_see_the_dag():
    dag = dag_of("X Y A", A={"scripts": {"PRE": script("PRE", "$DONE_COUNT", "$FAILED_COUNT",
                                                        "$DAG_STATUS", "$FUTILE_COUNT")}})
    dag.add_edge("X", "A", weak=True)
    dag.add_edge("Y", "A", weak=True)
    dag.add_node(__import__("htc.dag.model", fromlist=["Node"]).Node("Z", submit_file="z"))
    dag.add_edge("X", "Z")
    sim = Sim(dag, exits={"X": [1]})
    sim.go()
    assert args_of(sim, "A", "PRE") == [["1", "1", "2", "1"]]


def test_script_exited_for_a_script_not_running_is_ignored():
    sim = Sim(dag_of("A"), auto=False)
    sim.go()
    out = sim.feed(ScriptExited("A", "POST", 0))
    assert any("ignoring" in getattr(a, "text", "") for a in out)
    assert sim.status("A") == NodeStatus.SUBMITTED


def test_script_exited_names_a_bad_node_or_kind():
    import pytest
    sim = Sim(dag_of("A"), auto=False)
    sim.go()
    with pytest.raises(KeyError, match="no node 'Z'"):
        sim.run.handle(ScriptExited("Z", "PRE", 0), 0)
    with pytest.raises(ValueError, match="kind 'MID' of node A is not PRE, POST or HOLD"):
        sim.run.handle(ScriptExited("A", "MID", 0), 0)
