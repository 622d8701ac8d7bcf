"""What the engine knows about one node during a run (the model's Node says what the file says)."""

from __future__ import annotations

from dataclasses import dataclass, field

from htc.dag.engine.states import NodeStatus


@dataclass
class NodeRun:
    """The run-time record of one node."""

    name: str
    index: int                      # position in the DAG file (ties in the ready queue)
    status: NodeStatus = NodeStatus.NOT_READY
    retries: int = 0                # retries already started ($RETRY)
    retval: int = 0                 # the node's return value (the component that ran last)
    job_retval: int | None = None   # $RETURN for POST: first failed proc, or -100x
    pre_retval: int = -1            # $PRE_SCRIPT_RETURN (-1: no PRE ran)
    pre_done: bool = False          # PRE already succeeded for this attempt
    predone: bool = False           # DONE in the DAG file or rescue DAG
    waiting: set[str] = field(default_factory=set)   # parents not yet finished as needed
    cluster: int | None = None      # the current attempt's cluster
    clusters: list[int] = field(default_factory=list)   # every cluster of every attempt
    awaiting_submit: bool = False   # SubmitNode sent, NodeSubmitted/SubmitFailed not yet seen
    remove_reason: str | None = None   # the DAG is ending: remove the job once it is submitted
    procs: int = 0                  # procs submitted (NodeSubmitted, or submit events seen)
    submitted: set[int] = field(default_factory=set)    # procs whose submit event was seen
    ended: set[int] = field(default_factory=set)        # procs that left the queue
    exit_codes: dict[int, int | None] = field(default_factory=dict)  # None: aborted
    failed_jobs: int = 0
    jobs_failed: bool = False       # the job list failed (a proc failed / was removed)
    abort_count: int = 0
    idle: set[int] = field(default_factory=set)
    held: set[int] = field(default_factory=set)
    times_held: int = 0
    last_proc: int = 0
    submit_attempts: int = 0
    not_before: float = 0.0         # a failed submission is re-tried no sooner than this
    error: str = ""
    seq: int = 0                    # jobstate log sequence number (0: not given yet)
    last_event_time: float = 0.0

    def reset_attempt(self) -> None:
        """Forget the previous attempt's jobs and scripts (RETRY reruns the node from PRE)."""
        self.retval = 0
        self.job_retval = None
        self.pre_retval = -1
        self.pre_done = False
        self.cluster = None
        self.awaiting_submit = False
        self.remove_reason = None
        self.procs = 0
        self.submitted = set()
        self.ended = set()
        self.exit_codes = {}
        self.failed_jobs = 0
        self.jobs_failed = False
        self.abort_count = 0
        self.idle = set()
        self.held = set()
        self.submit_attempts = 0
        self.seq = 0

    @property
    def queued_procs(self) -> int:
        """Procs of the current attempt still in the queue."""
        return max(self.procs, len(self.submitted)) - len(self.ended)

    @property
    def all_procs_done(self) -> bool:
        """Every proc of the current attempt left the queue."""
        total = max(self.procs, len(self.submitted))
        return total > 0 and len(self.ended) >= total
