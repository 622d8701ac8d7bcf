"""Self-checkpointing (``checkpoint_exit_code``): a job's checkpoint files from its starter to
the schedd's spool, and back to the starter of its next run.

Both are conversations on a connection of their own, like the transfers of
:mod:`.transfer`, and use the same file streams (FileEntry, FileData, FileDone ...
TransferEnd). Names in a checkpoint stream are paths relative to the job's sandbox.
"""

from __future__ import annotations

from htc.wire.messages.common import Ack
from htc.wire.messages.schema import JobId, Message, NonEmpty, Positive


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


__all__ = ["FetchCheckpoint", "SendCheckpoint"]
