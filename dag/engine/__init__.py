"""The DAG engine: the state of one DAG run, driven by events, answering with actions (sans-IO).

    from htc.dag.engine import DagRun, Options, Start
    run = DagRun(dag, Options(max_jobs=10))
    actions = run.handle(Start(), now)      # then NodeSubmitted, JobEvent, ScriptExited, Tick...

No files, processes or clocks here: the manager (:mod:`htc.dag.manager`) performs the actions
and feeds back what happened. The modules, by meaning:

- :mod:`~htc.dag.engine.events`: the events in and the actions out; :mod:`~.options` the knobs
- :mod:`~htc.dag.engine.run`: :class:`DagRun`, the run (starting nodes, scripts, the loop)
- :mod:`~htc.dag.engine.states`: node states 0-7 and the table of their steps
- :mod:`~htc.dag.engine.jobs`: submissions and the events of the nodes log
- :mod:`~htc.dag.engine.ready`: the ready queue's order and the throttles
- :mod:`~htc.dag.engine.scripts`: the ``$JOB`` ... ``$RETURN`` macros of script arguments
- :mod:`~htc.dag.engine.outcome`: retries, ABORT-DAG-ON, FINAL, the DAG's end and exit code
- :mod:`~htc.dag.engine.rescue`: rescue DAG text, names, the newest one, applying one
- :mod:`~htc.dag.engine.recovery`: replaying the nodes log after a crash
- :mod:`~htc.dag.engine.reports`: node status file, jobstate log, DOT and metrics texts
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
