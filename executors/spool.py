"""An executor session on disk: the calls' files, a journal, and a lock.

``$HTC_HOME/executor/<session>/`` holds::

    session.json        name, backend, pool address, created, named or not
    session.lock        held (flock) by the one executor attached to the session
    journal.jsonl       one line per call made, and per job id learned
    calls/              the jobs' Iwd: for each call <call_id>.call, <call_id>.result,
                        <call_id>.out and <call_id>.err (the pool backend), or
    calls/<call_id>/    a call's own Iwd: htc_call.pkl, its parents' results, htc_result.pkl,
                        htc_checkpoint.pkl, stdout, stderr (the local backend, and calls
                        with checkpoint=True or transfer_output_files)

The Iwd is the job's initial directory: its input is transferred from there and its output
back there (the pool backend's calls name their result with ``TransferOutputRemaps``), so
the execute node never talks to the client -- the files move between the starter and the
schedd's shadow. Most calls share ``calls/``: making a directory costs a fresh inode in a
block group of its own, which on some disks costs more than a quick call (measured 0.6-1.3 ms
of CPU per call on the project's VM, against 0.05 ms for a file in a shared directory).

An anonymous session (one no later client can attach to) reuses its files: once the client
has read a result of at most ``RECYCLE_MAX_BYTES`` it renames the file to a spare
(``calls/.spare-<n>``, at most ``MAX_SPARES``) and keeps the bytes in memory (at most
``RECYCLE_KEEP_BYTES`` in all) in case the call is later some other call's parent; the next
call's file is written into a spare and renamed. A file system that allocates inodes slowly
(ext4 without a journal skips the inodes freed in the last minutes, one by one, for every
file it makes: 0.3-1 ms a file on the project's VM after a test run) so pays for no new
inode per call. For the same reason ``$HTC_HOME/executor`` carries ext4's top-directory flag
(``chattr +T``, :func:`spread_sessions`): each session's directory starts in a block group
of its own, away from files just deleted nearby.

The journal lets ``attach`` rebuild the futures of a session after the client died: which
calls exist, what they wait for, with which options, and which job runs each. A session's results stay until it is forgotten
(:meth:`Spool.remove`, ``htc.executors.forget``) or expires (``result_lifetime``, default a
week, checked when an executor starts).

Journal lines are appended with one ``write`` each, so a killed client leaves at worst a
truncated last line, which :meth:`Spool.journal` skips.

Results are read only from where only the client could have written them. The client unpickles
every result it reads, and unpickling runs code: a result file another user (a job running as
another account, say) could write or replace would run that user's code as the client. So the
session's directory, its ``calls/`` and each call's own directory must be directories owned by
the client's uid (or root, whose daemons may make them) that neither group nor others may
write, and a result file must be a regular file (not a symbolic link: it is opened with
``O_NOFOLLOW``) owned by the client or root and writable by neither group nor others -- checked
on the open file (``fstat``), so nothing can be swapped in between. Anything else is refused
with :class:`UntrustedFile`, which names the file, its owner and mode; the call fails with it
instead of unpickling. The directories the client makes lose their group and world write bits
whatever the umask.
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from htc.wire import callfile as cf
from htc.executors.errors import SessionError
from htc.executors.options import CallOptions

__all__ = ["Spool", "UntrustedFile", "check_trusted", "executor_root", "read_trusted", "sessions",
           "valid_session_name"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
STDOUT = "stdout"
STDERR = "stderr"
#: a call without a directory of its own: its files in ``calls/``
RESULT_SUFFIX = ".result"
OUT_SUFFIX = ".out"
ERR_SUFFIX = ".err"
_FLAT_SUFFIXES = (cf.CALL_SUFFIX, RESULT_SUFFIX, OUT_SUFFIX, ERR_SUFFIX)
#: the largest result whose file an anonymous session reuses (its bytes stay in memory)
RECYCLE_MAX_BYTES = 16 * 1024
#: the most result bytes a session keeps in memory for reused files
RECYCLE_KEEP_BYTES = 64 * 1024 * 1024
#: the most spare files a session keeps
MAX_SPARES = 4096
_SPARE_PREFIX = ".spare-"


class UntrustedFile(SessionError):
    """A session directory or result file that someone other than the client (or root) could
    have written: the client refuses to read (and unpickle) it."""


def _trusted_uids() -> tuple[int, ...]:
    """Who may own what the client reads: itself, and root (the pool's daemons)."""
    return (os.geteuid(), 0)


def check_trusted(st: os.stat_result, path: str | os.PathLike, *, directory: bool) -> None:
    """Refuse ``path`` (its ``lstat``/``fstat`` is ``st``) unless it is a directory (or a regular
    file) owned by the client or root that neither group nor others may write.

    Raises:
        UntrustedFile: it is not; the message says what and what to do.
    """
    kind = "directory" if directory else "result file"
    if not (stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)):
        raise UntrustedFile(f"executor {kind} {path} is not a {'directory' if directory else 'regular file'} "
                            f"({stat.filemode(st.st_mode)}); refusing to read the results there -- remove it")
    if st.st_uid not in _trusted_uids():
        raise UntrustedFile(f"executor {kind} {path} belongs to uid {st.st_uid}, not to this client (uid "
                            f"{os.geteuid()}) or root; refusing to read it (another user could have written what "
                            "would be unpickled here)")
    if st.st_mode & 0o022:
        who = " and ".join(w for bit, w in ((0o020, "its group"), (0o002, "others")) if st.st_mode & bit)
        raise UntrustedFile(f"executor {kind} {path} is writable by {who} "
                            f"({stat.filemode(st.st_mode)}); refusing to read it (another user could have written "
                            f"what would be unpickled here) -- chmod go-w {path} if you trust its content")


