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

from htc.eventlog import EventLogReader
from htc.eventlog import events as ev
from htc.eventlog.dirwatch import DirWatch as LogWake  # the manager selects on its descriptor

__all__ = ["AdaptivePoll", "LogWake", "NodeLog"]


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
