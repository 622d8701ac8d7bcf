"""The body of one job event log event: its date, and its lines read into an event object.

:func:`parse_event` turns the fields of one event (its number, ids, date, first line and body
lines, as :class:`~htc.eventlog.reader.EventLogReader` splits them off the file) into the
event's dataclass, leniently: a missing optional line leaves the field at its default, a code
htc does not know becomes an :class:`~htc.eventlog.events.UnknownEvent`. :func:`parse_time`
reads a header date. What repeats from event to event -- dates, usage lines, resource tables
-- is read once (bounded memos), since a busy log repeats little else.
"""

from __future__ import annotations

import calendar
import functools
import re
import time

from htc.eventlog import events as ev
from htc.eventlog.writer import FILE_TRANSFER_TEXT

__all__ = ["parse_event", "parse_time", "split_header"]

_ISO = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(\.\d+)?(Z)?$")
_LEGACY = re.compile(r"^(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)?$")
_RUSAGE = re.compile(r"Usr (\d+) (\d+):(\d+):(\d+), Sys (\d+) (\d+):(\d+):(\d+)")
_TERM_NORMAL = re.compile(r"\((\d)\) Normal termination \(return value (-?\d+)\)")
_TERM_SIGNAL = re.compile(r"\((\d)\) Abnormal termination \(signal (-?\d+)\)")
_BYTES = re.compile(r"^(-?[\d.]+)  -  (Run|Total) Bytes (Sent|Received) By Job$")
_CODE = re.compile(r"^Code (-?\d+) Subcode (-?\d+)$")
_TRANSFER_TYPES = {text: kind for kind, text in FILE_TRANSFER_TEXT.items()}


def parse_time(text: str) -> float:
    """Unix seconds of a header date (ISO_DATE local, ``Z`` UTC, full ISO, or legacy ``MM/DD``).

    Raises:
        ValueError: the text is not a date in any of these formats.
    """
    seconds = _iso_time(text)
    if seconds is not None:
        return seconds
    m = _LEGACY.match(text)
    if m:
        # The legacy format has no year: HTCondor's reader assumes the current one (so the
        # value is worked out each time).
        year = time.localtime().tm_year
        fields = (year,) + tuple(int(g) for g in m.groups()[:5])
        frac = float(m.group(6)) if m.group(6) else 0.0
        return time.mktime(fields + (0, 0, -1)) + frac
    raise ValueError(f"{text!r} is not an event log date")


# The events of one second share their date, and ``mktime`` costs more than the rest of a
# small event's parsing: each date text is read once. (A process that changes its time zone
# with ``time.tzset`` keeps the old zone's readings of the dates it has seen.)
@functools.lru_cache(maxsize=4096)
def _iso_time(text: str) -> float | None:
    """The seconds of an ISO date text (None: not one)."""
    m = _ISO.match(text)
    if not m:
        return None
    fields = tuple(int(g) for g in m.groups()[:6])
    frac = float(m.group(7)) if m.group(7) else 0.0
    if m.group(8):
        return calendar.timegm(fields + (0, 0, 0)) + frac
    return time.mktime(fields + (0, 0, -1)) + frac


def split_header(line: str) -> tuple[float, str]:
    """Split the rest of a header line into (time, first body line)."""
    first, _, rest = line.partition(" ")
    if "T" in first or first.endswith("Z"):  # one-token ISO 8601 date
        return parse_time(first), rest
    second, _, rest = rest.partition(" ")
    return parse_time(f"{first} {second}"), rest


# Usage lines and resource tables repeat from event to event (a cluster's calls ask for the
# same resources, and quick calls use no whole second): each distinct one is read once.
@functools.lru_cache(maxsize=1024)
def _rusage(line: str) -> ev.Rusage:
    m = _RUSAGE.search(line)
    if not m:
        return ev.Rusage()
    g = [int(x) for x in m.groups()]
    return ev.Rusage(g[0] * 86400 + g[1] * 3600 + g[2] * 60 + g[3],
                     g[4] * 86400 + g[5] * 3600 + g[6] * 60 + g[7])


