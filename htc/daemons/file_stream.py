"""A job's files over a connection: the file stream both ends of a transfer speak.

Theory of operation
-------------------
When the execute side does not share the submit side's file system, the starter and the
shadow move a job's files over a connection of their own (the messages and their order:
:mod:`htc.wire.messages.transfer`). This module is the part the two sides share:

* :func:`send_stream` sends what a *source* yields -- a synchronous generator of
  :class:`Outgoing` entries (a :class:`~htc.wire.messages.FileEntry` and, for a file, a
  descriptor open for reading), advanced in a worker thread because opening a job's files
  means switching to the owner's file-system credentials for a moment
  (:mod:`htc.daemons.owner_files`; the switch is per thread and never spans a ``yield``).
  A file is read :data:`~htc.wire.messages.MAX_TRANSFER_CHUNK` bytes at a time, each chunk
  sent and drained before the next is read: neither side holds more than a few chunks of a
  file, whatever its size (the receiver writes and hashes what arrives :data:`WRITE_BATCH`
  bytes at a time, in a worker thread), and a slow receiver slows the sender down (the
  transport's flow control). Each file ends with its SHA-256.
* :func:`receive_stream` takes a stream apart for a *sink* (:class:`Sink`: where the entries
  land -- a sandbox, or the job's Iwd written as its owner), checking that it is well formed:
  data only inside a file, no more and no fewer bytes than announced, the checksum right, the
  counts of :class:`~htc.wire.messages.TransferEnd` right. A malformed, oversized or truncated
  stream, an ``ErrorReply`` from the peer, or a connection that breaks raises
  :class:`~htc.daemons.job_files.TransferError` with a sentence that can become the job's
  hold reason; it never escapes as anything else, so a bad peer costs one job's transfer, not
  the daemon.

:func:`relative_parts` is the path rule for names that must stay beneath a directory.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from htc.daemons.job_files import TransferError
from htc.errors import HTCError
from htc.wire import messages as m

__all__ = ["Outgoing", "Sink", "StreamCounts", "Tap", "receive_stream", "relative_parts", "send_stream"]

#: what :func:`receive_stream` feeds a file's chunks to, besides the file and its SHA-256
Tap = Callable[[memoryview], None]

#: the most bytes of a file a receiver holds before writing them: one worker-thread hand-off
#: per this many bytes, not per chunk (each hand-off costs the event loop a wake-up)
WRITE_BATCH = 4 * m.MAX_TRANSFER_CHUNK

#: how long a receiver waits for the next message of a stream before giving up
STREAM_IDLE_TIMEOUT = 120.0


@dataclass
class Outgoing:
    """One entry a source yields: what to announce and, for a file, the descriptor to read
    (the stream closes it)."""

    entry: m.FileEntry
    fd: int | None = None


@dataclass
class StreamCounts:
    """What a stream carried."""

    files: int = 0
    bytes: int = 0


def relative_parts(name: str, what: str) -> list[str]:
    """The components of ``name``, a path that must stay beneath its directory.

    Raises:
        TransferError: ``name`` is absolute, empty, or has a ``..`` or empty component.
    """
    parts = name.split("/")
    if name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise TransferError(f"refusing {what} {name!r}: it must be a relative path without '..'")
    return parts


def _read(fd: int, size: int) -> bytes:
    return os.read(fd, size)


def _next(source: Iterator[Outgoing]) -> Outgoing | None:
    return next(source, None)


async def send_stream(conn, source: Iterator[Outgoing]) -> StreamCounts:
    """Send every entry ``source`` yields, then TransferEnd (see the module docstring).

    Raises:
        TransferError: the source failed (its text says which file and why), or a file
            changed size while being sent.
        ConnectionClosed: the peer went away.
    """
    counts = StreamCounts()
    try:
        while (item := await asyncio.to_thread(_next, source)) is not None:
            entry = item.entry
            try:
                await conn.send(entry)
            except BaseException:
                if item.fd is not None:
                    os.close(item.fd)  # a yielded descriptor is the stream's to close, sent or not
                raise
            counts.files += 1
            if item.fd is None:
                continue
            try:
                digest, sent = hashlib.sha256(), 0
                while sent < entry.size:
                    chunk = await asyncio.to_thread(_read, item.fd, min(m.MAX_TRANSFER_CHUNK, entry.size - sent))
                    if not chunk:
                        break
                    digest.update(chunk)
                    sent += len(chunk)
                    await conn.send(m.FileData(data=chunk))
            finally:
                os.close(item.fd)
            if sent != entry.size:
                raise TransferError(f"{entry.name} shrank from {entry.size} to {sent} bytes while it was being sent")
            counts.bytes += sent
            await conn.send(m.FileDone(sha256=digest.hexdigest()))
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()  # a source stopped early closes what it holds open
    await conn.send(m.TransferEnd(files=counts.files, bytes=counts.bytes))
    return counts


class Sink(Protocol):
    """Where a received stream lands."""

    def begin(self, entry: m.FileEntry) -> int | None:
        """Make ``entry``: a directory or link at once; for a file, return a descriptor to write to."""

    def finish(self, entry: m.FileEntry, fd: int) -> None:
        """The file open as ``fd`` is complete and checked: set its mode and times; close ``fd``
        whatever happens."""


def _take(fd: int, chunks: list[bytes], digest, tap: Tap | None) -> None:
    """Write chunks and fold them into the file's SHA-256 (and the tap's sum): one worker-thread
    call per :data:`WRITE_BATCH` bytes, with the hashes (which release the GIL) off the event loop."""
    for data in chunks:
        view = memoryview(data)
        digest.update(view)
        if tap is not None:
            tap(view)
        while view:
            view = view[os.write(fd, view):]


async def _sinking(call, entry: m.FileEntry, *args):
    """Run a sink's call in a worker thread; what it cannot do becomes a TransferError."""
    try:
        return await asyncio.to_thread(call, entry, *args)
    except TransferError:
        raise
    except OSError as exc:
        text = str(exc) if isinstance(exc, HTCError) else f"cannot write {entry.name}: {exc.strerror or exc}"
        raise TransferError(text) from None


