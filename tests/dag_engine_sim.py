"""A pretend DAG manager for the engine's unit tests: it performs the engine's actions.

Node jobs and scripts end as the test says (exit codes per attempt), one event at a time in
the order a real nodes log would show them; time advances one second per event, and the
simulator ticks the engine at its deadlines when nothing else happens.
"""

from __future__ import annotations

from collections import defaultdict, deque

from htc.dag.engine import (
    DagRun, Exit, JobEvent, NodeSubmitted, Options, RemoveJobs, RunScript, ScriptExited, Start,
    SubmitFailed, SubmitNode, Tick, WriteNodeEvent,
)
from htc.dag.model import Dag, Node, NodeKind, Script
from htc.eventlog import events as ev

ABORT = "abort"          # a proc outcome: removed from the queue
HOLD = "hold"            # a proc outcome: held (stays in the queue until removed)
SUBMIT_FAIL = "submit-fail"   # an attempt outcome: the submission fails


def dag_of(spec: str, **nodes: dict) -> Dag:
    """A Dag from ``"A->B A->C B->D C->D"`` (nodes in first-seen order); ``~>`` is a WEAK edge.

    Keyword arguments set Node fields: ``dag_of("A->B", A={"retry": 2})``.
    """
    dag = Dag(file="/d/test.dag")
    edges = []
    for word in spec.split():
        weak = "~>" in word
        names = word.replace("~>", "->").split("->")
        for name in names:
            if name and name not in dag.nodes:
                dag.add_node(Node(name, submit_file=f"/d/{name}.sub", dir="/d"))
        if len(names) == 2:
            edges.append((names[0], names[1], weak))
    for name, fields in nodes.items():
        if name not in dag.nodes:
            dag.add_node(Node(name, submit_file=f"/d/{name}.sub", dir="/d"))
        for key, value in fields.items():
            setattr(dag.nodes[name], key, value)
    for parent, child, weak in edges:
        dag.add_edge(parent, child, weak=weak)
    return dag


def script(kind: str, *args: str, **kw) -> Script:
    """A Script of ``kind`` running ``/bin/s`` with ``args``."""
    return Script(kind, "/bin/s", list(args), **kw)


def final(dag: Dag, name: str = "F", **fields) -> Dag:
    """Add a FINAL node to ``dag``."""
    dag.add_node(Node(name, kind=NodeKind.FINAL, submit_file=f"/d/{name}.sub", dir="/d",
                      **fields))
    return dag


