"""Being told by the kernel that a file was written, instead of looking at it again and again.

Theory of operation
-------------------
Whoever follows an event log (the DAG manager its nodes log, the executor its session's log)
polls it; polling often costs CPU while nothing happens, polling seldom adds delay to every
step. :class:`DirWatch` removes the trade-off where the kernel can tell: on Linux it asks
inotify about the file's *folder* (the file may not exist yet) for ``IN_MODIFY | IN_CLOSE_WRITE
| IN_CREATE | IN_MOVED_TO``, and its descriptor becomes readable when an entry there changes.
The caller selects on :meth:`DirWatch.fileno` beside whatever else it waits for, and
:meth:`DirWatch.drain` reads what the kernel queued and says whether the watched file was among
it (other files of the folder, such as ``dagman.out``, are dropped). Where inotify is missing
(another platform, out of instances or watches, a file system without it) ``fileno()`` is -1
and the caller's polling, which stays in place as the fallback, finds the change.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import struct
import sys

__all__ = ["DirWatch"]

_IN_MASK = 0x002 | 0x008 | 0x080 | 0x100  # IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE
_IN_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of the entry's name)


def _inotify():
    """libc's inotify calls (None off Linux, or when libc has none)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _inotify()


class DirWatch:
    """A descriptor that becomes readable when the file at ``path`` is written or created.

    ``fileno()`` is -1 where the kernel cannot tell; then :meth:`drain` finds nothing and
    :meth:`close` does nothing.
    """

    def __init__(self, path: str | os.PathLike):
        """Watch ``path``'s folder (the file need not exist yet) for changes of ``path``."""
        path = os.fspath(path)
        self._name = os.fsencode(os.path.basename(path))
        self._fd = -1
        if _LIBC is None:
            return
        fd = _LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return  # out of inotify instances: the caller polls
        if _LIBC.inotify_add_watch(fd, os.fsencode(os.path.dirname(os.path.abspath(path))), _IN_MASK) < 0:
            os.close(fd)
            return  # out of watches, or a file system without inotify: the caller polls
        self._fd = fd

    @property
    def active(self) -> bool:
        """Whether the kernel tells of changes (else only polling sees them)."""
        return self._fd >= 0

    def fileno(self) -> int:
        """The inotify descriptor to select on (-1: none)."""
        return self._fd

    def drain(self) -> bool:
        """Read what the kernel queued, without blocking; True if a change of the file is among it,
        or if the descriptor broke (closed under the caller: look at the file)."""
        named = False
        while self._fd >= 0:
            try:
                data = os.read(self._fd, 64 * 1024)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                return True
            offset = 0
            while offset + _IN_EVENT.size <= len(data):
                length = _IN_EVENT.unpack_from(data, offset)[3]
                start = offset + _IN_EVENT.size
                named = named or data[start:start + length].rstrip(b"\0") == self._name
                offset = start + length
        return named

    def close(self) -> None:
        """Stop watching (idempotent)."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):  # closing is all that is left to do with it
                os.close(self._fd)
        self._fd = -1
