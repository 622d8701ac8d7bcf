"""Writing HTCondor's job event log ("user log") text format.

Theory of operation
-------------------
An event is a header line ``NNN (cluster.proc.subproc) YYYY-MM-DD HH:MM:SS <first line>``,
zero or more body lines, and a line of exactly ``...``. :func:`format_event` renders one
event object of :mod:`htc.eventlog.events` as that text, line for line as HTCondor's
``ULogEvent::formatHeader`` and the ``formatBody`` methods of ``condor_event.cpp`` write it, so
that ``htcondor2.JobEventLog`` (and DAGMan, ``condor_wait``...) read our logs.

:class:`EventLogWriter` appends formatted events to a file that many writers may share (every
job of a DAG, several clusters, the schedd and DAGMan): each event is one ``write(2)`` on a
descriptor opened with ``O_APPEND``, under an exclusive ``flock`` so that no two events
interleave even across processes. With ``fsync=True`` (the ``ENABLE_USERLOG_FSYNC`` knob,
false by default as in HTCondor) each write is also made durable before it returns.

Free text (hold reasons, messages) never contains a newline in this format: ``\\n`` becomes
``|`` and ``\\r`` a space, as HTCondor does when it stores a reason.
"""

from __future__ import annotations

import fcntl
import functools
import os
import time
from typing import Iterable

from htc.errors import UsageError
from htc.eventlog import events as ev

# First lines of FILE_TRANSFER events, indexed by FileTransferType (ULogEvent's table).
FILE_TRANSFER_TEXT = {
    ev.FileTransferType.IN_QUEUED: "Entered queue to transfer input files",
    ev.FileTransferType.IN_STARTED: "Started transferring input files",
    ev.FileTransferType.IN_FINISHED: "Finished transferring input files",
    ev.FileTransferType.OUT_QUEUED: "Entered queue to transfer output files",
    ev.FileTransferType.OUT_STARTED: "Started transferring output files",
    ev.FileTransferType.OUT_FINISHED: "Finished transferring output files",
}

EXECUTABLE_ERROR_TEXT = {1: "Job file not executable.", 2: "Job not properly linked for Condor."}

# Resource names that print with a unit (formatUsageAd).
_RESOURCE_LABELS = {
    "Memory": "Memory (MB)",
    "Disk": "Disk (KB)",
    "Gpus": "Gpus (Average)",
    "GpusMemory": "GpusMemory (MB)",
    "TimeExecute": "TimeExecute (s)",
    "TimeSlotBusy": "TimeSlotBusy (s)",
}


def clean_text(text: str) -> str:
    """Make free text safe for one log line: newlines become ``|``, carriage returns spaces."""
    return text.replace("\r", " ").replace("\n", "|")


def format_time(timestamp: float, *, utc: bool = False, sub_second: bool = False) -> str:
    """The date of an event header in HTCondor's ISO_DATE format (local time unless ``utc``)."""
    secs = int(timestamp)
    tm = time.gmtime(secs) if utc else time.localtime(secs)
    text = time.strftime("%Y-%m-%d %H:%M:%S", tm)
    if sub_second:
        text += f".{int((timestamp - secs) * 1000):03d}"
    return text + ("Z" if utc else "")


def format_rusage(usage: ev.Rusage) -> str:
    """``Usr D HH:MM:SS, Sys D HH:MM:SS`` as HTCondor's ``formatRusage`` prints it."""
    return f"Usr {_dhms(usage.user)}, Sys {_dhms(usage.system)}"


def _dhms(seconds: float) -> str:
    return _dhms_of(int(seconds))


@functools.lru_cache(maxsize=4096)  # quick jobs' usage is mostly "0 00:00:00": formatted once
def _dhms_of(s: int) -> str:
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    return f"{days} {hours:02d}:{minutes:02d}:{s:02d}"


def _num(value: float | None) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value != int(value):
        return f"{value:.2f}"
    return str(int(value))


def format_resources(rows: Iterable[ev.ResourceRow]) -> list[str]:
    """The "Partitionable Resources" table lines, column widths as ``formatUsageAd`` computes them.

    The real reader cuts the rows at the column edges of the header line, so every row is
    padded to those widths even where a column is empty.
    """
    return list(_resource_lines(tuple(rows)))


