"""What makes a job a call for a call lane, and the files of a lane call (pure functions).

A job is a lane call when its ad says ``HTCLane = true`` and it asks for nothing a lane lacks
(no time limit, checkpoint, streaming or custom output files); calls with the same
:func:`lane_key` are interchangeable on one worker. :class:`Lane` is the schedd's record of one
lane; :mod:`htc.daemons.schedd.lanes` feeds them.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from htc.daemons.schedd import userlog as ul
from htc.daemons.job_files import TransferError, parse_remaps, split_list
from htc.jobqueue.ads import ClusterAd, parse_literal
from htc.jobqueue.records import JobId
from htc.wire import messages as m
from htc.wire.callfile import RESULT_FILE, is_call_file
from htc.wire.lane_frames import plain_name

__all__ = ["LANE_ARGUMENTS", "Lane", "call_file", "lane_key", "lane_outputs", "output_remaps"]

#: the lane worker's arguments (the interpreter is the call's own ``Cmd``)
LANE_ARGUMENTS = "-m htc.executors.lane"
#: attributes that must be equal for two calls to share one worker (the owner first)
_KEY_ATTRS = ("Owner", "AccountingGroup", "Cmd", "Arguments", "Environment", "Env", "JobUniverse", "RequestCpus",
              "RequestMemory", "RequestDisk", "RequestGpus", "Requirements", "HTCSession")
#: features a lane does not provide; a call that asks for one runs on a starter of its own
_CLASSIC_ONLY = ("AllowedExecuteDuration", "AllowedJobDuration", "StreamOut", "StreamErr", "TransferOutput",
                 "OutputDestination")
#: the attributes of a lane key that a cluster usually shares (lower case; not the owner, a
#: column of each job, nor TransferOutputRemaps, which an executor sets per call)
_SHARED_NAMES = frozenset(n.lower() for n in ("HTCLane", *_CLASSIC_ONLY, *_KEY_ATTRS[1:]))
_LANE_KEY_MEMO = "htc.schedd.lane_key"
_UNSET = object()
#: seconds of work a lane holds ahead of its worker (within 1 .. _MAX_AHEAD calls)
AHEAD_SECONDS = 0.300
#: (64: the startd sends a CallsDone once half of what the lane holds is done, so a lane of
#: no-op calls gets about 32 results ended a batch while it runs the other 32)
_MAX_AHEAD = 64
#: calls quicker than this (s) get the next one queued behind them
QUICK_CALL = 0.1


def lane_key(job) -> tuple | None:
    """What makes ``job`` interchangeable with other calls on one worker (None: not a lane call)."""
    cluster = getattr(job, "cluster", None)
    if isinstance(cluster, ClusterAd) and cluster.proc_attrs.isdisjoint(_SHARED_NAMES):
        # No proc sets any of them: worked out once per cluster ad (a cluster that changes is
        # read into a new ClusterAd, with an empty cache).
        shared = cluster.cache.get(_LANE_KEY_MEMO, _UNSET)
        if shared is _UNSET:
            shared = cluster.cache[_LANE_KEY_MEMO] = _shared_key(job)
    else:
        shared = _shared_key(job)
    if shared is None or output_remaps(job) is None:
        return None
    return (job.get("Owner"), *shared)


def _shared_key(job) -> tuple | None:
    """The lane key but the owner, from the attributes a cluster usually shares (None: not a
    lane call)."""
    if ul.literal(job, "HTCLane") is not True:
        return None
    for name in _CLASSIC_ONLY:
        value = ul.literal(job, name)
        if value not in (None, False, ""):
            return None
    return tuple(job.get(name) for name in _KEY_ATTRS[1:])


def output_remaps(job) -> Mapping[str, str] | None:
    """The job's ``TransferOutputRemaps`` when a lane can apply them: plain names renamed to
    plain names in the ``Iwd`` (None: remaps a lane leaves to the starter's file transfer).
    Read-only: the same mapping is handed out for the same text (a call's remaps are read
    when it is queued, fed to its lane and ended)."""
    return _lane_remaps(job.get("TransferOutputRemaps"))


@functools.lru_cache(maxsize=8192)
def _lane_remaps(text: str | None) -> Mapping[str, str] | None:
    try:
        value = parse_literal(text) if text is not None else None
    except ValueError:
        value = None
    try:
        remaps = parse_remaps(value)
    except TransferError:
        return None
    if not all(plain_name(k) and plain_name(v) for k, v in remaps.items()):
        return None
    return MappingProxyType(remaps)


def call_file(job) -> str | None:
    """The call file among the job's inputs (None: it has none)."""
    names = [os.path.basename(source) for source in split_list(ul.literal(job, "TransferInput"))]
    return next((name for name in names if is_call_file(name)), None)


def lane_outputs(job, result: m.LaneResult) -> tuple[tuple[str, bytes], ...]:
    """The files a call's result puts into its ``Iwd``: the result files (renamed by its
    remaps, the result first) and its stdout/stderr."""
    remaps = output_remaps(job) or {}
    plain = sorted(((name, data) for name, data in result.files.items() if plain_name(name)),
                   key=lambda item: item[0] != RESULT_FILE)  # the result first: it may take the call file's place
    files = [(remaps.get(name, name), data) for name, data in plain]
    # Empty output empties a file an earlier run left; on a first run there is none to look for.
    first_run = ul.number(job, "NumJobStarts") <= 1
    for attr, data in (("Out", result.stdout), ("Err", result.stderr)):
        target = ul.literal(job, attr)
        if (data or not first_run) and isinstance(target, str) and target and target != "/dev/null" \
                and "/" not in target:
            files.append((target, data))
    return tuple(files)


@dataclass(eq=False)
class Lane:
    """A call lane on one claim, as the schedd follows it."""

    claim_id: str
    key: tuple
    job_id: JobId                 # the job whose ad activated the lane (its JobExited names it)
    first: JobId | None = None    # that job, until the lane runs it
    active: bool = False          # the startd acknowledged the activation
    stopping: bool = False        # the schedd vacated it
    in_flight: dict[JobId, float] = field(default_factory=dict)  # sent, no result yet -> when sent
    pace: float | None = None     # recent seconds per call on the worker
    answered: list = field(default_factory=list)  # the calls of our last MoreCalls (sent again if it was lost)
    idle_until: float | None = None
    ran: int = 0                  # calls finished on it

    def ahead(self, now: float, others_busy: bool) -> int:
        """How many calls the lane should hold now.

        One, unless its calls are quick (under ``QUICK_CALL``: then the next one too, and
        about ``AHEAD_SECONDS`` of them, so the worker never waits for the wire), every other
        lane of its kind is busy too (an idle lane takes the next call instead) and the call it
        runs is not taking much longer than its pace (a call queued behind a slow one could
        neither run elsewhere nor be cancelled).
        """
        if self.pace is None or not others_busy or self.pace > QUICK_CALL:
            return 1
        oldest = min(self.in_flight.values(), default=now)
        if now - oldest > max(10 * self.pace, 2 * AHEAD_SECONDS):
            return 1
        return 1 + max(1, min(_MAX_AHEAD, math.ceil(AHEAD_SECONDS / max(self.pace, 1e-5))))
