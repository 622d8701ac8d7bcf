"""Node jobs: what the engine submits, and what the events of the nodes log do to nodes.

As ``Dag::ProcessOneEvent`` and its helpers: a submit event binds a cluster to its node (by
the ``DAG Node: X`` note), terminated / aborted events end procs, the first failed proc sets
the node's return value, a failed proc fails the job list (the rest are removed), held procs
are waited for until DAGMAN_MAX_JOB_HOLDS, and once every proc has left the queue the POST
script runs, or the jobs decide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from htc.dag.engine import outcome, recovery
from htc.dag.engine.events import RemoveJobs, SubmitNode
from htc.dag.engine.noderun import NodeRun
from htc.dag.engine.states import DagStatus, NodeStatus, Step
from htc.dag.model import NodeKind
from htc.eventlog import events as ev

if TYPE_CHECKING:
    from htc.dag.engine.run import DagRun

S = NodeStatus
SUBMIT_FAILED = -1001
JOB_ABORTED = -1002
NOTE_PREFIX = "DAG Node: "

#: events after which a proc is idle / not idle (DAGMan's ProcessIsIdleEvent / NotIdle)
_IDLE_AFTER = (ev.JobEvictedEvent, ev.JobSuspendedEvent, ev.ShadowExceptionEvent,
               ev.JobReconnectFailedEvent)
_RUNNING_AFTER = (ev.ExecuteEvent, ev.JobUnsuspendedEvent)


def node_of_notes(notes: str | None) -> str | None:
    """The node name of a submit event's ``DAG Node: X`` note, or None."""
    if notes and notes.strip().startswith(NOTE_PREFIX):
        return notes.strip()[len(NOTE_PREFIX):].strip()
    return None


def submit_action(run: DagRun, node_run: NodeRun) -> SubmitNode:
    """The submission of ``node_run``'s job: macros, VARS, job attributes, notes, priority."""
    node = run.dag.nodes[node_run.name]
    dag_id = str(run.options.dag_id)
    parents = parent_names(run.dag.parents(node.name))
    before = [v for v in node.vars if prepended(v, run.options.default_append_vars)]
    macros = {v.name: v.value for v in node.vars if v not in before}
    macros.update({"JOB": node.name, "RETRY": str(node_run.retries), "DAGManJobId": dag_id,
                   "DAG_STATUS": str(int(run.status)),
                   "FAILED_COUNT": str(run.count[S.ERROR])})
    if parents:
        macros["DAG_PARENT_NAMES"] = parents
    prepend = {v.name: v.value for v in before}
    attrs = {"DAGManJobId": dag_id, "DAGNodeName": _quote(node.name),
             "DAGParentNodeNames": _quote(parents)}
    if node_run.retries > 0:
        attrs["DAGManNodeRetry"] = str(node_run.retries)
    if node.kind is NodeKind.FINAL:
        attrs["DAG_Status"] = str(int(run.status))
    if node.kind is NodeKind.SERVICE:
        attrs["DAGLifetimeJob"] = "true"
    return SubmitNode(node.name, node.submit_file, node.submit_text, node.dir, macros, prepend,
                      attrs, NOTE_PREFIX + node.name, run.priority_of(node),
                      node_run.retries, node.noop)


def prepended(var, default_append: bool) -> bool:
    """True if a VARS pair goes before the submit file (PREPEND, or neither and not the
    DAGMAN_DEFAULT_APPEND_VARS default)."""
    if var.prepend or var.append:
        return bool(var.prepend)
    return not default_append


def failure_limit(run: DagRun, node_run: NodeRun) -> int:
    """How many failed jobs the node's job list tolerates (TOLERANCE N or N%, else the knob)."""
    spec = run.dag.nodes[node_run.name].tolerance
    if spec is None:
        return run.options.node_job_failure_tolerance
    spec = spec.strip()
    if spec.endswith("%"):
        return max(node_run.procs, len(node_run.submitted)) * int(spec[:-1]) // 100
    return int(spec)


