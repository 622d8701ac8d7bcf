"""Recovery: a new run replays the nodes log of a run that died, and finished work never reruns."""

from __future__ import annotations

from htc.dag.engine import (
    AppendJobstate, DagRun, Exit, JobEvent, NodeStatus, Options, Recover, RunScript, Start,
    SubmitNode,
)
from htc.eventlog import events as ev
from tests.dag_engine_sim import Sim, dag_of, script

DIAMOND = "A->B A->C B->D C->D"


def crashed(dag, steps, **kw):
    """Run ``dag`` for ``steps`` events, then "kill" it: return its nodes log."""
    sim = Sim(dag, **kw)
    sim.go(max_steps=steps)
    assert sim.exit is None, "the first run finished; crash it sooner"
    return sim, list(sim.nodes_log)


def resume(dag, log, options=None, **kw):
    """A new run of ``dag`` that recovers from ``log``, started (jobs still queued stay so)."""
    sim = Sim(dag, options, **kw)
    sim.next_cluster = 1000                              # the schedd never reuses clusters
    sim.feed(Recover(log))
    sim.feed(Start())
    return sim


def test_finished_nodes_are_not_rerun_and_running_jobs_are_waited_for():
    first, log = crashed(dag_of(DIAMOND), 7, auto=False)
    first.feed(first.job_end(100, 0, 0))                 # A done, B and C submitted
    while first.pending:
        first.step()                                     # their submit events are logged
    log = list(first.nodes_log)
    first.feed(first.job_end(102, 0, 0))                 # C done: not in the log we keep
    second = resume(dag_of(DIAMOND), log, auto=False)
    assert second.run.node_status("A") is NodeStatus.DONE
    assert second.run.node_status("B") is NodeStatus.SUBMITTED
    assert second.run.node_status("C") is NodeStatus.SUBMITTED
    assert second.submits == []                          # nothing resubmitted
    second.feed(JobEvent(ev.JobTerminatedEvent(cluster=101, return_value=0)))
    second.feed(JobEvent(ev.JobTerminatedEvent(cluster=102, return_value=0)))
    assert second.submits == ["D"]


def test_crash_at_any_point_then_recovery_finishes_without_rerunning_finished_nodes():
    for steps in range(1, 9):
        first = Sim(dag_of("A->B B->C D"))
        first.go(max_steps=steps)
        if first.exit is not None:
            break
        second = resume(dag_of("A->B B->C D"), list(first.nodes_log))
        for name, node in second.run.nodes.items():     # jobs still queued end now
            if node.status is NodeStatus.SUBMITTED and node.cluster is not None:
                second.pending.append(JobEvent(ev.JobTerminatedEvent(
                    cluster=node.cluster, return_value=0)))
        assert second.go() == Exit(0, 0), steps
        done_before = {n for n in "ABCD" if first.run.node_status(n) is NodeStatus.DONE}
        assert not done_before & set(second.submits), steps


def test_no_pre_rerun_for_a_submitted_node():
    dag = dag_of("A", A={"scripts": {"PRE": script("PRE")}})
    first, log = crashed(dag, 4, auto=False)
    assert first.submits == ["A"]
    second = resume(dag_of("A", A={"scripts": {"PRE": script("PRE")}}), log, auto=False)
    assert second.scripts == [] and second.submits == []
    assert second.run.node_status("A") is NodeStatus.SUBMITTED


def test_pre_running_at_the_crash_runs_again():
    dag = dag_of("A", A={"scripts": {"PRE": script("PRE")}})
    second = resume(dag, [])
    assert [k for (_, k, _) in second.scripts] == ["PRE"]


def test_post_running_at_the_crash_runs_again_without_resubmitting():
    dag = dag_of("A", A={"scripts": {"POST": script("POST")}})
    first = Sim(dag)
    first.go(max_steps=3)                                # job ended, POST started
    log = [e for e in first.nodes_log if not isinstance(e, ev.PostScriptTerminatedEvent)]
    second = resume(dag_of("A", A={"scripts": {"POST": script("POST")}}), log)
    assert [k for (_, k, _) in second.scripts] == ["POST"]
    assert second.submits == []
    assert second.go() == Exit(0, 0)


def test_finished_post_in_the_log_is_not_rerun():
    dag = dag_of("A->B", A={"scripts": {"POST": script("POST")}}, B={"scripts": {}})
    first, _ = crashed(dag, 6, auto=False)
    first.feed(first.job_end(100, 0, 0))
    first.step()                                          # POST ends, is written to the log
    assert any(isinstance(e, ev.PostScriptTerminatedEvent) for e in first.nodes_log)
    second = resume(dag_of("A->B", A={"scripts": {"POST": script("POST")}}),
                    list(first.nodes_log), auto=False)
    assert second.scripts == []
    assert second.run.node_status("A") is NodeStatus.DONE
    assert second.run.node_status("B") is NodeStatus.SUBMITTED


def test_failed_post_in_the_log_fails_the_node():
    dag = dag_of("A->B", A={"scripts": {"POST": script("POST")}})
    log = [ev.SubmitEvent(cluster=5, log_notes="DAG Node: A"),
           ev.JobTerminatedEvent(cluster=5, return_value=0),
           ev.PostScriptTerminatedEvent(cluster=5, return_value=3, dag_node_name="A")]
    second = resume(dag, log)
    assert second.run.node_status("A") is NodeStatus.ERROR
    assert second.run.node_status("B") is NodeStatus.FUTILE
    assert second.exit.code == 1


