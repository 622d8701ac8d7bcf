"""Properties over random DAGs with scripts, FINAL nodes, retries, aborts and crashes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from htc.dag.engine import (
    Exit, JobEvent, NodeStatus, Options, Recover, RunScript, ScriptExited, Start, SubmitNode,
)
from htc.dag.model import Dag, Node, NodeKind, Script
from htc.eventlog import events as ev
from tests.dag_engine_sim import ABORT, Sim

FINISHED = (NodeStatus.DONE, NodeStatus.ERROR, NodeStatus.FUTILE)


@st.composite
def scripted_runs(draw):
    n = draw(st.integers(1, 7))
    names = [f"N{i}" for i in range(n)]
    dag = Dag(file="/d/r.dag")
    script_exits = {}
    for name in names:
        scripts = {}
        for kind in ("PRE", "POST"):
            if draw(st.booleans()):
                defer = draw(st.sampled_from([None, 4]))
                scripts[kind] = Script(kind, "/bin/s", ["$JOB", "$RETURN"],
                                       defer_status=defer, defer_time=3)
                script_exits[(name, kind)] = draw(st.lists(st.sampled_from([0, 0, 1, 4, 2]),
                                                           max_size=4))
        abort = draw(st.sampled_from([None, None, 2]))
        dag.add_node(Node(name, submit_file="x.sub", dir="/d", scripts=scripts,
                          retry=draw(st.integers(0, 2)),
                          pre_skip=draw(st.sampled_from([None, 2])) if "PRE" in scripts else None,
                          abort_status=abort,
                          abort_return=draw(st.sampled_from([None, 0, 7])) if abort else None))
    for j in range(n):
        for i in range(j):
            if draw(st.integers(0, 2)) == 0:
                dag.add_edge(names[i], names[j], weak=draw(st.booleans()))
    if draw(st.booleans()):
        dag.add_node(Node("FIN", kind=NodeKind.FINAL, submit_file="f.sub", dir="/d"))
        names.append("FIN")
    exits = {name: draw(st.lists(st.sampled_from([0, 0, 1, 2, ABORT]), max_size=4))
             for name in names}
    opts = Options(max_jobs=draw(st.integers(0, 2)), max_pre=draw(st.integers(0, 2)),
                   max_post=draw(st.integers(0, 2)), always_run_post=draw(st.booleans()))
    return dag, opts, exits, script_exits


class Watched(Sim):
    """A Sim that checks, at every step, the rules a real DAGMan never breaks."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.running = {"PRE": 0, "POST": 0, "HOLD": 0}
        self.most = {"PRE": 0, "POST": 0, "HOLD": 0}
        self.final_submitted = False

    def feed(self, event):
        if isinstance(event, ScriptExited):
            self.running[event.kind] -= 1
        return super().feed(event)

    def _perform(self, a):
        if isinstance(a, RunScript):
            self.running[a.kind] += 1
            self.most[a.kind] = max(self.most[a.kind], self.running[a.kind])
        if isinstance(a, SubmitNode):
            assert not self.final_submitted, "a node was submitted after the FINAL node"
            if self.dag.nodes[a.node].kind is NodeKind.FINAL:
                self.final_submitted = True
            for parent in self.dag.parents(a.node):
                ok = (NodeStatus.DONE, NodeStatus.ERROR) if self.dag.is_weak(parent, a.node) \
                    else (NodeStatus.DONE,)
                assert self.run.node_status(parent) in ok, (parent, a.node)
        super()._perform(a)


@settings(max_examples=150, deadline=None)
@given(scripted_runs())
def test_random_scripted_dags_end_within_their_throttles(case):
    dag, opts, exits, script_exits = case
    sim = Watched(dag, opts, exits=exits, script_exits=script_exits)
    exit = sim.go()
    assert exit is not None, sim.run.counts()
    for kind, limit in (("PRE", opts.max_pre), ("POST", opts.max_post)):
        if limit:
            assert sim.most[kind] <= limit
    if opts.max_jobs:
        assert sim.max_queued <= opts.max_jobs
    final = dag.final
    if final is not None:
        assert sim.run.final_started                 # FINAL runs in every case
        assert sim.run.node_status(final.name) in FINISHED
    if not sim.run.aborted:
        assert all(sim.run.node_status(n) in FINISHED for n in dag.nodes if n != "FIN")
    if exit.code == 0 and not sim.run.aborted and final is None:
        assert all(sim.run.node_status(n) is NodeStatus.DONE for n in dag.nodes)


@st.composite
def crash_cases(draw):
    n = draw(st.integers(1, 6))
    names = [f"N{i}" for i in range(n)]
    dag = Dag(file="/d/c.dag")
    for name in names:
        scripts = {k: Script(k, "/bin/s") for k in ("PRE", "POST") if draw(st.booleans())}
        dag.add_node(Node(name, submit_file="x.sub", dir="/d", retry=draw(st.integers(0, 1)),
                          scripts=scripts))
    for j in range(n):
        for i in range(j):
            if draw(st.integers(0, 2)) == 0:
                dag.add_edge(names[i], names[j])
    exits = {name: draw(st.lists(st.sampled_from([0, 0, 1]), max_size=2)) for name in names}
    return dag, exits, draw(st.integers(1, 30))


@settings(max_examples=150, deadline=None)
@given(crash_cases())
def test_after_a_crash_no_finished_node_runs_again(case):
    dag, exits, steps = case
    first = Sim(dag, exits=exits)
    first.go(max_steps=steps)
    if first.exit is not None:
        return                                      # finished before the crash
    second = Sim(dag, exits={k: v[first.attempt[k]:] for k, v in exits.items()})
    second.next_cluster = 5000
    second.feed(Recover(list(first.nodes_log)))
    second.feed(Start())
    for name, node in second.run.nodes.items():       # jobs left in the queue end now
        if node.status is NodeStatus.SUBMITTED and node.cluster is not None and \
                node.cluster < 5000:
            outs = exits.get(name, [])
            idx = first.attempt[name] - 1
            code = outs[idx] if 0 <= idx < len(outs) else 0
            second.pending.append(JobEvent(ev.JobTerminatedEvent(
                cluster=node.cluster, return_value=code)))
    assert isinstance(second.go(), Exit)
    posts_logged = {e.dag_node_name for e in first.nodes_log
                    if isinstance(e, ev.PostScriptTerminatedEvent)}
    for name in dag.nodes:
        if first.run.node_status(name) in (NodeStatus.DONE, NodeStatus.ERROR):
            assert name not in second.submits, name
            if name in posts_logged:
                assert (name, "POST") not in [(n, k) for (n, k, _) in second.scripts], name
        if first.run.node_status(name) is NodeStatus.DONE:
            assert second.run.node_status(name) is NodeStatus.DONE
        if first.run.node_status(name) is NodeStatus.SUBMITTED and "PRE" in \
                dag.nodes[name].scripts:                  # its PRE ran: again only to retry
            pres = [(n, k) for (n, k, _) in second.scripts].count((name, "PRE"))
            assert pres == second.run.nodes[name].retries - first.run.nodes[name].retries
