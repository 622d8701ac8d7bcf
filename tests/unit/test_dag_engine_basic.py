"""The DAG engine's core: order of nodes, success, failure, FUTILE and WEAK, DONE nodes."""

from __future__ import annotations

import pytest

from htc.dag.engine import (
    DagRun, Exit, JobEvent, NodeStatus, NodeSubmitted, Options, RemoveJobs, Start, SubmitNode,
    Tick,
)
from htc.dag.engine.states import NODE_STEPS, DagStatus, Step, next_status
from htc.dag.model import Var
from htc.eventlog import events as ev
from htc.transitions import IllegalTransition
from tests.dag_engine_sim import ABORT, Sim, dag_of

DIAMOND = "A->B A->C B->D C->D"


def test_diamond_runs_parents_before_children_and_exits_0():
    sim = Sim(dag_of(DIAMOND))
    assert sim.go() == Exit(0, 0)
    assert sim.submits == ["A", "B", "C", "D"]
    assert all(sim.status(n) == NodeStatus.DONE for n in "ABCD")


def test_nothing_happens_before_start():
    run = DagRun(dag_of(DIAMOND))
    assert run.handle(Tick(), 0.0) == []
    assert run.node_status("A") is NodeStatus.READY
    assert run.node_status("B") is NodeStatus.NOT_READY
    assert run.next_deadline() is None


def test_start_submits_every_node_without_parents_in_file_order():
    run = DagRun(dag_of("X Y Z X->W"))
    actions = run.handle(Start(), 0.0)
    assert [a.node for a in actions if isinstance(a, SubmitNode)] == ["X", "Y", "Z"]
    assert run.node_status("W") is NodeStatus.NOT_READY


def test_start_twice_submits_once():
    run = DagRun(dag_of("A"))
    run.handle(Start(), 0.0)
    assert not [a for a in run.handle(Start(), 1.0) if isinstance(a, SubmitNode)]


def test_failed_node_makes_descendants_futile_and_the_rest_still_runs():
    sim = Sim(dag_of("A->B B->C X->Y"), exits={"A": [1]})
    assert sim.go() == Exit(1, DagStatus.NODE_FAILED)
    assert sim.submits == ["A", "X", "Y"]
    assert sim.status("A") == NodeStatus.ERROR
    assert sim.status("B") == NodeStatus.FUTILE
    assert sim.status("C") == NodeStatus.FUTILE
    assert sim.status("Y") == NodeStatus.DONE


def test_weak_child_runs_after_its_parent_failed():
    sim = Sim(dag_of("A~>B B->C"), exits={"A": [3]})
    assert sim.go() == Exit(1, DagStatus.NODE_FAILED)
    assert sim.submits == ["A", "B", "C"]
    assert sim.status("C") == NodeStatus.DONE


def test_weak_child_of_a_futile_node_is_futile():
    sim = Sim(dag_of("A->B B~>C"), exits={"A": [3]})
    sim.go()
    assert sim.status("B") == NodeStatus.FUTILE
    assert sim.status("C") == NodeStatus.FUTILE


def test_weak_child_waits_for_all_its_parents():
    sim = Sim(dag_of("A~>C B->C"), exits={"A": [1]})
    sim.go()
    assert sim.submits.index("C") > sim.submits.index("B")


def test_child_with_one_failed_strong_parent_is_futile_even_if_another_succeeded():
    sim = Sim(dag_of("A->C B->C"), exits={"B": [1]})
    sim.go()
    assert sim.status("C") == NodeStatus.FUTILE
    assert "C" not in sim.submits


def test_done_nodes_are_skipped_and_release_their_children():
    dag = dag_of("A->B B->C", A={"done": True})
    sim = Sim(dag)
    assert sim.go() == Exit(0, 0)
    assert sim.submits == ["B", "C"]


def test_all_nodes_done_exits_0_without_submitting():
    sim = Sim(dag_of("A->B", A={"done": True}, B={"done": True}))
    assert sim.go() == Exit(0, 0)
    assert sim.submits == []


def test_job_killed_by_signal_fails_the_node():
    sim = Sim(dag_of("A"), exits={"A": [-9]})
    assert sim.go().code == 1
    assert sim.run.nodes["A"].retval == -9