class Sim:
    """Drives a DagRun; ``exits[node]`` lists per-attempt outcomes (an int for every proc, a
    list per proc, ABORT, HOLD, or SUBMIT_FAIL), ``script_exits[(node, kind)]`` per-run
    statuses (default 0), ``procs[node]`` the procs per submission (default 1)."""

    def __init__(self, dag: Dag, options: Options | None = None, *, exits=None,
                 script_exits=None, procs=None, auto: bool = True):
        self.run = DagRun(dag, options or Options())
        self.dag = dag
        self.exits = {k: list(v) for k, v in (exits or {}).items()}
        self.script_exits = {k: list(v) for k, v in (script_exits or {}).items()}
        self.procs = procs or {}
        self.auto = auto
        self.t = 1000.0
        self.next_cluster = 100
        self.actions: list = []
        self.pending: deque = deque()
        self.immediate: deque = deque()
        self._draining = False
        self.submits: list[str] = []
        self.scripts: list[tuple[str, str, list[str]]] = []
        self.in_queue: dict[int, set[int]] = {}     # cluster -> procs still queued
        self.node_of: dict[int, str] = {}
        self.exit: Exit | None = None
        self.max_queued = 0
        self.max_cat: dict[str, int] = defaultdict(int)
        self.attempt: dict[str, int] = defaultdict(int)
        self.nodes_log: list[ev.Event] = []          # what the nodes log holds, in order

    # --- feeding -----------------------------------------------------------------------
    def feed(self, event) -> list:
        """Give the engine one event now; perform its actions; return them."""
        if isinstance(event, JobEvent):
            self.nodes_log.append(event.event)
        actions = self.run.handle(event, self.t)
        self.t += 1
        for a in actions:
            self._perform(a)
        if not self._draining:
            self._draining = True
            while self.immediate:               # submit outcomes, right after the actions
                self.feed(self.immediate.popleft())
            self._draining = False
        return actions

    def _perform(self, a) -> None:
        self.actions.append(a)
        if isinstance(a, Exit):
            self.exit = a
        elif isinstance(a, SubmitNode):
            self._submit(a)
        elif isinstance(a, RunScript):
            self.scripts.append((a.node, a.kind, a.args))
            outs = self.script_exits.get((a.node, a.kind), [])
            status = outs.pop(0) if outs else 0
            self.pending.append(ScriptExited(a.node, a.kind, status))
        elif isinstance(a, WriteNodeEvent):
            self.nodes_log.append(a.event)
        elif isinstance(a, RemoveJobs):
            for cluster in a.clusters:
                for proc in sorted(self.in_queue.get(cluster, ())):
                    self.pending.append(JobEvent(ev.JobAbortedEvent(
                        cluster=cluster, proc=proc, timestamp=self.t, reason=a.reason)))

    def _submit(self, a: SubmitNode) -> None:
        self.submits.append(a.node)
        n = self.attempt[a.node]
        self.attempt[a.node] += 1
        outs = self.exits.get(a.node, [])
        outcome = outs[n] if n < len(outs) else 0
        if outcome == SUBMIT_FAIL:
            self.immediate.append(SubmitFailed(a.node, "simulated submit failure"))
            return
        cluster = self.next_cluster
        self.next_cluster += 1
        procs = self.procs.get(a.node, 1)
        self.node_of[cluster] = a.node
        self.in_queue[cluster] = set(range(procs))
        self._track()
        self.immediate.append(NodeSubmitted(a.node, cluster, procs))   # as a manager does
        for p in range(procs):                  # the schedd logs these as it submits
            self.immediate.append(JobEvent(ev.SubmitEvent(
                cluster=cluster, proc=p, timestamp=self.t, log_notes=f"DAG Node: {a.node}")))
        if not self.auto:
            return
        for p in range(procs):
            code = outcome[p] if isinstance(outcome, list) else outcome
            self.pending.append(self.job_end(cluster, p, code))

    def job_end(self, cluster: int, proc: int, code) -> JobEvent:
        """The event that ends (or holds) ``cluster.proc`` with ``code``."""
        if code == ABORT:
            return JobEvent(ev.JobAbortedEvent(cluster=cluster, proc=proc, timestamp=self.t))
        if code == HOLD:
            return JobEvent(ev.JobHeldEvent(cluster=cluster, proc=proc, timestamp=self.t))
        if isinstance(code, int) and code < 0:
            return JobEvent(ev.JobTerminatedEvent(cluster=cluster, proc=proc, timestamp=self.t,
                                                  terminated_normally=False,
                                                  return_value=None, signal=-code))
        return JobEvent(ev.JobTerminatedEvent(cluster=cluster, proc=proc, timestamp=self.t,
                                              return_value=code))

    def _track(self) -> None:
        queued = [c for c, procs in self.in_queue.items() if procs]
        self.max_queued = max(self.max_queued, len(queued))
        cats: dict[str, int] = defaultdict(int)
        for c in queued:
            cat = self.dag.nodes[self.node_of[c]].category
            if cat:
                cats[cat] += 1
        for cat, n in cats.items():
            self.max_cat[cat] = max(self.max_cat[cat], n)

    def step(self) -> bool:
        """Feed the next pending event (or a Tick at the deadline); False if none is left."""
        if self.exit is not None:
            return False
        if self.pending:
            event = self.pending.popleft()
            if isinstance(event, JobEvent) and isinstance(
                    event.event, (ev.JobTerminatedEvent, ev.JobAbortedEvent)):
                procs = self.in_queue.get(event.event.cluster)
                if procs is not None:            # (a cluster of an earlier run: always fed)
                    if event.event.proc not in procs:
                        return True              # already removed
                    procs.discard(event.event.proc)
            self.feed(event)
            return True
        deadline = self.run.next_deadline()
        if deadline is None:
            return False
        self.t = max(self.t, deadline)
        self.feed(Tick())
        return True

    def go(self, max_steps: int = 100000) -> Exit | None:
        """Start (if not yet) and run until the engine exits or nothing is left to do."""
        if not self.run.started:
            self.feed(Start())
        for _ in range(max_steps):
            if not self.step():
                break
        return self.exit

    # --- looking -----------------------------------------------------------------------
    def of(self, kind: type) -> list:
        """The actions of one class, in order."""
        return [a for a in self.actions if isinstance(a, kind)]

    def status(self, name: str) -> int:
        """The node's NodeStatus number."""
        return int(self.run.node_status(name))
