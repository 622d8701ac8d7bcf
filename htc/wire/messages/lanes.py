"""Call lanes: a claimed slot's function-call worker takes one call after another
(``ActivateClaim(lane=True)`` starts it, see :mod:`htc.wire.messages.claims`)."""

from __future__ import annotations

from htc.wire.messages.common import Ack
from htc.wire.messages.schema import Int, JobId, Message, NonEmpty, Record, Seconds


#: the most input (or output) bytes one lane call may carry; bigger calls take the classic path
MAX_LANE_CALL_BYTES = 1024 * 1024


class LaneCall(Record, frozen=True):
    """One function call for a call lane: the job and its input files (sandbox name -> bytes)."""

    job_id: JobId
    files: dict[NonEmpty, bytes]


class RunCalls(Message, frozen=True):
    """Schedd -> startd: queue these calls, in order, on the call lane running on ``claim_id``."""

    reply_type = Ack
    claim_id: NonEmpty
    calls: tuple[LaneCall, ...]


class LaneResult(Record, frozen=True, omit_defaults=True):
    """How one lane call ended: the worker's exit status for it (``EXIT_VALUE`` 0,
    ``EXIT_EXCEPTION`` 1, ``EXIT_ERROR`` 3), the files it created or changed in its directory
    (``htc_result.pkl``, ...), what it printed, and its times (execute side's clock, seconds)."""

    job_id: JobId
    exit_code: Int
    files: dict[NonEmpty, bytes] = {}
    stdout: bytes = b""
    stderr: bytes = b""
    started: Seconds = 0.0
    finished: Seconds = 0.0
    user_cpu: Seconds = 0.0
    sys_cpu: Seconds = 0.0


class MoreCalls(Message, frozen=True):
    """Shadow -> startd, the answer to CallsDone: the lane's next calls, queued as RunCalls'
    are (one message fewer per call). A call the lane already has is not queued again: the
    answer to a CallsDone sent again repeats the calls of an answer that may have been lost."""

    calls: tuple[LaneCall, ...] = ()


class CallsDone(Message, frozen=True):
    """Startd -> shadow: calls of the lane on ``claim_id`` ended, in the order they ran."""

    reply_type = MoreCalls
    claim_id: NonEmpty
    results: tuple[LaneResult, ...]
