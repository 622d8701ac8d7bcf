"""One run of a DAG: the node states, driven by events, answering with actions (sans-IO).

The manager calls ``run.handle(event, now)`` and performs the returned actions in order; it
calls ``handle(Tick(), now)`` again by ``run.next_deadline()``. The rules are HTCondor's
DAGMan's (``Dag::ProcessLogEvents``, the script reapers, ``condor_event_timer``): see
docs/dagman.md and the reference's sections 3.3-3.8. Job events are handled in
:mod:`htc.dag.engine.jobs`, the end of the DAG in :mod:`htc.dag.engine.outcome`.
"""

from __future__ import annotations

from collections import Counter, deque

from htc.dag.engine import jobs, outcome, recovery, reports
from htc.dag.engine.events import (
    Action, AppendJobstate, Halt, JobEvent, Log, NodeSubmitted, Recover, RemoveRequested,
    Resume, RunScript, ScriptExited, Start, SubmitFailed, Tick, WriteFile,
    WriteNodeEvent,
)
from htc.dag.engine.noderun import NodeRun
from htc.dag.engine.options import Options
from htc.dag.engine.ready import ReadyQueue, Throttles, category_full
from htc.dag.engine.scripts import DagCounts, expand_args
from htc.dag.engine.states import DagStatus, NodeStatus, Step, next_status
from htc.dag.model import Dag, NodeKind
from htc.errors import UsageError
from htc.eventlog.events import PostScriptTerminatedEvent, PreSkipEvent

S = NodeStatus


