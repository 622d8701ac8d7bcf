"""RETRY, ABORT-DAG-ON, FINAL, SERVICE, PROVISIONER, condor_rm, halt: how nodes and DAGs end."""

from __future__ import annotations

from htc.dag.engine import (
    AppendJobstate, Exit, Halt, JobEvent, NodeStatus, Options, RemoveJobs, RemoveRequested,
    Resume, Start, SubmitNode, WriteFile,
)
from htc.dag.engine.states import DagStatus
from htc.dag.model import Node, NodeKind
from htc.eventlog import events as ev
from tests.dag_engine_sim import HOLD, SUBMIT_FAIL, Sim, dag_of, final, script


def rescues(sim):
    return [a for a in sim.of(WriteFile) if ".rescue" in a.path]


# --- RETRY ------------------------------------------------------------------------------------
def test_retry_reruns_a_failed_node():
    sim = Sim(dag_of("A->B", A={"retry": 2}), exits={"A": [1, 1, 0]})
    assert sim.go() == Exit(0, 0)
    assert sim.submits == ["A", "A", "A", "B"]
    assert sim.run.nodes["A"].retries == 2


def test_retry_exhausted_fails_the_node():
    sim = Sim(dag_of("A", A={"retry": 1}), exits={"A": [1, 1, 0]})
    assert sim.go().code == 1
    assert sim.submits == ["A", "A"]
    assert "(after 1 node retries)" in sim.run.nodes["A"].error


def test_retry_reruns_from_the_pre_script():
    dag = dag_of("A", A={"retry": 1, "scripts": {"PRE": script("PRE", "$RETRY")}})
    sim = Sim(dag, exits={"A": [1, 0]})
    sim.go()
    assert [a for (n, k, a) in sim.scripts if k == "PRE"] == [["0"], ["1"]]


def test_retry_macro_goes_to_the_submission():
    sim = Sim(dag_of("A", A={"retry": 1}), exits={"A": [1, 0]})
    sim.go()
    second = sim.of(SubmitNode)[1]
    assert second.macros["RETRY"] == "1" and second.retry == 1
    assert second.attrs["DAGManNodeRetry"] == "1"


def test_retry_unless_exit_stops_retrying():
    sim = Sim(dag_of("A", A={"retry": 5, "retry_unless_exit": 3}), exits={"A": [1, 3, 0]})
    assert sim.go().code == 1
    assert sim.submits == ["A", "A"]


def test_post_failure_is_retried_and_post_decides_each_time():
    dag = dag_of("A", A={"retry": 1, "scripts": {"POST": script("POST")}})
    sim = Sim(dag, script_exits={("A", "POST"): [1, 0]})
    assert sim.go().code == 0
    assert sim.submits == ["A", "A"]


def test_failed_pre_is_retried():
    dag = dag_of("A", A={"retry": 1, "scripts": {"PRE": script("PRE")}})
    sim = Sim(dag, script_exits={("A", "PRE"): [1, 0]})
    assert sim.go().code == 0
    assert sim.submits == ["A"]


def test_retry_node_first_puts_the_retried_node_ahead():
    dag = dag_of("A B C", A={"retry": 1})
    sim = Sim(dag, Options(max_jobs=1, retry_node_first=True), exits={"A": [1, 0]})
    sim.go()
    assert sim.submits == ["A", "A", "B", "C"]
    sim = Sim(dag_of("A B C", A={"retry": 1}), Options(max_jobs=1), exits={"A": [1, 0]})
    sim.go()
    assert sim.submits == ["A", "B", "C", "A"]


# --- submit failures --------------------------------------------------------------------------
def test_failed_submission_is_tried_again_after_a_delay():
    sim = Sim(dag_of("A"), Options(max_submit_attempts=3), exits={"A": [SUBMIT_FAIL, 0]})
    assert sim.go().code == 0
    assert sim.submits == ["A", "A"]
    lines = [a.line for a in sim.of(AppendJobstate)]
    assert lines == []                             # no JOBSTATE_LOG in this DAG


def test_submission_failing_every_attempt_fails_the_node_with_minus_1001():
    sim = Sim(dag_of("A"), Options(max_submit_attempts=2), exits={"A": [SUBMIT_FAIL] * 3})
    assert sim.go().code == 1
    assert sim.submits == ["A", "A"]
    assert sim.run.nodes["A"].retval == -1001


