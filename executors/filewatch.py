"""Being told at once that a file changed, instead of looking at it every few milliseconds.

The pool backend follows its session's event log, which the schedd appends to as the jobs
move. Looking (a ``stat``) every 2 ms costs CPU while nothing happens; backing off to 200 ms
adds up to 200 ms to a call's round trip. :class:`FileWatch` removes the trade-off where the
kernel can tell: on Linux it asks inotify about the file's directory and calls ``on_change``
from a small daemon thread the moment the file is written or created; elsewhere (or when
inotify is unavailable, e.g. out of watches) it does nothing and the caller's polling, which
stays in place as the fallback, finds the change.

Theory of operation
-------------------
``inotify_init1`` gives a file descriptor; ``inotify_add_watch`` on the *directory* (the file
may not exist yet) for ``IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE`` makes the
kernel queue an event whenever an entry of it changes. The thread blocks in ``select`` on that
descriptor and a self-pipe; each readable batch is read whole and, when one of its events names
the watched file, ``on_change()`` runs once. :meth:`close` writes the self-pipe, joins the
thread and closes both.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import struct
import sys
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["FileWatch"]

_IN_MODIFY = 0x002
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


class FileWatch:
    """Calls ``on_change()`` (from its own thread) whenever ``path`` is written or created.

    ``active`` is False when the platform cannot watch; then nothing is ever called.
    """

    def __init__(self, path: str | os.PathLike, on_change: Callable[[], None]):
        self.path = Path(path)
        self.on_change = on_change
        self.active = False
        self._fd = -1
        self._wake_r = self._wake_w = -1
        self._thread: threading.Thread | None = None
        if _LIBC is None:
            return
        fd = _LIBC.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            return
        mask = _IN_MODIFY | _IN_CLOSE_WRITE | _IN_CREATE | _IN_MOVED_TO
        if _LIBC.inotify_add_watch(fd, os.fsencode(self.path.parent), mask) < 0:
            os.close(fd)
            return
        self._fd = fd
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self.active = True
        self._thread = threading.Thread(target=self._run, name=f"htc-filewatch-{self.path.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        name = os.fsencode(self.path.name)
        while True:
            try:
                ready, _, _ = select.select([self._fd, self._wake_r], [], [])
            except (OSError, ValueError):
                return
            if self._wake_r in ready:
                return
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                continue
            except OSError:
                return
            if self._names(data, name):
                with contextlib.suppress(Exception):  # a watcher must not die of its listener's bug
                    self.on_change()

    @staticmethod
    def _names(data: bytes, name: bytes) -> bool:
        offset = 0
        while offset + _EVENT.size <= len(data):
            _wd, _mask, _cookie, length = _EVENT.unpack_from(data, offset)
            start = offset + _EVENT.size
            if data[start:start + length].rstrip(b"\0") == name:
                return True
            offset = start + length
        return False

    def close(self) -> None:
        """Stop watching (idempotent)."""
        if not self.active:
            return
        self.active = False
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        for fd in (self._fd, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fd = self._wake_r = self._wake_w = -1

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
