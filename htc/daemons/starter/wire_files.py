"""The starter's side of file transfer over the connection: input fetched from the shadow into
the sandbox, output sent back to it.

Theory of operation
-------------------
A job whose ``FileSystemDomain`` differs from the machine's
(:func:`htc.daemons.job_files.over_wire`) has its files moved over connections to its shadow,
never through its Iwd, which the execute side may not even see. The startd hands the starter a
:class:`WireTransfer` (how to reach the shadow, the claim, the job); then

* before the job starts, :func:`fetch_input` sends ``FetchInput`` and receives the file stream
  (:mod:`htc.daemons.file_stream`) into the sandbox with a :class:`SandboxSink`: every name
  must stay beneath the sandbox (relative, no ``..``), each directory on the way is opened
  without following a link, files are created afresh (``O_EXCL``... never through a link) and
  owned by the job's user. The shadow names the executable ``condor_exec.exe`` and the stdin
  file by its base name, as the direct copy does.
* when the job has ended, :func:`send_output` sends ``SendOutput`` and then the stream
  :func:`output_source` makes of what HTCondor sends back -- the captured stdout/stderr as
  ``Out``/``Err``, then ``TransferOutput`` or every new or modified top-level entry, renamed by
  ``TransferOutputRemaps`` -- read from the sandbox as the sandbox's user, component by
  component without following links (a link goes back as a link). The shadow writes them as
  the job's owner and answers Ack, or ErrorReply with the reason.

A failure of either raises or returns a :class:`~htc.daemons.job_files.TransferError` text,
which the startd turns into the hold HTCondor uses: 13 (TransferInputError) for input, 12
(TransferOutputError) for output.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from htc.daemons import owner_files as ofs
from htc.daemons.file_stream import Outgoing, StreamCounts, receive_stream, relative_parts, send_stream
from htc.daemons.job_files import STDERR_NAME, STDOUT_NAME, TransferError, parse_remaps, streamed_files
from htc.errors import HTCError
from htc.wire import messages as m

__all__ = ["SandboxSink", "WireTransfer", "fetch_input", "output_source", "sandbox_entries", "send_output"]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class WireTransfer:
    """How a starter reaches its job's shadow for files.

    Args:
        connect: opens a fresh connection to the shadow (for small requests: relayed calls).
        claim_id: the claim the job runs on (the shadow checks it).
        job_id: ``cluster.proc``.
        connect_bulk: opens one for a file stream, apart from small requests across hosts
            (:meth:`htc.wire.transport.Transport.open_bulk_connection`); None: ``connect``.
    """

    connect: Callable[[], Awaitable[Any]]
    claim_id: str
    job_id: str
    connect_bulk: Callable[[], Awaitable[Any]] | None = None

    async def open_stream(self) -> Any:
        """A fresh connection to the shadow for a file stream (input, output, a checkpoint)."""
        return await (self.connect_bulk or self.connect)()


class SandboxSink:
    """Writes a received input stream beneath the sandbox ``path``, owned by ``uid``/``gid``."""

    def __init__(self, path: Path, uid: int | None, gid: int | None):
        self.path, self.uid, self.gid = Path(path), uid, gid

    def _parent(self, parts: list[str]) -> int:
        """A descriptor of the directory that holds the last of ``parts``, opened without links."""
        fd = os.open(self.path, _DIR)
        try:
            for part in parts[:-1]:
                nxt = os.open(part, _DIR, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError:
            os.close(fd)
            raise
        return fd

    def _own(self, name: str, dir_fd: int) -> None:
        if self.uid is not None and os.geteuid() == 0:
            os.chown(name, self.uid, self.gid if self.gid is not None else -1, dir_fd=dir_fd, follow_symlinks=False)

    def begin(self, entry: m.FileEntry) -> int | None:
        """Make a directory or link now; create a file and return it open for writing."""
        parts = relative_parts(entry.name, "input file")
        parent = self._parent(parts)
        name = parts[-1]
        try:
            if entry.kind == "dir":
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=parent)
                fd = os.open(name, _DIR, dir_fd=parent)  # a directory, not a link to one
                try:
                    if self.uid is not None and os.geteuid() == 0:
                        os.fchown(fd, self.uid, self.gid if self.gid is not None else -1)
                    os.fchmod(fd, entry.mode & 0o777 | 0o700)
                finally:
                    os.close(fd)
                return None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=parent)
            if entry.kind == "link":
                os.symlink(entry.target, name, dir_fd=parent)
                self._own(name, parent)
                return None
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=parent)
            if self.uid is not None and os.geteuid() == 0:
                os.fchown(fd, self.uid, self.gid if self.gid is not None else -1)
            return fd
        finally:
            os.close(parent)

    def finish(self, entry: m.FileEntry, fd: int) -> None:
        """Give the file its mode and times; close it."""
        try:
            os.fchmod(fd, entry.mode & 0o777)
            if entry.mtime_ns:
                os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))
        finally:
            os.close(fd)


async def fetch_input(transfer: WireTransfer, sink: SandboxSink) -> int:
    """Ask the shadow for the job's input and write it into the sandbox.

    Returns:
        The number of bytes received.

    Raises:
        TransferError: the shadow cannot be reached, refused, or sent a bad stream.
    """
    request = m.FetchInput(claim_id=transfer.claim_id, job_id=transfer.job_id)
    return (await fetch_stream(transfer, request, sink, "input")).bytes


async def fetch_stream(transfer: WireTransfer, request: m.Message, sink, what: str) -> StreamCounts:
    """Send ``request`` to the job's shadow and receive the file stream it answers into ``sink``
    (the job's input, its stored checkpoint); ``what`` names it in errors.

    Raises:
        TransferError: the shadow cannot be reached, refused, or sent a bad stream.
    """
    try:
        conn = await transfer.open_stream()
    except HTCError as exc:
        raise TransferError(f"cannot reach the shadow of job {transfer.job_id} for its {what}: {exc}") from None
    try:
        await conn.send(request)
        return await receive_stream(conn, sink, peer=f"the shadow of job {transfer.job_id}")
    except TransferError:
        raise
    except HTCError as exc:
        raise TransferError(f"the {what} transfer of job {transfer.job_id} failed: {exc}") from None
    finally:
        await conn.aclose()


def _entries_beneath(src: int, name: str, reader: ofs.Identity, job: str) -> Iterator[Outgoing]:
    """``name`` (open as ``src``, a directory) and everything beneath it, as entries."""
    with ofs.acting_as(reader):
        children = sorted(os.listdir(src))
    for child in children:
        try:
            fd, st = ofs.open_beneath(src, child, reader, what="output file", job=job)
        except (FileNotFoundError, ofs.OwnerFileError):
            continue  # gone, or a FIFO/device: not output
        yield from _entry(fd, st, f"{name}/{child}", reader, job)


def _entry(fd: int, st: os.stat_result, name: str, reader: ofs.Identity, job: str) -> Iterator[Outgoing]:
    """The entries of one output open as ``fd`` (the stream closes a file's descriptor; the
    others are closed here)."""
    if stat.S_ISREG(st.st_mode):
        yield Outgoing(m.FileEntry(name=name, kind="file", mode=stat.S_IMODE(st.st_mode) & 0o777, size=st.st_size,
                                   mtime_ns=st.st_mtime_ns), fd)
        return
    try:
        if stat.S_ISLNK(st.st_mode):
            yield Outgoing(m.FileEntry(name=name, kind="link", mode=0o777, target=os.readlink("", dir_fd=fd)))
        else:
            yield Outgoing(m.FileEntry(name=name, kind="dir", mode=stat.S_IMODE(st.st_mode) & 0o777))
            yield from _entries_beneath(fd, name, reader, job)
    finally:
        os.close(fd)


def output_source(job_ad: Mapping[str, Any], box, *, baseline: Mapping[str, tuple[float, int]],
                  skip: Collection[str], job: str) -> Iterator[Outgoing]:
    """What the job sends back, as a file stream's entries (see the module docstring); names
    are destinations relative to the Iwd (or absolute, where a remap says so).

    Raises:
        TransferError: a requested output is missing or not the job's to send.
    """
    from htc.daemons.starter.output import path_attr

    reader = ofs.Identity.account(box.uid, box.gid)
    streamed = set(streamed_files(job_ad).values())
    wanted: list[tuple[str, str]] = []
    for attr, name in (("Out", STDOUT_NAME), ("Err", STDERR_NAME)):
        target = path_attr(job_ad, attr)
        if name not in streamed and target and job_ad.get("Transfer" + attr, True) is not False \
                and (box.path / name).exists():
            wanted.append((name, target))
    remaps = parse_remaps(job_ad.get("TransferOutputRemaps"))
    for name in box.output_names(job_ad, baseline, set(skip)):
        wanted.append((name, remaps.get(name) or remaps.get(name.rstrip("/")) or Path(name).name))
    root = os.open(box.path, _DIR)
    try:
        for name, target in wanted:
            try:
                fd, st = ofs.open_beneath(root, name.rstrip("/"), reader, what="output file", job=job)
            except FileNotFoundError:
                raise TransferError(f"output file {name!r} was not created by the job in its sandbox; "
                                    "fix transfer_output_files or the job") from None
            except ofs.OwnerFileError as exc:
                raise TransferError(str(exc)) from None
            yield from _entry(fd, st, target, reader, job)
    finally:
        os.close(root)


async def send_output(transfer: WireTransfer, source: Iterator[Outgoing]) -> tuple[int, str | None]:
    """Send the job's output to the shadow, which writes it into the Iwd.

    Returns:
        The number of entries sent and None, or the text of the error that stopped the transfer.
    """
    try:
        conn = await transfer.open_stream()
    except HTCError as exc:
        source.close()
        return 0, f"cannot reach the shadow of job {transfer.job_id} for its output: {exc}"
    try:
        await conn.send(m.SendOutput(claim_id=transfer.claim_id, job_id=transfer.job_id))
        counts = await send_stream(conn, source)
        reply = await conn.recv(timeout=120.0)
        if isinstance(reply, m.ErrorReply):
            return counts.files, f"the shadow could not write the output: {reply.message}"
        return counts.files, None
    except TransferError as exc:
        with contextlib.suppress(HTCError):
            await conn.send(m.ErrorReply(code="bad_request", message=str(exc)))  # the shadow stops waiting
        return 0, str(exc)
    except HTCError as exc:
        # The shadow may have refused mid-stream and closed: its ErrorReply says why.
        with contextlib.suppress(HTCError):
            reply = await conn.recv(timeout=5.0)
            if isinstance(reply, m.ErrorReply):
                return 0, f"the shadow could not write the output: {reply.message}"
        return 0, f"the output transfer of job {transfer.job_id} failed: {exc}"
    finally:
        await conn.aclose()


def sandbox_entries(box, names: Collection[str], job: str) -> Iterator[Outgoing]:
    """``names`` (top-level entries of the sandbox ``box``) and everything beneath them, as
    file-stream entries named as in the sandbox, read as the sandbox's user without following
    links (a self-checkpointing job's checkpoint: :mod:`htc.daemons.starter.self_checkpoint`).

    Raises:
        TransferError: a named entry is missing or not the job's to send.
    """
    reader = ofs.Identity.account(box.uid, box.gid)
    root = os.open(box.path, _DIR)
    try:
        for name in names:
            try:
                fd, st = ofs.open_beneath(root, name.rstrip("/"), reader, what="checkpoint file", job=job)
            except FileNotFoundError:
                raise TransferError(f"checkpoint file {name!r} is not in the job's sandbox; fix "
                                    "transfer_checkpoint_files or the job") from None
            except ofs.OwnerFileError as exc:
                raise TransferError(str(exc)) from None
            yield from _entry(fd, st, name.rstrip("/"), reader, job)
    finally:
        os.close(root)