# --- ABORT-DAG-ON -----------------------------------------------------------------------------
def test_abort_on_job_exit_without_post_removes_running_jobs_and_returns():
    dag = dag_of("A B", A={"abort_status": 3, "abort_return": 9, "retry": 4})
    sim = Sim(dag, exits={"A": [3], "B": [HOLD]})
    exit = sim.go()
    assert exit == Exit(9, DagStatus.ABORT)
    assert sim.submits == ["A", "B"]                 # ABORT-DAG-ON overrides RETRY
    assert [r.node for r in sim.of(RemoveJobs)] == ["B"]
    assert rescues(sim)


def test_abort_without_return_exits_with_the_node_value():
    sim = Sim(dag_of("A", A={"abort_status": 4}), exits={"A": [4]})
    assert sim.go() == Exit(4, DagStatus.ABORT)


def test_abort_return_0_is_a_success_without_rescue():
    sim = Sim(dag_of("A B", A={"abort_status": 1, "abort_return": 0}), exits={"A": [1],
                                                                            "B": [HOLD]})
    assert sim.go() == Exit(0, DagStatus.OK)
    assert not rescues(sim)


def test_abort_on_job_exit_is_ignored_when_the_node_has_post():
    dag = dag_of("A", A={"abort_status": 3, "scripts": {"POST": script("POST")}})
    sim = Sim(dag, exits={"A": [3]})
    assert sim.go() == Exit(0, 0)


def test_abort_on_post_exit():
    dag = dag_of("A", A={"abort_status": 6, "abort_return": 7,
                         "scripts": {"POST": script("POST")}})
    sim = Sim(dag, script_exits={("A", "POST"): [6]})
    assert sim.go() == Exit(7, DagStatus.ABORT)


def test_abort_on_pre_exit():
    dag = dag_of("A B", A={"abort_status": 2, "scripts": {"PRE": script("PRE")}})
    sim = Sim(dag, script_exits={("A", "PRE"): [2]}, exits={"B": [HOLD]})
    assert sim.go() == Exit(2, DagStatus.ABORT)
    assert "A" not in sim.submits


def test_abort_runs_the_final_node_and_its_success_decides():
    dag = final(dag_of("A B", A={"abort_status": 3, "abort_return": 5}))
    sim = Sim(dag, exits={"A": [3], "B": [HOLD]})
    assert sim.go() == Exit(0, DagStatus.ABORT)
    assert sim.submits == ["A", "B", "F"]
    assert sim.of(SubmitNode)[-1].attrs["DAG_Status"] == str(int(DagStatus.ABORT))


def test_abort_with_a_failing_final_node_exits_1():
    dag = final(dag_of("A", A={"abort_status": 3, "abort_return": 5}))
    sim = Sim(dag, exits={"A": [3], "F": [1]})
    assert sim.go().code == 1


# --- FINAL ------------------------------------------------------------------------------------
def test_final_runs_last_after_success():
    sim = Sim(final(dag_of("A->B C")))
    assert sim.go() == Exit(0, 0)
    assert sim.submits[-1] == "F" and len(sim.submits) == 4


def test_final_runs_after_a_failure_and_its_success_decides():
    sim = Sim(final(dag_of("A->B")), exits={"A": [1]})
    assert sim.go() == Exit(0, DagStatus.NODE_FAILED)
    assert sim.submits == ["A", "F"]
    assert sim.of(SubmitNode)[-1].macros["DAG_STATUS"] == "2"
    assert sim.status("B") == NodeStatus.FUTILE


def test_final_failure_fails_the_dag():
    sim = Sim(final(dag_of("A")), exits={"F": [1]})
    assert sim.go().code == 1
    text = rescues(sim)[0].text
    assert "DONE A" in text and "DONE F" not in text and "#   F,<ENDLIST>" in text


def test_final_node_scripts_see_dag_status():
    dag = final(dag_of("A"), scripts={"PRE": script("PRE", "$DAG_STATUS")})
    sim = Sim(dag, exits={"A": [1]})
    sim.go()
    assert [a for (n, k, a) in sim.scripts if n == "F"] == [["2"]]


def test_no_retries_once_final_runs():
    dag = final(dag_of("A B", A={"retry": 3}))
    dag.nodes["A"].abort_status = None
    sim = Sim(dag, exits={"B": [1], "A": [HOLD]}, auto=True)
    sim.go(max_steps=8)
    sim.feed(RemoveRequested())
    assert "F" in sim.submits
    sim.go()
    assert sim.submits.count("A") == 1


def test_rm_runs_final_and_removes_jobs():
    sim = Sim(final(dag_of("A->B")), auto=False)
    sim.go()
    sim.feed(RemoveRequested())
    assert [r.node for r in sim.of(RemoveJobs)] == ["A"]
    assert sim.submits == ["A", "F"]
    assert rescues(sim)
    sim.auto = True
    sim.feed(JobEvent(ev.JobAbortedEvent(cluster=100)))
    sim.feed(JobEvent(ev.JobTerminatedEvent(cluster=101, return_value=0)))
    assert sim.exit == Exit(0, DagStatus.RM)


