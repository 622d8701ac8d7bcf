"""The shadow's side of file transfer over the connection: a running job's input sent to its
starter, its output received and written into its Iwd.

Theory of operation
-------------------
When a job's execute machine is in another ``FileSystemDomain``
(:func:`htc.daemons.job_files.over_wire`), its starter does not touch the Iwd: it opens a
connection to the shadow (the schedd at the ActivateClaim's ``shadow_address``) and asks
(:mod:`htc.wire.messages.transfer`):

* ``FetchInput(claim_id, job_id)``: :class:`TransferService` answers with a file stream
  (:mod:`htc.daemons.file_stream`) of what HTCondor's file transfer sends: the executable as
  ``condor_exec.exe`` (unless ``TransferExecutable`` is false), each ``TransferInput`` entry (a
  file under its base name, a directory ``d`` whole as ``d/...``, ``d/`` as its contents; links
  inside a directory as links), and the stdin file (``In``) under its base name -- the same
  layout :meth:`htc.daemons.starter.sandbox.Sandbox.bring_in` makes from a shared file system.
  Every file is opened with the rights of the job's ``Owner`` (:mod:`htc.daemons.owner_files`).
* ``SendOutput(claim_id, job_id)`` followed by a file stream: each entry is written as the
  owner under the Iwd (a name made absolute by ``transfer_output_remaps`` where it says), never
  through a link at the destination and only into a regular file; a daemon that cannot act as
  the owner keeps every destination inside the Iwd, as the starter's direct copy does. The
  answer is ``Ack`` once all is written, or ``ErrorReply`` saying why not.

Both are served only for a run the schedd follows: the claim id (a secret the startd and schedd
share) must be the one the job runs on. A refused or failed transfer is answered with an
``ErrorReply`` whose text the starter makes the job's hold reason (13 for input, 12 for output);
nothing a starter sends ends the schedd. The service hands these conversations to
:class:`TransferService` (a connection of their own: :meth:`DaemonService.register_conversation`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from htc.daemons import owner_files as ofs
from htc.daemons.file_stream import Outgoing, receive_stream, send_stream
from htc.daemons.job_files import CONDOR_EXEC, TransferError, local_path, split_list
from htc.daemons.schedd.shadow import ad_text, ad_values, parse_job_id
from htc.errors import HTCError
from htc.wire import messages as m

__all__ = ["OwnerSink", "TransferService", "file_entry", "input_source", "open_as", "tree_entries"]


def _text(ad: Mapping[str, Any], name: str) -> str | None:
    value = ad.get(name)
    return value if isinstance(value, str) and value and value != "/dev/null" else None


def open_as(path: Path, owner: ofs.Identity | None, what: str, job: str) -> tuple[int, os.stat_result]:
    """Open ``path`` for reading with the rights of ``owner``; its descriptor and status.

    Raises:
        TransferError: it does not exist or the owner may not read it.
    """
    ofs.check_path(path, what, job)
    try:
        with ofs.acting_as(owner):
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise TransferError(f"{what} {str(path)!r} does not exist; fix transfer_input_files or the job's "
                            "initialdir") from None
    except OSError as exc:
        raise TransferError(ofs.describe(exc, "read", what, str(path), owner, job)) from None
    return fd, os.fstat(fd)


def file_entry(name: str, fd: int, st: os.stat_result, executable: bool = False) -> Outgoing:
    """The stream entry of a regular file open as ``fd``."""
    mode = stat.S_IMODE(st.st_mode) & 0o777
    if executable:
        mode |= 0o111
    return Outgoing(m.FileEntry(name=name, kind="file", mode=mode, size=st.st_size, mtime_ns=st.st_mtime_ns), fd)


def tree_entries(prefix: str, dir_fd: int, owner: ofs.Identity | None, job: str) -> Iterator[Outgoing]:
    """The entries beneath the directory open as ``dir_fd``, read as ``owner``, named under ``prefix``."""
    with ofs.acting_as(owner):
        names = sorted(os.listdir(dir_fd))
    for name in names:
        try:
            st, child, target = ofs.open_entry(dir_fd, name, owner, job=job)
        except ofs.OwnerFileError as exc:
            raise TransferError(str(exc)) from None
        path = f"{prefix}/{name}" if prefix else name
        if target is not None:
            yield Outgoing(m.FileEntry(name=path, kind="link", mode=0o777, target=target))
        elif child is not None and stat.S_ISDIR(st.st_mode):
            try:
                yield Outgoing(m.FileEntry(name=path, kind="dir", mode=stat.S_IMODE(st.st_mode) | 0o700))
                yield from tree_entries(path, child, owner, job)
            finally:
                os.close(child)
        elif child is not None:
            yield file_entry(path, child, os.fstat(child))
        # (FIFOs, sockets and devices are left out, as the direct copy leaves them)


def input_source(job_ad: Mapping[str, Any], owner: ofs.Identity | None, job: str) -> Iterator[Outgoing]:
    """The job's input as a file stream's entries (see the module docstring), read as ``owner``.

    Raises:
        TransferError: an input is missing, unreadable by its owner, or not a file or directory.
    """
    iwd = Path(_text(job_ad, "Iwd") or "/")
    cmd = _text(job_ad, "Cmd")
    if cmd and job_ad.get("TransferExecutable", True) is not False:
        fd, st = open_as(local_path(cmd, iwd), owner, "executable", job)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise TransferError(f"the executable {cmd!r} of job {job} is not a regular file")
        yield file_entry(CONDOR_EXEC, fd, st, executable=True)
    items = split_list(job_ad.get("TransferInput"))
    stdin = _text(job_ad, "In")
    if stdin and job_ad.get("TransferIn", True) is not False:
        items.append(stdin)
    for item in items:
        path = local_path(item, iwd)
        fd, st = open_as(path, owner, "input file", job)
        if stat.S_ISREG(st.st_mode):
            yield file_entry(path.name, fd, st)
            continue
        try:
            if not stat.S_ISDIR(st.st_mode):
                raise TransferError(f"cannot transfer input {item!r} for job {job}: {path} is not a regular file "
                                    "or a directory")
            if item.endswith("/"):
                yield from tree_entries("", fd, owner, job)
            else:
                yield Outgoing(m.FileEntry(name=path.name, kind="dir", mode=stat.S_IMODE(st.st_mode) | 0o700))
                yield from tree_entries(path.name, fd, owner, job)
        finally:
            os.close(fd)


class OwnerSink:
    """Writes a received output stream under ``iwd`` with the rights of ``owner``.

    Args:
        iwd: where relative names land.
        owner: whose rights (None: the daemon's own).
        job: ``cluster.proc`` for messages.
    """

    def __init__(self, iwd: Path, owner: ofs.Identity | None, job: str):
        self.iwd, self.owner, self.job = iwd, owner, job
        self.links: set[str] = set()  # links this stream made: nothing is written beneath them
        self.written: list[Path] = []

    def _dest(self, entry: m.FileEntry) -> str:
        name = entry.name.rstrip("/")
        ofs.check_path(name, "output destination", self.job)
        parts = name.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in self.links:
                raise TransferError(f"refusing output {name!r} of job {self.job}: it lies beneath a link the job "
                                    "sent")
        confined = self.owner is not None and not self.owner.kernel_checks
        if confined and ofs.leaves(name):
            raise TransferError(f"cannot write output file {name!r} for job {self.job}: it leaves the job's "
                                f"directory {self.iwd}, and the daemon cannot act as user {self.owner.name}")
        dest = str(local_path(name, self.iwd))
        ofs.makedirs(os.path.dirname(dest) or "/", self.owner, what="output directory", job=self.job)
        self.written.append(Path(dest))
        return dest

    def begin(self, entry: m.FileEntry) -> int | None:
        """Make a directory or link now; open a file for writing (see :class:`~htc.daemons.file_stream.Sink`)."""
        dest = self._dest(entry)
        if entry.kind == "dir":
            ofs.makedirs(dest, self.owner, what="output directory", job=self.job)
            return None
        if entry.kind == "link":
            ofs.check_path(entry.target, "link target", self.job)
            try:
                with ofs.acting_as(self.owner):
                    with contextlib.suppress(FileNotFoundError):
                        if stat.S_ISDIR(os.stat(dest, follow_symlinks=False).st_mode):
                            raise IsADirectoryError(21, "a directory is there")
                        os.unlink(dest)
                    os.symlink(entry.target, dest)
            except OSError as exc:
                raise ofs.OwnerFileError(ofs.describe(exc, "write", "output link", dest, self.owner,
                                                      self.job)) from None
            self.links.add(entry.name.rstrip("/"))
            return None
        return ofs.open_write(dest, self.owner, what="output file", job=self.job, truncate=True,
                              mode=entry.mode & 0o777)

    def finish(self, entry: m.FileEntry, fd: int) -> None:
        """Give the written file its mode and times, as the owner, and close it."""
        try:
            with ofs.acting_as(self.owner), contextlib.suppress(OSError):  # as copy2 does, where the owner may
                os.fchmod(fd, entry.mode & 0o777)
                if entry.mtime_ns:
                    os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))
        finally:
            os.close(fd)


class TransferService:
    """Serves FetchInput and SendOutput conversations for the schedd's service (see the module
    docstring)."""

    def __init__(self, service):
        self.service = service

    def _job(self, msg: m.FetchInput | m.SendOutput) -> tuple[dict[str, Any], str] | None:
        """The job's ad (as values) when ``msg``'s claim runs it; None otherwise."""
        core = self.service.core
        job_id = parse_job_id(msg.job_id)
        shadow = core.shadows.get(job_id)
        if shadow is None or shadow.claim_id != msg.claim_id:
            return None
        job = core.job(job_id)
        if job is None:
            return None
        return ad_values(ad_text(job)), f"{job_id[0]}.{job_id[1]}"

    def _owner(self, ad: Mapping[str, Any], label: str) -> ofs.Identity:
        try:
            return ofs.Identity.owner(ad.get("Owner"))
        except ofs.OwnerFileError as exc:
            raise TransferError(f"job {label}: {exc}") from None

    async def serve(self, conn, msg: m.FetchInput | m.SendOutput, peer=None) -> None:
        """Serve one transfer conversation on ``conn`` (it ends with the conversation)."""
        log = self.service.log
        found = self._job(msg)
        if found is None:
            await conn.send_error("not_found", f"no run of job {msg.job_id} on that claim; the transfer is refused")
            await conn.linger()  # the starter may be streaming its output already: let it read why
            return
        ad, label = found
        try:
            owner = self._owner(ad, label)
            if isinstance(msg, m.FetchInput):
                counts = await send_stream(conn, input_source(ad, owner, label))
                log.info("job %s: sent its input over the connection (%d entries, %d bytes)", label, counts.files,
                         counts.bytes)
                return
            sink = OwnerSink(Path(str(ad.get("Iwd") or "/")), owner, label)
            counts = await receive_stream(conn, sink, peer=f"the starter of job {label}")
            log.info("job %s: received its output over the connection (%d entries, %d bytes)", label, counts.files,
                     counts.bytes)
            await conn.send(m.Ack(detail=f"{counts.files} entries, {counts.bytes} bytes written"))
        except TransferError as exc:
            what = "input" if isinstance(msg, m.FetchInput) else "output"
            log.warning("job %s: %s transfer failed: %s", label, what, exc)
            await conn.send_error("bad_request", str(exc))
        except HTCError as exc:  # the starter went away (ConnectionClosed ...): nothing to answer
            log.info("job %s: transfer stopped: %s", label, exc)
