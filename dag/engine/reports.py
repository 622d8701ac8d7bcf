"""The texts DAGMan writes about a run: node status file, jobstate log lines, DOT, metrics.

Each is HTCondor's format (``Dag::DumpNodeStatus``, ``JobstateLog::Write``,
``Dag::DumpDotFile``, ``DagmanMetricsV2::Report``); times are written in UTC where HTCondor
uses the local time zone (the engine does not read the clock or the zone).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

import htc
from htc.dag.engine.events import WriteFile
from htc.dag.engine.states import DagStatus, NodeStatus
from htc.dag.model import NodeKind

if TYPE_CHECKING:
    from htc.dag.engine.run import DagRun

S = NodeStatus


def ctime(t: float) -> str:
    """``ctime(3)`` without its newline, in UTC: ``Fri Nov 27 21:34:06 2026``."""
    d = datetime.fromtimestamp(int(t), timezone.utc)
    return f"{d:%a %b} {d.day:2d} {d:%H:%M:%S %Y}"


def classad_string(text: str) -> str:
    """``text`` as a ClassAd string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- jobstate log ----------------------------------------------------------------------------
def jobstate_line(t: float, node: str, event: str, condor_id: str, seq: int,
                  tag: str = "-") -> str:
    """One JOBSTATE_LOG line: ``time node EVENT condorID tag - seq``."""
    return f"{int(t)} {node} {event} {condor_id} {tag} - {seq}"


def jobstate_internal(t: float, what: str) -> str:
    """An INTERNAL line: ``time INTERNAL *** DAGMAN_STARTED 12.0 ***``."""
    return f"{int(t)} INTERNAL *** {what} ***"


# --- node status file ------------------------------------------------------------------------
def status_name(status: NodeStatus) -> str:
    """``STATUS_DONE`` etc., as DAGMan names node states."""
    return f"STATUS_{status.name}"


def maybe_write_status(run: DagRun) -> None:
    """Rewrite the node status file if it is outdated and its minimum interval passed."""
    spec = run.dag.node_status
    if spec is None or not (spec.always_update or run.status_outdated):
        return
    last = run.last_status_update
    if spec.min_update > 0 and last is not None and run.now - last < spec.min_update:
        return
    write_status(run)


def write_status(run: DagRun, *, removed: bool = False, final: bool = False) -> None:
    """Write the node status file now (``final``: the last time, as the DAG exits)."""
    spec = run.dag.node_status
    if spec is None:
        return
    run.emit(WriteFile(spec.file, status_text(run, removed=removed, final=final)))
    run.status_outdated = False
    run.last_status_update = run.now


def status_text(run: DagRun, *, removed: bool = False, final: bool = False) -> str:
    """The node status file (``[ Type = "DagStatus"; ... ]`` blocks) for the run now."""
    from htc.dag.engine import outcome                 # outcome writes reports too
    now = run.now
    c = run.count
    mark_error = False
    dag_state, note = S.SUBMITTED, ""
    if outcome.done_success(run, True):
        dag_state, note, mark_error = S.DONE, "success", True
    elif outcome.done_failed(run, True):
        dag_state, mark_error = S.ERROR, True
        note = "aborted" if run.status == DagStatus.ABORT else "failed"
    elif outcome.finished_running(run, True) and c[S.ERROR] == 0 and not run.halted \
            and not run.aborted:
        dag_state, note = S.ERROR, "cycle"
    elif removed or run.aborted:
        note = "removed" if removed else "aborted"
        if not (run.final and not outcome.finished_running(run, True)):
            dag_state, mark_error = S.ERROR, True
    pre, queued, post, failed = c[S.PRERUN], c[S.SUBMITTED], c[S.POSTRUN], c[S.ERROR]
    held = sum(len(r.held) for r in run.nodes.values() if r.name not in run.service)
    idle = run.idle_procs
    if mark_error:
        failed += pre + queued + post
        pre = queued = post = held = idle = 0
    files = run.options.dag_files or ((run.dag.file,) if run.dag.file else ())
    out = ["[\n", '  Type = "DagStatus";\n', "  DagFiles = {\n",
           ",\n".join(f"    {classad_string(f)}" for f in files), "\n  };\n",
           f"  Timestamp = {int(now)}; /* {classad_string(ctime(now))} */\n",
           f"  DagStatus = {int(dag_state)}; /* "
           f"{classad_string(f'{status_name(dag_state)} ({note})')} */\n",
           f"  NodesTotal = {run.num_nodes(True)};\n", f"  NodesDone = {c[S.DONE]};\n",
           f"  NodesPre = {pre};\n", f"  NodesQueued = {queued};\n", f"  NodesPost = {post};\n",
           f"  NodesReady = {c[S.READY]};\n", f"  NodesUnready = {c[S.NOT_READY]};\n",
           f"  NodesFutile = {c[S.FUTILE]};\n", f"  NodesFailed = {failed};\n",
           f"  JobProcsHeld = {held};\n", f"  JobProcsIdle = {idle}; /* includes held */\n",
           "]\n"]
    for name, r in run.nodes.items():
        if name in run.service:
            continue
        status, detail = r.status, ""
        procs_queued, procs_held = max(r.queued_procs, 0), len(r.held)
        if status is S.SUBMITTED:
            if mark_error:
                status, detail, procs_queued, procs_held = S.ERROR, "Was STATUS_SUBMITTED", 0, 0
            else:
                detail = "idle" if 0 in r.idle else "not_idle"
        elif status is S.ERROR:
            detail = r.error
        elif status in (S.PRERUN, S.POSTRUN) and mark_error:
            detail, status = f"Was {status_name(status)}", S.ERROR
        elif status is S.FUTILE:
            detail = "Had an ancestor node fail"
        elif status is S.DONE and r.predone:
            detail = "User defined as DONE"
        out += ["[\n", '  Type = "NodeStatus";\n', f"  Node = {classad_string(name)};\n",
                f"  NodeStatus = {int(status)}; /* {classad_string(status_name(status))} */\n",
                f"  StatusDetails = {classad_string(detail)};\n",
                f"  RetryCount = {r.retries};\n", f"  JobProcsQueued = {procs_queued};\n",
                f"  JobProcsHeld = {procs_held};\n", "]\n"]
    spec = run.dag.node_status
    if final or removed:
        next_time, next_text = 0, "none"
    else:
        next_time = int(now) + (spec.min_update if spec else 0)
        next_text = ctime(next_time)
    out += ["[\n", '  Type = "StatusEnd";\n',
            f"  EndTime = {int(now)}; /* {classad_string(ctime(now))} */\n",
            f"  NextUpdate = {next_time}; /* {classad_string(next_text)} */\n", "]\n"]
    return "".join(out)


