"""Self-checkpointing (``checkpoint_exit_code``): a job's checkpoint files from its starter to
the schedd's spool, and back to the starter of its next run.

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


__all__ = ["MAX_JOB_IO_CHUNK", "FetchCheckpoint", "JobIOBytes", "RelayJobIO", "SendCheckpoint"]
