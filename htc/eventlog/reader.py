"""Reading HTCondor's job event log text format, including logs that are still growing.

Theory of operation
-------------------
The log is a sequence of events, each a header line, body lines and a ``...`` line (see
:mod:`htc.eventlog.writer`). :class:`EventLogReader` keeps a byte offset into the file. Each
:meth:`~EventLogReader.read_nowait` reads what was appended since, and returns only the
events whose ``...`` terminator is already there; the text of an event still being written
(no terminator yet, or a last line without its newline) stays unread, and the offset stays at
that event's first byte, so the next call sees the whole event once its writer finished it.

A log shared by many jobs and clusters is just a longer sequence: every event carries its own
``cluster.proc.subproc``; callers filter (``read_events(path, cluster=12)``).

Damage is skipped, not fatal: lines before the first header, and an event that was cut off by
a writer's crash (a new header appears before its ``...``), are dropped and counted in
:attr:`EventLogReader.skipped`; a header whose code htc does not know becomes an
:class:`~htc.eventlog.events.UnknownEvent`. Body lines are parsed leniently: a missing
optional line leaves the field at its default.

A file that shrank (it was truncated or replaced) is read again from its start.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Collection, Iterator

from htc.errors import UsageError
from htc.eventlog import events as ev
from htc.eventlog.parsing import parse_event, parse_time, split_header

__all__ = ["EventLogReader", "parse_event", "parse_time", "read_events"]

# "NNN (cluster.proc.subproc) " -- the event number is exactly three digits (readEventNumber).
#: a line that starts an event (its header) or ends one (``...``)
_BOUNDARY = re.compile(rb"^(?:(\.\.\.)\r?$|(\d{3}) \((-?\d+)\.(-?\d+)\.(-?\d+)\) )", re.M)


class EventLogReader:
    """Reads the complete events of one log, and follows it as writers append to it."""

    def __init__(self, path: str | os.PathLike, *, offset: int = 0, keep_open: bool = False):
        """Prepare to read ``path`` from byte ``offset`` (0: the beginning).

        The file need not exist yet: reads return no events until it does. With ``keep_open``
        the file stays open between reads (one ``stat`` and one ``pread`` a read, for a reader
        that follows a log closely; a file put in its place is opened afresh); :meth:`close`
        closes it.
        """
        self.path = os.fspath(path)
        #: byte offset of the first event not yet returned
        self.offset = offset
        #: number of damaged fragments skipped so far (text before a header, cut-off events)
        self.skipped = 0
        self._keep_open = keep_open
        self._fd: int | None = None
        self._file_id: tuple[int, int] | None = None

    def close(self) -> None:
        """Close the file a ``keep_open`` reader holds (the next read opens it again)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = self._file_id = None

    def read_nowait(self, *, cluster: int | None = None,
                    types: Collection[ev.EventType] | None = None) -> list[ev.Event]:
        """Return the complete events appended since the last call, without waiting.

        Args:
            cluster: return only events of this cluster (others are consumed all the same).
            types: return only events of these types (others are consumed without being parsed).

        Returns:
            Events in file order; empty when nothing complete was added.

        Raises:
            UsageError: the path exists but cannot be read (a directory, no permission).
        """
        try:
            data = self._read_kept() if self._keep_open else self._read_once()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise UsageError(f"cannot read the job event log {self.path}: {exc.strerror}") from None
        if not data:
            return []
        events, consumed = self._parse(data, None if types is None else frozenset(int(t) for t in types))
        self.offset += consumed
        if cluster is not None:
            events = [e for e in events if e.cluster == cluster]
        return events

    def _read_once(self) -> bytes:
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < self.offset:
                self.offset = 0  # truncated or replaced: start over
            f.seek(self.offset)
            return f.read()

    def _read_kept(self) -> bytes:
        st = os.stat(self.path)
        if self._fd is None or self._file_id != (st.st_dev, st.st_ino):
            replaced = self._file_id is not None
            self.close()
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            st = os.fstat(fd)  # the file opened, should the name have moved on meanwhile
            self._fd, self._file_id = fd, (st.st_dev, st.st_ino)
            if replaced:
                self.offset = 0  # another file now: start over
        if st.st_size < self.offset:
            self.offset = 0  # truncated: start over
        if st.st_size == self.offset:
            return b""
        parts, at = [], self.offset
        while at < st.st_size:
            chunk = os.pread(self._fd, st.st_size - at, at)
            if not chunk:
                break
            parts.append(chunk)
            at += len(chunk)
        return b"".join(parts)

    def wait_events(self, timeout: float | None = None, *, poll: float = 0.1,
                    cluster: int | None = None) -> list[ev.Event]:
        """Block until at least one new complete event is there, or ``timeout`` seconds pass.

        Returns:
            The new events; empty if the timeout passed first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            found = self.read_nowait(cluster=cluster)
            if found or (deadline is not None and time.monotonic() >= deadline):
                return found
            time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))

    def _parse(self, data: bytes, codes: frozenset[int] | None = None) -> tuple[list[ev.Event], int]:
        # From one boundary line (a header or a "...") to the next with one regex search, not a
        # look at every line: an event not asked for is passed over without being split.
        events: list[ev.Event] = []
        pos = 0          # where to look for the next boundary line
        consumed = 0     # end of the last complete event (or skipped junk)
        current: tuple[re.Match, int] | None = None  # the open event's header, where its body starts
        while True:
            m = _BOUNDARY.search(data, pos)
            if m is None:
                break
            end = data.find(b"\n", m.start())
            if end < 0:
                break  # a line without its newline is still being written
            pos = end + 1
            if m.group(1) is None:  # a header
                if current is not None:
                    self.skipped += 1  # the previous event never got its terminator
                elif m.start() > consumed:
                    self.skipped += 1  # junk before this header
                current = (m, pos)
                continue
            if current is not None:
                header, body = current
                if codes is None or int(header.group(2)) in codes:
                    event = self._build(header, data[header.end():body - 1], data[body:m.start()])
                    if event is not None:
                        events.append(event)
                current = None
            consumed = pos
        return events, consumed

    def _build(self, header: re.Match, rest: bytes, body: bytes) -> ev.Event | None:
        code, cluster, proc, subproc = (int(g) for g in header.group(2, 3, 4, 5))
        try:
            timestamp, first = split_header((rest[:-1] if rest.endswith(b"\r") else rest).decode("utf-8", "replace"))
        except ValueError:
            self.skipped += 1
            return None
        lines = body.decode("utf-8", "replace").split("\n")[:-1] if body else []
        return parse_event(code, cluster, proc, subproc, timestamp, first,
                           [l[:-1] if l.endswith("\r") else l for l in lines])

    def __iter__(self) -> Iterator[ev.Event]:
        """Follow the log forever, yielding events as they complete (polls every 0.1 s)."""
        while True:
            yield from self.wait_events(None)


def read_events(path: str | os.PathLike, *, cluster: int | None = None) -> list[ev.Event]:
    """All complete events in the log at ``path`` now (a half-written last event is left out).

    Args:
        path: the job event log.
        cluster: keep only this cluster's events.

    Returns:
        The events in file order (an empty list when the file does not exist).

    Raises:
        UsageError: the file cannot be read.
    """
    return EventLogReader(path).read_nowait(cluster=cluster)
