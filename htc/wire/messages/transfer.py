"""File transfer over a connection: a job's input from the shadow to the starter, its output
back, when the execute side does not share the submit side's file system.

A transfer is one conversation on a connection of its own. The side that asks sends
:class:`FetchInput` (starter -> shadow: "send me job J's input") or :class:`SendOutput`
(starter -> shadow: "here comes job J's output"); then the side that has the files sends a
*file stream*: for each file, directory or link a :class:`FileEntry`, then, for a file, its
bytes in :class:`FileData` messages of at most :data:`MAX_TRANSFER_CHUNK` bytes each and a
:class:`FileDone` with the file's SHA-256; the stream ends with :class:`TransferEnd` (the
counts, checked by the receiver). The receiver of an output stream answers ``Ack`` (or
``ErrorReply``); either side ends a failed stream with ``ErrorReply``, whose text becomes the
job's hold reason (HoldReasonCode 13 for input, 12 for output).

A standard-universe job's checkpoint images travel the same way: :class:`SendCheckpoint`
(starter -> shadow, an image follows) and :class:`FetchCheckpoint` (starter -> shadow, "send me
the latest image").

The same streams carry a client's files to and from the schedd's spool (``htc submit
-spool``, ``htc transfer_data``): :class:`SpoolInput` and :class:`FetchOutput`.

Names in a stream are ``/``-separated relative paths: for input, where the file lands in the
sandbox; for output, where it lands relative to the job's Iwd (a remap may make it absolute).
Each receiver applies its own path rules on top of the checks here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from htc.wire.messages.common import Ack
from htc.wire.messages.schema import MODE, Count, JobId, Message, NonEmpty, invalid

#: the largest ``FileData.data`` a receiver accepts (senders cut files into chunks this big)
MAX_TRANSFER_CHUNK = 1024 * 1024
#: the longest path a stream may name (Linux's PATH_MAX)
MAX_PATH = 4096

FileKind = Literal["file", "dir", "link"]


class FetchInput(Message, frozen=True):
    """Starter -> shadow: send the input files of job ``job_id`` running on ``claim_id`` (the
    answer is a file stream: FileEntry, FileData, FileDone ... TransferEnd)."""

    reply_type = None
    claim_id: NonEmpty
    job_id: JobId


class SendOutput(Message, frozen=True):
    """Starter -> shadow: the output files of job ``job_id`` on ``claim_id`` follow as a file
    stream; the shadow answers Ack once every file is written (ErrorReply: why not)."""

    reply_type = Ack
    claim_id: NonEmpty
    job_id: JobId


class SendCheckpoint(Message, frozen=True):
    """Starter -> shadow: a checkpoint image of standard-universe job ``job_id`` on ``claim_id``
    follows as a file stream of one file; the shadow keeps it in the schedd's spool once its
    checksum verifies (the previous image until then) and answers Ack (ErrorReply: why not)."""

    reply_type = Ack
    claim_id: NonEmpty
    job_id: JobId


class FetchCheckpoint(Message, frozen=True):
    """Starter -> shadow: send the latest checkpoint image of job ``job_id`` running on
    ``claim_id`` (the answer is a file stream with that one file, or with none: start afresh)."""

    reply_type = None
    claim_id: NonEmpty
    job_id: JobId


class SpoolInput(Message, frozen=True):
    """Client -> schedd (``htc submit -spool``): the input files of job ``job_id``, held with
    HoldReasonCode 16 (SpoolingInput), follow as a file stream; the schedd stores them in its
    spool, makes that the job's Iwd, releases the job and answers Ack."""

    reply_type = Ack
    job_id: JobId


class FetchOutput(Message, frozen=True):
    """Client -> schedd (``htc transfer_data``): send the spooled output of completed job
    ``job_id`` as a file stream; the client answers Ack once it is written, and the schedd
    lets the job leave the queue and answers Ack."""

    reply_type = None
    job_id: JobId


class FileEntry(Message, frozen=True):
    """One entry of a file stream: a ``file`` (``size`` bytes of FileData follow, then
    FileDone), a ``dir``, or a ``link`` to ``target``; ``mode`` is its permission bits."""

    name: Annotated[str, Meta(min_length=1, max_length=MAX_PATH)]
    kind: FileKind
    mode: Annotated[int, Meta(ge=0, le=0o7777)] = 0o644
    size: Count = 0
    mtime_ns: Count = 0
    target: Annotated[str, Meta(max_length=MAX_PATH)] = ""

    def _check(self) -> None:
        if "\0" in self.name or "\0" in self.target:
            raise invalid(self, "a path may not contain a NUL byte")
        if self.kind == "link" and not self.target:
            raise invalid(self, "a link entry needs its target")
        if self.kind != "file" and self.size:
            raise invalid(self, f"a {self.kind} entry carries no bytes (size must be 0)")


class FileData(Message, frozen=True):
    """The next bytes of the file the last FileEntry announced."""

    data: Annotated[bytes, Meta(max_length=MAX_TRANSFER_CHUNK)]

    def __post_init__(self) -> None:
        # Built in Python, a chunk is checked by hand: the generic check's round trip through
        # builtins would copy each megabyte twice. Decoded, msgspec has checked the same rule.
        if MODE.get() is None and (not isinstance(self.data, bytes) or len(self.data) > MAX_TRANSFER_CHUNK):
            raise invalid(self, f"data must be at most {MAX_TRANSFER_CHUNK} bytes")


class FileDone(Message, frozen=True):
    """The file's bytes are all sent; ``sha256`` (hex) is their checksum."""

    sha256: Annotated[str, Meta(pattern=r"^[0-9a-f]{64}$")]


class TransferEnd(Message, frozen=True):
    """The stream is over: ``files`` entries and ``bytes`` bytes of file data were sent."""

    files: Count
    bytes: Count


__all__ = ["FetchInput", "FetchOutput", "FileData", "FileDone", "FileEntry", "FileKind", "MAX_PATH",
           "MAX_TRANSFER_CHUNK", "SendOutput", "SpoolInput", "TransferEnd"]