@functools.lru_cache(maxsize=256)  # a cluster's jobs ask for the same resources: one table each
def _resource_lines(rows: tuple[ev.ResourceRow, ...]) -> tuple[str, ...]:
    rows = sorted(rows, key=lambda r: r.name.lower())
    if not rows:
        return ()
    cells = [[_num(r.usage), _num(r.request), _num(r.allocated), r.assigned or ""] for r in rows]
    # A column that shows a fraction anywhere pads its whole numbers to line up the dots.
    for col in range(3):
        if any("." in c[col] for c in cells):
            for c in cells:
                if c[col].isdigit():
                    c[col] += "   "
    w_res = max([len("Memory (MB)") + 1] + [len(r.name) for r in rows])
    w_use = max([8] + [len(c[0]) for c in cells])
    w_req = max([8] + [len(c[1]) for c in cells])
    w_alloc = max([0] + [len(c[2]) for c in cells])
    w_assigned = max([0] + [len(c[3]) for c in cells])
    lines = [
        f"\tPartitionable Resources : {'Usage':>{w_use}} {'Request':>{w_req}} "
        f"{'Allocated' if w_alloc else '':>{max(w_alloc, 9)}} {'Assigned' if w_assigned else ''}"
    ]
    for row, c in zip(rows, cells):
        label = _RESOURCE_LABELS.get(row.name, row.name)
        lines.append(
            f"\t   {label:<{w_res + 8}} : {c[0]:>{w_use}} {c[1]:>{w_req}} "
            f"{c[2]:>{max(w_alloc, 9)}} {c[3]}"
        )
    return tuple(lines)


def _termination(normal: bool, return_value: int | None, signal: int | None,
                 core_file: str | None) -> list[str]:
    if normal:
        return [f"\t(1) Normal termination (return value {return_value or 0})"]
    core = f"\t(1) Corefile in: {core_file}" if core_file else "\t(0) No core file"
    return [f"\t(0) Abnormal termination (signal {signal or 0})", core]