def parent_names(parents: list[str], limit: int = 2000) -> str:
    """``DAG_PARENT_NAMES``: the parents, comma-separated, stopping once ``limit`` is reached."""
    out = ""
    for i, name in enumerate(parents):
        if len(out) >= limit:
            break
        out += ("," if i else "") + name
    return out


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def node_submitted(run: DagRun, name: str, cluster: int, procs: int) -> None:
    """The manager submitted ``name``'s job as ``procs`` procs of ``cluster``."""
    node_run = _node(run, name, "NodeSubmitted")
    if node_run.status is not S.SUBMITTED or not node_run.awaiting_submit:
        run.log(f"Warning: NodeSubmitted for node {name}, which is not being submitted; ignored")
        return
    node_run.awaiting_submit = False
    run.in_flight -= 1
    run.status_outdated = True
    _bind(run, node_run, cluster)
    if node_run.remove_reason:
        run.emit(RemoveJobs(name, [cluster], node_run.remove_reason))
    node_run.procs = max(node_run.procs, procs)
    run.jobs_submitted += procs
    for proc in range(procs):
        if proc not in node_run.ended:
            _set_idle(run, node_run, proc, True)
    run.log(f"Submitted node {name} as cluster {cluster} ({procs} proc(s))")
    if node_run.ended:
        _proc_end(run, node_run)               # the log follower was faster than the submit


def submit_failed(run: DagRun, name: str, error: str) -> None:
    """Submitting ``name``'s job failed: try again later, or fail the node ($RETURN -1001)."""
    node_run = _node(run, name, "SubmitFailed")
    if node_run.status is not S.SUBMITTED or not node_run.awaiting_submit:
        run.log(f"Warning: SubmitFailed for node {name}, which is not being submitted; ignored")
        return
    node_run.awaiting_submit = False
    run.in_flight -= 1
    node = run.dag.nodes[name]
    if node.category:
        run.cat_running[node.category] -= 1
    run.jobstate(node_run, "SUBMIT_FAILURE", when=run.now)
    attempts = node_run.submit_attempts
    run.log(f"Job submit failed for node {name} (attempt {attempts}): {error}")
    run.move(node_run, Step.UNSUBMIT)
    if attempts < run.options.max_submit_attempts and (not run.final_started
                                                       or name == run.final):
        node_run.not_before = run.now + 2 ** (attempts - 1)
        run.backoff.add(name)
        run.ready.push(name, run.priority_of(node),
                       head=run.options.retry_submit_first)
        return
    node_run.retval = node_run.job_retval = SUBMIT_FAILED
    node_run.jobs_failed = True
    node_run.error = f"Job submit failed after {attempts} attempts: {error}"
    if "POST" in node.scripts:
        run.move(node_run, Step.RUN_POST)
        run.queue_script(node_run, "POST")
    else:
        run.move(node_run, Step.FAIL)
        run.node_failed(node_run)


def _node(run: DagRun, name: str, what: str) -> NodeRun:
    try:
        return run.nodes[name]
    except KeyError:
        raise KeyError(f"{what}: the DAG has no node {name!r}") from None


def _bind(run: DagRun, node_run: NodeRun, cluster: int) -> None:
    if node_run.cluster != cluster:
        node_run.cluster = cluster
        if cluster not in node_run.clusters:
            node_run.clusters.append(cluster)
    run.by_cluster[cluster] = node_run.name


def _set_idle(run: DagRun, node_run: NodeRun, proc: int, idle: bool) -> None:
    if idle and proc not in node_run.idle and node_run.status is S.SUBMITTED:
        node_run.idle.add(proc)
        run.idle_procs += 1
    elif not idle and proc in node_run.idle:
        node_run.idle.discard(proc)
        run.idle_procs -= 1