def _number(text: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value == int(value) and "." not in text else value


def _resources(lines: list[str]) -> tuple[ev.ResourceRow, ...]:
    """Rows of a "Partitionable Resources" table, cut at the header's column edges."""
    start = next((i for i, l in enumerate(lines) if l.strip().startswith("Partitionable Resources")), None)
    if start is None:
        return ()
    return _resource_rows(tuple(lines[start:]))


@functools.lru_cache(maxsize=256)
def _resource_rows(lines: tuple[str, ...]) -> tuple[ev.ResourceRow, ...]:
    header = lines[0]
    table = header[header.index(":") + 1:]
    cut_use = len(table) - len(table.lstrip()) + len("Usage")
    cut_req = table.index("Request") + len("Request") if "Request" in table else cut_use + 9
    cut_alloc = table.index("Allocated") + len("Allocated") if "Allocated" in table else None
    rows = []
    for line in lines[1:]:
        name_part, colon, values = line.partition(":")
        if not colon:
            break
        name = name_part.split()[0] if name_part.split() else ""
        usage = _number(values[:cut_use])
        request = _number(values[cut_use:cut_req])
        allocated = _number(values[cut_req:cut_alloc]) if cut_alloc else None
        assigned = values[cut_alloc:].strip() if cut_alloc else ""
        rows.append(ev.ResourceRow(name, usage, request, allocated, assigned or None))
    return tuple(rows)


def _bytes(lines: list[str]) -> dict[str, float]:
    out = {}
    for line in lines:
        if "By Job" not in line:
            continue
        m = _BYTES.match(line.strip())
        if m:
            key = ("total_" if m.group(2) == "Total" else "") + m.group(3).lower()
            out[key] = float(m.group(1))
    return out


def _termination(lines: list[str]) -> dict:
    for i, line in enumerate(lines):
        m = _TERM_NORMAL.search(line)
        if m:
            return {"terminated_normally": True, "return_value": int(m.group(2)), "signal": None}
        m = _TERM_SIGNAL.search(line)
        if m:
            core = None
            if i + 1 < len(lines) and "Corefile in: " in lines[i + 1]:
                core = lines[i + 1].split("Corefile in: ", 1)[1]
            return {"terminated_normally": False, "return_value": None,
                    "signal": int(m.group(2)), "core_file": core}
    return {}


def _after(line: str, prefix: str) -> str:
    return line.split(prefix, 1)[1].strip() if prefix in line else ""


def _notes(lines: list[str]) -> list[str]:
    return [l.strip() for l in lines if l.startswith("    ") and not l.strip().startswith("WARNING:")]


# Quick jobs' TERMINATED events differ in their header only (the same exit, usage rounded to
# the second, bytes and resource table): each body is read once.
@functools.lru_cache(maxsize=1024)
def _terminated(body: tuple[str, ...]) -> dict:
    """The fields of a TERMINATED event read from its body lines (values all immutable)."""
    lines = list(body)
    nbytes = _bytes(lines)
    toe = next((l.strip() for l in lines if l.strip().startswith("Job terminated of its own accord")), None)
    return dict(
        **_termination(lines),
        run_remote_usage=_rusage(_find(lines, "Run Remote Usage")),
        run_local_usage=_rusage(_find(lines, "Run Local Usage")),
        total_remote_usage=_rusage(_find(lines, "Total Remote Usage")),
        total_local_usage=_rusage(_find(lines, "Total Local Usage")),
        sent_bytes=nbytes.get("sent", 0.0), received_bytes=nbytes.get("received", 0.0),
        total_sent_bytes=nbytes.get("total_sent", 0.0),
        total_received_bytes=nbytes.get("total_received", 0.0),
        resources=_resources(lines), toe=toe,
    )


def parse_event(code: int, cluster: int, proc: int, subproc: int, timestamp: float,
                first: str, body: list[str]) -> ev.Event:
    """Build the event object for one event's header fields, first line and body lines."""
    base = {"cluster": cluster, "proc": proc, "subproc": subproc, "timestamp": timestamp}
    t = ev.EventType
    try:
        kind = ev.EventType(code)
    except ValueError:
        kind = None
    stripped = [l.strip() for l in body]
    if kind == t.SUBMIT or kind == t.CLUSTER_SUBMIT:
        notes = _notes(body)
        extra = {"warnings": _after(next((l for l in body if "WARNING:" in l), ""), "warning(s): ") or None} \
            if kind == t.SUBMIT else {}
        cls = ev.SubmitEvent if kind == t.SUBMIT else ev.ClusterSubmitEvent
        return cls(**base, submit_host=_after(first, "submitted from host:"),
                   log_notes=notes[0] if notes else None,
                   user_notes=notes[1] if len(notes) > 1 else None, **extra)
    if kind == t.EXECUTE:
        slot = next((l.split(":", 1)[1].strip() for l in stripped if l.startswith("SlotName:")), None)
        props = dict(
            (k.strip(), v.strip()) for k, _, v in (l.partition("=") for l in stripped if " = " in l)
        )
        return ev.ExecuteEvent(**base, execute_host=_after(first, "executing on host:"),
                               slot_name=slot, props=props)
    if kind == t.EXECUTABLE_ERROR:
        m = re.match(r"\((\d+)\)", first)
        return ev.ExecutableErrorEvent(**base, error_type=int(m.group(1)) if m else 0)
    if kind == t.CHECKPOINTED:
        sent = next((_number(l.split("  -  ")[0]) for l in stripped if "For Checkpoint" in l), 0)
        return ev.CheckpointedEvent(**base, run_remote_usage=_rusage(_find(body, "Run Remote Usage")),
                                    run_local_usage=_rusage(_find(body, "Run Local Usage")),
                                    sent_bytes=float(sent or 0))
    if kind == t.JOB_EVICTED:
        how = stripped[0] if stripped else ""
        requeued = "terminated and was requeued" in how
        term = _termination(body) if requeued else {}
        nbytes = _bytes(body)
        # The reason is the first free-text line after the usage, bytes and termination lines.
        reason = None
        for l in stripped[1:]:
            if l.startswith("Partitionable"):
                break
            if l and not l.startswith(("(", "Usr ")) and not _BYTES.match(l):
                reason = l.removeprefix("Reason: ")  # (HTCondor's prefix when not requeued)
                break
        code = re.search(r"Code (-?\d+) Subcode (-?\d+)", first)
        return ev.JobEvictedEvent(
            **base, checkpointed=how.startswith("(1)"), terminated_and_requeued=requeued,
            run_remote_usage=_rusage(_find(body, "Run Remote Usage")),
            run_local_usage=_rusage(_find(body, "Run Local Usage")),
            sent_bytes=nbytes.get("sent", 0.0), received_bytes=nbytes.get("received", 0.0),
            reason=reason, resources=_resources(body),
            reason_code=int(code.group(1)) if code else None,
            reason_subcode=int(code.group(2)) if code else None,
            **{k: v for k, v in term.items()},
        )
    if kind == t.JOB_TERMINATED:
        return ev.JobTerminatedEvent(**base, **_terminated(tuple(body)))
    if kind == t.IMAGE_SIZE:
        def value(label: str) -> int | None:
            line = _find(body, label)
            return int(line.split("  -  ")[0]) if line else None
        return ev.ImageSizeEvent(**base, size=int(_after(first, "updated:") or 0),
                                 memory_usage=value("MemoryUsage of job"),
                                 resident_set_size=value("ResidentSetSize of job"),
                                 proportional_set_size=value("ProportionalSetSize of job"))
    if kind == t.SHADOW_EXCEPTION:
        nbytes = _bytes(body)
        message = stripped[0] if stripped and not _BYTES.match(stripped[0]) else ""
        return ev.ShadowExceptionEvent(**base, message=message, sent_bytes=nbytes.get("sent", 0.0),
                                       received_bytes=nbytes.get("received", 0.0))
    if kind == t.GENERIC:
        return ev.GenericEvent(**base, info=first)
    if kind == t.JOB_ABORTED:
        return ev.JobAbortedEvent(**base, reason=stripped[0] if stripped else None)
    if kind == t.JOB_SUSPENDED:
        return ev.JobSuspendedEvent(**base, num_pids=int(_after(_find(body, "suspended:"), "suspended:") or 0))
    if kind == t.JOB_UNSUSPENDED:
        return ev.JobUnsuspendedEvent(**base)
    if kind == t.JOB_HELD:
        code = next((_CODE.match(l) for l in stripped if _CODE.match(l)), None)
        reason = stripped[0] if stripped and not _CODE.match(stripped[0]) else None
        return ev.JobHeldEvent(**base, reason=None if reason == "Reason unspecified" else reason,
                               code=int(code.group(1)) if code else 0,
                               subcode=int(code.group(2)) if code else 0)
    if kind == t.JOB_RELEASED:
        return ev.JobReleasedEvent(**base, reason=stripped[0] if stripped else None)
    if kind == t.POST_SCRIPT_TERMINATED:
        term = _termination(body)
        term.pop("core_file", None)
        node = next((_after(l, "DAG Node:") for l in stripped if l.startswith("DAG Node:")), None)
        return ev.PostScriptTerminatedEvent(**base, **term, dag_node_name=node)
    if kind == t.REMOTE_ERROR:
        m = re.match(r"^(\w+) from (.*?) on (.*):$", first)
        code = next((_CODE.match(l) for l in stripped if _CODE.match(l)), None)
        msg = [l[1:] if l.startswith("\t") else l for l in body if not _CODE.match(l.strip())]
        return ev.RemoteErrorEvent(**base, daemon=m.group(2) if m else "",
                                   execute_host=m.group(3) if m else "",
                                   critical=(m.group(1) == "Error") if m else True,
                                   error_msg="\n".join(msg),
                                   hold_code=int(code.group(1)) if code else 0,
                                   hold_subcode=int(code.group(2)) if code else 0)
    if kind == t.JOB_DISCONNECTED:
        target = _after(_find(body, "Trying to reconnect to"), "Trying to reconnect to")
        name, _, addr = target.partition(" ")
        return ev.JobDisconnectedEvent(**base, reason=stripped[0] if stripped else "",
                                       startd_name=name, startd_addr=addr)
    if kind == t.JOB_RECONNECTED:
        return ev.JobReconnectedEvent(**base, startd_name=_after(first, "reconnected to"),
                                      startd_addr=_after(_find(body, "startd address:"), "startd address:"),
                                      starter_addr=_after(_find(body, "starter address:"), "starter address:"))
    if kind == t.JOB_RECONNECT_FAILED:
        name = _after(_find(body, "Can not reconnect to"), "Can not reconnect to")
        return ev.JobReconnectFailedEvent(**base, reason=stripped[0] if stripped else "",
                                          startd_name=name.rsplit(", rescheduling job", 1)[0])
    if kind == t.JOB_AD_INFORMATION:
        attrs = {k.strip(): v.strip() for k, _, v in (l.partition("=") for l in stripped if "=" in l)}
        return ev.JobAdInformationEvent(**base, attrs=attrs)
    if kind == t.ATTRIBUTE_UPDATE:
        m = re.match(r"^Changing job attribute (\S+) from (.*) to (.*)$", first)
        if m:
            return ev.AttributeUpdateEvent(**base, attribute=m.group(1), old_value=m.group(2),
                                           value=m.group(3))
        m = re.match(r"^Setting job attribute (\S+) to (.*)$", first)
        return ev.AttributeUpdateEvent(**base, attribute=m.group(1) if m else "",
                                       value=m.group(2) if m else "")
    if kind == t.PRESKIP:
        note = stripped[0] if stripped else ""
        return ev.PreSkipEvent(**base, dag_node_name=_after(note, "DAG Node:") or note)
    if kind == t.CLUSTER_REMOVE:
        m = re.search(r"Materialized (\d+) jobs from (\d+) items\.\s*(\w*)\s*(-?\d*)", "\n".join(stripped))
        completion = 0
        if m:
            state = m.group(3).lower()
            completion = {"complete": 1, "paused": 2, "incomplete": 0}.get(state, 0)
            if state == "error":
                completion = int(m.group(4) or -1)
        notes = [l for l in stripped if not l.startswith("Materialized")]
        return ev.ClusterRemoveEvent(**base, next_proc_id=int(m.group(1)) if m else 0,
                                     next_row=int(m.group(2)) if m else 0, completion=completion,
                                     notes=notes[0] if notes else None)
    if kind == t.FACTORY_PAUSED:
        fields = {"reason": None, "pause_code": 0, "hold_code": 0}
        for l in stripped:
            if l.startswith("PauseCode "):
                fields["pause_code"] = int(l.split()[1])
            elif l.startswith("HoldCode "):
                fields["hold_code"] = int(l.split()[1])
            elif fields["reason"] is None and l:
                fields["reason"] = l
        return ev.FactoryPausedEvent(**base, **fields)
    if kind == t.FACTORY_RESUMED:
        return ev.FactoryResumedEvent(**base, reason=stripped[0] if stripped else None)
    if kind == t.FILE_TRANSFER and first in _TRANSFER_TYPES:
        delay = _after(_find(body, "Seconds spent in queue:"), "Seconds spent in queue:")
        host = _after(_find(body, "Transferring to host:"), "Transferring to host:")
        return ev.FileTransferEvent(**base, transfer_type=_TRANSFER_TYPES[first],
                                    queueing_delay=int(delay) if delay else None, host=host or None)
    return ev.UnknownEvent(**base, number=code, head=first, body=tuple(body))


def _find(lines: list[str], needle: str) -> str:
    return next((l for l in lines if needle in l), "")
