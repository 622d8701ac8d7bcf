"""How nodes and the DAG end: retries, ABORT-DAG-ON, the FINAL node, the exit code.

As HTCondor's DAGMan (``condor_event_timer``, ``main_shutdown_rescue``, ``Dag::DoneSuccess``
...): the DAG succeeds when every node is done (or the FINAL node succeeded), fails when no
more progress is possible after a failure, and stops at once on ABORT-DAG-ON or a condor_rm
(removing its running node jobs). The FINAL node runs last in every case and its result
decides the DAG's. A rescue DAG is written whenever the exit code is not 0.

Exit codes (``dagman_main.h``): 0 EXIT_OKAY, 1 EXIT_ERROR, 2 EXIT_ABORT (condor_rm), or the
ABORT-DAG-ON RETURN value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import networkx as nx

from htc.dag.engine import reports, rescue
from htc.dag.engine.events import Exit, RemoveJobs, WriteFile
from htc.dag.engine.noderun import NodeRun
from htc.dag.engine.states import DagStatus, NodeStatus, Step

if TYPE_CHECKING:
    from htc.dag.engine.run import DagRun

S = NodeStatus
EXIT_OKAY, EXIT_ERROR, EXIT_ABORT = 0, 1, 2


def may_retry(run: DagRun, node_run: NodeRun) -> bool:
    """RETRY: the node has retries left, its value is not UNLESS-EXIT, no abort, no FINAL yet."""
    node = run.dag.nodes[node_run.name]
    if run.final_started or run.shutting_down or aborts(run, node_run):
        return False
    if node.retry_unless_exit is not None and node_run.retval == node.retry_unless_exit:
        return False
    return node_run.retries < node.retry


def aborts(run: DagRun, node_run: NodeRun) -> bool:
    """ABORT-DAG-ON: the node's return value is the abort status."""
    node = run.dag.nodes[node_run.name]
    return node.abort_status is not None and node_run.retval == node.abort_status


def check_abort(run: DagRun, node_run: NodeRun, what: str) -> bool:
    """Abort the DAG if ``node_run``'s value (from ``what``) is its ABORT-DAG-ON status."""
    if run.shutting_down or not aborts(run, node_run):
        return False
    node = run.dag.nodes[node_run.name]
    run.log(f"Aborting DAG because we got the ABORT exit value from a {what}")
    run.aborted = True
    if node.abort_return is not None:
        shutdown(run, node.abort_return,
                 DagStatus.ABORT if node.abort_return != 0 else DagStatus.OK)
    else:
        shutdown(run, node_run.retval & 0xFF, DagStatus.ABORT)
    return True


# --- the DAG-wide questions of dag.cpp --------------------------------------------------------
def finished_running(run: DagRun, include_final: bool) -> bool:
    """Nothing runs or waits to run (with ``include_final``: and FINAL ran, if there is one)."""
    c = run.count
    if include_final and run.final and not run.final_started:
        return False
    if run.halted:                  # waiting PRE scripts will run in the rescue DAG's run
        running = sum(sum(n.values()) for n in run.scripts_running.values())
        return c[S.SUBMITTED] == 0 and running == 0
    return c[S.SUBMITTED] == 0 and c[S.READY] == 0 and c[S.PRERUN] + c[S.POSTRUN] == 0


def _final_done(run: DagRun) -> bool:
    return bool(run.final) and run.nodes[run.final].status is S.DONE


def done_success(run: DagRun, include_final: bool) -> bool:
    """DAGMan's ``DoneSuccess``."""
    if not finished_running(run, include_final):
        return False
    if run.count[S.DONE] - _final_not_counted(run, include_final) == \
            run.num_nodes(include_final):
        return True
    if include_final and _final_done(run):
        return True
    return run.aborted and run.status == DagStatus.OK


def _final_not_counted(run: DagRun, include_final: bool) -> int:
    return 1 if (not include_final and _final_done(run)) else 0


def done_failed(run: DagRun, include_final: bool) -> bool:
    """DAGMan's ``DoneFailed``."""
    if not finished_running(run, include_final):
        return False
    if include_final and _final_done(run):
        return False
    if run.aborted and run.status == DagStatus.OK:
        return False
    return run.halted or run.count[S.ERROR] > 0


def check_progress(run: DagRun) -> None:
    """The end of DAGMan's event timer: finish, fail, start FINAL, or go on."""
    if run.exited or not run.started or run.recovering:
        return
    if done_success(run, True):
        remove_service_nodes(run)
        finish(run, EXIT_OKAY)
    elif done_failed(run, True):
        shutdown(run, EXIT_ERROR, run.status)
    elif done_success(run, False):
        start_final(run)
    elif run.halted and run.count[S.SUBMITTED] == 0 and run.count[S.POSTRUN] == 0 \
            and not run.final_started:
        shutdown(run, EXIT_ERROR, DagStatus.HALTED)
    elif finished_running(run, False) and not run.final_started:
        if done_failed(run, False):
            status = DagStatus.NODE_FAILED
        else:
            acyclic = nx.is_directed_acyclic_graph(run.dag.graph)
            status = DagStatus.ERROR if acyclic else DagStatus.CYCLE
            run.log("ERROR: no node failed but the DAG cannot make progress"
                    + ("" if acyclic else " (it has a cycle)"))
        shutdown(run, EXIT_ERROR, status)


