"""``condor_wait``: block until the jobs of a job event log have finished.

Theory of operation
-------------------
:func:`wait_for_jobs` follows one event log with :class:`~htc.eventlog.EventLogReader`,
which returns only complete events and keeps its place in a log that is still growing.  It
keeps condor_wait's bookkeeping exactly:

* a *submit* event (000) of a watched job adds ``cluster.proc.subproc`` to the table of jobs
  being waited for; a *terminated* (005) or *aborted* (009) event takes it out again;
* with ``num`` the wait ends once that many watched jobs have terminated or aborted;
  without it, once the table is empty after at least one submit event;
* ``timeout`` seconds without that happening ends the wait with ``Time expired.``; a log
  that mentioned no watched job by then says so instead;
* ``timeout=0`` reads what the log holds now and stops there.

The outcome says which, as a :class:`WaitResult` whose ``exit_status`` is condor_wait's:
0 only when the jobs are positively known to be done, 1 otherwise.  The messages are
condor_wait's own, word for word (``Specifed`` included), so scripts that grep for them keep
working.  One deliberate difference: with ``timeout=0`` condor_wait exits 0 at the end of the
log even when jobs are still running; htc exits 1 then, as condor_wait's own header comment
says every exit short of "confirmed done" should.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from htc.errors import UsageError
from htc.eventlog import EventLogReader, EventType, format_event
from htc.eventlog.events import Event, ExecuteEvent

__all__ = ["WaitResult", "parse_job_spec", "wait_for_jobs"]

_SPEC = re.compile(r"^(-?\d+)(?:\.(-?\d+)(?:\.(-?\d+))?)?$")

ALL_DONE = "All jobs done."
TIME_EXPIRED = "Time expired."
NO_JOBS = "This log does not mention any jobs!"
NO_SUCH_JOB = "This log does not mention that job!"


@dataclass(frozen=True)
class WaitResult:
    """How a wait ended: ``done`` (exit 0) or not (exit 1), with condor_wait's message."""

    done: bool
    message: str
    submitted: int = 0
    completed: int = 0
    aborted: int = 0
    #: jobs (``cluster.proc.subproc``) submitted and not yet finished when the wait ended
    pending: tuple[str, ...] = ()

    @property
    def exit_status(self) -> int:
        """condor_wait's exit status: 0 when the jobs are known to be done, else 1."""
        return 0 if self.done else 1


def parse_job_spec(spec: str | None) -> tuple[int, int, int] | None:
    """``"12"``, ``"12.3"`` or ``"12.3.0"`` as (cluster, proc, subproc), -1 meaning any.

    Args:
        spec: the job argument of ``htc wait``; None or ``"-1"`` watch every job.

    Returns:
        The triple, or None to watch every job of the log.

    Raises:
        UsageError: the text is not a job number.
    """
    if spec is None:
        return None
    m = _SPEC.match(spec.strip())
    if not m:
        raise UsageError(f"Couldn't understand job number: {spec} (give CLUSTER, CLUSTER.PROC or "
                         "CLUSTER.PROC.SUBPROC)")
    parts = [int(g) if g is not None else -1 for g in m.groups()]
    if parts == [-1, -1, -1]:
        return None
    return parts[0], parts[1], parts[2]


def _matches(event: Event, want: tuple[int, int, int] | None) -> bool:
    if want is None:
        return True
    cluster, proc, subproc = want
    return ((cluster == -1 or event.cluster == cluster) and (proc == -1 or event.proc == proc)
            and (subproc == -1 or event.subproc == subproc))


def wait_for_jobs(log: str | os.PathLike, job: str | None = None, *, timeout: float | None = None,
                  num: int | None = None, echo: bool = False, status: bool = False,
                  report: Callable[[str], None] | None = None, poll: float = 0.1) -> WaitResult:
    """Wait until the jobs in event log ``log`` (or job ``job`` of it) have finished.

    Args:
        log: the job event log (the ``log`` command of the submit description).
        job: ``CLUSTER``, ``CLUSTER.PROC`` or ``CLUSTER.PROC.SUBPROC``; None: every job the log
            mentions.
        timeout: give up after this many seconds (None: wait as long as it takes; 0: read the
            log once and stop).
        num: finish once this many watched jobs have ended, instead of all of them.
        echo: pass each watched event, in the log's own text, to ``report``.
        status: pass condor_wait's ``-status`` lines (``12.0.0 submitted``, ``... completed``)
            to ``report``.
        report: receives the lines ``echo``/``status`` ask for (default: none are made).
        poll: seconds between looks at a log that has not grown.

    Returns:
        A :class:`WaitResult`; its ``exit_status`` is what ``htc wait`` exits with.

    Raises:
        UsageError: the log cannot be read (missing, a directory, no permission), ``job`` is
            not a job number, or ``num`` is not positive.
    """
    want = parse_job_spec(job)
    if num is not None and num < 1:
        raise UsageError("-num must be greater than zero")
    path = os.fspath(log)
    if not os.path.isfile(path):
        what = "is a directory" if os.path.isdir(path) else "does not exist"
        raise UsageError(f"Couldn't open {path}: it {what}; give the job event log named by the "
                         "submit description's 'log' command")
    reader = EventLogReader(path)
    say = report or (lambda line: None)
    table: set[str] = set()
    submitted = completed = aborted = 0
    deadline = None if not timeout else time.monotonic() + timeout

    def result(done: bool, message: str) -> WaitResult:
        return WaitResult(done, message, submitted, completed, aborted, tuple(sorted(table)))

    while True:
        if deadline is not None and time.monotonic() > deadline:
            return result(False, TIME_EXPIRED)
        if timeout == 0:
            events = reader.read_nowait()
        else:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            events = reader.wait_events(remaining, poll=poll)
        if not events:
            if not table and not submitted:
                message = NO_JOBS if want is None else NO_SUCH_JOB
                if timeout == 0 or deadline is not None:
                    return result(False, message)
            if timeout == 0:
                return result(False, TIME_EXPIRED)
            continue
        for event in events:
            if _matches(event, want):
                key = f"{event.cluster}.{event.proc}.{event.subproc}"
                if echo:
                    say(format_event(event).rstrip("\n"))
                if event.type is EventType.SUBMIT:
                    table.add(key)
                    submitted += 1
                    if status:
                        say(f"{key} submitted")
                elif event.type is EventType.JOB_TERMINATED:
                    table.discard(key)
                    completed += 1
                    if status:
                        say(f"{key} completed")
                elif event.type is EventType.JOB_ABORTED:
                    table.discard(key)
                    aborted += 1
                    if status:
                        say(f"{key} aborted")
                elif event.type is EventType.EXECUTE and status:
                    host = event.execute_host if isinstance(event, ExecuteEvent) else ""
                    say(f"{key} executing on host {host}")
            if num and completed + aborted >= num:
                return result(True, f"Specifed number of jobs ({num}) done.")
            if not table and submitted and not num:
                return result(True, ALL_DONE)
