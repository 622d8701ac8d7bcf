"""Progress bars (rich) for ``map`` and ``wait``: on a terminal, off otherwise.

``progress=None`` (the default everywhere) means "on when standard error is a terminal", so
a script run by hand shows a bar and the same script under cron, CI or a pipe prints nothing.
``True``/``False`` force it. The bar counts futures as they finish (a done-callback advances
it, from whichever thread finishes the future) and shows how many failed.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ALL_COMPLETED, Future
from concurrent.futures import as_completed as _as_completed
from concurrent.futures import wait as _wait

__all__ = ["ProgressBar", "as_completed", "enabled", "wait"]


def enabled(setting: bool | None) -> bool:
    """Whether to show a bar for ``setting`` (None: when stderr is a terminal)."""
    if setting is not None:
        return bool(setting)
    stream = sys.stderr
    return bool(getattr(stream, "isatty", None)) and stream.isatty()


class ProgressBar:
    """A bar over a set of futures; a context manager. Does nothing when not ``shown``.

    Args:
        futures: what to count.
        description: the bar's label.
        shown: draw it (see :func:`enabled`).
    """

    def __init__(self, futures: Iterable[Future], description: str = "calls", shown: bool = False):
        self.futures = list(futures)
        self.shown = shown
        self.failed = 0
        self._lock = threading.Lock()
        self._progress = None
        self._task = None
        self.description = description

    def __enter__(self) -> ProgressBar:
        if not self.shown or not self.futures:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[failed]}"), TimeElapsedColumn(), transient=False,
                                  console=Console(file=sys.stderr))
        self._progress.start()
        self._task = self._progress.add_task(self.description, total=len(self.futures), failed="")
        for future in self.futures:
            future.add_done_callback(self._done)
        return self

    def _done(self, future: Future) -> None:
        progress = self._progress
        if progress is None:
            return
        with self._lock:
            if future.cancelled() or future.exception() is not None:
                self.failed += 1
            failed = f"[red]{self.failed} failed" if self.failed else ""
        progress.update(self._task, advance=1, failed=failed)

    def __exit__(self, *exc_info) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def wait(fs: Iterable[Future], timeout: float | None = None, return_when: str = ALL_COMPLETED, *,
         progress: bool | None = None):
    """:func:`concurrent.futures.wait` with a progress bar on a terminal.

    Args:
        fs, timeout, return_when: as for :func:`concurrent.futures.wait`.
        progress: show the bar (None: when stderr is a terminal).

    Returns:
        ``DoneAndNotDoneFutures(done, not_done)``.
    """
    fs = list(fs)
    with ProgressBar(fs, "waiting", enabled(progress)):
        return _wait(fs, timeout=timeout, return_when=return_when)


def as_completed(fs: Iterable[Future], timeout: float | None = None, *, progress: bool | None = None) -> Iterator[Future]:
    """:func:`concurrent.futures.as_completed` with a progress bar on a terminal.

    Args:
        fs, timeout: as for :func:`concurrent.futures.as_completed`.
        progress: show the bar (None: when stderr is a terminal).

    Yields:
        Each future as it finishes.

    Raises:
        TimeoutError: ``timeout`` passed with futures still unfinished.
    """
    fs = list(fs)
    with ProgressBar(fs, "completed", enabled(progress)):
        yield from _as_completed(fs, timeout=timeout)