def read_trusted(path: str) -> bytes | None:
    """The bytes of the result file ``path`` once :func:`check_trusted` accepts it (on the open
    file, opened without following a symbolic link); None when there is none.

    Raises:
        UntrustedFile: the file is not one only the client or root could have written.
        OSError: it cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UntrustedFile(f"executor result file {path} is a symbolic link; refusing to follow it "
                                "(results are read only from files in the session itself)") from None
        raise
    try:
        st = os.fstat(fd)
        check_trusted(st, path, directory=False)
        return cf.read_fd(fd, st.st_size)
    finally:
        os.close(fd)


def _private_dir(path: Path) -> None:
    """Make directory ``path`` (and its parents) if missing; one the client made loses group and
    world write whatever the umask."""
    if path.is_dir():
        return
    path.mkdir(parents=True, exist_ok=True)
    st = path.lstat()
    if st.st_uid == os.geteuid() and stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022)


# ext2/3/4's "top of a directory hierarchy" flag (chattr +T): the directories made in one are
# spread over the disk's block groups instead of kept near their parent's.
_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS, _FS_TOPDIR_FL = 0x80086601, 0x40086602, 0x00020000


def spread_sessions(root: Path) -> None:
    """Make ``root`` (creating it) a directory whose sessions land in block groups of their own.

    A file made in a directory gets an inode of the directory's block group, and ext4 without
    a journal passes over each inode freed there in the last minutes before it picks one:
    after a test run or another session's files were deleted near ``/tmp``, 0.5 ms a file on
    the project's VM, against 0.03 ms in a group nothing was deleted from. With the flag set,
    each new session directory starts in a group the allocator picks afresh. On other file
    systems this does nothing.
    """
    root.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        if not flags[0] & _FS_TOPDIR_FL:
            flags[0] |= _FS_TOPDIR_FL
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, flags)
    except OSError:
        return  # not ext2/3/4, or not ours to flag: sessions go where the file system puts them
    finally:
        os.close(fd)


def _write_new(path: str, data: bytes) -> None:
    """Write a new call file in place, without a temporary name: in a session no later client
    attaches to, nothing reads it before its job is queued (and a client that dies before
    takes the session with it). A rename less per call."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except FileExistsError:  # a leftover of the same name: replace it whole
        cf.write_atomic(Path(path), data)
        return
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def executor_root() -> Path:
    """``$HTC_HOME/executor``: where sessions live."""
    from htc.config import htc_home

    return Path(htc_home()) / "executor"


