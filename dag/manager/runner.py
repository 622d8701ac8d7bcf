"""The manager's loop: the engine's actions carried out, the world's happenings fed back.

:class:`Runner` owns the I/O around one :class:`htc.dag.engine.DagRun`: it submits node jobs
(:mod:`~htc.dag.manager.submitter`), runs scripts (:mod:`~htc.dag.manager.scripts`), follows the
nodes log (:mod:`~htc.dag.manager.logwatch`), writes the files the engine asks for and
``dagman.out`` (:mod:`~htc.dag.manager.outputs`), and turns signals into events: ``SIGUSR1``
(the schedd's ``remove_kill_sig`` on ``htc rm`` of the manager job) is ``RemoveRequested``;
``SIGTERM`` (a hold, a schedd shutting down) stops the manager at once, leaving the lock file
so that the next start recovers. ``SIGCHLD`` only wakes the loop, so that a script's end is
seen at once.

Every engine call goes through :meth:`Runner.feed`, which queues the actions it returns (for
all the events of one read of the nodes log before any is carried out, so that the nodes they
make ready are submitted together); one action may feed more events (a submission answers with
``NodeSubmitted``), whose actions run after it, in order. The submissions the engine asks for
together go to the schedd as ``SubmitClusters`` batches (:mod:`~htc.dag.manager.batches`).
The loop sleeps on a self-pipe (``signal.set_wakeup_fd``) and on the nodes log's
:class:`~htc.dag.manager.logwatch.LogWake` (the schedd wrote the log) for the adaptive poll
interval of :class:`~htc.dag.manager.logwatch.AdaptivePoll`, or until the engine's next deadline.

The engine asks for the events DAGMan writes to the nodes log itself (``WriteNodeEvent``:
``POST_SCRIPT_TERMINATED`` when a POST script ends, ``PRE_SKIP`` when a PRE script's exit code
skips the node), so that recovery knows what only the manager saw; the log follower does not
hand them back to the engine, which had the ``ScriptExited`` already.
"""

from __future__ import annotations

import collections
import os
import selectors
import signal
import time

from htc.dag.engine import DagRun
from htc.dag.engine import events as e
from htc.dag.manager.batches import submit_batch
from htc.dag.manager.logwatch import AdaptivePoll, LogWake, NodeLog
from htc.dag.manager.outputs import DagmanOut, append_line, write_whole
from htc.dag.manager.scripts import Scripts
from htc.dag.manager.settings import Settings
from htc.dag.manager.submitter import NodeSubmission, ScheddLink, submit_many
from htc.dag.model import Dag, NodeKind
from htc.errors import HTCError
from htc.eventlog import EventLogWriter
from htc.eventlog import events as ev

__all__ = ["EXIT_RESTART", "Runner"]

#: the manager stopped without finishing (SIGTERM): start me again, I will recover
EXIT_RESTART = 3

#: events the manager writes to the nodes log itself (for recovery only)
_OWN_EVENTS = (ev.PostScriptTerminatedEvent, ev.PreSkipEvent)
_COUNT_COLUMNS = (("Done", "done"), ("Pre", "pre"), ("Queued", "queued"), ("Post", "post"), ("Ready", "ready"),
                  ("Un-Ready", "unready"), ("Failed", "failed"), ("Futile", "futile"))


