"""A job's sandbox (scratch directory): creation, file transfer in and out, removal.

Theory of operation
-------------------
Each job runs in a fresh directory under the execute dir, ``dir_<starter pid>_<n>``, owned by
the user the job runs as (mode 0700). Files move as HTCondor's file transfer moves them:

* Input (``TransferInput``, comma separated; paths relative to the job's Iwd). A file lands in
  the top of the sandbox under its base name. A directory ``d`` is copied whole as ``d/``; a
  directory written with a trailing slash, ``d/``, has its *contents* copied into the top.
  ``file://`` URLs are local paths; other URL schemes need a transfer plugin htc does not have.
  The executable (``Cmd``) is copied too unless ``TransferExecutable`` is false, named
  ``condor_exec.exe`` (HTCondor's ``CONDOR_EXEC``: the job runs as ``./condor_exec.exe``,
  whatever its name on the submit side) and made executable. Stdin (``In``) is copied when ``TransferIn`` is not false.
* Output. With ``TransferOutput`` set, exactly those paths (relative to the sandbox; a missing
  one is an error, as it puts an HTCondor job on hold). Without it, every file or directory at
  the top of the sandbox that is new or modified since input transfer -- minus the starter's own
  files (stdout/stderr captures, the ad files, the executable). ``TransferOutputRemaps``
  (``"name = dest; name2 = dest2"``, ``\\;`` and ``\\=`` escaped) renames or moves each output;
  relative destinations are relative to the Iwd. Stdout and stderr are captured in the sandbox
  (``_condor_stdout``/``_condor_stderr``) and copied to ``Out``/``Err``.
* Removal leaves nothing behind, even when the job made files read-only.

Whose rights (:mod:`htc.daemons.owner_files`): inputs are read, and outputs written, with the
rights of the job's owner (``owner``: the kernel checks the owner's permissions, and a link at
a destination is never written through); the sandbox side is reached only under a descriptor
of the sandbox, every component opened without following links, and read as the sandbox's
user, so that a job cannot make the starter read or write anything its owner could not.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from htc.daemons import owner_files as ofs
from htc.daemons.job_files import CONDOR_EXEC, STDERR_NAME, STDOUT_NAME, TransferError, local_path, split_list  # noqa: F401  (sb.* for the starter)
from htc.daemons.owner_files import Identity

JOB_AD_NAME = ".job.ad"
MACHINE_AD_NAME = ".machine.ad"
_STARTER_FILES = {STDOUT_NAME, STDERR_NAME, JOB_AD_NAME, MACHINE_AD_NAME, ".chirp.config", ".update.ad"}
_counter = itertools.count(1)


def _for(job: str | None) -> str:
    return f" for job {job}" if job else ""


@dataclass
class Sandbox:
    """One job's scratch directory."""

    path: Path
    uid: int | None = None
    gid: int | None = None

    @classmethod
    def create(cls, execute_dir: Path, uid: int | None = None, gid: int | None = None) -> Sandbox:
        """Make a fresh sandbox under ``execute_dir`` (created if missing), owned by uid/gid.

        Raises:
            TransferError: the execute dir cannot be written.
        """
        execute_dir = Path(execute_dir)
        try:
            execute_dir.mkdir(parents=True, exist_ok=True)
            while True:
                path = execute_dir / f"dir_{os.getpid()}_{next(_counter)}"
                try:
                    path.mkdir(mode=0o700)
                    break
                except FileExistsError:
                    continue
        except OSError as exc:
            raise TransferError(f"cannot create a sandbox in {execute_dir}: {exc.strerror}; check EXECUTE") from exc
        box = cls(path, uid, gid)
        box._own(path)
        return box

    def _own(self, path: Path) -> None:
        if self.uid is not None and os.geteuid() == 0:
            os.chown(path, self.uid, self.gid if self.gid is not None else -1, follow_symlinks=False)

    def bring_in(self, source: str, base: Path, *, executable: bool = False, owner: Identity | None = None,
                 job: str | None = None) -> Path:
        """Copy one input (file, directory, ``dir/`` contents, or file:// URL) into the sandbox,
        reading it with the rights of ``owner`` (the job's owner: :mod:`htc.daemons.owner_files`;
        None: the daemon's own) and writing it under a descriptor of the sandbox, never through
        a link. Links inside an input directory are copied as links; FIFOs, sockets and devices
        are left out. The ``executable`` lands as :data:`CONDOR_EXEC`, made executable.

        Returns:
            The path inside the sandbox (for ``dir/``: the sandbox itself).

        Raises:
            TransferError: the input does not exist or cannot be read by its owner.
        """
        src = local_path(source, base)
        try:
            ofs.check_path(src, "input file", job)
            try:
                with ofs.acting_as(owner):
                    fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as exc:
                if isinstance(exc, FileNotFoundError):
                    raise
                raise ofs.OwnerFileError(ofs.describe(exc, "read", "input file", str(src), owner, job)) from None
            box = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                st = os.fstat(fd)
                if stat.S_ISDIR(st.st_mode):
                    if source.endswith("/"):
                        self._copy_dir_in(fd, box, owner, job)
                        return self.path
                    dest = self.path / src.name
                    self._dir_in(src.name, st, fd, box, owner, job)
                elif stat.S_ISREG(st.st_mode):
                    name = CONDOR_EXEC if executable else src.name
                    dest = self.path / name
                    self._file_in(name, st, fd, box, executable)
                else:
                    raise TransferError(f"cannot transfer input {source!r}{_for(job)}: {src} is not a regular file "
                                        "or a directory")
            finally:
                os.close(fd)
                os.close(box)
        except FileNotFoundError as exc:
            raise TransferError(f"input file {source!r} does not exist (looked at {src}); "
                                "fix transfer_input_files or the job's initialdir") from exc
        except ofs.OwnerFileError as exc:
            raise TransferError(str(exc)) from None
        except OSError as exc:
            raise TransferError(f"cannot copy input {source!r} into {self.path}: {exc}") from exc
        return dest

    def _file_in(self, name: str, st: os.stat_result, src: int, box: int, executable: bool = False) -> None:
        dst = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=box)
        try:
            ofs.copy_fd(src, dst)
            mode = stat.S_IMODE(st.st_mode) & 0o777
            if executable:
                mode |= stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
            self._fown(dst)
            os.fchmod(dst, mode)
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dst)

    def _dir_in(self, name: str, st: os.stat_result, src: int, box: int, owner: Identity | None,
                job: str | None) -> None:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=box)
        dst = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=box)
        try:
            self._copy_dir_in(src, dst, owner, job)
            self._fown(dst)
            os.fchmod(dst, stat.S_IMODE(st.st_mode) & 0o777 | stat.S_IRWXU)
        finally:
            os.close(dst)

    def _copy_dir_in(self, src: int, dst: int, owner: Identity | None, job: str | None) -> None:
        """Copy the directory open as ``src`` (read as ``owner``) into the one open as ``dst``."""
        with ofs.acting_as(owner):
            names = os.listdir(src)
        for name in names:
            st, child, link = ofs.open_entry(src, name, owner, job=job)
            try:
                if link is not None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=dst)
                    os.symlink(link, name, dir_fd=dst)
                    if self.uid is not None and os.geteuid() == 0:
                        os.chown(name, self.uid, self.gid if self.gid is not None else -1, dir_fd=dst,
                                 follow_symlinks=False)
                elif child is not None and stat.S_ISDIR(st.st_mode):
                    self._dir_in(name, st, child, dst, owner, job)
                elif child is not None:
                    self._file_in(name, st, child, dst)
            finally:
                if child is not None:
                    os.close(child)

    def _fown(self, fd: int) -> None:
        if self.uid is not None and os.geteuid() == 0:
            os.fchown(fd, self.uid, self.gid if self.gid is not None else -1)

    def fresh_file(self, name: str, data: bytes = b"", *, own: bool = False) -> Path:
        """Make the starter's own file ``name`` at the top of the sandbox afresh: whatever the
        input put under that name (a link to ``/etc/passwd``...) is removed, never written
        through. ``own``: the job's user owns it (its stdout/stderr), else the starter.

        Raises:
            TransferError: a directory of that name is in the way, or the write failed.
        """
        box = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=box)
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=box)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if own:
                    self._fown(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise TransferError(f"cannot make {name} in the sandbox {self.path}: {exc.strerror or exc}; "
                                "an input of that name is in the way") from None
        finally:
            os.close(box)
        return self.path / name

    def snapshot(self) -> dict[str, tuple[float, int]]:
        """Modification time and size of each top-level entry (to spot new/modified output)."""
        out = {}
        for entry in os.scandir(self.path):
            st = entry.stat(follow_symlinks=False)
            out[entry.name] = (st.st_mtime, st.st_size)
        return out

    def output_names(self, job_ad: Mapping[str, Any], baseline: Mapping[str, tuple[float, int]],
                     skip: set[str]) -> list[str]:
        """What to send back: ``TransferOutput`` or the new/modified top-level entries."""
        wanted = split_list(job_ad.get("TransferOutput"))
        if wanted:
            return wanted
        now = self.snapshot()
        return sorted(name for name, sig in now.items()
                      if name not in _STARTER_FILES and name not in skip and baseline.get(name) != sig)

    def send_out(self, names: list[str], dest_dir: Path, remaps: Mapping[str, str], *,
                 owner: Identity | None = None, job: str | None = None) -> list[Path]:
        """Copy outputs to ``dest_dir`` (remapped where asked), writing with the rights of
        ``owner`` (:mod:`htc.daemons.owner_files`; None: the daemon's own).

        Each output is read under a descriptor of the sandbox, component by component without
        following a link, as the sandbox's user (a link is sent back as a link). Each
        destination is written as the owner, never through a link, and only into a regular
        file. A remap leaving ``dest_dir`` (absolute, or with ``..``) is the kernel's to judge
        when it checks as the owner; otherwise it is refused.

        Returns:
            The destination paths written.

        Raises:
            TransferError: a requested output is missing, not the job's, or cannot be written.
        """
        written = []
        reader = ofs.Identity.account(self.uid, self.gid)
        try:
            box = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise TransferError(f"cannot open the sandbox {self.path}{_for(job)}: {exc.strerror}") from None
        try:
            for name in names:
                target = remaps.get(name) or remaps.get(name.rstrip("/")) or Path(name).name
                try:
                    written.append(self._send_one(box, name, target, dest_dir, reader, owner, job))
                except FileNotFoundError as exc:
                    raise TransferError(f"output file {name!r} was not created by the job in its sandbox; "
                                        "fix transfer_output_files or the job") from exc
                except ofs.OwnerFileError as exc:
                    raise TransferError(str(exc)) from None
                except OSError as exc:
                    raise TransferError(f"cannot write output {name!r}{_for(job)} to {dest_dir}: {exc}") from exc
        finally:
            os.close(box)
        return written

    def _send_one(self, box: int, name: str, target: str, dest_dir: Path, reader: ofs.Identity,
                  owner: Identity | None, job: str | None) -> Path:
        ofs.check_path(target, "output destination", job)
        src, st = ofs.open_beneath(box, name.rstrip("/"), reader, what="output file", job=job)
        try:
            confined = owner is not None and not owner.kernel_checks
            if confined and ("://" in target or ofs.leaves(target)):
                raise ofs.OwnerFileError(f"cannot write output file {name!r}{_for(job)} to {target!r}: it leaves "
                                         f"the job's directory {dest_dir}, and the daemon cannot act as user "
                                         f"{owner.name}")
            dest = local_path(target, dest_dir)
            ofs.makedirs(str(dest.parent), owner, what="output directory", job=job)
            if stat.S_ISDIR(st.st_mode):
                ofs.makedirs(str(dest), owner, what="output directory", job=job)
                dst = self._open_dir_out(str(dest), None, owner, job)
                try:
                    self._copy_dir_out(src, dst, reader, owner, job)
                finally:
                    os.close(dst)
            elif stat.S_ISLNK(st.st_mode):
                self._link_out(os.readlink("", dir_fd=src), str(dest), None, owner, job)
            else:
                self._file_out(src, st, str(dest), None, owner, job)
            return dest
        finally:
            os.close(src)

    @staticmethod
    def _file_out(src: int, st: os.stat_result, dest: str, dir_fd: int | None, owner: Identity | None,
                  job: str | None) -> None:
        dst = ofs.open_write(dest, owner, what="output file", job=job, truncate=True,
                             mode=stat.S_IMODE(st.st_mode) & 0o777, dir_fd=dir_fd)
        try:
            ofs.copy_fd(src, dst)
            with ofs.acting_as(owner), contextlib.suppress(OSError):  # as copy2 does, where the owner may
                os.fchmod(dst, stat.S_IMODE(st.st_mode) & 0o777)
                os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(dst)

    @staticmethod
    def _link_out(link: str, dest: str, dir_fd: int | None, owner: Identity | None, job: str | None) -> None:
        ofs.check_path(link, "link target", job)
        try:
            with ofs.acting_as(owner):
                with contextlib.suppress(FileNotFoundError):
                    st = os.stat(dest, dir_fd=dir_fd, follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        raise IsADirectoryError(errno.EISDIR, "a directory is there")
                    os.unlink(dest, dir_fd=dir_fd)
                os.symlink(link, dest, dir_fd=dir_fd)
        except OSError as exc:
            raise ofs.OwnerFileError(ofs.describe(exc, "write", "output link", dest, owner, job)) from None

    @staticmethod
    def _open_dir_out(dest: str, dir_fd: int | None, owner: Identity | None, job: str | None) -> int:
        try:
            with ofs.acting_as(owner):
                return os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            raise ofs.OwnerFileError(ofs.describe(exc, "write", "output directory", dest, owner, job)) from None

    def _copy_dir_out(self, src: int, dst: int, reader: ofs.Identity, owner: Identity | None,
                      job: str | None) -> None:
        with ofs.acting_as(reader):
            names = os.listdir(src)
        for name in names:
            try:
                child, st = ofs.open_beneath(src, name, reader, what="output file", job=job)
            except (FileNotFoundError, ofs.OwnerFileError):
                continue  # gone, or a FIFO/device: not output
            try:
                if stat.S_ISDIR(st.st_mode):
                    try:
                        with ofs.acting_as(owner):
                            os.mkdir(name, 0o755, dir_fd=dst)
                    except FileExistsError:
                        pass
                    except OSError as exc:
                        raise ofs.OwnerFileError(ofs.describe(exc, "write", "output directory", name, owner,
                                                              job)) from None
                    sub = self._open_dir_out(name, dst, owner, job)
                    try:
                        self._copy_dir_out(child, sub, reader, owner, job)
                    finally:
                        os.close(sub)
                elif stat.S_ISLNK(st.st_mode):
                    self._link_out(os.readlink("", dir_fd=child), name, dst, owner, job)
                else:
                    self._file_out(child, st, name, dst, owner, job)
            finally:
                os.close(child)

    def disk_usage_kib(self) -> int:
        """KiB the sandbox occupies (``DiskUsage``), counting allocated blocks like du."""
        total = 0
        for root, dirs, files in os.walk(self.path):
            for name in dirs + files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
                except OSError:
                    continue
        return (total + 1023) // 1024

    def remove(self) -> None:
        """Delete the sandbox and everything in it, whatever permissions the job left."""

        def make_writable(func, path, _exc):
            # The job may have left read-only directories; open them up and retry once.
            for p in (os.path.dirname(path), path):
                if not os.path.islink(p):
                    with contextlib.suppress(OSError):
                        os.chmod(p, stat.S_IRWXU)
            func(path)

        if self.path.exists():
            shutil.rmtree(self.path, onerror=make_writable)


def sweep_stale_sandboxes(execute_dir: Path) -> list[Path]:
    """Remove the sandboxes (``dir_<pid>_<n>``) of starters that are gone -- a startd killed with
    SIGKILL cannot clean up after its jobs, which died with it. Sandboxes of live processes
    (this one, another pool's startd sharing the directory) are left alone.

    Returns:
        The directories removed.
    """
    removed: list[Path] = []
    try:
        entries = list(Path(execute_dir).iterdir())
    except OSError:
        return removed
    for entry in entries:
        parts = entry.name.split("_")
        if len(parts) != 3 or parts[0] != "dir" or not parts[1].isdigit() or not parts[2].isdigit():
            continue
        pid = int(parts[1])
        if pid == os.getpid() or psutil.pid_exists(pid) or not entry.is_dir() or entry.is_symlink():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        if not entry.exists():
            removed.append(entry)
    return removed