def test_rm_without_final_exits_2_with_rescue():
    sim = Sim(dag_of("A->B C"), auto=False)
    sim.go()
    sim.feed(RemoveRequested())
    assert sim.exit == Exit(2, DagStatus.RM)
    assert {r.node for r in sim.of(RemoveJobs)} == {"A", "C"}
    assert rescues(sim)


def test_rm_before_start_is_ignored():
    sim = Sim(dag_of("A"))
    assert sim.feed(RemoveRequested()) == []


# --- SERVICE ----------------------------------------------------------------------------------
def service_dag(spec="A->B"):
    dag = dag_of(spec)
    dag.add_node(Node("S", kind=NodeKind.SERVICE, submit_file="/d/S.sub", dir="/d"))
    return dag


def test_service_node_is_submitted_at_start_and_removed_at_the_end():
    sim = Sim(service_dag(), exits={"S": [HOLD]})
    assert sim.go() == Exit(0, 0)
    assert sim.submits[0] == "S"
    assert [r.node for r in sim.of(RemoveJobs)] == ["S"]
    assert sim.of(SubmitNode)[0].attrs["DAGLifetimeJob"] == "true"


def test_service_failure_is_ignored():
    sim = Sim(service_dag(), exits={"S": [1]})
    assert sim.go() == Exit(0, 0)


def test_service_nodes_are_not_counted():
    sim = Sim(service_dag(), auto=False)
    sim.go()
    assert sim.run.counts()["total"] == 2


# --- PROVISIONER ------------------------------------------------------------------------------
def test_provisioner_runs_first_and_others_start_when_it_is_ready():
    dag = dag_of("A->B")
    dag.add_node(Node("P", kind=NodeKind.PROVISIONER, submit_file="/d/P.sub", dir="/d"))
    sim = Sim(dag, auto=False)
    sim.go()
    assert sim.submits == ["P"]
    sim.feed(JobEvent(ev.AttributeUpdateEvent(cluster=100, attribute="ProvisionerState",
                                              value="1")))
    assert sim.submits == ["P"]
    sim.feed(JobEvent(ev.AttributeUpdateEvent(cluster=100, attribute="ProvisionerState",
                                              value="2")))
    assert sim.submits == ["P", "A"]


# --- NOOP -------------------------------------------------------------------------------------
def test_noop_node_with_scripts_runs_its_scripts():
    dag = dag_of("A", A={"noop": True, "scripts": {"PRE": script("PRE"),
                                                   "POST": script("POST")}})
    sim = Sim(dag)
    assert sim.go() == Exit(0, 0)
    assert [k for (_, k, _) in sim.scripts] == ["PRE", "POST"]


# --- halt -------------------------------------------------------------------------------------
def test_halt_stops_new_work_and_ends_with_rescue():
    sim = Sim(dag_of("A->B C"), auto=False)
    sim.go()
    sim.feed(Halt())
    sim.feed(sim.job_end(100, 0, 0))
    assert sim.submits == ["A", "C"]
    sim.feed(sim.job_end(101, 0, 0))
    assert sim.exit == Exit(1, DagStatus.HALTED)
    assert "DONE A" in rescues(sim)[0].text


def test_halt_with_pre_scripts_waiting_for_their_throttle_still_ends():
    pre = {"scripts": {"PRE": script("PRE")}}
    sim = Sim(dag_of("A B C", A=pre, B=pre, C=pre), Options(max_pre=1), auto=False)
    sim.feed(Start())
    sim.feed(Halt())
    sim.go()
    assert sim.exit == Exit(1, DagStatus.HALTED)
    assert [n for (n, _, _) in sim.scripts] == ["A"]


def test_halt_with_final_runs_final():
    sim = Sim(final(dag_of("A->B")), auto=False)
    sim.go()
    sim.feed(Halt())
    sim.feed(sim.job_end(100, 0, 0))
    assert sim.submits == ["A", "F"]
    sim.feed(sim.job_end(101, 0, 0))
    assert sim.exit == Exit(0, DagStatus.HALTED)


def test_resume_continues():
    sim = Sim(dag_of("A->B C"), auto=False)
    sim.go()
    sim.feed(Halt())
    sim.feed(sim.job_end(100, 0, 0))
    sim.feed(Resume())
    assert sim.submits == ["A", "C", "B"]


def test_start_actions_list():
    sim = Sim(dag_of("A"))
    out = sim.feed(Start())
    assert [type(a).__name__ for a in out if not type(a).__name__ == "Log"] == ["SubmitNode"]
