"""What the DAG manager tells the engine (events) and what the engine asks it to do (actions).

The engine (:class:`htc.dag.engine.run.DagRun`) is sans-IO: the manager feeds it these events
with the time, ``run.handle(event, now)``, and performs the actions it returns, in order.
All are frozen dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from htc.eventlog.events import Event as LogEvent

__all__ = [
    "Action", "AppendJobstate", "EngineEvent", "Exit", "Halt", "JobEvent", "Log", "NodeSubmitted",
    "Recover", "RemoveJobs", "RemoveRequested", "Resume", "RunScript", "ScriptExited", "Start",
    "SubmitFailed", "SubmitNode", "Tick", "WriteFile", "WriteNodeEvent",
]


# --- events (manager -> engine) ---------------------------------------------------------------
@dataclass(frozen=True)
class Start:
    """Begin the run: PRE scripts and submissions of the nodes that are ready."""


@dataclass(frozen=True)
class Recover:
    """Replay the nodes log from its beginning (before :class:`Start`) to resume a run.

    Submit events whose ``log_notes`` carry ``DAG Node: X`` bind node X to their cluster; the
    later events of that cluster update the node.
    """

    events: tuple[LogEvent, ...] | list[LogEvent] = ()


@dataclass(frozen=True)
class ScriptExited:
    """A PRE, POST or HOLD script of ``node`` ended: ``status`` is its exit code, or -signal."""

    node: str
    kind: str
    status: int


@dataclass(frozen=True)
class NodeSubmitted:
    """The manager submitted ``node``'s job: ``procs`` jobs in ``cluster``."""

    node: str
    cluster: int
    procs: int = 1


@dataclass(frozen=True)
class SubmitFailed:
    """Submitting ``node``'s job failed; ``error`` says why."""

    node: str
    error: str = ""


@dataclass(frozen=True)
class JobEvent:
    """An event of the nodes log; the engine maps its cluster to a node (unknown: ignored)."""

    event: LogEvent


@dataclass(frozen=True)
class RemoveRequested:
    """The DAGMan job itself was removed (condor_rm): remove the node jobs, run FINAL, stop."""


@dataclass(frozen=True)
class Halt:
    """Stop submitting new work (running work continues)."""


@dataclass(frozen=True)
class Resume:
    """Undo :class:`Halt`."""


@dataclass(frozen=True)
class Tick:
    """Time passed: DEFERred scripts may re-run, the node status file may be rewritten."""


EngineEvent = (Start | Recover | ScriptExited | NodeSubmitted | SubmitFailed | JobEvent
               | RemoveRequested | Halt | Resume | Tick)


# --- actions (engine -> manager) --------------------------------------------------------------
@dataclass(frozen=True)
class RunScript:
    """Run a PRE/POST/HOLD script of ``node``; report its end with :class:`ScriptExited`."""

    node: str
    kind: str
    executable: str
    args: list[str] = field(default_factory=list)   # macros expanded
    cwd: str = ""
    debug_file: str | None = None
    debug_stream: str | None = None                 # "STDOUT", "STDERR" or "ALL"


@dataclass(frozen=True)
class SubmitNode:
    """Submit ``node``'s job; report with :class:`NodeSubmitted` or :class:`SubmitFailed`.

    ``macros`` are submit-file macros (VARS + JOB, RETRY, DAGManJobId, DAG_STATUS,
    FAILED_COUNT, DAG_PARENT_NAMES); ``prepend`` the VARS PREPEND ones; ``attrs`` job-ad
    attributes as ClassAd expression text; ``notes`` goes in the submit event ("DAG Node: X").
    A ``noop`` node is not submitted for real: the manager feeds back a synthetic success
    (submit + terminated events, as DAGMan writes them). The manager reports the outcome
    (NodeSubmitted / SubmitFailed) right after performing the action, before other events.
    """

    node: str
    submit_file: str | None
    submit_text: str | None
    cwd: str
    macros: dict[str, str] = field(default_factory=dict)
    prepend: dict[str, str] = field(default_factory=dict)
    attrs: dict[str, str] = field(default_factory=dict)
    notes: str = ""
    priority: int = 0
    retry: int = 0
    noop: bool = False


@dataclass(frozen=True)
class RemoveJobs:
    """condor_rm the clusters of ``node`` (``reason`` for the log / hold reason)."""

    node: str
    clusters: list[int] = field(default_factory=list)
    reason: str = ""


@dataclass(frozen=True)
class WriteNodeEvent:
    """Append ``event`` to the nodes log, as DAGMan does for recovery.

    The engine asks for a ``POST_SCRIPT_TERMINATED`` event when a POST script ends and a
    ``PRESKIP`` event when PRE_SKIP skips a node; a later run replays them in
    :class:`Recover` (without them, recovery re-runs those POST / PRE scripts). The engine
    ignores these events when the log follower hands them back as :class:`JobEvent`.
    """

    event: LogEvent


@dataclass(frozen=True)
class WriteFile:
    """Write ``text`` as the whole content of ``path`` (rescue DAG, status file, DOT, metrics)."""

    path: str
    text: str


@dataclass(frozen=True)
class AppendJobstate:
    """Append one line (without its newline) to the JOBSTATE_LOG."""

    line: str


@dataclass(frozen=True)
class Log:
    """One line for ``<dag>.dagman.out``."""

    text: str


@dataclass(frozen=True)
class Exit:
    """Exit with ``code`` after performing the earlier actions; ``dag_status`` is DAG_Status."""

    code: int
    dag_status: int = 0


Action = (RunScript | SubmitNode | RemoveJobs | WriteNodeEvent | WriteFile | AppendJobstate | Log
          | Exit)
