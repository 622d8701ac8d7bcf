"""The user log of a spooled job, brought up to date on the submitter's side by ``htc transfer_data``.

Theory of operation
-------------------
A spooled job's ``UserLog`` is rewritten to a file of the same name in its spool directory
(HTCondor's ``rewriteSpooledJobAd`` does the same), so the events of its run are written there,
on the schedd's host; ``FetchOutput`` sends that file back under the name the submitter gave
(``SUBMIT_UserLog``). Written like any other output file it would *replace* the submitter's
log, and with it every event already there: the events of any other job sharing the log (a
log shared by many clusters is common, and DAGMan's node logs are shared by design). (The job's
own SUBMIT event is in the fetched log, first: the schedd writes it into the spool's copy when
the input arrives, never to the submitter's path, :mod:`htc.daemons.schedd.spool`.) HTCondor's
condor_transfer_data overwrites the file too, which is harmless only when the log held nothing
else.

So :class:`SpoolFetchSink` receives the user log into a hidden file beside it and then
*appends* to the submitter's log each event of the fetched one that it does not hold already
(an event is the text up to and including its ``...`` line; the same event twice is the same
text). The result is the log as if the job had run on this host: its earlier events kept, its
new ones after them, none twice, even when ``htc transfer_data`` is run again after a fetch
that failed half way. The events are appended with one ``O_APPEND`` write, so they do not
interleave with events another writer appends at the same moment.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from htc.daemons.job_files import local_path
from htc.daemons.schedd.transfers import OwnerSink
from htc.wire import messages as m

__all__ = ["SpoolFetchSink", "merge_user_log", "split_events"]

#: the line that ends an event in a classic user log
_END = "...\n"


def split_events(text: str) -> list[str]:
    """The events of a user log's ``text``, each with its ``...`` line (a torn last event as it is)."""
    events: list[str] = []
    current: list[str] = []
    pieces = text.split("\n")
    for i, piece in enumerate(pieces):
        line = piece + "\n" if i < len(pieces) - 1 else piece
        if line:
            current.append(line)
        if line == _END:
            events.append("".join(current))
            current = []
    if current:
        events.append("".join(current))
    return events


def merge_user_log(fetched: Path, log: Path, mode: int = 0o644) -> int:
    """Append to ``log`` (made with ``mode`` when missing) the events of ``fetched`` it lacks.

    Returns:
        How many events were appended.
    """
    new = split_events(fetched.read_text(errors="surrogateescape"))
    try:
        held = log.read_text(errors="surrogateescape")
    except FileNotFoundError:
        held = ""
    have = set(split_events(held))
    missing = [event for event in new if event not in have]
    if not missing:
        return 0
    text = "".join(missing)
    if held and not held.endswith("\n"):
        text = "\n" + text  # (a torn last line of the submitter's log ends before ours starts)
    data = text.encode(errors="surrogateescape")
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return len(missing)


class SpoolFetchSink(OwnerSink):
    """Writes a spooled job's fetched output under ``iwd`` with this process's rights, merging
    its user log into the submitter's (module header) rather than replacing it.

    Args:
        iwd: the submit directory (``SUBMIT_Iwd``).
        job: ``cluster.proc`` for messages.
        user_log: the log the submit description named (``SUBMIT_UserLog``), or None.
    """

    def __init__(self, iwd: Path, job: str, user_log: str | None):
        super().__init__(iwd, None, job)
        self.user_log = Path(local_path(user_log, iwd)) if user_log else None
        self._receiving: dict[int, Path] = {}  # descriptor -> the hidden file the log arrives in

    def begin(self, entry: m.FileEntry) -> int | None:
        """As :meth:`OwnerSink.begin`, but the user log arrives in a hidden file beside it."""
        if self.user_log is None or entry.kind != "file" or \
                Path(local_path(entry.name.rstrip("/"), self.iwd)) != self.user_log:
            return super().begin(entry)
        self._dest(entry)  # (the path rules; the directory made)
        hidden = self.user_log.with_name(f".{self.user_log.name}.fetching-{os.getpid()}")
        fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._receiving[fd] = hidden
        return fd

    def finish(self, entry: m.FileEntry, fd: int) -> None:
        """As :meth:`OwnerSink.finish`; the user log's new events are appended to the submitter's."""
        hidden = self._receiving.pop(fd, None)
        if hidden is None:
            super().finish(entry, fd)
            return
        os.close(fd)
        try:
            merge_user_log(hidden, self.user_log, entry.mode & 0o777 or 0o644)
        finally:
            hidden.unlink(missing_ok=True)

    def close(self) -> None:
        """Remove what a stream that stopped half way left behind (a partly received log)."""
        for fd, hidden in self._receiving.items():
            with contextlib.suppress(OSError):
                os.close(fd)
            hidden.unlink(missing_ok=True)
        self._receiving.clear()
