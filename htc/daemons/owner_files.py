"""File operations the daemons do for a job, with the rights of the job's owner.

Theory of operation
-------------------
The schedd and the startd (whose in-process starters move a job's files) run as root in a
root-started pool. Every file they open *for a job* -- its input files, its output and
remaps, its ``output``/``error``/``log`` files, a streamed chunk, a lane call's result --
must be one the job's owner could open, or a job could make root read ``/etc/shadow`` or
write through a symbolic link it planted into ``/etc``. These rules do that:

1. **The kernel checks the owner.** :func:`acting_as` switches the *file-system*
   credentials of the calling thread -- Linux's fsuid, fsgid and supplementary groups, which
   the kernel keeps per thread -- to the owner's for the duration of a ``with`` block, and
   back in its ``finally`` (a thread started inside the block would inherit the owner's
   credentials: none is). Inside it the kernel checks every path lookup, every link
   followed and every file created as it would for the owner (files made are the owner's),
   and root's file capabilities (``CAP_DAC_OVERRIDE``...) are off. The switch uses the raw
   system calls (``syscall(SYS_setfsuid)``...), not glibc's ``setgroups``/``setuid``
   wrappers, which change *every* thread of the process. Nothing else runs in the thread
   during the block: the daemons call it in synchronous code with no ``await`` inside (the
   schedd's event-loop thread; the starters' one worker thread), and nothing is logged
   before the credentials are back. When the daemon is not root it cannot switch: the
   operations run as the daemon's own user, and the path rules below still apply.

2. **Path rules, whoever acts.** A path with a NUL byte is refused. A destination is
   opened with ``O_NOFOLLOW`` (a symbolic link at the name is refused, never written
   through), ``O_NONBLOCK`` (a FIFO there cannot hang the daemon) and must be a regular file.
   Files in a job's sandbox are read relative to a descriptor of the sandbox, each path
   component opened with ``O_NOFOLLOW``, as the sandbox's user (the job's), so a job cannot
   swap in a link to ``/etc/shadow``; a name with ``..`` or ``/`` at its start is refused.
   A remap destination that leaves the job's Iwd (absolute, or with ``..``) is allowed only
   when the kernel can judge it as the owner (:attr:`Identity.kernel_checks`): a non-root
   daemon serving another user's job keeps every destination inside the Iwd.

3. **The owner's own directory** (:func:`own_directory`): a directory owned by the owner,
   closed to group and others, and reachable by the owner (checked with the owner's
   credentials, again every few seconds) holds only what the owner (or root) put there, so a
   regular file of the owner's opened there with ``O_NOFOLLOW`` is one the owner may write.
   The lane's call files (thousands a second) are written so without a switch; anything
   else met there sends the write back to rule 1.

:class:`Identity` says for whom: :meth:`Identity.owner` looks the job's ``Owner`` up in the
password database (a few seconds' cache: the lane path asks thousands of times a second); an
owner without an account here is refused, or acted for as the account the job runs as when
the caller names it (the starter). The switch needs the system call numbers of the machine
(x86_64 and aarch64 here); elsewhere root acts as itself with the path rules and keeps remaps
inside the Iwd.
:class:`OwnerFileError` carries a sentence for the SchedLog or the job's hold reason
("cannot write output file out.txt for job 1.0: permission denied for user alice").
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import pwd
import stat
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from htc.daemons.clock import REAL, Clock
from htc.errors import HTCError

__all__ = ["Identity", "OwnerFileError", "acting_as", "check_path", "describe", "leaves", "open_beneath", "open_entry",
           "open_read", "open_write", "own_directory", "makedirs", "copy_fd"]

# System call numbers (asm/unistd_64.h); the fs-credential calls are per thread in the kernel.
_SYSCALLS = {
    "x86_64": {"setfsuid": 122, "setfsgid": 123, "setgroups": 116},
    "aarch64": {"setfsuid": 151, "setfsgid": 152, "setgroups": 159},
}
_NR = _SYSCALLS.get(os.uname().machine) if sys.platform == "linux" else None
_LIBC = ctypes.CDLL(None, use_errno=True) if _NR else None
_CACHE_SECONDS = 5.0


class OwnerFileError(HTCError, OSError):
    """A file operation for a job was refused (by the kernel for its owner, or by a path rule).

    An ``OSError`` too, so that every place that already survives a file it cannot write
    (the schedd's log and output writers) survives this one; its text is the whole sentence.
    """

    def __init__(self, message: str, errno_: int | None = None):
        super().__init__(message)
        self.errno = errno_


@dataclass(frozen=True)
class Identity:
    """Whose rights a file operation uses.

    ``switch``: the daemon is root and takes these credentials for the operation (False: it
    acts as itself). ``kernel_checks``: the kernel judges paths as this user -- we switch, or
    the daemon already is the user -- so destinations outside the Iwd are the kernel's call.
    """

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    switch: bool = False
    kernel_checks: bool = True

    @classmethod
    def daemon(cls) -> Identity:
        """The daemon itself (no switch)."""
        uid = os.geteuid()
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
        return cls(name, uid, os.getegid(), (), switch=False, kernel_checks=True)

    @classmethod
    def owner(cls, name: object, fallback: Identity | None = None, *, clock: Clock = REAL) -> Identity:
        """The identity acting for a job whose ``Owner`` is ``name``.

        Root acts as that user (a missing Owner: as root, with the path rules). A daemon that
        is not root acts as itself; it judges destinations outside the Iwd itself unless it is
        the owner. An owner without an account here is acted for as ``fallback`` (the starter
        gives the account the job runs as, as HTCondor's starter does for a user it cannot
        map) or refused.

        A look-up is kept for a few seconds, by ``clock`` (:mod:`htc.daemons.clock`).

        Raises:
            OwnerFileError: root serves an owner the password database does not know, and
                there is no fallback.
        """
        owner = name if isinstance(name, str) and name else None
        key = (owner, os.geteuid())
        now = clock.monotonic()
        hit = _cache.get(key)
        if hit is not None and hit[0] > now:
            identity = hit[1]
        else:
            identity = cls._look_up(owner)
            if len(_cache) > 1024:
                _cache.clear()
            _cache[key] = (now + _CACHE_SECONDS, identity)
        if identity is None:
            if fallback is not None:
                return fallback
            raise OwnerFileError(f"the job's owner {owner!r} has no account on this machine; htc acts for a "
                                 "job only with its owner's rights")
        return identity

    @classmethod
    def _look_up(cls, owner: str | None) -> Identity | None:
        if os.geteuid() != 0:
            me = cls.daemon()
            return me if owner is None or owner == me.name else Identity(me.name, me.uid, me.gid, (), False, False)
        if owner is None:
            return cls.daemon()
        try:
            entry = pwd.getpwnam(owner)
        except (KeyError, ValueError):  # (ValueError: a NUL byte in the name)
            return None
        if entry.pw_uid == 0:
            return cls.daemon()
        try:
            groups = tuple(os.getgrouplist(owner, entry.pw_gid))
        except OSError:
            groups = (entry.pw_gid,)
        return cls(owner, entry.pw_uid, entry.pw_gid, groups, switch=_NR is not None, kernel_checks=_NR is not None)

    @classmethod
    def account(cls, uid: int | None, gid: int | None) -> Identity:
        """A job's own account (the sandbox's user): no supplementary groups, as the job runs."""
        if uid is None or os.geteuid() != 0 or uid == 0:
            return cls.daemon()
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
        return cls(name, uid, gid if gid is not None else uid, (), switch=_NR is not None)


_cache: dict[tuple[str | None, int], tuple[float, Identity | None]] = {}
_switched = threading.local()


def _syscall(name: str, *args) -> int:
    assert _LIBC is not None and _NR is not None
    return _LIBC.syscall(_NR[name], *args)


def _set_groups(groups: tuple[int, ...] | list[int]) -> None:
    array = (ctypes.c_uint * max(len(groups), 1))(*groups)
    if _syscall("setgroups", ctypes.c_size_t(len(groups)), array) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setgroups: {os.strerror(err)}")


def _set_fs_ids(uid: int, gid: int) -> None:
    # setfsuid/setfsgid return the previous value and never fail loudly: ask again to check.
    _syscall("setfsgid", ctypes.c_uint(gid))
    _syscall("setfsuid", ctypes.c_uint(uid))
    if _syscall("setfsuid", ctypes.c_uint(0xFFFFFFFF)) != uid or _syscall("setfsgid", ctypes.c_uint(0xFFFFFFFF)) != gid:
        raise OSError(errno.EPERM, f"cannot take file-system ids {uid}:{gid}")


@contextlib.contextmanager
def acting_as(who: Identity | None) -> Iterator[None]:
    """This thread's file-system credentials are ``who``'s inside the block (root only).

    Nested blocks for the same identity are free; the credentials come back in ``finally``
    however the block ends.

    Raises:
        OwnerFileError: the credentials could not be taken (nothing is left switched).
    """
    current = getattr(_switched, "who", None)
    if who is None or not who.switch or current == who:
        yield
        return
    if current is not None:
        raise RuntimeError(f"acting_as({who.name}) inside acting_as({current.name}); leave one first")
    saved_groups = os.getgroups()
    try:
        _set_groups(who.groups)
        _set_fs_ids(who.uid, who.gid)
    except OSError as exc:
        _restore(saved_groups)
        raise OwnerFileError(f"cannot take the rights of user {who.name}: {exc.strerror}", exc.errno) from None
    _switched.who = who
    try:
        yield
    finally:
        _switched.who = None
        _restore(saved_groups)


def _restore(groups: list[int]) -> None:
    _set_fs_ids(os.geteuid(), os.getegid())
    _set_groups(groups)


def check_path(path: str | os.PathLike, what: str, job: str | None = None) -> str:
    """``path`` as a string, refused when it has a NUL byte (which no file name can hold)."""
    text = path if type(path) is str else os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if "\0" in text:
        raise OwnerFileError(f"cannot use {what} {text!r}{_for(job)}: the name contains a NUL byte")
    return text


def leaves(relative: str) -> bool:
    """True when a path meant relative to a directory leaves it (absolute, or ``..``)."""
    return os.path.isabs(relative) or ".." in relative.replace("\\", "/").split("/")


def _for(job: str | None) -> str:
    return f" for job {job}" if job else ""


def describe(exc: OSError, verb: str, what: str, path: str, who: Identity | None, job: str | None = None) -> str:
    """A sentence for a failed operation: ``cannot write output file X for job 1.0: permission
    denied for user alice``."""
    code = exc.errno
    name = who.name if who is not None else None
    if code in (errno.EACCES, errno.EPERM):
        why = f"permission denied for user {name}" if name else "permission denied"
    elif code == errno.ELOOP:
        why = "it is a symbolic link, which htc does not follow for a job"
    elif code in (errno.ENXIO, errno.EISDIR, errno.ENOTDIR) and what:
        why = exc.strerror or "not a regular file"
    elif code == errno.ENOENT:
        why = "no such file or directory"
    else:
        why = exc.strerror or str(exc)
    return f"cannot {verb} {what} {path}{_for(job)}: {why}"


_NOT_REGULAR = "it is not a regular file"


def _regular(fd: int, verb: str, what: str, path: str, job: str | None) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OwnerFileError(f"cannot {verb} {what} {path}{_for(job)}: {_NOT_REGULAR}", errno.EINVAL)
    return st


def open_write(path: str | os.PathLike, who: Identity | None, *, what: str = "file", job: str | None = None,
               append: bool = False, truncate: bool = False, create: bool = True, mode: int = 0o644,
               dir_fd: int | None = None) -> int:
    """Open a destination for writing as ``who``: never through a link, only a regular file.

    Returns:
        The descriptor (close it).

    Raises:
        OwnerFileError: refused (the message says what, for which job, and why).
        FileNotFoundError: ``create`` is False and there is no such file.
    """
    text = check_path(path, what, job)
    flags = (os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | (os.O_CREAT if create else 0)
             | (os.O_APPEND if append else 0) | (os.O_TRUNC if truncate else 0))
    try:
        if who is not None and who.switch:
            with acting_as(who):
                fd = os.open(text, flags, mode, dir_fd=dir_fd)
        else:  # (no switch: spare the context manager, the lane path opens thousands a second)
            fd = os.open(text, flags, mode, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
        raise OwnerFileError(describe(FileNotFoundError(errno.ENOENT, "missing"), "write", what, text, who, job),
                             errno.ENOENT) from None
    except OSError as exc:
        raise OwnerFileError(describe(exc, "write", what, text, who, job), exc.errno) from None
    _regular(fd, "write", what, text, job)
    return fd


def open_read(path: str | os.PathLike, who: Identity | None, *, what: str = "file", job: str | None = None,
              follow: bool = True, dir_fd: int | None = None,
              regular: bool = True) -> tuple[int, os.stat_result | None]:
    """Open a regular file for reading as ``who`` (a link the owner names is followed, with the
    owner's rights, unless ``follow`` is False). ``regular=False`` spares the check (and its
    ``fstat``) for a caller whose reads are bounded: ``O_NONBLOCK`` keeps a FIFO from hanging it.

    Returns:
        The descriptor and its status (None without the check).

    Raises:
        OwnerFileError: refused; FileNotFoundError: no such file.
    """
    text = check_path(path, what, job)
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        if who is not None and who.switch:
            with acting_as(who):
                fd = os.open(text, flags, dir_fd=dir_fd)
        else:
            fd = os.open(text, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise OwnerFileError(describe(exc, "read", what, text, who, job), exc.errno) from None
    return fd, (_regular(fd, "read", what, text, job) if regular else None)


def open_beneath(dir_fd: int, relative: str, who: Identity | None, *, what: str = "file",
                 job: str | None = None, directory: bool = False) -> tuple[int, os.stat_result]:
    """Open ``relative`` under the directory ``dir_fd``, every component with ``O_NOFOLLOW``,
    as ``who``: a file (or, with ``directory``, a directory) that cannot be anywhere else.
    A symbolic link as the last component is opened as the link itself (``O_PATH``) so that
    the caller can copy it as a link.

    Returns:
        The descriptor and its lstat-like status (``S_ISLNK`` for a link).

    Raises:
        OwnerFileError: the name leaves the directory or is not a file/directory/link;
        FileNotFoundError: no such file.
    """
    text = check_path(relative, what, job)
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if os.path.isabs(text) or ".." in parts or not parts:
        raise OwnerFileError(f"cannot read {what} {text!r}{_for(job)}: a name in the sandbox may not be "
                             "absolute or contain '..'", errno.EINVAL)
    fd = dir_fd
    try:
        with acting_as(who):
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                try:
                    if last:
                        st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                        if stat.S_ISLNK(st.st_mode):
                            nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                        elif stat.S_ISDIR(st.st_mode):
                            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                                          dir_fd=fd)
                        else:
                            nxt = os.open(part, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                          dir_fd=fd)
                    else:
                        nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                finally:
                    if fd != dir_fd:
                        os.close(fd)
                fd = nxt
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ENOTDIR or exc.errno == errno.ELOOP:
            raise OwnerFileError(f"cannot read {what} {text}{_for(job)}: a directory on the way is a symbolic "
                                 "link or a file", exc.errno) from None
        raise OwnerFileError(describe(exc, "read", what, text, who, job), exc.errno) from None
    st = os.stat(fd) if not stat.S_ISLNK(st.st_mode) else st
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        os.close(fd)
        raise OwnerFileError(f"cannot read {what} {text}{_for(job)}: {_NOT_REGULAR}", errno.EINVAL)
    return fd, st


_own_dirs: dict[tuple[str, int], tuple[float, int, int]] = {}


def open_entry(dir_fd: int, name: str, who: Identity | None, *, what: str = "input file",
               job: str | None = None) -> tuple[os.stat_result, int | None, str | None]:
    """Entry ``name`` of the directory open as ``dir_fd``, as ``who`` sees it, never followed:
    ``(stat, fd, link)`` -- an open descriptor for a directory or regular file (the caller closes
    it), the target for a symbolic link, neither for anything else (FIFOs, sockets, devices).

    Raises:
        OwnerFileError: ``who`` may not look at or open it (the message names it and the job).
    """
    fd = link = None
    try:
        with acting_as(who):
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                link = os.readlink(name, dir_fd=dir_fd)
            elif stat.S_ISDIR(st.st_mode):
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            elif stat.S_ISREG(st.st_mode):
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        raise OwnerFileError(describe(exc, "read", what, name, who, job)) from None
    return st, fd, link


def own_directory(path: str, who: Identity | None, *, clock: Clock = REAL) -> int | None:
    """A descriptor of ``path`` when it is ``who``'s own directory -- owned by ``who``, not
    writable by group or others, and reachable by ``who`` (checked with the owner's rights
    once every few seconds) -- else None.

    In such a directory only ``who`` (and root) can make or replace an entry, so a regular file
    opened there with ``O_NOFOLLOW`` and owned by ``who`` is one ``who`` may write: the daemon
    may then write it without switching credentials (the lane's hot path,
    :mod:`htc.daemons.schedd.callfiles`), making new files ``who``'s with ``fchown``. ``clock``
    says when the reach check is due again (:mod:`htc.daemons.clock`).
    """
    if who is None or not who.switch:
        return None
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    st = os.fstat(fd)
    if st.st_uid != who.uid or st.st_mode & 0o022:
        os.close(fd)
        return None
    key, now = (path, who.uid), clock.monotonic()
    seen = _own_dirs.get(key)
    if seen is None or seen[0] <= now or seen[1:] != (st.st_dev, st.st_ino):
        try:
            with acting_as(who):
                reached = os.stat(path)
        except OSError:
            os.close(fd)
            return None
        if (reached.st_dev, reached.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)
            return None
        if len(_own_dirs) > 4096:
            _own_dirs.clear()
        _own_dirs[key] = (now + _CACHE_SECONDS, st.st_dev, st.st_ino)
    return fd


def makedirs(path: str, who: Identity | None, *, what: str = "directory", job: str | None = None) -> None:
    """``mkdir -p`` as ``who``.

    Raises:
        OwnerFileError: refused.
    """
    text = check_path(path, what, job)
    try:
        with acting_as(who):
            os.makedirs(text, exist_ok=True)
    except OSError as exc:
        raise OwnerFileError(describe(exc, "make", what, text, who, job), exc.errno) from None


def copy_fd(src: int, dst: int) -> None:
    """Copy everything from ``src`` (at its start) to ``dst`` (from its position); no
    credentials involved: both are open already."""
    offset = 0
    while True:
        try:
            sent = os.sendfile(dst, src, offset, 1 << 30)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOSYS) and offset == 0:
                _copy_by_read(src, dst)
                return
            raise
        if sent == 0:
            return
        offset += sent


def _copy_by_read(src: int, dst: int) -> None:
    offset = 0
    while True:
        chunk = os.pread(src, 1 << 20, offset)
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view):]
        offset += len(chunk)