class Runner:
    """Runs one DAG to its end (see the module docstring)."""

    def __init__(self, dag: Dag, run: DagRun, settings: Settings, *, dag_id: int, node_log: str,
                 out: DagmanOut, halt_file: str | None = None, transport=None):
        """Drive ``run`` (a fresh engine for ``dag``) with the nodes log at ``node_log``."""
        self.dag = dag
        self.run = run
        self.settings = settings
        self.dag_id = dag_id
        self.node_log_path = node_log
        self.out = out
        self.halt_file = halt_file
        self.transport = transport
        #: the connections to the schedd kept for node submissions
        self.link = ScheddLink(transport)
        self.scripts = Scripts()
        self.log = NodeLog(node_log)
        self.log_wake = LogWake(node_log)
        self.poll = AdaptivePoll(ceiling=max(0.005, float(settings.user_log_scan_interval)))
        self.exit_code: int | None = None
        self.dag_status = 0
        self._actions: collections.deque = collections.deque()
        #: the engine counts submit attempts and backs off between them (Options.max_submit_attempts):
        #: then each SubmitNode is one try
        self._engine_counts_attempts = hasattr(run_options(run), "max_submit_attempts")
        self._fake_cluster = 0
        #: a manager without a job (run by hand) has no job id to make its submission ids unique
        self._run_token = "" if dag_id > 0 else f".{os.getpid()}.{int(time.time())}"
        self._remove = False
        self._stop = False
        self._sig = None            # (selector, pipe ends, old handlers) while the signals are ours
        self._halted = False
        self._writer: EventLogWriter | None = None
        #: DAGMAN_DEBUG with D_FULLDEBUG or D_ALL: every event read goes to dagman.out
        self._full_debug = any(w in settings.debug.upper() for w in ("D_FULLDEBUG", "D_ALL"))
        self._last_counts: str | None = None
        self._next_halt_check = 0.0
        self._next_queue_update = 0.0
        self._next_pending_report = time.time() + settings.pending_report_interval

    # -- the engine ------------------------------------------------------------------------------
    def feed(self, *events) -> None:
        """Hand ``events`` to the engine, in order, then carry out the actions they returned (and
        theirs): the nodes that several events of one read of the log make ready (jobs that ended
        together) go to the schedd together."""
        for event in events:
            self._actions.extend(self.run.handle(event, time.time()))
        while self._actions:
            action = self._actions.popleft()
            if isinstance(action, e.SubmitNode) and not action.noop:
                # the submissions the engine asked for together go to the schedd together (its
                # "Submitting HTCondor Node X job(s)..." lines between them are written meanwhile)
                batch = [action]
                while self._actions and (isinstance(self._actions[0], e.Log) or (
                        isinstance(self._actions[0], e.SubmitNode) and not self._actions[0].noop)):
                    nxt = self._actions.popleft()
                    if isinstance(nxt, e.Log):
                        self._perform(nxt)
                    else:
                        batch.append(nxt)
                self._submit(batch)
            else:
                self._perform(action)

    def _perform(self, action) -> None:
        if isinstance(action, _Feed):
            self._actions.extend(self.run.handle(action.event, time.time()))
        elif isinstance(action, e.SubmitNode):
            self._submit([action])
        elif isinstance(action, e.RunScript):
            self.out.line(f"Running {action.kind} script of Node {action.node}...")
            self.scripts.start(action.node, action.kind, action.executable, list(action.args), action.cwd,
                               action.debug_file, action.debug_stream)
        elif isinstance(action, e.RemoveJobs):
            self._remove_jobs(action)
        elif type(action).__name__ == "WriteNodeEvent":
            self._own_event(action.event)
        elif isinstance(action, e.WriteFile):
            write_whole(action.path, action.text)
        elif isinstance(action, e.AppendJobstate):
            if self.dag.jobstate_log:
                append_line(self.dag.jobstate_log, action.line)
        elif isinstance(action, e.Log):
            self.out.line(action.text)
        elif isinstance(action, e.Exit):
            self.exit_code, self.dag_status = action.code, action.dag_status
        else:
            self.out.line(f"WARNING: the engine asked for {type(action).__name__}, which this manager "
                          "does not know; ignored")

    # -- actions ----------------------------------------------------------------------------------
    def _submit(self, batch: list) -> None:
        """Submit the nodes of ``batch`` (NOOP ones only pretend), and queue the engine's
        ``NodeSubmitted`` / ``SubmitFailed`` for each, in the batch's order. The log is not read
        meanwhile, so the engine knows every cluster before it sees that cluster's events."""
        subs = []
        for action in batch:
            if action.noop:
                self._noop(action)
            else:
                subs.append((action, self._submission(action)))
        if not subs:
            return
        attempts = 1 if self._engine_counts_attempts else self.settings.max_submit_attempts
        delay = float(self.settings.submit_delay)
        size = self.settings.submit_batch_size
        if len(subs) > 1 and delay <= 0 and size > 1:
            # the nodes the engine let go together: one SubmitClusters per DAGMAN_SUBMIT_BATCH_SIZE of them
            self.out.line(f"Submitting {len(subs)} nodes together "
                          f"({-(-len(subs) // size)} SubmitClusters of up to {size})")
            results = submit_batch([sub for _, sub in subs], attempts=attempts, transport=self.transport,
                                   link=self.link, batch_nodes=size)
        else:
            results = submit_many([sub for _, sub in subs], attempts=attempts, delay=delay,
                                  transport=self.transport, link=self.link)
        for (action, _sub), result in zip(subs, results):
            if isinstance(result, Exception):
                self.out.line(f"ERROR: submit attempt failed for Node {action.node}: {result}")
                self._actions.append(_Feed(e.SubmitFailed(action.node, str(result))))
            else:
                self.out.line(f"\tassigned HTCondor ID ({result.cluster}.0.0)")
                self._actions.append(_Feed(e.NodeSubmitted(action.node, result.cluster, result.procs)))

    def _noop(self, action) -> None:
        """A NOOP node: no job; the engine hears of a submission and a success, as from DAGMan."""
        self._fake_cluster -= 1
        self.out.line(f"Submitting HTCondor Node {action.node} job(s)... (NOOP)")
        self._actions.append(_Feed(e.NodeSubmitted(action.node, self._fake_cluster, 1)))
        self._actions.append(_Feed(e.JobEvent(ev.SubmitEvent(cluster=self._fake_cluster,
                                                             log_notes=f"DAG Node: {action.node}"))))
        self._actions.append(_Feed(e.JobEvent(ev.JobTerminatedEvent(cluster=self._fake_cluster,
                                                                    terminated_normally=True, return_value=0))))

    def _submission(self, action) -> NodeSubmission:
        node = self.dag.nodes.get(action.node)
        submit_file, submit_text = action.submit_file, action.submit_text
        if node is not None and node.kind is NodeKind.SUBDAG and submit_file and submit_text is None:
            submit_file = self._subdag_condor_sub(node, submit_file, action.priority)
        return NodeSubmission(
            node=action.node, submit_file=submit_file, submit_text=submit_text, cwd=action.cwd,
            macros=dict(action.macros), prepend=dict(action.prepend), attrs=dict(action.attrs),
            notes=action.notes, priority=action.priority or self.settings.default_priority,
            retry=action.retry, node_log=self.node_log_path, dag_id=self.dag_id,
            suppress_notification=self.settings.suppress_notification,
            put_failed_jobs_on_hold=self.settings.put_failed_jobs_on_hold,
            hold_claim_time=self.settings.hold_claim_time if self.dag.children(action.node) else 0,
            run_token=self._run_token)

    def _subdag_condor_sub(self, node, nested_dag: str, priority: int) -> str:
        """Write the nested DAG's ``.condor.sub`` (as ``condor_submit_dag -no_submit``); its
        manager adds the SUBDAG node's effective ``priority`` to its nodes' priorities."""
        from htc.dag.manager.condor_sub import ManagerJob, condor_sub_path, condor_sub_text
        from htc.dag.parser import parse_dag

        path = nested_dag if os.path.isabs(nested_dag) else os.path.join(node.dir, nested_dag)
        nested = parse_dag(path)
        text = condor_sub_text(nested, ManagerJob(dag_file=path, parent_dag_id=self.dag_id,
                                                       priority=priority or None))
        write_whole(condor_sub_path(path), text)
        return condor_sub_path(path)

    def _remove_jobs(self, action) -> None:
        from htc.client import act, parse_selection

        clusters = [c for c in action.clusters if c > 0]
        if not clusters or not self.settings.remove_node_jobs:
            return
        self.out.line(f"Removing HTCondor Node {action.node} job(s) {', '.join(map(str, clusters))}: "
                      f"{action.reason}")
        try:
            act("Remove", parse_selection([str(c) for c in clusters]), reason=action.reason,
                transport=self.transport)
        except HTCError as exc:
            self.out.line(f"WARNING: could not remove the jobs of Node {action.node}: {exc}")

    def _own_event(self, event: ev.Event) -> None:
        try:
            if self._writer is None:
                self._writer = EventLogWriter(self.node_log_path)
            self._writer.write(event)
        except (HTCError, OSError) as exc:
            self.out.line(f"WARNING: cannot write to the nodes log {self.node_log_path}: {exc}")

    def _script_done(self, node: str, kind: str, status: int) -> None:
        self.out.line(f"{kind} Script of Node {node} "
                      + (f"completed successfully." if status == 0 else
                         f"failed with status {status}" if status > 0 else f"died on signal {-status}"))
        self.feed(e.ScriptExited(node, kind, status))

    # -- the loop ---------------------------------------------------------------------------------
    def start(self, recovering: bool) -> None:
        """Take the signals over, recover from the nodes log (if ``recovering``), then start
        the DAG (a removal during a long first round of submissions is seen by the loop)."""
        if self._sig is None:
            self._sig = self._signals()
        if recovering:
            events = self.log.read()
            self.out.line(f"Running in RECOVERY mode... >>>>>>>>>>  {len(events)} events in {self.node_log_path}")
            self.feed(e.Recover(events))
            self.out.line("...done with RECOVERY mode <<<<<<<<<<")
        self.feed(e.Start())

    def loop(self) -> int:
        """Run until the engine says Exit (or SIGTERM); returns the exit code."""
        if self._sig is None:
            self._sig = self._signals()
        sel, rfd, wfd, old = self._sig
        try:
            while self.exit_code is None:
                now = time.time()
                busy = self._step(now)
                if self.exit_code is not None or self._stop:
                    break
                if busy:
                    self.poll.activity(now)
                timeout = self.poll.interval(time.time())
                deadline = self.run.next_deadline()
                if deadline is not None:
                    timeout = max(0.0, min(timeout, deadline - time.time()))
                self._wait(sel, timeout)
        finally:
            self._restore(sel, rfd, wfd, old)
            self._sig = None
            self.link.close()
        if self._stop and self.exit_code is None:
            self.scripts.kill_all()
            self.out.line("Received SIGTERM: stopping now; the next start of this DAG recovers")
            return EXIT_RESTART
        self._update_queue(final=True)
        if self._halted and self.halt_file:
            try:
                os.unlink(self.halt_file)   # the halt is used up: the next run of the DAG is not halted
            except FileNotFoundError:
                pass  # someone resumed meanwhile
        return self.exit_code if self.exit_code is not None else 1

    def _wait(self, sel, timeout: float) -> None:
        """Sleep until a signal, a write to the nodes log, a change of the halt file, or
        ``timeout`` seconds. Writes to the folder's other files -- the manager's own
        ``dagman.out`` lines above all, a few per step -- end no wait: each would cost a step
        that finds nothing new in the log."""
        end = time.monotonic() + timeout
        while True:
            ready = sel.select(max(0.0, end - time.monotonic()))
            if not ready:
                return  # the poll interval or the engine's deadline is up
            for key, _ in ready:
                if key.fd == self.log_wake.fileno():
                    if self.log_wake.drain():
                        return  # the schedd wrote the log: the next step reads it
                    continue
                try:
                    os.read(key.fd, 4096)
                except BlockingIOError:
                    pass  # drained already; a signal woke the loop all the same
                return
            if self.halt_file and os.path.exists(self.halt_file) != self._halted:
                return  # the halt file came or went: the next step sees it
            if time.monotonic() >= end:
                return

    def _step(self, now: float) -> bool:
        """One round: signals, scripts, the log, deadlines; True if anything happened."""
        busy = False
        if self._remove:
            self._remove = False
            self.out.line("Received SIGUSR1: the DAG manager job was removed")
            self.feed(e.RemoveRequested())
            busy = True
        for fin in self.scripts.reap():
            if fin.error:
                self.out.line(f"ERROR: {fin.error}")
            self._script_done(fin.node, fin.kind, fin.status)
            busy = True
        events = self.log.read()
        if self._full_debug:
            for event in events:
                self.out.line(f"Event: {type(event).__name__} for job {event.cluster}.{event.proc}", level=0)
        self.feed(*(e.JobEvent(event) for event in events if not isinstance(event, _OWN_EVENTS)))
        busy = busy or bool(events)
        deadline = self.run.next_deadline()
        if deadline is not None and time.time() >= deadline:
            self.feed(e.Tick())
        if self.halt_file and now >= self._next_halt_check:
            self._next_halt_check = now + 1.0
            self._check_halt()
        if busy:
            self._report_counts()
        if now >= self._next_queue_update:
            self._next_queue_update = now + max(1, self.settings.queue_update_interval)
            self._update_queue()
        if now >= self._next_pending_report:
            self._next_pending_report = now + max(1, self.settings.pending_report_interval)
            self._report_counts(force=True)
        return busy

    def _check_halt(self) -> None:
        halted = os.path.exists(self.halt_file)
        if halted != self._halted:
            self._halted = halted
            self.out.line(f"DAG {'halted' if halted else 'resumed'} ({self.halt_file} "
                          f"{'appeared' if halted else 'went away'})")
            self.feed(e.Halt() if halted else e.Resume())

    def _counts(self) -> dict:
        try:
            return self.run.counts(held=False)  # neither report shows held procs
        except Exception as exc:  # noqa: BLE001 -- a report must never stop the DAG
            return {"error": str(exc)}

    def _report_counts(self, force: bool = False) -> None:
        counts = self._counts()
        row = " ".join(f"{counts.get(key, 0):>8}" for _, key in _COUNT_COLUMNS)
        if row == self._last_counts and not force:
            return
        self._last_counts = row
        self.out.line(f"Of {counts.get('total', len(self.dag.nodes))} nodes total:")
        self.out.line(" ".join(f"{name:>8}" for name, _ in _COUNT_COLUMNS))
        self.out.line(" ".join(f"{'===':>8}" for _ in _COUNT_COLUMNS))
        self.out.line(row)

    def _update_queue(self, final: bool = False) -> None:
        """Put the DAG's progress in the manager job's ad (``DAG_Nodes*``), for ``htc q``."""
        if self.dag_id <= 0:
            return
        from htc.client import edit, parse_selection

        counts = self._counts()
        attrs = {"DAG_NodesTotal": str(int(counts.get("total", len(self.dag.nodes))))}
        for name, key in (("DAG_NodesDone", "done"), ("DAG_NodesFailed", "failed"), ("DAG_NodesQueued", "queued"),
                          ("DAG_NodesReady", "ready"), ("DAG_NodesPrerun", "pre"), ("DAG_NodesPostrun", "post"),
                          ("DAG_NodesUnready", "unready"), ("DAG_NodesFutile", "futile")):
            attrs[name] = str(int(counts.get(key, 0) or 0))
        attrs["DAG_Status"] = str(self.dag_status if final else int(counts.get("dag_status", 0) or 0))
        try:
            edit(parse_selection([str(self.dag_id)]), attrs, transport=self.transport)
        except HTCError as exc:
            self.out.line(f"WARNING: cannot update the DAG manager job's ad: {exc}", level=4)

    # -- signals ----------------------------------------------------------------------------------
    def _signals(self):
        rfd, wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        sel = selectors.DefaultSelector()
        sel.register(rfd, selectors.EVENT_READ)
        if self.log_wake.fileno() >= 0:
            sel.register(self.log_wake.fileno(), selectors.EVENT_READ)
        old = {signal.SIGUSR1: signal.signal(signal.SIGUSR1, self._on_remove),
               signal.SIGTERM: signal.signal(signal.SIGTERM, self._on_term),
               signal.SIGCHLD: signal.signal(signal.SIGCHLD, _wake)}
        old["fd"] = signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
        return sel, rfd, wfd, old

    def _restore(self, sel, rfd, wfd, old) -> None:
        signal.set_wakeup_fd(old.pop("fd"))
        for sig, handler in old.items():
            signal.signal(sig, handler)
        sel.close()
        os.close(rfd)
        os.close(wfd)
        if self._writer is not None:
            self._writer.close()
        self.log.close()
        self.log_wake.close()

    def _on_remove(self, signum, frame) -> None:
        self._remove = True

    def _on_term(self, signum, frame) -> None:
        self._stop = True


def run_options(run: DagRun):
    """The engine's Options of ``run`` (None if it does not show them)."""
    return getattr(run, "options", None)


def _wake(signum, frame) -> None:
    """SIGCHLD: nothing to do here; the wakeup fd makes the loop look at the scripts."""


class _Feed:
    """An event queued among the actions: fed to the engine when its turn comes."""

    def __init__(self, event) -> None:
        self.event = event
