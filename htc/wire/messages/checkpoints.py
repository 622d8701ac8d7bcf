"""Self-checkpointing (``checkpoint_exit_code``): a job's checkpoint files from its starter to
the schedd's spool, and back to the starter of its next run; and ``htc checkpoint``: a tool asks
the schedd to have a running standard-universe job checkpointed now (CheckpointJobs), and the
schedd asks the job's startd (CheckpointClaim).

Both are conversations on a connection of their own, like the transfers of
:mod:`.transfer`, and use the same file streams (FileEntry, FileData, FileDone ...
TransferEnd). Names in a checkpoint stream are paths relative to the job's sandbox.

A standard-universe job running in another FileSystemDomain also has its forwarded file calls
relayed to the schedd (``RelayJobIO``, then ``JobIOBytes`` both ways until either side closes).
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from htc.wire.messages.common import Ack
from htc.wire.messages.schema import MODE, JobId, Message, NonEmpty, Positive, invalid

#: the most bytes of forwarded calls one JobIOBytes carries
MAX_JOB_IO_CHUNK = 1 << 20


class SendCheckpoint(Message, frozen=True):
    """Starter -> shadow: checkpoint ``number`` of job ``job_id`` on ``claim_id`` follows as a
    file stream; the shadow stores it in the job's spool, replacing the previous one only once
    every file has arrived intact, records it and answers Ack (ErrorReply: why not)."""

    reply_type = Ack
    claim_id: NonEmpty
    job_id: JobId
    number: Positive


class FetchCheckpoint(Message, frozen=True):
    """Starter -> shadow: send the latest stored checkpoint of job ``job_id`` on ``claim_id``
    (the answer is a file stream; an empty one when the job has none)."""

    reply_type = None
    claim_id: NonEmpty
    job_id: JobId


class CheckpointJobsReply(Message, frozen=True):
    """The schedd's answer to CheckpointJobs: the jobs whose startd was asked to checkpoint them
    (``requested``), and for each other job why not (``refused``: job id -> reason)."""

    requested: tuple[JobId, ...] = ()
    refused: dict[JobId, str] = {}


class CheckpointJobs(Message, frozen=True):
    """Tool -> schedd (``htc checkpoint``): checkpoint each running standard-universe job of
    ``ids`` now, without stopping it; only its owner or an administrator may ask."""

    reply_type = CheckpointJobsReply
    ids: tuple[JobId, ...]

    def _check(self) -> None:
        if not self.ids:
            raise invalid(self, "ids is empty; name at least one job (cluster.proc)")


class CheckpointClaim(Message, frozen=True):
    """Schedd -> startd: have the starter of ``claim_id`` checkpoint its standard-universe job
    now; the job runs on, and the image goes to the shadow like a periodic one. Ack once the
    starter was told; ErrorReply when the claim runs no such job."""

    reply_type = Ack
    claim_id: NonEmpty


class RelayJobIO(Message, frozen=True):
    """Starter -> shadow: relay the forwarded file calls of standard-universe job ``job_id`` on
    ``claim_id`` (:mod:`htc.runtime.protocol`'s bytes) to a file server in the job's Iwd, run as
    its owner. Ack, then JobIOBytes both ways until either side closes (ErrorReply: why not)."""

    reply_type = Ack
    claim_id: NonEmpty
    job_id: JobId


class JobIOBytes(Message, frozen=True):
    """The next bytes of a RelayJobIO conversation: requests from the job, replies from the server."""

    data: Annotated[bytes, Meta(min_length=1, max_length=MAX_JOB_IO_CHUNK)]

    def __post_init__(self) -> None:
        # checked by hand when built in Python, as FileData is (decoded, msgspec has checked it)
        if MODE.get() is None and (not isinstance(self.data, bytes) or not 0 < len(self.data) <= MAX_JOB_IO_CHUNK):
            raise invalid(self, f"data must be 1 to {MAX_JOB_IO_CHUNK} bytes")


__all__ = ["MAX_JOB_IO_CHUNK", "CheckpointClaim", "CheckpointJobs", "CheckpointJobsReply", "FetchCheckpoint", "JobIOBytes",
           "RelayJobIO", "SendCheckpoint"]