def job_event(run: DagRun, event: ev.Event) -> None:
    """One event of the nodes log (live, or replayed in recovery)."""
    name = run.by_cluster.get(event.cluster)
    if isinstance(event, ev.PreSkipEvent):
        recovery.preskip(run, event.dag_node_name or name)
        return
    if isinstance(event, ev.PostScriptTerminatedEvent):
        recovery.post_terminated(run, event.dag_node_name or name, event)
        return
    if isinstance(event, (ev.SubmitEvent, ev.ClusterSubmitEvent)):
        noted = node_of_notes(event.log_notes)
        if noted in run.nodes:
            name = noted
    if name is None or name not in run.nodes:
        return                                   # a job that is not this DAG's
    node_run = run.nodes[name]
    if isinstance(event, ev.SubmitEvent):
        _submit_event(run, node_run, event)
        return
    if event.cluster != node_run.cluster:
        return                                   # an earlier attempt's job
    run.jobstate(node_run, event.type.name, f"{event.cluster}.{event.proc}", event.timestamp)
    node_run.last_event_time = event.timestamp
    run.status_outdated = True
    if isinstance(event, ev.JobTerminatedEvent):
        _terminated(run, node_run, event)
    elif isinstance(event, ev.JobAbortedEvent):
        _aborted(run, node_run, event)
    elif isinstance(event, ev.JobHeldEvent):
        _held(run, node_run, event)
    elif isinstance(event, ev.JobReleasedEvent):
        node_run.held.discard(event.proc)
    elif isinstance(event, _IDLE_AFTER):
        _set_idle(run, node_run, event.proc, True)
    elif isinstance(event, _RUNNING_AFTER):
        _set_idle(run, node_run, event.proc, False)
    elif isinstance(event, (ev.AttributeUpdateEvent, ev.JobAdInformationEvent)):
        _provisioner_update(run, node_run, event)


def _submit_event(run: DagRun, node_run: NodeRun, event: ev.SubmitEvent) -> None:
    if node_run.status in (S.DONE, S.FUTILE) or (node_run.status is S.ERROR):
        return                                   # finished nodes never run again
    if node_run.status is S.NOT_READY and run.recovering:
        node_run.waiting.clear()
        run.move(node_run, Step.PARENTS_DONE)
    if node_run.status in (S.READY, S.PRERUN):
        if not run.recovering:
            return                               # not submitted by this run
        if node_run.status is S.PRERUN:
            run.move(node_run, Step.PRE_OK)
        run.ready.remove(node_run.name)
        run.move(node_run, Step.SUBMIT)
        node_run.pre_done = True
        category = run.dag.nodes[node_run.name].category
        if category:
            run.cat_running[category] += 1
        if node_run.name == run.final:
            run.final_started = True             # the FINAL node was running
    if node_run.status is not S.SUBMITTED:
        return
    if node_run.cluster != event.cluster:
        if node_run.cluster is not None and not node_run.awaiting_submit:
            return                               # a stale submit event
        _bind(run, node_run, event.cluster)
    if run.recovering and node_run.awaiting_submit:
        node_run.awaiting_submit = False
        run.in_flight -= 1
    run.jobstate(node_run, "SUBMIT", f"{event.cluster}.{event.proc}", event.timestamp)
    node_run.last_event_time = event.timestamp
    if event.proc not in node_run.submitted:
        node_run.submitted.add(event.proc)
        if run.recovering:
            run.jobs_submitted += 1
    node_run.last_proc = max(node_run.last_proc, event.proc)
    if event.proc not in node_run.ended:
        _set_idle(run, node_run, event.proc, True)


def _proc_left(run: DagRun, node_run: NodeRun, proc: int) -> bool:
    """Note that ``proc`` left the queue; False if it already had."""
    if proc in node_run.ended or node_run.status is not S.SUBMITTED:
        return False
    node_run.ended.add(proc)
    _set_idle(run, node_run, proc, False)
    node_run.held.discard(proc)
    node_run.submitted.add(proc)
    run.jobs_completed += 1
    return True


def _terminated(run: DagRun, node_run: NodeRun, event: ev.JobTerminatedEvent) -> None:
    if not _proc_left(run, node_run, event.proc):
        return
    ok = event.terminated_normally and event.return_value == 0
    code = event.return_value if event.terminated_normally else -(event.signal or 0)
    node_run.exit_codes[event.proc] = event.return_value if event.terminated_normally else code
    if ok:
        run.jobs_succeeded += 1
        if not node_run.jobs_failed:
            node_run.retval = node_run.job_retval = 0
    else:
        _proc_failed(run, node_run, event, code or 0,
                     f"Job proc ({event.cluster}.{event.proc}.{event.subproc}) failed with "
                     + (f"status {code}" if event.terminated_normally
                        else f"signal {event.signal}"))
    _proc_end(run, node_run)
    if "POST" not in run.dag.nodes[node_run.name].scripts and not run.exited:
        outcome.check_abort(run, node_run, "job")


