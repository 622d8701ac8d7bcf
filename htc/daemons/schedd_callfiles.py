"""The files of a call lane's calls, as the schedd reads and writes them.

A lane call's inputs are read from its ``Iwd`` (:func:`read_input`, which the schedd core is
given) and its outputs written back there by the schedd's service (:class:`WriteCallFiles`,
the action the core returns; :func:`write_call_files` carries it out) -- what the starter's
file transfer does for a job that runs on a starter of its own. See
:mod:`htc.daemons.schedd_lanes`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from htc.daemons import core as c
from htc.executors.callfile import overwrite
from htc.wire import messages as m

__all__ = ["WriteCallFiles", "read_input", "write_call_files"]


def read_input(path: str) -> bytes:
    """One input file of a call (the service's default reader): at most one byte more than a
    lane carries, so that the caller sees it is too big."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
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


@dataclass(frozen=True)
class WriteCallFiles(c.Action):
    """Write a lane call's output ``files`` (name -> bytes) into ``directory``, owned like it.
    ``recycle`` names a file there the call no longer needs (its call file, once the job has
    left the queue): the first output is written into it and renamed, which spares a new
    file (an inode costs more to make than most calls take)."""

    directory: str
    files: tuple[tuple[str, bytes], ...]
    recycle: str | None = None


def write_call_files(action: WriteCallFiles) -> None:
    """Carry out :class:`WriteCallFiles` (the schedd service's side). Empty output goes only
    where a file is there to empty: creating a file costs more than a quick call.

    Raises:
        OSError: a file could not be written.
    """
    base = action.directory
    root = os.geteuid() == 0
    for i, (name, data) in enumerate(action.files):
        path = os.path.join(base, name)
        old = os.path.join(base, action.recycle) if action.recycle and i == 0 else None
        created = False
        try:
            fd = os.open(old, os.O_WRONLY) if old is not None else None
        except FileNotFoundError:
            fd = old = None
        try:
            if fd is None:
                fd = os.open(path, os.O_WRONLY | (os.O_CREAT if data else 0), 0o644)
                created = data != b"" and os.fstat(fd).st_size == 0
        except FileNotFoundError:
            continue  # nothing printed and no file: the reader takes a missing one as empty
        try:
            overwrite(fd, data)
            if root and created:  # a file made here belongs to the directory's owner
                st = os.stat(base)
                if (st.st_uid, st.st_gid) != (0, 0):
                    os.fchown(fd, st.st_uid, st.st_gid)
        finally:
            os.close(fd)
        if old is not None:
            os.replace(old, path)