class DagRun:
    """The state of one DAG run. ``handle(event, now)`` returns the actions to perform."""

    def __init__(self, dag: Dag, options: Options | None = None):
        """Prepare a run of ``dag`` (DONE nodes are done; nothing starts before Start).

        Raises:
            UsageError: the DAG file says REJECT.
        """
        if dag.reject is not None:
            raise UsageError(f"{dag.reject}: the DAG file says REJECT, so DAGMan refuses to run "
                             f"{dag.file or 'it'}; remove the REJECT line to run it")
        self.dag = dag
        self.options = opts = options or Options()
        self.nodes = {name: NodeRun(name, i) for i, name in enumerate(dag.nodes)}
        self.service = {n.name for n in dag.of_kind(NodeKind.SERVICE)}
        final = dag.final
        self.final = final.name if final else None
        prov = dag.of_kind(NodeKind.PROVISIONER)
        self.provisioner = prov[0].name if prov else None
        self.provisioner_ready = self.provisioner is None
        self.by_cluster: dict[int, str] = {}
        self.ready = ReadyQueue()
        self.throttles = Throttles(opts.max_jobs, opts.max_idle, opts.max_pre, opts.max_post,
                                   opts.max_hold)
        self.count: Counter[NodeStatus] = Counter()       # main nodes (not SERVICE) by status
        self.cat_running: Counter[str] = Counter()        # MAXJOBS categories: nodes submitted
        self.idle_procs = 0
        self.in_flight = 0                                # submissions not yet answered
        self.backoff: set[str] = set()                    # nodes whose submission failed
        self._held_back_by: str | None = None             # the throttle last logged
        self._idle_held_at: float | None = None           # since when max_idle holds submissions
        self.status = self.status_before_halt = DagStatus.OK
        self.started = self.recovering = self.halted = self.aborted = False
        self.final_started = self.exited = self.shutting_down = False
        self.script_queue: dict[str, deque[str]] = {"PRE": deque(), "POST": deque(),
                                                    "HOLD": deque()}
        self.scripts_running: dict[str, Counter[str]] = {"PRE": Counter(), "POST": Counter(),
                                                         "HOLD": Counter()}
        self.deferred: dict[tuple[str, str], float] = {}
        self.window_start = 0.0
        self.submits_in_window = 0
        self.start_time: float | None = None
        self.now = 0.0
        self.rescue_file: str | None = None
        self.status_outdated = True
        self.last_status_update: float | None = None
        self.dot_suffix = 0
        self.next_seq = 1
        self.jobs_submitted = self.jobs_completed = self.jobs_succeeded = 0
        self._changed = False
        self.ran = Counter()          # metrics: (kind, ok) of finished nodes
        self.out: list[Action] = []
        for name, run in self.nodes.items():
            run.waiting = set(dag.parents(name))
            if not self._main(name):
                continue
            self.count[run.status] += 1
        self._bootstrap()

    # --- small helpers -----------------------------------------------------------------
    def _main(self, name: str) -> bool:
        """True for the nodes DAGMan counts (everything but SERVICE nodes)."""
        return name not in self.service

    def move(self, run: NodeRun, step: Step) -> None:
        """Move ``run`` along the state table, keeping the per-status counts."""
        new = next_status(run.name, run.status, step)
        if self._main(run.name):
            self.count[run.status] -= 1
            self.count[new] += 1
        run.status = new
        self.status_outdated = True
        self._changed = True

    def emit(self, action: Action) -> None:
        """Ask the manager to do ``action`` (after the ones asked before)."""
        self.out.append(action)

    def log(self, text: str) -> None:
        """A line for dagman.out."""
        self.out.append(Log(text))

    def jobstate(self, run: NodeRun | None, name: str, condor_id: str = "-",
                 when: float | None = None) -> None:
        """One JOBSTATE_LOG line (only if the DAG asks for a jobstate log)."""
        if not self.dag.jobstate_log or self.recovering:
            return
        if run is None:
            line = reports.jobstate_internal(self.now if when is None else when, name)
        else:
            if not run.seq:
                run.seq, self.next_seq = self.next_seq, self.next_seq + 1
            t = when if when is not None else (run.last_event_time or self.now)
            line = reports.jobstate_line(t, run.name, name, condor_id, run.seq)
        self.out.append(AppendJobstate(line))

    def set_dag_status(self, status: DagStatus, force: bool = False) -> None:
        """DAGMan's ``SetStatus``: the first failure sticks unless forced."""
        if force:
            self.status = status
            self.halted = status == DagStatus.HALTED
        elif self.halted and self.status_before_halt == DagStatus.OK:
            self.status_before_halt = status
        elif self.status == DagStatus.OK:
            self.status = status

    def counts_for_macros(self) -> DagCounts:
        """The DAG-wide numbers scripts and submissions see."""
        c = self.count
        return DagCounts(int(self.status), c[S.ERROR], c[S.FUTILE], c[S.DONE], c[S.SUBMITTED],
                         self.num_nodes(True), self.options.dag_id)

    def priority_of(self, node) -> int:
        """A node's effective priority: its PRIORITY plus the DAG's (-Priority)."""
        return node.priority + self.options.dag_priority

    def num_nodes(self, include_final: bool) -> int:
        """Nodes DAGMan counts (SERVICE nodes never; FINAL if asked)."""
        n = len(self.nodes) - len(self.service)
        return n - 1 if (self.final and not include_final) else n

    # --- the interface -----------------------------------------------------------------
    def handle(self, event: object, now: float) -> list[Action]:
        """Apply ``event`` (see :mod:`htc.dag.engine.events`) at time ``now``; return actions."""
        self.now = now
        self.out = []
        if self.exited:
            return []
        if isinstance(event, Start):
            self._start()
        elif isinstance(event, Recover):
            if self.started:
                raise ValueError("DagRun.handle: Recover replays the nodes log before Start; "
                                 "this run has started already")
            recovery.replay(self, list(event.events))
        elif isinstance(event, ScriptExited):
            self._script_exited(event.node, event.kind, event.status)
        elif isinstance(event, NodeSubmitted):
            jobs.node_submitted(self, event.node, event.cluster, event.procs)
        elif isinstance(event, SubmitFailed):
            jobs.submit_failed(self, event.node, event.error)
        elif isinstance(event, JobEvent):
            jobs.job_event(self, event.event)
        elif isinstance(event, RemoveRequested):
            if self.started:
                outcome.shutdown(self, 2, DagStatus.RM)
        elif isinstance(event, Halt):
            if not self.halted:
                self.halted, self.status_before_halt = True, self.status
                self.status = DagStatus.HALTED
                self.log("DAG is halted: no new PRE scripts or submissions")
        elif isinstance(event, Resume):
            if self.halted:
                self.halted, self.status = False, self.status_before_halt
                self.log("DAG is resumed")
        elif not isinstance(event, Tick):
            raise TypeError(f"DagRun.handle: {type(event).__name__} is not an engine event; "
                            "use one of htc.dag.engine.events")
        if self.started:
            self._pump()
        return self.out

    def next_deadline(self) -> float | None:
        """When to call ``handle(Tick(), now)`` next (DEFERred scripts, status file), or None."""
        if self.exited or not self.started:
            return None
        times = list(self.deferred.values())
        if len(self.ready) and self.options.max_submits_per_interval and \
                self.submits_in_window >= self.options.max_submits_per_interval:
            times.append(self.window_start + self.options.submit_interval)
        if self._refilling() and len(self.ready):
            times.append(self._idle_held_at + self.options.submit_interval)
        times += [self.nodes[n].not_before for n in self.backoff
                  if self.nodes[n].not_before > self.now and n in self.ready]
        spec = self.dag.node_status
        if spec and self.status_outdated and self.last_status_update is not None:
            times.append(self.last_status_update + spec.min_update)
        return min(times) if times else None

    def node_status(self, name: str) -> NodeStatus:
        """The state of node ``name``."""
        return self.nodes[name].status

    def counts(self, held: bool = True) -> dict[str, int]:
        """How many nodes are in each state (SERVICE nodes not counted), as ``htc dag status``;
        with ``held`` False, no ``held_procs`` (a sum over every node: the manager's per-step
        report does not show it)."""
        c = self.count
        out = {"total": self.num_nodes(True), "done": c[S.DONE], "pre": c[S.PRERUN],
                "queued": c[S.SUBMITTED], "post": c[S.POSTRUN], "ready": c[S.READY],
                "unready": c[S.NOT_READY], "failed": c[S.ERROR], "futile": c[S.FUTILE],
                "idle_procs": self.idle_procs, "dag_status": int(self.status)}
        if held:
            out["held_procs"] = sum(len(r.held) for r in self.nodes.values())
        return out

    # --- starting --------------------------------------------------------------------
    def _bootstrap(self) -> None:
        """DONE nodes are done; nodes without parents are ready (nothing starts yet)."""
        for name, node in self.dag.nodes.items():
            run = self.nodes[name]
            if node.done and node.kind is not NodeKind.FINAL:
                run.predone = True
                self.move(run, Step.PREDONE)
                self.notify_children(run)
        for name, run in self.nodes.items():
            if run.status is S.NOT_READY and not run.waiting and name != self.final:
                self.move(run, Step.PARENTS_DONE)

    def _start(self) -> None:
        if self.started:
            return
        self.started = True
        self.start_time = self.now
        self.window_start = self.now
        self.jobstate(None, f"DAGMAN_STARTED {self.options.dag_id}.0")
        if self.dag.dot:
            self.write_dot()
        for name in self.service:
            if self.nodes[name].status is S.READY:
                self.start_node(self.nodes[name])
        for run in self.nodes.values():
            if run.status is S.POSTRUN:                 # recovered: the POST runs again
                self.queue_script(run, "POST")
        if not self.provisioner_ready:
            self.start_node(self.nodes[self.provisioner])
            return
        self.start_ready_nodes()

    def start_ready_nodes(self) -> None:
        """Start every READY node that is not started yet, in file order."""
        for name, run in self.nodes.items():
            if (run.status is S.READY and name not in self.ready and name not in self.service
                    and not run.awaiting_submit):
                self.start_node(run)

    def start_node(self, run: NodeRun, is_retry: bool = False) -> None:
        """DAGMan's ``StartNode``: run the PRE script, or queue the node for submission."""
        node = self.dag.nodes[run.name]
        if not is_retry and node.save_point:
            self.emit(WriteFile(node.save_point, outcome.save_point_text(self, run.name)))
        if "PRE" in node.scripts and not run.pre_done:
            self.move(run, Step.RUN_PRE)
            self.queue_script(run, "PRE")
            return
        head = (is_retry and self.options.retry_node_first) or self.options.submit_depth_first
        self.ready.push(run.name, self.priority_of(node), head=head)

    def notify_children(self, run: NodeRun) -> None:
        """``run`` finished as its children need: children with no other wait become READY."""
        for child in self.dag.children(run.name):
            self.parent_finished(child, run.name)

    def parent_finished(self, child: str, parent: str) -> None:
        """One parent of ``child`` no longer holds it back."""
        crun = self.nodes[child]
        crun.waiting.discard(parent)
        if crun.waiting or crun.status is not S.NOT_READY or self.final_started:
            return
        self.move(crun, Step.PARENTS_DONE)
        if self.started and not self.recovering and self.provisioner_ready:
            self.start_node(crun)

    # --- scripts ----------------------------------------------------------------------
    def queue_script(self, run: NodeRun, kind: str) -> None:
        """Run ``kind`` for ``run`` when its throttle allows."""
        self.script_queue[kind].append(run.name)

    def _run_scripts(self) -> None:
        for kind, queue in self.script_queue.items():
            if kind == "PRE" and self.halted and not self.final_started:
                continue                               # halted: no new PRE scripts
            while queue and self.throttles.may_run_script(
                    kind, sum(self.scripts_running[kind].values())):
                name = queue.popleft()
                run = self.nodes[name]
                script = self.dag.nodes[name].scripts[kind]
                warn: list[str] = []
                args = expand_args(script.args, kind, run, self.dag.nodes[name].retry,
                                   self.counts_for_macros(), warn)
                for w in warn:
                    self.log(w)
                self.scripts_running[kind][name] += 1
                if kind != "HOLD":
                    cid = f"{run.cluster}.0" if kind == "POST" and run.cluster else "-"
                    self.jobstate(run, f"{kind}_SCRIPT_STARTED", cid)
                self.log(f"Running {kind} script of Node {name}...")
                self.emit(RunScript(name, kind, script.executable, args,
                                     self.dag.nodes[name].dir, script.debug_file,
                                     script.debug_stream))

    def _script_exited(self, name: str, kind: str, status: int) -> None:
        if name not in self.nodes:
            raise KeyError(f"ScriptExited: the DAG has no node {name!r}")
        if kind not in self.scripts_running:
            raise ValueError(f"ScriptExited: kind {kind!r} of node {name} is not PRE, POST or "
                             "HOLD")
        running = self.scripts_running[kind]
        if running[name] <= 0:
            self.log(f"Warning: ignoring the end of a {kind} script of node {name} that the "
                     "DAG is not waiting for")
            return
        running[name] -= 1
        if not running[name]:
            del running[name]
        run = self.nodes[name]
        script = self.dag.nodes[name].scripts[kind]
        if kind == "HOLD":
            return                                     # best effort, result ignored
        if script.defer_status is not None and status == script.defer_status:
            self.log(f"Deferring {kind} script of node {name} for {script.defer_time} seconds "
                     f"(exit value {status})")
            self.deferred[(name, kind)] = self.now + script.defer_time
            return
        if kind == "PRE":
            self._pre_reaper(run, status)
        else:
            self._post_reaper(run, status)

    def _pre_reaper(self, run: NodeRun, status: int) -> None:
        node = self.dag.nodes[run.name]
        run.retval = status
        run.pre_retval = status
        self.jobstate(run, "PRE_SCRIPT_SUCCESS" if status == 0 else "PRE_SCRIPT_FAILURE")
        if status == 0:
            run.pre_done = True
            self.move(run, Step.PRE_OK)
            if self.final_started and run.name != self.final:
                self.move(run, Step.UNSTART)       # the FINAL node took over: never submitted
            else:
                self.ready.push(run.name, self.priority_of(node),
                                head=self.options.submit_depth_first)
        elif node.pre_skip is not None and status == node.pre_skip:
            self.log(f"PRE_SKIP return value {status} indicates we are done (successfully) "
                     f"with node {run.name}")
            run.pre_done = True
            run.retval = 0
            self.emit(WriteNodeEvent(PreSkipEvent(cluster=-1, timestamp=self.now,
                                                   dag_node_name=run.name)))
            self.move(run, Step.SUCCEED)
            self.node_done(run)
        elif self.options.always_run_post and "POST" in node.scripts:
            run.job_retval = -1004
            run.jobs_failed = True
            self.move(run, Step.RUN_POST)
            self.queue_script(run, "POST")
        else:
            run.error = (f"PRE script died on signal {-status}" if status < 0
                         else f"PRE Script failed with status {status}")
            self.move(run, Step.FAIL)
            self.node_failed(run)
        outcome.check_abort(self, run, "PRE script")

    def _post_reaper(self, run: NodeRun, status: int) -> None:
        self.emit(WriteNodeEvent(PostScriptTerminatedEvent(
            cluster=run.cluster if run.cluster is not None else -1, timestamp=self.now,
            terminated_normally=status >= 0, return_value=status if status >= 0 else None,
            signal=-status if status < 0 else None, dag_node_name=run.name)))
        self.post_result(run, status)

    def post_result(self, run: NodeRun, status: int) -> None:
        """A POST script ended with ``status`` (live, or replayed from the nodes log)."""
        cid = f"{run.cluster}.0" if run.cluster else "-"
        run.retval = status
        if status != 0:
            self.jobstate(run, "POST_SCRIPT_FAILURE", cid)
            how = f"died on signal {-status}" if status < 0 else f"failed with status {status}"
            run.error = f"POST Script {how}"
            self.move(run, Step.FAIL)
            self.node_failed(run)
        else:
            self.jobstate(run, "POST_SCRIPT_SUCCESS", cid)
            self.move(run, Step.SUCCEED)
            self.node_done(run)
        outcome.check_abort(self, run, "POST script")

    # --- node outcomes ----------------------------------------------------------------
    def node_done(self, run: NodeRun) -> None:
        """``run`` is DONE: count it and let its children go (DAGMan's ``TerminateNode``)."""
        node = self.dag.nodes[run.name]
        self.ran[(node.kind, True)] += 1
        self.log(f"Node {run.name} completed successfully.")
        if run.name not in self.service:
            self.notify_children(run)

    def node_failed(self, run: NodeRun) -> None:
        """``run`` is in ERROR: retry it (from PRE), or fail it and make its children futile."""
        node = self.dag.nodes[run.name]
        if outcome.may_retry(self, run):
            run.retries += 1
            run.reset_attempt()
            self.move(run, Step.RETRY)
            self.log(f"Retrying node {run.name} (retry #{run.retries} of {node.retry})...")
            if not self.recovering:
                self.start_node(run, is_retry=True)
            return
        if node.retry > 0:
            run.error += f" (after {run.retries} node retries)"
        self.ran[(node.kind, False)] += 1
        self.log(f"Node {run.name} failed: {run.error}")
        if run.name in self.service:
            return                                    # SERVICE failures are ignored
        self.set_dag_status(DagStatus.NODE_FAILED)
        self.make_futile(run.name)

    def make_futile(self, name: str) -> None:
        """Children of the failed node ``name`` never run (WEAK children still do)."""
        for child in self.dag.children(name):
            if self.dag.is_weak(name, child):
                self.parent_finished(child, name)
            else:
                self._cascade_futile(child)

    def _cascade_futile(self, name: str) -> None:
        stack = [name]
        while stack:
            run = self.nodes[stack.pop()]
            if run.status not in (S.NOT_READY, S.READY):
                continue
            self.ready.remove(run.name)
            self.move(run, Step.FUTILE)
            stack.extend(self.dag.children(run.name))

    # --- submitting -------------------------------------------------------------------
    def _submit_ready(self) -> None:
        if self.halted and not self.final_started:
            return
        opts = self.options
        if self.now - self.window_start >= opts.submit_interval:
            self.window_start, self.submits_in_window = self.now, 0
        held_back = []
        while len(self.ready):
            if opts.max_submits_per_interval and \
                    self.submits_in_window >= opts.max_submits_per_interval:
                break
            why = self.throttles.may_submit(self.count[S.SUBMITTED], self.idle_procs + self.in_flight,
                                            refilling=self._refilling())
            if why:
                if why.startswith("max_idle") and self._idle_held_at is None:
                    self._idle_held_at = self.now
                if why != self._held_back_by:
                    self.log(f"{why}; {len(self.ready)} ready node(s) wait")
                self._held_back_by = why
                break
            self._held_back_by = self._idle_held_at = None
            key = self.ready.pop()
            if key is None:
                break
            run = self.nodes[key[3]]
            node = self.dag.nodes[run.name]
            if run.not_before > self.now or category_full(self.dag.maxjobs, node.category,
                                                          self.cat_running):
                held_back.append(key)
                continue
            self._submit(run)
        for key in held_back:
            self.ready.restore(key)

    def _refilling(self) -> bool:
        """Submissions are held at max_idle and wait for a batch's room to be free
        (:meth:`Throttles.may_submit`) -- for at most DAGMAN_USER_LOG_SCAN_INTERVAL (the submit
        interval), DAGMan's own pace, so that a DAG whose idle jobs barely move still goes on."""
        return self._idle_held_at is not None and self.now - self._idle_held_at < self.options.submit_interval

    def _submit(self, run: NodeRun) -> None:
        node = self.dag.nodes[run.name]
        self.move(run, Step.SUBMIT)
        run.awaiting_submit = True
        self.in_flight += 1
        self.backoff.discard(run.name)
        run.submit_attempts += 1
        if node.category:
            self.cat_running[node.category] += 1
        self.submits_in_window += 1
        self.log(f"Submitting HTCondor Node {run.name} job(s)...")
        self.emit(jobs.submit_action(self, run))

    # --- the loop ----------------------------------------------------------------------
    def _pump(self) -> None:
        """What DAGMan's event timer does: due scripts, scripts, submissions, the end."""
        for _ in range(100):
            self._changed = False
            for (name, kind), due in list(self.deferred.items()):
                if due <= self.now:
                    del self.deferred[(name, kind)]
                    self.queue_script(self.nodes[name], kind)
            self._run_scripts()
            self._submit_ready()
            if self.exited:
                return
            outcome.check_progress(self)
            if self.exited or not self._changed:
                break
        if self.dag.dot and self.dag.dot.update and self.status_outdated:
            self.write_dot()
        reports.maybe_write_status(self)

    def write_dot(self) -> None:
        """Write the DOT file (UPDATE rewrites it as nodes change)."""
        spec = self.dag.dot
        path = spec.file
        if not spec.overwrite:
            path = f"{spec.file}.{self.dot_suffix}"
            self.dot_suffix += 1
        self.emit(WriteFile(path, reports.dot_text(self, spec.include)))