def test_job_removed_by_someone_else_fails_the_node_with_minus_1002():
    sim = Sim(dag_of("A"), exits={"A": [ABORT]})
    assert sim.go().code == 1
    assert sim.run.nodes["A"].retval == -1002


def test_events_of_unknown_clusters_are_ignored():
    run = DagRun(dag_of("A"))
    run.handle(Start(), 0.0)
    out = run.handle(JobEvent(ev.JobTerminatedEvent(cluster=999, return_value=0)), 1.0)
    assert not [a for a in out if isinstance(a, Exit)]
    assert run.node_status("A") is NodeStatus.SUBMITTED


def test_events_are_mapped_to_nodes_by_cluster():
    run = DagRun(dag_of("A B"))
    run.handle(Start(), 0.0)
    run.handle(NodeSubmitted("A", 10, 1), 1.0)
    run.handle(NodeSubmitted("B", 11, 1), 1.0)
    run.handle(JobEvent(ev.JobTerminatedEvent(cluster=11, return_value=0)), 2.0)
    assert run.node_status("B") is NodeStatus.DONE
    assert run.node_status("A") is NodeStatus.SUBMITTED


def test_submit_event_note_binds_the_cluster_before_node_submitted():
    run = DagRun(dag_of("A"))
    run.handle(Start(), 0.0)
    run.handle(JobEvent(ev.SubmitEvent(cluster=7, log_notes="DAG Node: A")), 1.0)
    run.handle(JobEvent(ev.JobTerminatedEvent(cluster=7, return_value=0)), 2.0)
    assert run.node_status("A") is NodeStatus.SUBMITTED       # procs not known yet
    out = run.handle(NodeSubmitted("A", 7, 1), 3.0)
    assert run.node_status("A") is NodeStatus.DONE
    assert Exit(0, 0) in out


def test_multi_proc_node_waits_for_every_proc():
    sim = Sim(dag_of("A->B"), procs={"A": 3}, auto=False)
    sim.go()
    assert sim.submits == ["A"]
    for proc in (0, 1):
        sim.feed(sim.job_end(100, proc, 0))
        assert sim.status("A") == NodeStatus.SUBMITTED
    sim.feed(sim.job_end(100, 2, 0))
    assert sim.status("A") == NodeStatus.DONE
    assert sim.submits == ["A", "B"]


def test_multi_proc_failure_removes_the_other_procs_and_fails_the_node():
    sim = Sim(dag_of("A"), procs={"A": 3}, exits={"A": [[0, 5, 0]]})
    sim.go()
    removes = sim.of(RemoveJobs)
    assert len(removes) == 1 and removes[0].clusters == [100]
    assert removes[0].reason == ("Node Error: DAG node A (100.1.0) reached failure tolerance "
                                 "after 1 failures.")
    assert sim.status("A") == NodeStatus.ERROR
    assert sim.run.nodes["A"].retval == 5
    assert sim.exit.code == 1


def test_first_failed_proc_sets_the_return_value():
    sim = Sim(dag_of("A"), procs={"A": 2}, exits={"A": [[7, 9]]})
    sim.go()
    assert sim.run.nodes["A"].retval == 7


def test_counts_follow_the_run():
    sim = Sim(dag_of(DIAMOND), auto=False)
    sim.go()
    counts = sim.run.counts()
    assert counts["total"] == 4 and counts["queued"] == 1 and counts["unready"] == 3
    assert counts["idle_procs"] == 1
    sim.feed(JobEvent(ev.ExecuteEvent(cluster=100)))
    assert sim.run.counts()["idle_procs"] == 0
    sim.feed(sim.job_end(100, 0, 0))
    counts = sim.run.counts()
    assert counts["done"] == 1 and counts["queued"] == 2


def test_submit_action_carries_macros_attrs_and_notes():
    dag = dag_of("P->A", A={"vars": [Var("x", "1", append=True), Var("y", "2", prepend=True)],
                            "priority": 5})
    sim = Sim(dag, Options(dag_id=42))
    sim.go()
    submit = [a for a in sim.of(SubmitNode) if a.node == "A"][0]
    assert submit.macros["x"] == "1" and "x" not in submit.prepend
    assert submit.prepend == {"y": "2"}
    assert submit.macros["JOB"] == "A" and submit.macros["RETRY"] == "0"
    assert submit.macros["DAGManJobId"] == "42"
    assert submit.macros["DAG_PARENT_NAMES"] == "P"
    assert submit.attrs["DAGNodeName"] == '"A"'
    assert submit.attrs["DAGManJobId"] == "42"
    assert submit.attrs["DAGParentNodeNames"] == '"P"'
    assert submit.notes == "DAG Node: A"
    assert submit.priority == 5 and submit.cwd == "/d" and submit.submit_file == "/d/A.sub"