def valid_session_name(name: str) -> str:
    """Check a session name.

    Raises:
        SessionError: not 1-100 letters, digits, ``_``, ``.`` or ``-`` starting with a letter or digit.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise SessionError(f"session name {name!r} is not usable; use letters, digits, '_', '.' and '-' "
                           "(starting with a letter or digit, at most 100)")
    return name


def options_to_json(options: CallOptions) -> dict[str, Any]:
    """Options as JSON data for the journal."""
    data = asdict(options)
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in data.items()}


def options_from_json(data: dict[str, Any]) -> CallOptions:
    """Options back from the journal (unknown names from a newer htc are dropped)."""
    known = set(CallOptions.names())
    return CallOptions().merge(**{k: v for k, v in data.items() if k in known})


class Spool:
    """One session's directory. See the module docstring.

    Args:
        name: the session's name.
        root: where sessions live (default: :func:`executor_root`).
    """

    def __init__(self, name: str, root: Path | None = None):
        self.name = valid_session_name(name)
        self.path = (root or executor_root()) / name
        self.calls = self.path / "calls"
        self._calls = os.fspath(self.calls)  # (string paths where a call pays for each: pathlib costs more)
        self._lock_fd: int | None = None
        self._journal_fd: int | None = None
        self._record_lock = threading.Lock()
        #: calls keep their files in ``calls/`` unless they need a directory (set by the backend)
        self.flat = False
        self._has_dir: dict[str, bool] = {}  # call id -> whether it has a directory of its own
        #: reuse read results' files for new calls (set by the backend for an anonymous session)
        self.recycle = False
        self._spares: list[str] = []  # names in calls/ of files to write the next calls into
        self._spare_seq = 0
        self._recycled: dict[str, bytes] = {}  # call id -> the result whose file was reused
        self._recycled_bytes = 0
        self._spare_lock = threading.Lock()
        self._trusted_dirs: set[str] = set()  # directories check_trusted accepted (see read_result)

    # --- the session ------------------------------------------------------------------------
    def exists(self) -> bool:
        """True when the session has been created."""
        return (self.path / "session.json").exists()

    def create(self, info: dict[str, Any]) -> None:
        """Make the directories and write ``session.json`` (keeping ``created`` of an existing one).

        Raises:
            UntrustedFile: the session's directory or ``calls/`` may be written by others.
        """
        _private_dir(self.calls)
        self.check_dirs()
        old = self.info() if self.exists() else {}
        data = {**info, "name": self.name, "created": old.get("created", time.time()), "updated": time.time()}
        cf.write_atomic(self.path / "session.json", json.dumps(data, indent=1).encode())

    def info(self) -> dict[str, Any]:
        """``session.json`` as a dict.

        Raises:
            SessionError: no such session.
        """
        try:
            return json.loads((self.path / "session.json").read_text())
        except FileNotFoundError:
            raise SessionError(f"there is no executor session {self.name!r} under {self.path.parent}; "
                               "htc.executors.sessions() lists them") from None

    def lock(self) -> None:
        """Take the session for this process (released when it exits, however it exits).

        Raises:
            SessionError: another live executor holds it.
        """
        spread_sessions(self.path.parent)
        _private_dir(self.path)
        self.check_dirs()
        fd = os.open(self.path / "session.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise SessionError(f"executor session {self.name!r} is in use by pid {holder}; shut that executor "
                               "down (or wait for it to exit) before attaching") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd

    def check_dirs(self) -> None:
        """Check the session's directory and ``calls/`` (when made) as results are read from them.

        Raises:
            UntrustedFile: one is not the client's (or root's), or others may write it.
        """
        for directory in (self.path, self.calls):
            try:
                st = directory.lstat()
            except FileNotFoundError:
                continue
            check_trusted(st, directory, directory=True)
            self._trusted_dirs.add(os.fspath(directory))

    def read_result(self, call_id: str) -> bytes | None:
        """The call's result file, read only if only the client or root could have written it
        (see the module docstring); None when it is not there (yet).

        Raises:
            UntrustedFile: the file, or a directory it is in, could have been written by others.
            OSError: it cannot be read.
        """
        path = self.result_file(call_id)
        directory = os.path.dirname(path)
        if directory not in self._trusted_dirs:
            for where in dict.fromkeys((os.fspath(self.path), self._calls, directory)):
                if where in self._trusted_dirs:
                    continue
                try:
                    st = os.lstat(where)
                except FileNotFoundError:
                    return None
                check_trusted(st, where, directory=True)
                self._trusted_dirs.add(where)
        return read_trusted(path)

    def unlock(self) -> None:
        """Release the session (and close the journal)."""
        with self._record_lock:
            if self._journal_fd is not None:
                os.close(self._journal_fd)
                self._journal_fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def remove(self) -> None:
        """Delete the session and every result in it."""
        self.unlock()
        shutil.rmtree(self.path, ignore_errors=True)

    # --- the journal -------------------------------------------------------------------------
    def record(self, entries: Iterable[dict[str, Any]]) -> None:
        """Append entries to the journal, all in one write (from any thread)."""
        data = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries).encode()
        if not data:
            return
        with self._record_lock:
            if self._journal_fd is None:
                self._journal_fd = os.open(self.path / "journal.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                                           0o644)
            os.write(self._journal_fd, data)

    def journal(self) -> Iterator[dict[str, Any]]:
        """Every complete journal entry, oldest first."""
        try:
            text = (self.path / "journal.jsonl").read_text()
        except FileNotFoundError:
            return
        for line in text.splitlines():
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line of a client killed mid-write

    # --- calls ---------------------------------------------------------------------------------
    def own_dir(self, options: CallOptions | None) -> bool:
        """Whether a call with ``options`` gets a directory of its own (see the module docstring)."""
        return not self.flat or options is None or bool(options.transfer_output_files or options.checkpoint)

    def call_dir(self, call_id: str) -> Path:
        """The directory of a call that has one of its own (its job's Iwd)."""
        return self.calls / call_id

    def _file(self, call_id: str, own: str, flat: str) -> str:
        has_dir = self._has_dir.get(call_id)
        if has_dir is None:  # a call of an earlier client of the session: look once
            has_dir = self._has_dir[call_id] = os.path.isdir(os.path.join(self._calls, call_id))
        return f"{self._calls}/{call_id}/{own}" if has_dir else f"{self._calls}/{call_id}{flat}"

    def prepare(self, call_id: str, data: bytes | None, parents: Iterable[str],
                options: CallOptions | None = None) -> str:
        """Write the call's file (when ``data``) and make its parents' results its inputs.

        Returns:
            The call's file (``htc_call.pkl`` in its own directory, or ``<call_id>.call`` in
            ``calls/``); its directory is the job's Iwd.

        Raises:
            CallFileError: a parent's result is missing.
        """
        flat = not self.own_dir(options)
        if flat:
            where, path = self.calls, f"{self._calls}/{call_id}{cf.CALL_SUFFIX}"
        else:
            where = self.call_dir(call_id)
            _private_dir(where)
            path = os.path.join(where, cf.CALL_FILE)
        self._has_dir[call_id] = not flat
        if data is not None and not (flat and self._write_into_spare(path, data)):
            if flat and self.recycle:
                _write_new(path, data)
            else:
                cf.write_atomic(Path(path), data)
        for parent in parents:
            target = where / cf.parent_file(parent)
            if target.exists():
                continue  # a parent's result in calls/ is already where a flat call reads it
            kept = self._recycled.get(parent)
            if kept is not None:  # its file went to a later call: write it again
                cf.write_atomic(target, kept)
                continue
            source = self.result_path(parent)
            try:
                os.link(source, target)
            except FileNotFoundError:
                raise cf.CallFileError(f"the result of parent call {parent} is missing from {source}") from None
            except OSError:
                shutil.copyfile(source, target)
        return path

    def consumed(self, call_id: str, result: bytes) -> None:
        """The client has read the call's ``result``: a session that recycles makes its file a
        spare (see the module docstring)."""
        if not self.recycle or len(result) > RECYCLE_MAX_BYTES or self._has_dir.get(call_id, True):
            return
        with self._spare_lock:
            if len(self._spares) >= MAX_SPARES or self._recycled_bytes + len(result) > RECYCLE_KEEP_BYTES:
                return
            spare = f"{_SPARE_PREFIX}{self._spare_seq}"
            self._spare_seq += 1
            try:
                os.rename(f"{self._calls}/{call_id}{RESULT_SUFFIX}", f"{self._calls}/{spare}")
            except OSError:
                return  # gone already (forgotten, expired): nothing to reuse
            self._spares.append(spare)
            self._recycled[call_id] = result
            self._recycled_bytes += len(result)

    def _write_into_spare(self, path: str, data: bytes) -> bool:
        """Write a new call file into a spare and rename it to ``path`` (False: no spare)."""
        while True:
            with self._spare_lock:
                if not self._spares:
                    return False
                spare = f"{self._calls}/{self._spares.pop()}"
            try:
                fd = os.open(spare, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    cf.overwrite(fd, data)
                finally:
                    os.close(fd)
                os.rename(spare, path)
                return True
            except OSError:  # not ours to write (a result a starter made), or gone: drop it
                with contextlib.suppress(OSError):
                    os.unlink(spare)

    def call_path(self, call_id: str) -> Path:
        """The call's call file."""
        return Path(self._file(call_id, cf.CALL_FILE, cf.CALL_SUFFIX))

    def result_path(self, call_id: str) -> Path:
        """Where the call's result file arrives."""
        return Path(self.result_file(call_id))

    def result_file(self, call_id: str) -> str:
        """:meth:`result_path` as a string (what a client does for every call)."""
        return self._file(call_id, cf.RESULT_FILE, RESULT_SUFFIX)

    def output_path(self, call_id: str, stream: str) -> Path:
        """Where the call's ``stdout`` or ``stderr`` arrives."""
        return Path(self.output_file(call_id, stream))

    def output_file(self, call_id: str, stream: str) -> str:
        """:meth:`output_path` as a string."""
        if stream == "stdout":
            return self._file(call_id, STDOUT, OUT_SUFFIX)
        return self._file(call_id, STDERR, ERR_SUFFIX)

    def forget_call(self, call_id: str) -> None:
        """Delete one call's files."""
        self._has_dir.pop(call_id, None)
        shutil.rmtree(self.call_dir(call_id), ignore_errors=True)
        for suffix in _FLAT_SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                (self.calls / f"{call_id}{suffix}").unlink()

    def expire(self, lifetime: float, now: float | None = None) -> list[str]:
        """Delete the calls whose result is older than ``lifetime`` seconds.

        Returns:
            The call ids deleted.
        """
        now = time.time() if now is None else now
        gone = []
        if not self.calls.exists():
            return gone
        for entry in os.scandir(self.calls):
            if entry.is_dir(follow_symlinks=False):
                call_id, result = entry.name, Path(entry.path) / cf.RESULT_FILE
            elif entry.name.endswith(RESULT_SUFFIX):
                call_id, result = entry.name[:-len(RESULT_SUFFIX)], Path(entry.path)
            else:
                continue
            try:
                if now - result.stat().st_mtime > lifetime:
                    self.forget_call(call_id)
                    gone.append(call_id)
            except FileNotFoundError:
                continue
        return gone


def sessions(root: Path | None = None) -> list[dict[str, Any]]:
    """Every executor session under ``$HTC_HOME/executor`` (their ``session.json``), oldest first."""
    root = root or executor_root()
    out = []
    if root.exists():
        for d in root.iterdir():
            try:
                out.append(json.loads((d / "session.json").read_text()))
            except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
                continue
    return sorted(out, key=lambda s: s.get("created", 0))