async def _flush(fd: int, pending: list[bytes], digest, tap: Tap | None, entry: m.FileEntry) -> None:
    """Write (and hash) the chunks received and not yet written; ``pending`` is emptied."""
    if not pending:
        return
    chunks = pending.copy()
    pending.clear()
    try:
        await asyncio.to_thread(_take, fd, chunks, digest, tap)
    except OSError as exc:
        raise TransferError(f"cannot write {entry.name}: {exc.strerror or exc}") from None


async def receive_stream(conn, sink: Sink, *, peer: str, timeout: float = STREAM_IDLE_TIMEOUT,
                         taps: Callable[[m.FileEntry], Tap | None] | None = None) -> StreamCounts:
    """Receive one file stream from ``conn`` into ``sink``, checking it as it comes.

    Args:
        conn: the connection (the stream's first message is the next one on it).
        sink: where the entries land (its calls run in a worker thread).
        peer: how messages name the sender ("the shadow at schedd").
        timeout: the longest wait for each message.
        taps: called with each file's entry as it begins; what it returns (if not None) is fed
            every chunk of that file as it is written (in a worker thread) -- a second checksum
            taken in the same pass, so the file need not be read again.

    Returns:
        The counts, equal to the sender's TransferEnd.

    Raises:
        TransferError: the stream was malformed, oversized, truncated or refused, or the
            sink could not write an entry; the text says which and why.
    """
    counts = StreamCounts()
    current: m.FileEntry | None = None
    fd: int | None = None
    digest = hashlib.sha256()
    tap: Tap | None = None
    pending: list[bytes] = []
    written = flushed = 0
    try:
        while True:
            try:
                msg = await conn.recv(timeout)
            except HTCError as exc:  # WireError (malformed, oversized), ConnectionClosed, RequestTimeout
                raise TransferError(f"the file transfer from {peer} failed: {exc}") from None
            if isinstance(msg, m.ErrorReply):
                raise TransferError(f"{peer} could not send the files: {msg.message}")
            if isinstance(msg, m.FileData):
                if current is None or fd is None:
                    raise TransferError(f"{peer} sent file data outside a file")
                if written + len(msg.data) > current.size:
                    raise TransferError(f"{peer} sent more than the {current.size} bytes announced for "
                                        f"{current.name}")
                pending.append(msg.data)
                written += len(msg.data)
                if written - flushed >= WRITE_BATCH:
                    await _flush(fd, pending, digest, tap, current)
                    flushed = written
            elif isinstance(msg, m.FileDone):
                if current is None or fd is None:
                    raise TransferError(f"{peer} ended a file it never began")
                await _flush(fd, pending, digest, tap, current)
                if written != current.size:
                    raise TransferError(f"{peer} sent {written} of the {current.size} bytes of {current.name}")
                if digest.hexdigest() != msg.sha256:
                    raise TransferError(f"{current.name} arrived damaged from {peer}: its SHA-256 does not match")
                entry, done, fd, current = current, fd, None, None
                await _sinking(sink.finish, entry, done)  # (it closes ``done``, come what may)
                counts.bytes += written
            elif isinstance(msg, m.FileEntry):
                if current is not None:
                    raise TransferError(f"{peer} began {msg.name} before finishing {current.name}")
                counts.files += 1
                opened = await _sinking(sink.begin, msg)
                if msg.kind == "file":
                    current, fd, written, flushed, digest = msg, opened, 0, 0, hashlib.sha256()
                    tap = taps(msg) if taps is not None else None
            elif isinstance(msg, m.TransferEnd):
                if current is not None:
                    raise TransferError(f"{peer} ended the transfer in the middle of {current.name}")
                if (msg.files, msg.bytes) != (counts.files, counts.bytes):
                    raise TransferError(f"{peer} said it sent {msg.files} files, {msg.bytes} bytes; "
                                        f"{counts.files} files, {counts.bytes} bytes arrived")
                return counts
            else:
                raise TransferError(f"{peer} sent {type(msg).__name__} in the middle of a file transfer")
    finally:
        if fd is not None:
            os.close(fd)