def _body(event: ev.Event) -> list[str]:
    """The first line (which goes on the header line) and the body lines of one event."""
    match event:
        case ev.SubmitEvent() | ev.ClusterSubmitEvent():
            first = "Job" if isinstance(event, ev.SubmitEvent) else "Cluster"
            lines = [f"{first} submitted from host: {event.submit_host}"]
            lines += [f"    {clean_text(n)}" for n in (event.log_notes, event.user_notes) if n]
            if isinstance(event, ev.SubmitEvent) and event.warnings:
                lines.append(
                    "    WARNING: Committed job submission into the queue with the following "
                    f"warning(s): {clean_text(event.warnings)}"
                )
            return lines
        case ev.ExecuteEvent():
            lines = [f"Job executing on host: {event.execute_host}"]
            if event.slot_name:
                lines.append(f"\tSlotName: {event.slot_name}")
            lines += [f"\t{k} = {event.props[k]}" for k in sorted(event.props, key=str.lower)]
            return lines
        case ev.ExecutableErrorEvent():
            text = EXECUTABLE_ERROR_TEXT.get(event.error_type, "[Bad error number.]")
            return [f"({event.error_type}) {text}"]
        case ev.CheckpointedEvent():
            return [
                "Job was checkpointed.",
                f"\t\t{format_rusage(event.run_remote_usage)}  -  Run Remote Usage",
                f"\t\t{format_rusage(event.run_local_usage)}  -  Run Local Usage",
                f"\t{event.sent_bytes:.0f}  -  Run Bytes Sent By Job For Checkpoint",
            ]
        case ev.JobEvictedEvent():
            if event.terminated_and_requeued:
                how = "\t(0) Job terminated and was requeued"
            elif event.checkpointed:
                how = "\t(1) Job was checkpointed."
            else:
                how = "\t(0) CPU times"
            first = "Job was evicted."
            if event.reason_code is not None:
                first += f" Code {event.reason_code} Subcode {event.reason_subcode or 0}"
            lines = [
                first,
                how,
                f"\t\t{format_rusage(event.run_remote_usage)}  -  Run Remote Usage",
                f"\t\t{format_rusage(event.run_local_usage)}  -  Run Local Usage",
                f"\t{event.sent_bytes:.0f}  -  Run Bytes Sent By Job",
                f"\t{event.received_bytes:.0f}  -  Run Bytes Received By Job",
            ]
            if event.terminated_and_requeued:
                lines += _termination(event.terminated_normally, event.return_value,
                                      event.signal, event.core_file)
            if event.reason:  # HTCondor's formatBody: "Reason: " unless terminated and requeued
                label = "" if event.terminated_and_requeued else "Reason: "
                lines.append(f"\t{label}{clean_text(event.reason)}")
            return lines + format_resources(event.resources)
        case ev.JobTerminatedEvent():
            lines = ["Job terminated."]
            lines += _termination(event.terminated_normally, event.return_value,
                                  event.signal, event.core_file)
            for usage, label in (
                (event.run_remote_usage, "Run Remote Usage"),
                (event.run_local_usage, "Run Local Usage"),
                (event.total_remote_usage, "Total Remote Usage"),
                (event.total_local_usage, "Total Local Usage"),
            ):
                lines.append(f"\t\t{format_rusage(usage)}  -  {label}")
            lines += [
                f"\t{event.sent_bytes:.0f}  -  Run Bytes Sent By Job",
                f"\t{event.received_bytes:.0f}  -  Run Bytes Received By Job",
                f"\t{event.total_sent_bytes:.0f}  -  Total Bytes Sent By Job",
                f"\t{event.total_received_bytes:.0f}  -  Total Bytes Received By Job",
            ]
            lines += format_resources(event.resources)
            if event.toe:
                lines += ["", f"\t{clean_text(event.toe)}"]
            return lines
        case ev.ImageSizeEvent():
            lines = [f"Image size of job updated: {event.size}"]
            for value, label in (
                (event.memory_usage, "MemoryUsage of job (MB)"),
                (event.resident_set_size, "ResidentSetSize of job (KB)"),
                (event.proportional_set_size, "ProportionalSetSize of job (KB)"),
            ):
                if value is not None:
                    lines.append(f"\t{value}  -  {label}")
            return lines
        case ev.ShadowExceptionEvent():
            return [
                "Shadow exception!",
                f"\t{clean_text(event.message)}",
                f"\t{event.sent_bytes:.0f}  -  Run Bytes Sent By Job",
                f"\t{event.received_bytes:.0f}  -  Run Bytes Received By Job",
            ]
        case ev.GenericEvent():
            return [clean_text(event.info)]
        case ev.JobAbortedEvent():
            return ["Job was aborted."] + _reason_line(event.reason)
        case ev.JobSuspendedEvent():
            return ["Job was suspended.", f"\tNumber of processes actually suspended: {event.num_pids}"]
        case ev.JobUnsuspendedEvent():
            return ["Job was unsuspended."]
        case ev.JobHeldEvent():
            reason = clean_text(event.reason) if event.reason else "Reason unspecified"
            return ["Job was held.", f"\t{reason}", f"\tCode {event.code} Subcode {event.subcode}"]
        case ev.JobReleasedEvent():
            return ["Job was released."] + _reason_line(event.reason)
        case ev.PostScriptTerminatedEvent():
            lines = ["POST Script terminated."]
            lines += _termination(event.terminated_normally, event.return_value, event.signal, None)[:1]
            if event.dag_node_name:
                lines.append(f"    DAG Node: {event.dag_node_name}")
            return lines
        case ev.RemoteErrorEvent():
            kind = "Error" if event.critical else "Message"
            lines = [f"{kind} from {event.daemon} on {event.execute_host}:"]
            lines += [f"\t{line}" for line in event.error_msg.replace("\r", " ").split("\n")]
            if event.hold_code:
                lines.append(f"\tCode {event.hold_code} Subcode {event.hold_subcode}")
            return lines
        case ev.JobDisconnectedEvent():
            return [
                "Job disconnected, attempting to reconnect",
                f"    {clean_text(event.reason)}",
                f"    Trying to reconnect to {event.startd_name} {event.startd_addr}",
            ]
        case ev.JobReconnectedEvent():
            return [
                f"Job reconnected to {event.startd_name}",
                f"    startd address: {event.startd_addr}",
                f"    starter address: {event.starter_addr}",
            ]
        case ev.JobReconnectFailedEvent():
            return [
                "Job reconnection failed",
                f"    {clean_text(event.reason)}",
                f"    Can not reconnect to {event.startd_name}, rescheduling job",
            ]
        case ev.JobAdInformationEvent():
            return ["Job ad information event triggered."] + [
                f"{k} = {v}" for k, v in event.attrs.items()
            ]
        case ev.AttributeUpdateEvent():
            if event.old_value is not None:
                return [f"Changing job attribute {event.attribute} from {event.old_value} to {event.value}"]
            return [f"Setting job attribute {event.attribute} to {event.value}"]
        case ev.PreSkipEvent():
            if not event.dag_node_name:
                raise UsageError("a PRESKIP event needs its DAG node name; set dag_node_name")
            return ["PRE script return value is PRE_SKIP value", f"    DAG Node: {event.dag_node_name}"]
        case ev.ClusterRemoveEvent():
            if event.completion < 0:
                state = f"Error {event.completion}"
            else:
                state = {0: "Incomplete", 1: "Complete"}.get(event.completion, "Paused")
            lines = ["Cluster removed",
                     f"\tMaterialized {event.next_proc_id} jobs from {event.next_row} items.\t{state}"]
            return lines + _reason_line(event.notes)
        case ev.FactoryPausedEvent():
            lines = ["Job Materialization Paused"]
            if event.reason or event.pause_code:
                lines.append(f"\t{clean_text(event.reason or '')}")
            if event.pause_code:
                lines.append(f"\tPauseCode {event.pause_code}")
            if event.hold_code:
                lines.append(f"\tHoldCode {event.hold_code}")
            return lines
        case ev.FactoryResumedEvent():
            return ["Job Materialization Resumed"] + _reason_line(event.reason)
        case ev.FileTransferEvent():
            lines = [FILE_TRANSFER_TEXT[ev.FileTransferType(event.transfer_type)]]
            if event.queueing_delay is not None:
                lines.append(f"\tSeconds spent in queue: {event.queueing_delay}")
            if event.host:
                lines.append(f"\tTransferring to host: {event.host}")
            return lines
    raise UsageError(
        f"htc cannot write a {type(event).__name__} to an event log; "
        f"use one of {', '.join(c.__name__ for c in ev.EVENT_CLASSES.values())}"
    )