def start_final(run: DagRun) -> bool:
    """Start the FINAL node (other nodes that have not started never will); False if none."""
    if not run.final or run.nodes[run.final].status is not S.NOT_READY:
        return False
    for name, node_run in run.nodes.items():
        if name == run.final or name in run.service:
            continue
        if node_run.status is S.READY and not node_run.awaiting_submit:
            run.ready.remove(name)
            run.move(node_run, Step.UNSTART)
    run.final_started = True
    _drop_waiting_scripts(run)
    final = run.nodes[run.final]
    final.waiting.clear()
    run.move(final, Step.PARENTS_DONE)
    run.log(f"Starting final node {run.final} (DAG status {int(run.status)})")
    run.start_node(final)
    return True


def _drop_waiting_scripts(run: DagRun) -> None:
    """Scripts that wait (throttled or DEFERred) of other nodes never run: those nodes fail."""
    waiting = {n for q in run.script_queue.values() for n in q} | {n for n, _ in run.deferred}
    waiting.discard(run.final)
    for q in run.script_queue.values():
        kept = [n for n in q if n not in waiting]
        q.clear()
        q.extend(kept)
    run.deferred = {k: v for k, v in run.deferred.items() if k[0] not in waiting}
    for name in sorted(waiting):
        node_run = run.nodes[name]
        if node_run.status in (S.PRERUN, S.POSTRUN):
            node_run.error = f"Was STATUS_{node_run.status.name}"
            run.move(node_run, Step.FAIL)
            run.node_failed(node_run)


def remove_service_nodes(run: DagRun) -> None:
    """The DAG is over: remove the SERVICE nodes' jobs (they count as done)."""
    for name in sorted(run.service):
        node_run = run.nodes[name]
        if node_run.status is S.SUBMITTED:
            if node_run.cluster is not None:
                run.emit(RemoveJobs(name, [node_run.cluster], "DAG is exiting"))
            run.move(node_run, Step.SUCCEED)


def shutdown(run: DagRun, exit_code: int, status: DagStatus) -> None:
    """DAGMan's ``main_shutdown_rescue``: rescue DAG, remove jobs, run FINAL, or exit."""
    if run.exited:
        return
    run.set_dag_status(status, force=True)
    run.shutting_down = True
    if exit_code != EXIT_OKAY:
        write_rescue(run)
    reason = ("DAG Removed: User removed scheduler job from queue." if status == DagStatus.RM
              else "DAG Abort: DAG is exiting and writing rescue file.")
    keep_service = bool(run.final) and not run.final_started
    for name, node_run in run.nodes.items():
        if node_run.status is not S.SUBMITTED or (keep_service and name in run.service):
            continue
        if name == run.final:
            continue
        if node_run.awaiting_submit:
            node_run.remove_reason = reason    # removed as soon as its cluster is known
        if node_run.cluster is not None:
            run.emit(RemoveJobs(name, [node_run.cluster], reason))
    if start_final(run):
        return                  # the FINAL node's result decides (check_progress)
    finish(run, exit_code, removed=status == DagStatus.RM)


def finish(run: DagRun, exit_code: int, removed: bool = False) -> None:
    """Write the last reports and exit with ``exit_code``."""
    run.log(f"DAG finished with status {int(run.status)}: exiting with {exit_code}")
    if run.dag.dot and run.dag.dot.update:
        run.write_dot()
    reports.write_status(run, removed=removed, final=True)
    run.jobstate(None, f"DAGMAN_FINISHED {exit_code}")
    run.emit(WriteFile(f"{run.dag.file}.metrics", reports.metrics_text(run, exit_code)))
    run.exited = True
    run.emit(Exit(exit_code, int(run.status)))


def write_rescue(run: DagRun) -> None:
    """Write this run's rescue DAG (one file per run: a later failure overwrites it)."""
    opts = run.options
    if opts.max_rescue_num <= 0:
        run.log("No rescue DAG written because DAGMAN_MAX_RESCUE_NUM is 0")
        return
    if run.rescue_file is None:
        number = min(opts.last_rescue_num + 1, opts.max_rescue_num)
        run.rescue_file = rescue.rescue_name(run.dag.file, number)
    run.log(f"Writing Rescue DAG to {run.rescue_file}...")
    run.emit(WriteFile(run.rescue_file, rescue.rescue_text(
        run.dag, _statuses(run), _retries(run), run.now,
        reset_retries=opts.reset_retries_upon_rescue)))


def save_point_text(run: DagRun, node: str) -> str:
    """The SAVE_POINT_FILE text written when ``node`` starts."""
    return rescue.rescue_text(run.dag, _statuses(run), _retries(run), run.now,
                              reset_retries=True,
                              header=f"# Save file written at Start Node {node}\n")


def _statuses(run: DagRun) -> dict[str, NodeStatus]:
    return {name: r.status for name, r in run.nodes.items() if name not in run.service}


def _retries(run: DagRun) -> dict[str, int]:
    return {name: r.retries for name, r in run.nodes.items()}
