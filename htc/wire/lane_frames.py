"""What a call lane and its startd say to each other over the lane's socket.

The channel is one end of a ``SOCK_STREAM`` socket pair, the lane process's fd 0 (the startd
keeps the other end; ``HTC_LANE_FD`` in the job's environment names the descriptor). Each
direction carries frames: a 4-byte big-endian length, then a msgpack body (msgspec, decoded
into the typed structs below, so neither side ever unpickles what the other sends):

* startd -> lane: :class:`CallFrame`, one per call, in the order the calls must run;
* lane -> startd: :class:`ResultFrame`, one per call, in the same order.

This module imports only msgspec: the startd uses it without importing the executor.
"""

from __future__ import annotations

import struct

import msgspec

__all__ = ["CHANNEL_ENV", "HEADER", "MAX_FRAME", "MAX_RESULT_BYTES", "MAX_STREAM_BYTES", "CallFrame", "ResultFrame",
           "frame", "plain_name"]

#: the environment variable naming the lane's channel descriptor
CHANNEL_ENV = "HTC_LANE_FD"
#: the length prefix of every frame
HEADER = struct.Struct(">I")
#: the most bytes of a call's files a result frame carries (a bigger result becomes an error)
MAX_RESULT_BYTES = 32 * 1024 * 1024
#: the most bytes of one call's stdout (stderr) a result frame carries (the rest is cut)
MAX_STREAM_BYTES = 4 * 1024 * 1024
#: the largest frame either side accepts
MAX_FRAME = MAX_RESULT_BYTES + 2 * MAX_STREAM_BYTES + 64 * 1024


class CallFrame(msgspec.Struct, array_like=True, frozen=True):
    """One call for the lane: its job and its input files (plain name -> bytes)."""

    job_id: str
    files: dict[str, bytes]


class ResultFrame(msgspec.Struct, array_like=True, frozen=True):
    """How one call ended (the fields of :class:`htc.wire.messages.LaneResult` but the job id)."""

    exit_code: int
    files: dict[str, bytes]
    stdout: bytes
    stderr: bytes
    started: float
    finished: float
    user_cpu: float
    sys_cpu: float


def frame(body: bytes) -> bytes:
    """``body`` with its length prefix."""
    return HEADER.pack(len(body)) + body


def plain_name(name: str) -> bool:
    """True for a file name that stays in its directory (no ``/``, not ``.`` or ``..``, no NUL)."""
    return bool(name) and "/" not in name and "\0" not in name and name not in (".", "..")
