"""The files of a call lane's calls, as the schedd reads and writes them.

A lane call's inputs are read from its ``Iwd`` (:func:`read_input`, which the schedd core is
given) and its outputs written back there by the schedd's service (:class:`WriteCallFiles`,
the action the core returns; :func:`write_call_files` carries it out) -- what the starter's
file transfer does for a job that runs on a starter of its own. See
:mod:`htc.daemons.schedd.lanes`. Both act with the rights of the job's owner and never
through a link (:mod:`htc.daemons.owner_files`): an executor's calls share one ``calls/``
directory, where a job could otherwise leave a link for root to write through.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable

from htc.daemons import owner_files as ofs
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.events import WriteCallFiles
from htc.daemons.job_files import split_list
from htc.wire.callfile import overwrite
from htc.wire.lane_frames import plain_name
from htc.wire import messages as m

__all__ = ["WriteCallFiles", "call_inputs", "read_input", "reading_as", "write_call_files"]


def read_input(path: str, owner: str | None = None) -> bytes:
    """One input file of a call (the service's default reader), read with the rights of the
    job's ``owner`` (:mod:`htc.daemons.owner_files`): at most one byte more than a lane
    carries, so that the caller sees it is too big.

    Raises:
        OSError: missing, not a regular file, or the owner may not read it (an
            :class:`~htc.daemons.owner_files.OwnerFileError`): the call goes to a starter,
            whose transfer says what is wrong.
    """
    fd, _ = ofs.open_read(path, ofs.Identity.owner(owner), what="input file", regular=False)  # (bounded reads)
    try:
        parts, left = [], m.MAX_LANE_CALL_BYTES + 1
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def reading_as(owner: str | None) -> contextlib.AbstractContextManager:
    """Inside the block, :func:`read_input` of ``owner``'s files takes no credentials of its
    own: the block holds the owner's (:func:`~htc.daemons.owner_files.acting_as`, nested
    blocks for the same owner are free). A lane's batch of calls -- one owner, its lane key's --
    reads its inputs under one switch instead of one per file (ten system calls each way).

    Only reads belong inside: the thread's file-system rights are the owner's there (a file
    the queue opened would be opened as the owner). When the owner cannot be acted for here
    nothing is taken, and each read says why on its own, as before; a daemon that switches to
    nobody (not root, or the owner is root) gets a block that does nothing.
    """
    try:
        who = ofs.Identity.owner(owner)
    except ofs.OwnerFileError:
        return contextlib.nullcontext()  # no account here: each read_input says so itself
    return _OwnersReads(who) if who.switch else contextlib.nullcontext()


class _OwnersReads:
    """The block of :func:`reading_as` for an owner the daemon switches to."""

    def __init__(self, who: ofs.Identity):
        self._switch = ofs.acting_as(who)
        self._held = False

    def __enter__(self) -> None:
        try:
            self._switch.__enter__()
        except ofs.OwnerFileError:
            return  # its rights cannot be taken: each read tries, and says why it cannot
        self._held = True

    def __exit__(self, *exc) -> None:
        if self._held:  # the owner's rights are given back however the block ends
            self._held = False
            self._switch.__exit__(None, None, None)


def call_inputs(job, read: Callable[[str, str | None], bytes] = read_input) -> dict[str, bytes] | None:
    """A lane call's input files by name, read with ``read`` (path, owner) from its ``Iwd``
    (None: it cannot run on a lane -- a URL, a directory, a missing file, too many bytes; the
    starter's transfer says what is wrong)."""
    iwd = ul.literal(job, "Iwd")
    if not isinstance(iwd, str):
        return None
    files, total = {}, 0
    for source in split_list(ul.literal(job, "TransferInput")):
        name = os.path.basename(source)
        if "://" in source or not name or name in files:
            return None
        try:
            data = read(os.path.join(iwd, source), ul.owner(job))
        except OSError:
            return None  # a directory, or missing: the starter's transfer says what is wrong
        total += len(data)
        if total > m.MAX_LANE_CALL_BYTES:
            return None
        files[name] = data
    return files


def write_call_files(action: WriteCallFiles) -> None:
    """Carry out :class:`WriteCallFiles` (the schedd service's side). Empty output goes only
    where a file is there to empty: creating a file costs more than a quick call.

    Every file is opened relative to one descriptor of the directory, with ``O_NOFOLLOW``,
    and only a regular file is written: a link planted in a shared ``calls/`` directory is
    refused, never written through. The rights are the owner's. When the directory is the
    owner's own (:func:`~htc.daemons.owner_files.own_directory`: only the owner can put
    anything there) and every file met is the owner's, the schedd writes without switching
    credentials and gives the files it makes to the owner -- the hot path of a lane, thousands
    of calls a second; anywhere else the whole action runs with the owner's credentials
    (:func:`~htc.daemons.owner_files.acting_as`) and the kernel decides.

    Raises:
        OSError: a file could not be written (an
            :class:`~htc.daemons.owner_files.OwnerFileError` says why and for whom).
    """
    who = ofs.Identity.owner(action.owner)
    base = ofs.check_path(action.directory, "call directory")
    for name, _ in action.files:
        if not plain_name(name):
            raise ofs.OwnerFileError(f"cannot write call output {name!r} in {base}: not a plain file name")
    if action.recycle is not None and not plain_name(action.recycle):
        raise ofs.OwnerFileError(f"cannot reuse call file {action.recycle!r} in {base}: not a plain file name")
    try:
        dir_fd = ofs.own_directory(base, who)
        if dir_fd is not None:
            try:
                if _write_all(action, base, dir_fd, who):
                    return
            finally:
                os.close(dir_fd)
        if who.switch:
            with ofs.acting_as(who):
                _write_in(action, base)
        else:
            _write_in(action, base)
    except ofs.OwnerFileError:
        raise
    except OSError as exc:
        name = exc.filename if isinstance(exc.filename, str) else ""
        what, where = ("call directory", base) if name in ("", base) else ("call output", os.path.join(base, name))
        raise ofs.OwnerFileError(ofs.describe(exc, "write", what, where, who), exc.errno) from None


_WRITE = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _write_in(action: WriteCallFiles, base: str) -> None:
    dir_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _write_all(action, base, dir_fd, None)
    finally:
        os.close(dir_fd)


def _write_all(action: WriteCallFiles, base: str, dir_fd: int, owner: ofs.Identity | None) -> bool:
    """Write the action's files under ``dir_fd``. ``owner``: the directory is the owner's own
    and we write as root, giving new files to the owner; False when a file there is not the
    owner's, for the caller to do it all again with the owner's credentials (each write
    replaces a file's whole contents; a recycled call file already renamed is not looked for)."""
    for i, (name, data) in enumerate(action.files):
        old = action.recycle if action.recycle and i == 0 else None
        fd = None
        if old is not None:
            try:
                fd = os.open(old, _WRITE, dir_fd=dir_fd)
            except FileNotFoundError:
                old = None
            except OSError as exc:
                exc.filename = old
                raise
        made = False
        try:
            if fd is None and owner is None:  # as the owner: the file made is the owner's
                fd = os.open(name, _WRITE | (os.O_CREAT if data else 0), 0o644, dir_fd=dir_fd)
            elif fd is None:  # as root: a file made here must be given to the owner
                try:
                    fd = os.open(name, _WRITE, dir_fd=dir_fd)
                except FileNotFoundError:
                    if not data:
                        raise
                    fd = os.open(name, _WRITE | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dir_fd)
                    made = True
        except FileNotFoundError:
            continue  # nothing printed and no file: the reader takes a missing one as empty
        except OSError as exc:
            exc.filename = name
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ofs.OwnerFileError(f"cannot write call output {os.path.join(base, old or name)}: "
                                         "it is not a regular file")
            if owner is not None:
                if made:
                    os.fchown(fd, owner.uid, owner.gid)
                elif st.st_uid != owner.uid:
                    return False  # not the owner's file: all again as the owner (writes are idempotent)
            overwrite(fd, data)
        finally:
            os.close(fd)
        if old is not None:
            os.replace(old, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    return True
