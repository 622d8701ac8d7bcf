"""Following the nodes log: new events as soon as the schedd writes them.

The node jobs' events reach the manager through one file, ``<dag>.nodes.log``, which the schedd
appends to. There is no notification for "a file grew" that works everywhere (inotify misses
writes on network file systems), so the manager polls, adaptively: right after anything
happened it looks again within milliseconds (a chain of nodes moves at the pace of this
latency), and the longer nothing happens the less often it looks, up to a ceiling
(``DAGMAN_USER_LOG_SCAN_INTERVAL``). A read that finds nothing costs one ``stat``.

Where the kernel can tell (Linux), :class:`LogWake` makes the wait end the moment the schedd
writes the log: an inotify descriptor on the log's folder, which the manager's loop selects on
beside its signal pipe. A chain's next node is then submitted as soon as its parent's end is in
the file, not up to a poll interval later. The polling stays as it was, so a file system whose
writes inotify does not see (NFS) is still followed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import struct
import sys

from htc.eventlog import EventLogReader
from htc.eventlog import events as ev

__all__ = ["AdaptivePoll", "LogWake", "NodeLog"]

#: IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE: the file was written, replaced or made
_IN_MASK = 0x002 | 0x008 | 0x080 | 0x100
_IN_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of the entry's name)


class AdaptivePoll:
    """How long to wait before the next look, given how long nothing has happened.

    The wait is a tenth of the quiet time so far (a change is seen at most ~10% of the quiet
    stretch after it happened), between ``floor`` and ``ceiling`` seconds.
    """

    def __init__(self, *, floor: float = 0.005, ceiling: float = 5.0, share: float = 0.1):
        """Poll at least every ``ceiling`` seconds, at most every ``floor`` seconds."""
        self.floor = floor
        self.ceiling = max(floor, ceiling)
        self.share = share
        self._last_activity: float | None = None

    def activity(self, now: float) -> None:
        """Something happened at ``now``: look again soon."""
        self._last_activity = now

    def interval(self, now: float) -> float:
        """Seconds to wait before looking again."""
        if self._last_activity is None:
            self._last_activity = now
        quiet = max(0.0, now - self._last_activity)
        return min(self.ceiling, max(self.floor, quiet * self.share))


class NodeLog:
    """The nodes log, read from where the last read stopped (see :class:`EventLogReader`)."""

    def __init__(self, path: str, *, offset: int = 0):
        """Follow ``path`` (it need not exist yet) from byte ``offset``."""
        self.path = path
        self._reader = EventLogReader(path, offset=offset, keep_open=True)

    def read(self) -> list[ev.Event]:
        """The complete events appended since the last read (none if the file is not there)."""
        return self._reader.read_nowait()

    @property
    def offset(self) -> int:
        """Byte offset of the first event not yet read."""
        return self._reader.offset

    def close(self) -> None:
        """Close the file."""
        self._reader.close()


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


class LogWake:
    """A descriptor that becomes readable when the file at ``path`` is written (see the module
    docstring). ``fileno()`` is -1 where the kernel cannot tell (then only the polling sees
    changes); every method is then a no-op."""

    def __init__(self, path: str):
        """Watch ``path``'s folder (the file need not exist yet) for writes to ``path``."""
        self._name = os.fsencode(os.path.basename(path))
        self._fd = -1
        libc = _inotify()
        if libc is None:
            return
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return  # out of inotify instances: poll
        if libc.inotify_add_watch(fd, os.fsencode(os.path.dirname(os.path.abspath(path))), _IN_MASK) < 0:
            os.close(fd)
            return  # out of watches, or a file system without inotify: poll
        self._fd = fd

    def fileno(self) -> int:
        """The inotify descriptor to select on (-1: none)."""
        return self._fd

    def drain(self) -> bool:
        """Read what the kernel queued, without blocking; True if a change of the file is among it
        (changes of other files of the folder, such as ``dagman.out``, are dropped)."""
        named = False
        while self._fd >= 0:
            try:
                data = os.read(self._fd, 64 * 1024)
            except (BlockingIOError, InterruptedError):
                break
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