def test_retries_seen_in_the_log_are_counted():
    dag = dag_of("A", A={"retry": 3})
    log = [ev.SubmitEvent(cluster=5, log_notes="DAG Node: A"),
           ev.JobTerminatedEvent(cluster=5, return_value=1),
           ev.SubmitEvent(cluster=6, log_notes="DAG Node: A")]
    second = resume(dag, log, auto=False)
    node = second.run.nodes["A"]
    assert node.retries == 1 and node.cluster == 6
    assert second.submits == []
    second.feed(JobEvent(ev.JobTerminatedEvent(cluster=6, return_value=1)))
    assert second.submits == ["A"]
    assert second.of(SubmitNode)[-1].macros["RETRY"] == "2"


def test_pre_skip_in_the_log_means_done():
    dag = dag_of("A->B", A={"scripts": {"PRE": script("PRE")}, "pre_skip": 1})
    second = resume(dag, [ev.PreSkipEvent(cluster=-1, dag_node_name="A")], auto=False)
    assert second.run.node_status("A") is NodeStatus.DONE
    assert second.submits == ["B"] and second.scripts == []


def test_failed_node_without_retries_stays_failed():
    dag = dag_of("A->B C")
    log = [ev.SubmitEvent(cluster=5, log_notes="DAG Node: A"),
           ev.JobTerminatedEvent(cluster=5, return_value=2)]
    second = resume(dag, log)
    assert second.submits == ["C"]
    assert second.go().code == 1
    assert second.run.node_status("B") is NodeStatus.FUTILE


def test_events_of_other_jobs_in_the_log_are_ignored():
    dag = dag_of("A")
    log = [ev.SubmitEvent(cluster=5, log_notes="DAG Node: Z"),
           ev.SubmitEvent(cluster=6), ev.JobTerminatedEvent(cluster=6, return_value=0)]
    second = resume(dag, log, auto=False)
    assert second.submits == ["A"]


def test_multi_proc_recovery_waits_for_all_procs():
    dag = dag_of("A->B")
    log = [ev.SubmitEvent(cluster=5, proc=p, log_notes="DAG Node: A") for p in range(3)]
    log.append(ev.JobTerminatedEvent(cluster=5, proc=0, return_value=0))
    second = resume(dag, log, auto=False)
    assert second.run.node_status("A") is NodeStatus.SUBMITTED
    for proc in (1, 2):
        second.feed(JobEvent(ev.JobTerminatedEvent(cluster=5, proc=proc, return_value=0)))
    assert second.submits == ["B"]


def test_recovery_starts_nothing_while_replaying():
    run = DagRun(dag_of("A->B"))
    out = run.handle(Recover([ev.SubmitEvent(cluster=5, log_notes="DAG Node: A"),
                              ev.JobTerminatedEvent(cluster=5, return_value=0)]), 0.0)
    assert not [a for a in out if isinstance(a, (SubmitNode, RunScript))]
    assert run.node_status("B") is NodeStatus.READY


def test_recovery_writes_jobstate_markers():
    dag = dag_of("A")
    dag.jobstate_log = "/d/js.log"
    run = DagRun(dag, Options(dag_id=9))
    out = run.handle(Recover([]), 100.0) + run.handle(Start(), 101.0)
    lines = [a.line for a in out if isinstance(a, AppendJobstate)]
    assert lines[:3] == ["100 INTERNAL *** RECOVERY_STARTED ***",
                         "100 INTERNAL *** RECOVERY_FINISHED ***",
                         "101 INTERNAL *** DAGMAN_STARTED 9.0 ***"]


def test_final_node_running_at_the_crash_is_waited_for():
    from tests.dag_engine_sim import final
    dag = final(dag_of("A"))
    log = [ev.SubmitEvent(cluster=5, log_notes="DAG Node: A"),
           ev.JobTerminatedEvent(cluster=5, return_value=1),
           ev.SubmitEvent(cluster=6, log_notes="DAG Node: F")]
    second = resume(dag, log, auto=False)
    assert second.submits == [] and second.exit is None
    second.feed(JobEvent(ev.JobTerminatedEvent(cluster=6, return_value=0)))
    assert second.exit == Exit(0, 2)


def test_provisioner_ready_in_the_log_stays_ready():
    from htc.dag.model import Node, NodeKind
    dag = dag_of("A")
    dag.add_node(Node("P", kind=NodeKind.PROVISIONER, submit_file="p.sub", dir="/d"))
    log = [ev.SubmitEvent(cluster=5, log_notes="DAG Node: P"),
           ev.AttributeUpdateEvent(cluster=5, attribute="ProvisionerState", value="2")]
    second = resume(dag, log, auto=False)
    assert second.submits == ["A"]


def test_recovery_from_a_real_nodes_log_file(tmp_path):
    from htc.eventlog.reader import read_events
    from htc.eventlog.writer import format_event

    def make():
        return dag_of("A->B B->C", A={"scripts": {"PRE": script("PRE")}, "pre_skip": 3},
                      B={"scripts": {"POST": script("POST")}})
    first = Sim(make(), script_exits={("A", "PRE"): [3]}, auto=False)
    first.go()
    first.feed(first.job_end(100, 0, 0))                 # B's job ends, its POST runs
    first.step()
    assert first.run.node_status("B") is NodeStatus.DONE
    log = tmp_path / "test.dag.nodes.log"
    log.write_text("".join(format_event(e) for e in first.nodes_log))
    second = resume(make(), read_events(log), auto=False)
    assert second.scripts == [] and second.submits == []
    assert [second.run.node_status(n) for n in "ABC"] == \
        [NodeStatus.DONE, NodeStatus.DONE, NodeStatus.SUBMITTED]


def test_recover_after_start_is_refused():
    import pytest
    run = DagRun(dag_of("A"))
    run.handle(Start(), 0.0)
    with pytest.raises(ValueError, match="before Start"):
        run.handle(Recover([]), 1.0)
