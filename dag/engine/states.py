"""Node states (numbered as HTCondor's node status file numbers them) and the table of steps.

A node moves only through :data:`NODE_STEPS`, applied by :func:`htc.transitions.transition`;
a step that is not in the table is a bug in the engine and raises ``IllegalTransition``::

    NOT_READY --parents_done--> READY --run_pre--> PRERUN --pre_ok--> READY --submit--> SUBMITTED
    SUBMITTED --run_post--> POSTRUN --succeed/fail--> DONE/ERROR;  ERROR --retry--> READY
    NOT_READY/READY --futile--> FUTILE (an ancestor failed)
"""

from __future__ import annotations

import enum

from htc.transitions import transition


class NodeStatus(enum.IntEnum):
    """A node's state, numbered as in HTCondor's node status file (``NodeStatus``)."""

    NOT_READY = 0
    READY = 1
    PRERUN = 2
    SUBMITTED = 3
    POSTRUN = 4
    DONE = 5
    ERROR = 6
    FUTILE = 7


class DagStatus(enum.IntEnum):
    """``DAG_Status`` / ``$DAG_STATUS`` values."""

    OK = 0
    ERROR = 1
    NODE_FAILED = 2
    ABORT = 3
    RM = 4
    CYCLE = 5
    HALTED = 6


class Step(enum.Enum):
    """What happens to a node."""

    PARENTS_DONE = "parents_done"    # every parent finished as its edge requires
    PREDONE = "predone"              # DONE in the DAG file / rescue DAG
    RUN_PRE = "run_pre"
    PRE_OK = "pre_ok"                # PRE exited 0: the node is ready to submit
    SUBMIT = "submit"
    UNSUBMIT = "unsubmit"            # the submission failed; it may be tried again
    RUN_POST = "run_post"
    SUCCEED = "succeed"
    FAIL = "fail"
    RETRY = "retry"
    FUTILE = "futile"
    UNSTART = "unstart"              # a READY node put back when the FINAL node takes over


S = NodeStatus
NODE_STEPS: dict[tuple[NodeStatus, Step], NodeStatus] = {
    (S.NOT_READY, Step.PARENTS_DONE): S.READY,
    (S.NOT_READY, Step.PREDONE): S.DONE,
    (S.READY, Step.PREDONE): S.DONE,
    (S.READY, Step.RUN_PRE): S.PRERUN,
    (S.PRERUN, Step.PRE_OK): S.READY,
    (S.PRERUN, Step.SUCCEED): S.DONE,          # PRE_SKIP
    (S.PRERUN, Step.FAIL): S.ERROR,
    (S.PRERUN, Step.RUN_POST): S.POSTRUN,      # PRE failed, ALWAYS_RUN_POST
    (S.READY, Step.SUBMIT): S.SUBMITTED,
    (S.SUBMITTED, Step.UNSUBMIT): S.READY,
    (S.READY, Step.RUN_POST): S.POSTRUN,       # submit failed, POST decides
    (S.READY, Step.FAIL): S.ERROR,             # submit failed, no POST
    (S.READY, Step.UNSTART): S.NOT_READY,
    (S.SUBMITTED, Step.RUN_POST): S.POSTRUN,
    (S.SUBMITTED, Step.SUCCEED): S.DONE,
    (S.SUBMITTED, Step.FAIL): S.ERROR,
    (S.POSTRUN, Step.SUCCEED): S.DONE,
    (S.POSTRUN, Step.FAIL): S.ERROR,
    (S.ERROR, Step.RETRY): S.READY,
    (S.NOT_READY, Step.FUTILE): S.FUTILE,
    (S.READY, Step.FUTILE): S.FUTILE,
}


def next_status(node: str, status: NodeStatus, step: Step) -> NodeStatus:
    """The status ``step`` leads ``node`` to from ``status`` (``IllegalTransition`` if none)."""
    return transition(NODE_STEPS, f"DAG node {node}", status, step)