def _aborted(run: DagRun, node_run: NodeRun, event: ev.JobAbortedEvent) -> None:
    if not _proc_left(run, node_run, event.proc):
        return
    node_run.exit_codes[event.proc] = None
    node_run.abort_count += 1
    _proc_failed(run, node_run, event, JOB_ABORTED,
                 f"HTCondor reported ULOG_JOB_ABORTED event for job proc "
                 f"({event.cluster}.{event.proc}.{event.subproc})")
    _proc_end(run, node_run)


def _proc_failed(run: DagRun, node_run: NodeRun, event: ev.Event, code: int, why: str) -> None:
    node_run.failed_jobs += 1
    if node_run.failed_jobs == 1:
        node_run.retval = node_run.job_retval = code
        node_run.error = why
    if not node_run.jobs_failed and node_run.failed_jobs > failure_limit(run, node_run):
        node_run.jobs_failed = True
        mode = run.dag.nodes[node_run.name].tolerance_mode
        remove = {"FAIL-FAST": True, "WAIT": False}.get(
            (mode or "").upper().replace("_", "-"), run.options.remove_job_list_on_failure)
        if remove and node_run.queued_procs > 0 and not run.recovering:
            where = f"DAG node {node_run.name} ({event.cluster}.{event.proc}.{event.subproc})"
            why = ("got ULOG_JOB_ABORTED event." if isinstance(event, ev.JobAbortedEvent) else
                   f"reached failure tolerance after {node_run.failed_jobs} failures.")
            run.emit(RemoveJobs(node_run.name, [node_run.cluster],
                                 f"Node Error: {where} {why}"))


def _proc_end(run: DagRun, node_run: NodeRun) -> None:
    """DAGMan's ``ProcessJobProcEnd``: once all procs left, POST runs or the jobs decide."""
    if node_run.awaiting_submit or not node_run.all_procs_done:
        return
    node = run.dag.nodes[node_run.name]
    if node.category:
        run.cat_running[node.category] -= 1
    if node_run.name == run.provisioner and not run.provisioner_ready:
        run.log(f"ERROR: Provisioner node {node_run.name} job exited before giving DAGMan "
                "the go ahead!")
        run.move(node_run, Step.FAIL)
        outcome.shutdown(run, outcome.EXIT_ERROR, DagStatus.ERROR)
        return
    run.jobstate(node_run, "JOB_SUCCESS" if node_run.retval == 0 else "JOB_FAILURE",
                 str(node_run.retval))
    if "POST" in node.scripts:
        run.move(node_run, Step.RUN_POST)
        if not run.recovering:
            run.queue_script(node_run, "POST")
    elif node_run.jobs_failed:
        run.move(node_run, Step.FAIL)
        run.node_failed(node_run)
    else:
        run.move(node_run, Step.SUCCEED)
        run.node_done(node_run)


def _held(run: DagRun, node_run: NodeRun, event: ev.JobHeldEvent) -> None:
    if event.proc in node_run.ended:
        return
    _set_idle(run, node_run, event.proc, True)
    if event.proc not in node_run.held:
        node_run.held.add(event.proc)
        node_run.times_held += 1
        limit = run.options.max_job_holds
        if limit and node_run.times_held >= limit and not run.recovering:
            run.log(f"Node {node_run.name} job was held {node_run.times_held} times: "
                    "removing it (DAGMAN_MAX_JOB_HOLDS)")
            run.emit(RemoveJobs(node_run.name, [node_run.cluster],
                                 "DAG Limit: Max number of held jobs was reached."))
    if "HOLD" in run.dag.nodes[node_run.name].scripts and not run.recovering:
        run.queue_script(node_run, "HOLD")


def _provisioner_update(run: DagRun, node_run: NodeRun, event: ev.Event) -> None:
    if node_run.name != run.provisioner or run.provisioner_ready:
        return
    if isinstance(event, ev.AttributeUpdateEvent):
        state = event.value if event.attribute == "ProvisionerState" else None
    else:
        state = event.attrs.get("ProvisionerState")
    if state is not None and str(state).strip() == "2":
        run.provisioner_ready = True
        run.log("Provisioner node reports PROVISIONING_COMPLETE: starting the other nodes")
        if not run.recovering:
            run.start_ready_nodes()