def test_parent_names_macro_absent_without_parents_and_cut_when_long():
    from htc.dag.engine.jobs import parent_names
    sim = Sim(dag_of("A"))
    sim.go()
    assert "DAG_PARENT_NAMES" not in sim.of(SubmitNode)[0].macros
    assert sim.of(SubmitNode)[0].attrs["DAGParentNodeNames"] == '""'
    names = [f"P{i:04d}" for i in range(1000)]
    text = parent_names(names)
    assert text.startswith("P0000,P0001,") and 2000 <= len(text) < 2010


def test_vars_without_prepend_or_append_follow_default_append_vars():
    dag = dag_of("A", A={"vars": [Var("x", "1")]})
    sim = Sim(dag)
    sim.go()
    assert sim.of(SubmitNode)[0].prepend == {"x": "1"}          # HTCondor's default
    sim = Sim(dag_of("A", A={"vars": [Var("x", "1")]}), Options(default_append_vars=True))
    sim.go()
    assert sim.of(SubmitNode)[0].prepend == {} and sim.of(SubmitNode)[0].macros["x"] == "1"


def test_tolerance_lets_a_job_list_lose_some_jobs():
    sim = Sim(dag_of("A->B", A={"tolerance": "1"}), procs={"A": 3}, exits={"A": [[0, 4, 0]]})
    assert sim.go() == Exit(0, 0)
    assert not sim.of(RemoveJobs) and sim.submits == ["A", "B"]


def test_tolerance_exceeded_fails_and_removes_the_rest():
    sim = Sim(dag_of("A", A={"tolerance": "1"}), procs={"A": 4}, exits={"A": [[4, 4, 0, 0]]})
    assert sim.go().code == 1
    assert len(sim.of(RemoveJobs)) == 1


def test_tolerance_percent_and_wait_mode():
    dag = dag_of("A", A={"tolerance": "50%", "tolerance_mode": "WAIT"})
    sim = Sim(dag, procs={"A": 4}, exits={"A": [[4, 4, 4, 0]]})
    assert sim.go().code == 1
    assert not sim.of(RemoveJobs)                       # WAIT: the others finish
    sim = Sim(dag_of("A", A={"tolerance": "50%"}), procs={"A": 4}, exits={"A": [[4, 4, 0, 0]]})
    assert sim.go().code == 0


def test_remove_job_list_on_failure_false_keeps_the_other_jobs():
    sim = Sim(dag_of("A"), Options(remove_job_list_on_failure=False), procs={"A": 2},
              exits={"A": [[3, 0]]})
    assert sim.go().code == 1
    assert not sim.of(RemoveJobs)


def test_noop_node_is_submitted_as_noop():
    sim = Sim(dag_of("A", A={"noop": True}))
    sim.go()
    assert sim.of(SubmitNode)[0].noop is True


def test_handle_rejects_what_is_not_an_event():
    run = DagRun(dag_of("A"))
    with pytest.raises(TypeError, match="not an engine event"):
        run.handle("start", 0.0)


def test_nothing_after_exit():
    sim = Sim(dag_of("A"))
    sim.go()
    assert sim.run.handle(Tick(), 5000.0) == []


def test_state_table_rejects_illegal_steps():
    assert next_status("A", NodeStatus.READY, Step.SUBMIT) is NodeStatus.SUBMITTED
    with pytest.raises(IllegalTransition, match="DAG node A.*DONE.*SUBMIT"):
        next_status("A", NodeStatus.DONE, Step.SUBMIT)


def test_done_and_futile_are_final_states():
    for (state, _step) in NODE_STEPS:
        assert state not in (NodeStatus.DONE, NodeStatus.FUTILE)


def test_node_status_numbers_are_htcondors():
    assert [s.value for s in NodeStatus] == list(range(8))
    assert NodeStatus(7).name == "FUTILE" and NodeStatus(3).name == "SUBMITTED"
    assert [s.value for s in DagStatus] == list(range(7))
