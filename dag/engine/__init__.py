"""The DAG engine: the state of one DAG run, driven by events, answering with actions (sans-IO).

    from htc.dag.engine import DagRun, Options
    run = DagRun(dag, Options(max_jobs=10))
    actions = run.handle(Start(), now)

See :mod:`htc.dag.engine.events` for the events and actions, :mod:`htc.dag.engine.run` for
the run.
"""

from htc.dag.engine.events import (
    Action, AppendJobstate, Exit, Halt, JobEvent, Log, NodeSubmitted, Recover, RemoveJobs,
    RemoveRequested, Resume, RunScript, ScriptExited, Start, SubmitFailed, SubmitNode, Tick,
    WriteFile, WriteNodeEvent,
)
from htc.dag.engine.options import Options
from htc.dag.engine.run import DagRun
from htc.dag.engine.states import NodeStatus

__all__ = [
    "Action", "AppendJobstate", "DagRun", "Exit", "Halt", "JobEvent", "Log", "NodeStatus",
    "NodeSubmitted", "Options", "Recover", "RemoveJobs", "RemoveRequested", "Resume", "RunScript",
    "ScriptExited", "Start", "SubmitFailed", "SubmitNode", "Tick", "WriteFile", "WriteNodeEvent",
]
