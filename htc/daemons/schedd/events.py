"""What the schedd core asks its service to do beyond the generic actions, and the kinds of
answers it waits for.

The generic events and actions (a message :class:`~htc.daemons.core.Received`, a
:class:`~htc.daemons.core.Reply`, a :class:`~htc.daemons.core.Send`...) are in
:mod:`htc.daemons.core`; requests whose refusal the core tells from silence
(:class:`~htc.daemons.calls.Call`, answered by ``CallDone``/``CallFailed``) in
:mod:`htc.daemons.calls`. The schedd adds:

* :class:`WriteUserLog` -- append events to a job's user log (:mod:`htc.daemons.schedd.userlog`);
* :class:`WriteCallFiles` -- a lane call's result and output files (:mod:`htc.daemons.schedd.callfiles`);
* :class:`WriteJobOutput` -- a chunk of a streamed stdout/stderr (:mod:`htc.daemons.schedd.output`);
* :class:`Owed` -- the outbox entry that kept those writes may go (:mod:`htc.daemons.schedd.owed`);
* :class:`StartLocalJob`, :class:`SignalLocalJob` -- start or signal a scheduler- or
  local-universe job's process (:mod:`htc.daemons.schedd.local_jobs`), whose service answers
  with the events :class:`LocalJobStarted`, :class:`LocalJobFailed` and :class:`LocalJobExited`;

and :class:`Answer`, what each of its calls was for (the first item of the call's cookie),
by which it finds the handler of the answer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from htc.daemons import core as c
from htc.eventlog import events as ev

__all__ = ["Answer", "LocalJobExited", "LocalJobFailed", "LocalJobStarted", "Owed", "SignalLocalJob", "StartLocalJob",
           "WriteCallFiles", "WriteJobOutput", "WriteUserLog"]


@dataclass(frozen=True)
class WriteUserLog(c.Action):
    """Append ``events`` to the job event log at ``path``, with the rights of ``owner`` (the
    jobs' ``Owner``; see :func:`htc.daemons.schedd.userlog.open_log`). ``replayed``: from the
    queue's outbox at start-up (:mod:`htc.daemons.schedd.owed`), perhaps written already: the
    service leaves out what the log's end holds."""

    path: str
    events: tuple[ev.Event, ...]
    owner: str | None = None
    replayed: bool = field(default=False, compare=False)  # (an event list compares as the same list)


@dataclass(frozen=True)
class WriteCallFiles(c.Action):
    """Write a lane call's output ``files`` (name -> bytes) into ``directory`` with the rights
    of the job's ``owner``. ``recycle`` names a file there the call no longer needs (its call
    file, once the job has left the queue): the first output is written into it and renamed,
    which spares a new file (an inode costs more to make than most calls take)."""

    directory: str
    files: tuple[tuple[str, bytes], ...]
    recycle: str | None = None
    owner: str | None = None


@dataclass(frozen=True)
class WriteJobOutput(c.Action):
    """Write ``data`` at byte ``offset`` of ``path`` (created as needed); ``truncate`` empties it
    first. ``owner`` is the job's ``Owner``, whose rights the write uses; ``job_id`` names the
    job in a refusal."""

    path: str
    offset: int
    data: bytes
    truncate: bool = False
    owner: str | None = None
    job_id: str | None = None


@dataclass(frozen=True)
class Owed(c.Action):
    """The outbox entry ``seq`` is paid once the writes before it (call files, then user-log
    events) are done."""

    seq: int


@dataclass(frozen=True)
class StartLocalJob(c.Action):
    """Start the process of the scheduler- or local-universe job ``job_id`` on this machine:
    ``argv`` (the executable first) in ``cwd`` with exactly ``env``, its stdin/stdout/stderr
    opened from those paths (outputs emptied, as HTCondor's schedd opens them) with the rights of
    ``owner``, as whom it runs when the schedd is root. The service answers with
    :class:`LocalJobStarted` or :class:`LocalJobFailed`, later :class:`LocalJobExited`."""

    job_id: tuple[int, int]
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    cwd: str
    stdin: str
    stdout: str
    stderr: str
    owner: str | None = None


@dataclass(frozen=True)
class SignalLocalJob(c.Action):
    """Send ``signal`` to the process group of the local job ``job_id`` (nothing if it is gone)."""

    job_id: tuple[int, int]
    signal: int


@dataclass(frozen=True)
class LocalJobStarted(c.Event):
    """The process of local job ``job_id`` runs as ``pid``."""

    job_id: tuple[int, int]
    pid: int


@dataclass(frozen=True)
class LocalJobFailed(c.Event):
    """The process of local job ``job_id`` could not be started (``reason``; ``errno`` or 0);
    ``code`` is the hold reason code (FailedToCreateProcess, FailedToAccessUserAccount...)."""

    job_id: tuple[int, int]
    reason: str
    errno: int = 0
    code: int = 6


@dataclass(frozen=True)
class LocalJobExited(c.Event):
    """The process of local job ``job_id`` ended: ``exit_code``, or killed by ``exit_signal``;
    its CPU times in seconds."""

    job_id: tuple[int, int]
    exit_code: int | None
    exit_signal: int | None = None
    core_dumped: bool = False
    user_cpu: float = 0.0
    sys_cpu: float = 0.0


class Answer(enum.Enum):
    """What a :class:`~htc.daemons.calls.Call` of the schedd asked (its cookie's first item)."""

    CLAIM = "claim"               # RequestClaim for a match; cookie (CLAIM, claim key)
    ALIVE = "alive"               # a claim's keep-alive watch; (ALIVE, claim id)
    ACTIVATE = "activate"         # a shadow's ActivateClaim or reconnect; (ACTIVATE, job id, claim id)
    VACATE = "vacate"             # a shadow's Vacate; (VACATE, job id, claim id)
    SUSPEND = "suspend"           # htc suspend; (SUSPEND, job id, claim id)
    CONTINUE = "continue"         # htc continue; (CONTINUE, job id, claim id)
    LANE = "lane"                 # a call lane's activation; (LANE, claim id)
    LANE_CALLS = "lanecalls"      # RunCalls to a lane; (LANE_CALLS, claim id)
    LANE_VACATE = "lanevacate"    # a lane's Vacate; (LANE_VACATE, claim id)
    CHECKPOINT = "checkpoint"     # htc checkpoint's CheckpointClaim; (CHECKPOINT, job id, claim id)
