"""Node states (the numbers of the node status file) and the table of their steps."""

from __future__ import annotations

import enum


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