# --- DOT ------------------------------------------------------------------------------------
_DOT_STYLE = {
    S.READY: 'shape=ellipse label="{n} (I)"',
    S.PRERUN: 'shape=ellipse label="{n} (Pre)" style=dotted',
    S.SUBMITTED: 'shape=ellipse label="{n} (R)" peripheries=2',
    S.POSTRUN: 'shape=ellipse label="{n} (Post)" style=dotted',
    S.DONE: 'shape=ellipse label="{n} (Done)" style=bold',
    S.ERROR: 'shape=box label="{n} (E)"',
}


def dot_text(run: DagRun, include: str | None = None) -> str:
    """The DOT file: one line per node styled by its state, then one per edge."""
    out = ["digraph DAG {\n", f'    label="DAGMan Job status at {ctime(run.now)}";\n\n']
    text = run.options.dot_include_text
    if include and text is not None:
        out.append(f"// Beginning of commands included from {include}.\n")
        out.append(text if text.endswith("\n") or not text else text + "\n")
        out.append(f"// End of commands included from {include}.\n\n")
    for name, r in run.nodes.items():
        if name in run.service:
            continue
        style = _DOT_STYLE.get(r.status, 'shape=ellipse label="{n} (I)"').format(n=name)
        out.append(f'    "{name}" [{style}];\n')
    out.append("\n")
    for name in run.nodes:
        for child in run.dag.children(name):
            out.append(f'    "{name}" -> "{child}";\n')
    out.append("}\n")
    return "".join(out)


# --- metrics ----------------------------------------------------------------------------------
def metrics_text(run: DagRun, exit_code: int) -> str:
    """``<dag>.metrics``: the JSON text of DAGMan's metrics (version 2)."""
    start = run.start_time if run.start_time is not None else run.now
    kinds = {n.name: n.kind for n in run.dag.nodes.values()}

    def total(*ks: NodeKind) -> int:
        return sum(1 for name, k in kinds.items() if k in ks)

    def ran(ok: bool, *ks: NodeKind) -> int:
        return sum(run.ran[(k, ok)] for k in ks)

    normal = (NodeKind.JOB, NodeKind.FINAL, NodeKind.PROVISIONER)
    sub = (NodeKind.SUBDAG,)
    svc = (NodeKind.SERVICE,)
    fields = [
        ("client", '"condor_dagman"'), ("version", f'"{htc.__version__}"'),
        ("type", '"metrics"'), ("metrics_version", "2"), ("start_time", f"{start:.3f}"),
        ("end_time", f"{run.now:.3f}"), ("duration", f"{run.now - start:.3f}"),
        ("exitcode", str(exit_code)), ("dagman_id", f'"{run.options.dag_id}"'),
        ("parent_dagman_id", f'"{run.options.parent_dag_id}"'),
        ("rescue_dag_number", str(run.options.rescue_used)),
        ("has_final_node", "true" if run.final else "false"),
        ("nodes", str(total(*normal))), ("nodes_failed", str(ran(False, *normal))),
        ("nodes_succeeded", str(ran(True, *normal))), ("dag_nodes", str(total(*sub))),
        ("dag_nodes_failed", str(ran(False, *sub))),
        ("dag_nodes_succeeded", str(ran(True, *sub))),
        ("provisioner_nodes", "1" if run.provisioner else "0"),
        ("service_nodes", str(total(*svc))), ("service_nodes_failed", str(ran(False, *svc))),
        ("service_nodes_succeeded", str(ran(True, *svc))),
        ("total_nodes", str(total(*normal, *sub))),
        ("total_nodes_run", str(ran(True, *normal, *sub) + ran(False, *normal, *sub))),
        ("jobs_submitted", str(run.jobs_submitted)), ("jobs_succeeded", str(run.jobs_completed)),
        ("jobs_failed", str(run.jobs_submitted - run.jobs_completed)),
        ("DagStatus", str(int(run.status))),
    ]
    body = ",\n".join(f'    "{k}":{v}' for k, v in fields)
    return "{\n" + body + "\n}\n"
