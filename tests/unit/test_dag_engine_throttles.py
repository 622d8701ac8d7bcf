"""Ordering (PRIORITY, file order, depth first) and throttles (max jobs / idle / scripts,
MAXJOBS categories, submissions per interval); a property test over random DAGs."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from htc.dag.engine import JobEvent, NodeStatus, Options, Start, SubmitNode, Tick
from htc.dag.engine.ready import ReadyQueue, Throttles, category_full
from htc.dag.model import Dag, Node
from htc.eventlog import events as ev
from tests.dag_engine_sim import ABORT, Sim, dag_of, script


def test_priority_orders_submissions_ties_in_file_order():
    dag = dag_of("A B C D", B={"priority": 10}, D={"priority": 10}, C={"priority": -1})
    sim = Sim(dag, Options(max_jobs=1))
    sim.go()
    assert sim.submits == ["B", "D", "A", "C"]


def test_dag_priority_is_added_to_every_node():
    sim = Sim(dag_of("A B", B={"priority": 3}), Options(dag_priority=100, max_jobs=1))
    sim.go()
    assert [a.priority for a in sim.of(SubmitNode)] == [103, 100]


def test_newly_ready_children_queue_behind_earlier_nodes():
    sim = Sim(dag_of("A->C B D"), Options(max_jobs=1))
    sim.go()
    assert sim.submits == ["A", "B", "D", "C"]


def test_submit_depth_first_puts_every_started_node_at_the_head():
    sim = Sim(dag_of("A->C B D"), Options(max_jobs=1, submit_depth_first=True))
    sim.go()
    assert sim.submits == ["D", "B", "A", "C"]      # HTCondor prepends each one


def test_submit_depth_first_runs_a_child_before_older_ready_nodes():
    sim = Sim(dag_of("A->C B D", B={"priority": -1}, D={"priority": -1}),
              Options(max_jobs=1, submit_depth_first=True))
    sim.go()
    assert sim.submits[:2] == ["A", "C"]


def test_max_jobs_limits_node_clusters_in_the_queue():
    sim = Sim(dag_of("A B C D E"), Options(max_jobs=2), procs={"A": 3})
    assert sim.go().code == 0
    assert sim.max_queued == 2


def test_max_jobs_0_is_no_limit():
    sim = Sim(dag_of("A B C D E"), Options(max_jobs=0), auto=False)
    sim.go()
    assert len(sim.submits) == 5


def test_max_idle_counts_idle_procs():
    sim = Sim(dag_of("A B C"), Options(max_idle=2), procs={"A": 3}, auto=False)
    sim.go()
    assert sim.submits == ["A", "B"]          # a submission in flight counts as one idle proc
    assert sim.run.counts()["idle_procs"] == 4
    for proc in (0, 1):
        sim.feed(JobEvent(ev.ExecuteEvent(cluster=100, proc=proc)))
    assert sim.submits == ["A", "B"]
    sim.feed(JobEvent(ev.ExecuteEvent(cluster=100, proc=2)))
    assert sim.submits == ["A", "B", "C"]


def test_held_at_max_idle_nodes_go_in_batches_as_room_frees_or_after_a_scan_interval():
    """A wide DAG at max_idle: the nodes held back go once a twentieth of the limit is free (one
    SubmitClusters, not a Submit per job start), or, if jobs barely start, after the submit
    interval; the limit is never passed."""
    sim = Sim(dag_of(" ".join(f"N{i}" for i in range(50))), Options(max_idle=40, submit_interval=500.0), auto=False)
    sim.feed(Start())                                  # (the simulation's clock moves 1 s per event)
    assert len(sim.submits) == 40 and Throttles(max_idle=40).idle_refill() == 2
    held_at = sim.run._idle_held_at
    sim.feed(JobEvent(ev.ExecuteEvent(cluster=100)))
    assert len(sim.submits) == 40                      # 1 of room: wait for 2
    assert sim.run.next_deadline() == held_at + 500    # ... for one submit interval at most
    sim.feed(JobEvent(ev.ExecuteEvent(cluster=101)))
    assert len(sim.submits) == 42                      # 2 of room: both go together
    sim.feed(JobEvent(ev.ExecuteEvent(cluster=102)))
    assert len(sim.submits) == 42 and sim.run.counts()["idle_procs"] == 39
    sim.t = sim.run._idle_held_at + 499                # idle jobs that barely move
    sim.feed(Tick())
    assert len(sim.submits) == 42
    sim.t = sim.run._idle_held_at + 500
    sim.feed(Tick())
    assert len(sim.submits) == 43 and sim.run.counts()["idle_procs"] == 40   # up to the limit, not past it


def test_evicted_proc_is_idle_again():
    sim = Sim(dag_of("A B"), Options(max_idle=1), auto=False)
    sim.go()
    sim.feed(JobEvent(ev.ExecuteEvent(cluster=100)))
    assert sim.submits == ["A", "B"]
    sim.feed(JobEvent(ev.ExecuteEvent(cluster=101)))
    sim.feed(JobEvent(ev.JobEvictedEvent(cluster=100)))
    assert sim.run.counts()["idle_procs"] == 1


def test_held_proc_counts_as_idle():
    sim = Sim(dag_of("A B"), Options(max_idle=1), auto=False)
    sim.go()
    sim.feed(JobEvent(ev.ExecuteEvent(cluster=100)))
    sim.feed(JobEvent(ev.ExecuteEvent(cluster=101)))
    sim.feed(JobEvent(ev.JobHeldEvent(cluster=100)))
    assert sim.run.counts() | {} and sim.run.counts()["idle_procs"] == 1
    assert sim.run.counts()["held_procs"] == 1
    sim.feed(JobEvent(ev.JobReleasedEvent(cluster=100)))
    assert sim.run.counts()["held_procs"] == 0


def test_max_job_holds_removes_the_job_and_fails_the_node():
    sim = Sim(dag_of("A"), Options(max_job_holds=2), auto=False)
    sim.go()
    sim.feed(JobEvent(ev.JobHeldEvent(cluster=100)))
    sim.feed(JobEvent(ev.JobReleasedEvent(cluster=100)))
    assert not [a for a in sim.actions if type(a).__name__ == "RemoveJobs"]
    sim.feed(JobEvent(ev.JobHeldEvent(cluster=100)))
    removes = [a for a in sim.actions if type(a).__name__ == "RemoveJobs"]
    assert removes and removes[0].reason == "DAG Limit: Max number of held jobs was reached."
    sim.feed(JobEvent(ev.JobAbortedEvent(cluster=100)))
    assert sim.exit.code == 1


def test_max_pre_limits_running_pre_scripts():
    pre = {"scripts": {"PRE": script("PRE")}}
    sim = Sim(dag_of("A B C", A=pre, B=pre, C=pre), Options(max_pre=1))
    sim.feed(__import__("htc.dag.engine", fromlist=["Start"]).Start())
    assert len(sim.scripts) == 1
    sim.go()
    assert len(sim.scripts) == 3 and sim.exit.code == 0


def test_max_post_limits_running_post_scripts():
    post = {"scripts": {"POST": script("POST")}}
    sim = Sim(dag_of("A B", A=post, B=post), Options(max_post=1), auto=False)
    sim.go()
    sim.feed(sim.job_end(100, 0, 0))
    sim.feed(sim.job_end(101, 0, 0))
    assert len(sim.scripts) == 1


def test_max_hold_limits_running_hold_scripts():
    hold = {"scripts": {"HOLD": script("HOLD")}}
    sim = Sim(dag_of("A B", A=hold, B=hold), Options(max_hold=1), auto=False)
    sim.go()
    sim.run.handle(JobEvent(ev.JobHeldEvent(cluster=100)), sim.t)
    out = sim.run.handle(JobEvent(ev.JobHeldEvent(cluster=101)), sim.t)
    assert not [a for a in out if type(a).__name__ == "RunScript"]
    out = sim.run.handle(__import__("htc.dag.engine", fromlist=["ScriptExited"]).ScriptExited(
        "A", "HOLD", 0), sim.t)
    assert [a.node for a in out if type(a).__name__ == "RunScript"] == ["B"]


def test_category_maxjobs():
    dag = dag_of("A B C D E", A={"category": "c"}, B={"category": "c"}, C={"category": "c"})
    dag.maxjobs["c"] = 1
    sim = Sim(dag)
    assert sim.go().code == 0
    assert sim.max_cat["c"] == 1
    assert sim.submits[:3] == ["A", "D", "E"]


def test_category_throttle_does_not_block_other_nodes():
    dag = dag_of("A B C", A={"category": "c"}, B={"category": "c"})
    dag.maxjobs["c"] = 1
    sim = Sim(dag, auto=False)
    sim.go()
    assert sim.submits == ["A", "C"]


def test_max_submits_per_interval():
    sim = Sim(dag_of("A B C D E"), Options(max_submits_per_interval=2, submit_interval=5.0),
              auto=False)
    sim.feed(Start())
    assert len(sim.submits) == 2
    assert sim.run.next_deadline() == 1005.0
    sim.t = 1003.0
    sim.feed(Tick())
    assert len(sim.submits) == 2
    sim.t = 1005.0
    sim.feed(Tick())
    assert len(sim.submits) == 4
    sim.go()
    assert len(sim.submits) == 5


def test_throttles_helpers():
    t = Throttles(max_jobs=2, max_idle=0, max_pre=1)
    assert t.may_submit(1, 99) is None
    assert "max_jobs" in t.may_submit(2, 0)
    assert t.may_run_script("PRE", 0) and not t.may_run_script("PRE", 1)
    assert t.may_run_script("HOLD", 1000)
    assert category_full({"c": 1}, "c", {"c": 1})
    assert not category_full({"c": 1}, "d", {"c": 5})
    assert not category_full({}, None, {})


def test_ready_queue_order():
    q = ReadyQueue()
    q.push("a", 0)
    q.push("b", 5)
    q.push("c", 0, head=True)
    q.push("d", 0)
    q.remove("d")
    assert q.ordered() == ["b", "c", "a"] and len(q) == 3 and "a" in q
    first = q.pop()
    assert first[3] == "b"
    q.restore(first)
    assert [q.pop()[3] for _ in range(3)] == ["b", "c", "a"] and q.pop() is None


# --- property: any DAG, any outcomes --------------------------------------------------------------
@st.composite
def random_runs(draw):
    n = draw(st.integers(1, 9))
    names = [f"N{i}" for i in range(n)]
    dag = Dag(file="/d/r.dag")
    for name in names:
        dag.add_node(Node(name, submit_file="x.sub", dir="/d",
                          retry=draw(st.integers(0, 2)),
                          category=draw(st.sampled_from([None, "c"])),
                          priority=draw(st.integers(-1, 1))))
    for j in range(n):
        for i in range(j):
            if draw(st.booleans()) and draw(st.booleans()):
                dag.add_edge(names[i], names[j], weak=draw(st.booleans()))
    dag.maxjobs["c"] = draw(st.integers(1, 2))
    outcomes = st.lists(st.sampled_from([0, 0, 1, ABORT, -9]), max_size=4)
    exits = {name: draw(outcomes) for name in names}
    return dag, exits, draw(st.integers(0, 3))


@settings(max_examples=150, deadline=None)
@given(random_runs())
def test_any_dag_terminates_in_order_within_throttles(case):
    dag, exits, max_jobs = case
    sim = Sim(dag, Options(max_jobs=max_jobs), exits=exits)
    seen_done: set[str] = set()
    submitted_at: dict[str, int] = {}
    original = sim.run.handle

    def watch(event, now):
        out = original(event, now)
        for a in out:
            if isinstance(a, SubmitNode):
                for parent in dag.parents(a.node):
                    status = sim.run.node_status(parent)
                    if dag.is_weak(parent, a.node):
                        assert status in (NodeStatus.DONE, NodeStatus.ERROR)
                    else:
                        assert status is NodeStatus.DONE, (parent, a.node)
                submitted_at[a.node] = len(submitted_at)
        return out

    sim.run.handle = watch
    exit = sim.go()
    assert exit is not None, "the DAG did not finish"
    if max_jobs:
        assert sim.max_queued <= max_jobs
    assert sim.max_cat.get("c", 0) <= dag.maxjobs["c"]
    statuses = {n: sim.run.node_status(n) for n in dag.nodes}
    assert all(s in (NodeStatus.DONE, NodeStatus.ERROR, NodeStatus.FUTILE)
               for s in statuses.values())
    failed = any(s is NodeStatus.ERROR for s in statuses.values())
    assert exit.code == (1 if failed else 0)
    for name, s in statuses.items():
        if s is NodeStatus.FUTILE:
            assert any(statuses[p] in (NodeStatus.ERROR, NodeStatus.FUTILE)
                       for p in nx.ancestors(dag.graph, name))
        assert sim.submits.count(name) <= dag.nodes[name].retry + 1
    seen_done.update(n for n, s in statuses.items() if s is NodeStatus.DONE)


def test_counts_without_held_skip_the_sum_over_nodes():
    """The manager's per-step report asks for counts without ``held_procs``: the same numbers,
    without the walk over every node that held needs."""
    sim = Sim(dag_of("A B"), Options(max_idle=1), auto=False)
    sim.go()
    sim.feed(JobEvent(ev.ExecuteEvent(cluster=100)))
    sim.feed(JobEvent(ev.JobHeldEvent(cluster=100)))
    full, cheap = sim.run.counts(), sim.run.counts(held=False)
    assert "held_procs" not in cheap and full.pop("held_procs") == 1
    assert cheap == full