def _reason_line(reason: str | None) -> list[str]:
    return [f"\t{clean_text(reason)}"] if reason else []


def format_event(event: ev.Event, *, utc: bool = False, sub_second: bool = False) -> str:
    """Render one event in the user-log text format, terminator line included.

    Args:
        event: any event object of :mod:`htc.eventlog.events` except ``UnknownEvent``.
        utc: print the time in UTC with a ``Z`` (HTCondor's ``UTC`` format option).
        sub_second: append milliseconds (``SUB_SECOND``).

    Returns:
        The event's text, ending with ``...\\n``.

    Raises:
        UsageError: the event cannot be written (unknown class, PRESKIP without node name).
    """
    first, *rest = _body(event)
    header = (
        f"{int(event.type):03d} ({event.cluster:03d}.{event.proc:03d}.{event.subproc:03d}) "
        f"{format_time(event.timestamp, utc=utc, sub_second=sub_second)} {first}"
    )
    return "\n".join([header, *rest, "...", ""])


class EventLogWriter:
    """Appends events to one job event log file, safely shared with other writers.

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike, *, utc: bool = False,
                 sub_second: bool = False, fsync: bool = False, fd: int | None = None):
        """Open (creating if needed) the log at ``path`` for appending.

        Args:
            path: the log file; its directory must exist.
            utc: write times in UTC (``Z`` suffix) instead of local time.
            sub_second: write milliseconds.
            fsync: make every :meth:`write` durable before it returns (``ENABLE_USERLOG_FSYNC``).
            fd: a descriptor of ``path`` already open for appending (the schedd opens a job's
                log with the owner's rights); the writer takes it over and closes it.

        Raises:
            UsageError: the file cannot be opened for appending (the message says why).
        """
        self.path = os.fspath(path)
        self._utc = utc
        self._sub_second = sub_second
        self._fsync = fsync
        if fd is not None:
            self._fd = fd
            return
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise UsageError(f"cannot open the job event log {self.path} for writing: {exc.strerror}; "
                             "check that its directory exists and is writable") from None

    def write(self, *events: ev.Event) -> None:
        """Append events as one locked write (durable on return when ``fsync`` is on).

        Raises:
            UsageError: an event cannot be formatted, or the log is closed.
            OSError: the disk refused the write (full, I/O error).
        """
        if self._fd < 0:
            raise UsageError(f"the event log writer for {self.path} is closed; open a new one")
        data = "".join(
            format_event(e, utc=self._utc, sub_second=self._sub_second) for e in events
        ).encode("utf-8")
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            if self._fsync:
                os.fsync(self._fd)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the file; further writes raise ``UsageError``."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> EventLogWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
