"""Recovery: rebuilding a run from the nodes log of a DAG manager that died (sans-IO).

As DAGMan's recovery mode: the new run replays the log from its beginning before it starts.
Submit events bind nodes to clusters by their ``DAG Node: X`` note, job events move the nodes
as they did (a failure with retries left makes the node READY again, its retry counted), a
POST_SCRIPT_TERMINATED event gives a POST's result, a PRESKIP event marks its node done.
Nothing is submitted or run while replaying; afterwards (:class:`~htc.dag.engine.Start`) a
POST that was running runs again, jobs still in the queue are waited for, no PRE runs again
for a submitted node, and finished nodes never run again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from htc.dag.engine.events import AppendJobstate
from htc.dag.engine.states import NodeStatus, Step
from htc.eventlog import events as ev

if TYPE_CHECKING:
    from htc.dag.engine.run import DagRun

S = NodeStatus


def replay(run: DagRun, events: list[ev.Event]) -> None:
    """Replay ``events`` (the whole nodes log, in order) into ``run``, starting nothing."""
    from htc.dag.engine import jobs, reports
    run.recovering = True
    if run.dag.jobstate_log:
        run.out.append(AppendJobstate(reports.jobstate_internal(run.now, "RECOVERY_STARTED")))
    run.log(f"Running in RECOVERY mode... replaying {len(events)} events of the nodes log")
    for event in events:
        jobs.job_event(run, event)
    run.recovering = False
    run.jobstate(None, "RECOVERY_FINISHED")
    run.log("...done with RECOVERY mode")


def preskip(run: DagRun, name: str | None) -> None:
    """A PRESKIP event: replayed, the node is done (its PRE said skip); live, an echo."""
    if not run.recovering or name not in run.nodes:
        return                                   # live: the engine did it already
    node_run = run.nodes[name]
    if node_run.status is S.NOT_READY:
        node_run.waiting.clear()
        run.move(node_run, Step.PARENTS_DONE)
    if node_run.status is S.READY:
        run.move(node_run, Step.RUN_PRE)
    if node_run.status is S.PRERUN:
        node_run.pre_done = True
        node_run.retval = 0
        run.move(node_run, Step.SUCCEED)
        run.node_done(node_run)


def post_terminated(run: DagRun, name: str | None,
                    event: ev.PostScriptTerminatedEvent) -> None:
    """A POST_SCRIPT_TERMINATED event: replayed, the POST's result decides; live, an echo."""
    if not run.recovering or name not in run.nodes:
        return                                   # live: the engine did it already
    node_run = run.nodes[name]
    if node_run.status is not S.POSTRUN:
        return
    status = event.return_value if event.terminated_normally else -(event.signal or 0)
    run.post_result(node_run, status or 0)
