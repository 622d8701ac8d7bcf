"""A job's sandbox (scratch directory): creation, file transfer in and out, removal.

Theory of operation
-------------------
Each job runs in a fresh directory under the execute dir, ``dir_<starter pid>_<n>``, owned by
the user the job runs as (mode 0700). Files move as HTCondor's file transfer moves them:

* Input (``TransferInput``, comma separated; paths relative to the job's Iwd). A file lands in
  the top of the sandbox under its base name. A directory ``d`` is copied whole as ``d/``; a
  directory written with a trailing slash, ``d/``, has its *contents* copied into the top.
  ``file://`` URLs are local paths; other URL schemes need a transfer plugin htc does not have.
  The executable (``Cmd``) is copied too unless ``TransferExecutable`` is false, keeping its base
  name and made executable. Stdin (``In``) is copied when ``TransferIn`` is not false.
* Output. With ``TransferOutput`` set, exactly those paths (relative to the sandbox; a missing
  one is an error, as it puts an HTCondor job on hold). Without it, every file or directory at
  the top of the sandbox that is new or modified since input transfer -- minus the starter's own
  files (stdout/stderr captures, the ad files, the executable). ``TransferOutputRemaps``
  (``"name = dest; name2 = dest2"``, ``\\;`` and ``\\=`` escaped) renames or moves each output;
  relative destinations are relative to the Iwd. Stdout and stderr are captured in the sandbox
  (``_condor_stdout``/``_condor_stderr``) and copied to ``Out``/``Err``.
* Removal leaves nothing behind, even when the job made files read-only.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from htc.errors import HTCError

STDOUT_NAME = "_condor_stdout"
STDERR_NAME = "_condor_stderr"
JOB_AD_NAME = ".job.ad"
MACHINE_AD_NAME = ".machine.ad"
_STARTER_FILES = {STDOUT_NAME, STDERR_NAME, JOB_AD_NAME, MACHINE_AD_NAME, ".chirp.config", ".update.ad"}
_counter = itertools.count(1)


class TransferError(HTCError):
    """A file could not be moved into or out of a sandbox (HTCondor would hold the job)."""


def split_list(value: Any) -> list[str]:
    """A comma-separated file list attribute as a list (empty when absent)."""
    if not isinstance(value, str):
        return []
    return [item.strip() for item in value.split(",") if item.strip()]


def parse_remaps(value: Any) -> dict[str, str]:
    """``TransferOutputRemaps`` as ``{name: destination}``.

    Raises:
        TransferError: an entry without ``=``.
    """
    if not isinstance(value, str) or not value.strip():
        return {}
    # Nothing escaped (what an executor's calls set): plain splits read it the same way.
    return _split_escaped_remaps(value) if "\\" in value else _split_plain_remaps(value)


def _split_plain_remaps(value: str) -> dict[str, str]:
    remaps = {}
    for entry in value.split(";"):
        entry = entry.strip()
        if entry:
            name, eq, destination = entry.partition("=")
            if not eq:
                raise _no_equals(entry)
            remaps[name.strip()] = destination.strip()
    return remaps


def _split_escaped_remaps(value: str) -> dict[str, str]:
    entries, buf, i = [], "", 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            buf += "\\" + value[i + 1]  # keep escapes until the '=' split
            i += 2
            continue
        if ch == ";":
            entries.append(buf)
            buf = ""
        else:
            buf += ch
        i += 1
    entries.append(buf)
    remaps = {}
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        pos = next((k for k in range(len(entry)) if entry[k] == "=" and (k == 0 or entry[k - 1] != "\\")), -1)
        if pos < 0:
            raise _no_equals(entry)
        unescape = lambda s: s.strip().replace("\\;", ";").replace("\\=", "=")  # noqa: E731
        remaps[unescape(entry[:pos])] = unescape(entry[pos + 1:])
    return remaps


def _no_equals(entry: str) -> TransferError:
    return TransferError(f"TransferOutputRemaps entry {entry!r} has no '='; write it as 'name = destination'")


def _local(source: str, base: Path) -> Path:
    if "://" in source:
        scheme, _, rest = source.partition("://")
        if scheme.lower() != "file":
            raise TransferError(f"cannot transfer {source!r}: no file transfer plugin for '{scheme}://' URLs in htc; "
                                "use a local path or file:// URL")
        return Path(rest)
    path = Path(source)
    return path if path.is_absolute() else base / path


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

    def _own_tree(self, path: Path) -> None:
        self._own(path)
        if path.is_dir() and not path.is_symlink():
            for root, dirs, files in os.walk(path):
                for name in dirs + files:
                    self._own(Path(root) / name)

    def bring_in(self, source: str, base: Path, *, executable: bool = False) -> Path:
        """Copy one input (file, directory, ``dir/`` contents, or file:// URL) into the sandbox.

        Returns:
            The path inside the sandbox (for ``dir/``: the sandbox itself).

        Raises:
            TransferError: the input does not exist or cannot be read.
        """
        src = _local(source, base)
        try:
            if source.endswith("/") and src.is_dir():
                for child in src.iterdir():
                    self.bring_in(str(child), base)
                return self.path
            dest = self.path / src.name
            if src.is_dir():
                shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(src, dest)
                if executable:
                    dest.chmod(dest.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except FileNotFoundError as exc:
            raise TransferError(f"input file {source!r} does not exist (looked at {src}); "
                                "fix transfer_input_files or the job's initialdir") from exc
        except OSError as exc:
            raise TransferError(f"cannot copy input {source!r} into {self.path}: {exc}") from exc
        self._own_tree(dest)
        return dest

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

    def send_out(self, names: list[str], dest_dir: Path, remaps: Mapping[str, str]) -> list[Path]:
        """Copy outputs to ``dest_dir`` (remapped where asked).

        Returns:
            The destination paths written.

        Raises:
            TransferError: a requested output is missing or cannot be written.
        """
        written = []
        for name in names:
            src = self.path / name
            if not src.exists() and not src.is_symlink():
                raise TransferError(f"output file {name!r} was not created by the job in its sandbox; "
                                    "fix transfer_output_files or the job")
            target = remaps.get(name) or remaps.get(name.rstrip("/")) or Path(name).name
            dest = _local(target, dest_dir)
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                if src.is_dir() and not src.is_symlink():
                    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
                else:
                    shutil.copy2(src, dest, follow_symlinks=False)
            except OSError as exc:
                raise TransferError(f"cannot write output {name!r} to {dest}: {exc}") from exc
            written.append(dest)
        return written

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
