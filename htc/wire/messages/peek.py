"""condor_tail across hosts: a client asks the startd running a job for the end of its files.

HTCondor's condor_tail asks the starter (``STARTER_PEEK``); htc asks the startd that runs the
job (the job ad's ``StartdIpAddr``), which reads the sandbox of its starter. :class:`PeekJob`
names the job, the files (``stdout``, ``stderr`` or a path relative to the sandbox) and, per
file, where to start: ``-1`` for the last ``max_bytes`` bytes, else an offset (``-follow``
continues from where the previous answer ended). :class:`PeekReply` has one
:class:`PeekChunk` per file, and whether the job still runs there.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from htc.wire.messages.schema import Count, Int, JobId, Message, Record, invalid

#: the most bytes one answer carries per file (condor_tail's -maxbytes is per file too)
MAX_PEEK_BYTES = 1024 * 1024

#: ``stdout``, ``stderr`` or a relative path inside the sandbox (checked again by the startd)
PeekName = Annotated[str, Meta(min_length=1, max_length=4096)]


class PeekChunk(Record, frozen=True):
    """Bytes ``offset`` .. ``offset + len(data)`` of the file ``name``, whose size is ``size``."""

    name: PeekName
    offset: Count
    size: Count
    data: bytes = b""


class PeekReply(Message, frozen=True):
    """Startd -> client: a chunk per file asked for, and whether the job still runs here."""

    reply_type = None
    chunks: Annotated[tuple[PeekChunk, ...], Meta(max_length=64)] = ()
    running: bool = True


class PeekJob(Message, frozen=True):
    """Client -> startd (``htc tail``): the end of running job ``job_id``'s ``names`` (at most
    ``max_bytes`` each; ``offsets[i]`` -1 = the last bytes, else from there). Only the job's
    owner or an administrator may look."""

    reply_type = PeekReply
    job_id: JobId
    names: Annotated[tuple[PeekName, ...], Meta(min_length=1, max_length=64)] = ("stdout",)
    offsets: Annotated[tuple[Int, ...], Meta(max_length=64)] = ()
    max_bytes: Annotated[int, Meta(gt=0, le=MAX_PEEK_BYTES)] = 1024

    def _check(self) -> None:
        if self.offsets and len(self.offsets) != len(self.names):
            raise invalid(self, f"{len(self.offsets)} offsets for {len(self.names)} names")
        if any(o < -1 for o in self.offsets):
            raise invalid(self, "an offset is -1 (the last bytes) or a position in the file")
