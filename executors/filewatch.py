"""Being told at once that a file changed, instead of looking at it every few milliseconds.

The pool backend follows its session's event log, which the schedd appends to as the jobs
move. Looking (a ``stat``) every 2 ms costs CPU while nothing happens; backing off to 200 ms
adds up to 200 ms to a call's round trip. :class:`FileWatch` removes the trade-off where the
kernel can tell: on Linux it asks inotify about the file's directory, and the waiting thread
itself (:meth:`FileWatch.wait`; the pool backend's dispatcher) or a small daemon thread of the
watch's own (``on_change``) wakes the moment the file is written or created; elsewhere (or when
inotify is unavailable, e.g. out of watches) nothing tells, and the caller's polling, which
stays in place as the fallback, finds the change.

Theory of operation
-------------------
The kernel side is :class:`htc.eventlog.dirwatch.DirWatch` (inotify on the file's folder, the
one the DAG manager uses too). A wait is a ``select`` on its descriptor and a self-pipe (:meth:`FileWatch.wake` writes it, from any thread); each readable
batch is read whole and ends the wait when one of its events names the watched file. Waiting
in the thread that acts on the change saves a thread hand-off per change, which on a small VM
costs more than reading the change. :meth:`close` writes the self-pipe, joins the thread (if
any) and closes both.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable
from pathlib import Path

from htc.eventlog.dirwatch import DirWatch

__all__ = ["FileWatch"]


class FileWatch:
    """Tells when ``path`` is written or created: :meth:`wait` blocks the calling thread until it
    is (or :meth:`wake` is called), or, given ``on_change``, a thread of its own calls that.

    ``active`` is False when the platform cannot watch; then :meth:`wait` only times out or
    wakes, and ``on_change`` is never called.
    """

    def __init__(self, path: str | os.PathLike, on_change: Callable[[], None] | None = None):
        self.path = Path(path)
        self.on_change = on_change
        self.active = False
        self._closing = False
        self._wake_pending = False
        self._watch = DirWatch(self.path)
        self._fd = self._watch.fileno()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread: threading.Thread | None = None
        if not self._watch.active:
            return
        self.active = True
        if on_change is not None:
            self._thread = threading.Thread(target=self._run, name=f"htc-filewatch-{self.path.name}", daemon=True)
            self._thread.start()

    def wait(self, timeout: float | None) -> bool:
        """Block until the file changes or :meth:`wake` is called (True), or ``timeout`` s pass
        (False). Changes to other entries of the directory do not end the wait."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fds = [self._wake_r, self._fd] if self._fd >= 0 else [self._wake_r]
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                ready, _, _ = select.select(fds, [], [], left)
            except (OSError, ValueError):
                return True  # closed under us
            if not ready:
                return False
            if self._wake_r in ready:
                with contextlib.suppress(OSError):
                    os.read(self._wake_r, 4096)  # a byte per wake while none was pending: all of them
                # Cleared after the drain: a wake() in between skipped its write, and this
                # return (which follows it) answers it.
                self._wake_pending = False
                return True
            if self._watch.drain():
                return True

    def wake(self) -> None:
        """End a :meth:`wait` now (or the next one, if none is waiting); from any thread.
        Wakes before the wait returns are one wake (a submit loop costs no system call each)."""
        if self._wake_pending:
            return
        self._wake_pending = True
        with contextlib.suppress(OSError):  # a full pipe is a wake already pending
            os.write(self._wake_w, b"x")

    def _run(self) -> None:
        while self.wait(None) and not self._closing:
            with contextlib.suppress(Exception):  # a watcher must not die of its listener's bug
                self.on_change()

    def close(self) -> None:
        """Stop watching (idempotent)."""
        if self._closing:
            return
        self._closing = True
        self.active = False
        self.wake()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._watch.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                if fd >= 0:
                    os.close(fd)
        self._fd = self._wake_r = self._wake_w = -1

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
