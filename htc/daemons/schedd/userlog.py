"""The job's user log as the schedd writes it: which event, with which fields, for which job.

The core decides; it never opens the log. It returns :class:`WriteUserLog` actions (the
service appends them with :class:`htc.eventlog.writer.EventLogWriter`, one locked, fsynced
write per action) after the queue change they record is committed, so that a reader never
sees an event the queue could take back. The events of a change of a job are also kept in the
job queue's outbox in the change's own transaction (:func:`htc.daemons.schedd.owed.owe`), so
that a schedd killed before it wrote them writes them when it starts. The log is opened with
the rights of the job's owner, never through a link (:func:`open_log`,
:mod:`htc.daemons.owner_files`).

A job's log is its ``UserLog`` attribute (the ``log`` submit command, made absolute by
submit); a job without one gets no events. A job may name a second log, ``DAGManNodesLog``
(the ``dagman_log`` submit command; DAGMan sets it to its ``<dag>.nodes.log``): its events go
there too, as HTCondor's ``WriteUserLog`` writes them, but only the event numbers listed in
``DAGManNodesMask`` (a comma-separated string such as ``"0,1,2,4,5,7,9,10,11,12,13,16,17,24,27"``)
when the job has one. The helpers here read job ads as the queue stores
them (attribute -> ClassAd expression text).
"""

from __future__ import annotations

from collections.abc import Mapping
from htc.config.hostname import sinful
from htc.daemons import owner_files as ofs
from htc.daemons.schedd.events import WriteUserLog
from htc.eventlog import events as ev
from htc.eventlog.writer import EventLogWriter
from htc.jobqueue import HoldReasonCode, JobStatus
from htc.jobqueue.ads import JobAd, parse_literal


def owner(job: Mapping[str, str]) -> str | None:
    """The job's ``Owner`` (None when it has none), whose rights its files are written with."""
    # A queued job's Owner is a column, its string at hand (not quoted to be parsed back).
    name = job.owner if isinstance(job, JobAd) else literal(job, "Owner")
    return name if isinstance(name, str) and name else None


def open_log(path: str, owner_name: str | None, **options) -> EventLogWriter:
    """The user log at ``path`` opened for appending as the schedd writes it: with the rights
    of the job's owner, never through a link, only a regular file
    (:mod:`htc.daemons.owner_files`) -- ``log = /etc/passwd`` is refused as the owner would be.

    Raises:
        OSError: refused or cannot be opened (an
            :class:`~htc.daemons.owner_files.OwnerFileError` says why and for whom).
    """
    who = ofs.Identity.owner(owner_name)
    fd = ofs.open_write(path, who, what="user log", append=True)
    return EventLogWriter(path, fd=fd, **options)


def literal(job: Mapping[str, str], name: str, default=None):
    """The value of a literal attribute of a stored job ad (``default`` when absent or not literal)."""
    text = job.get(name)
    if text is None:
        return default
    try:
        value = parse_literal(text)
    except ValueError:
        return default
    return default if value is None else value


def number(job: Mapping[str, str], name: str, default: float = 0.0) -> float:
    """A numeric literal attribute, ``default`` otherwise."""
    value = literal(job, name, default)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def log_path(job: Mapping[str, str]) -> str | None:
    """The job's user log (``UserLog``), or None when it has none."""
    path = literal(job, "UserLog")
    return path if isinstance(path, str) and path else None


def nodes_log_path(job: Mapping[str, str]) -> str | None:
    """The job's DAG nodes log (``DAGManNodesLog``), or None when it has none."""
    path = literal(job, "DAGManNodesLog")
    return path if isinstance(path, str) and path else None


def nodes_mask(job: Mapping[str, str]) -> frozenset[int] | None:
    """The event numbers ``DAGManNodesMask`` lets into the nodes log (None: every event).

    As HTCondor reads it (``atoi`` of each comma-separated token), a token that is not a
    number counts as event 0."""
    text = literal(job, "DAGManNodesMask")
    if not isinstance(text, str) or not text.strip():
        return None
    numbers = set()
    for token in text.split(","):
        token = token.strip()
        if token:
            digits = token[1:] if token[:1] in "+-" else token
            numbers.add(int(token) if digits.isdigit() else 0)
    return frozenset(numbers) or None


def write(job: Mapping[str, str], *events: ev.Event) -> list[WriteUserLog]:
    """The actions writing ``events`` to ``job``'s log and to its DAG nodes log (masked by
    ``DAGManNodesMask``); nothing for a log the job does not have. A nodes log that is the
    job's own log gets each event once."""
    path, nodes, who = log_path(job), nodes_log_path(job), owner(job)
    out = [WriteUserLog(path, tuple(events), who)] if path and events else []
    if nodes and nodes != path:
        mask = nodes_mask(job)
        chosen = tuple(e for e in events if mask is None or int(e.type) in mask)
        if chosen:
            out.append(WriteUserLog(nodes, chosen, who))
    return out


def ids(job: Mapping[str, str]) -> dict[str, int]:
    """``cluster`` and ``proc`` keyword arguments of an event for ``job``."""
    if isinstance(job, JobAd):  # (its ids are columns: no texts to parse)
        cluster, proc = job.job_id
        return {"cluster": cluster, "proc": proc}
    return {"cluster": int(literal(job, "ClusterId", 0)), "proc": int(literal(job, "ProcId", 0))}


def usage_rusage(usage: Mapping[str, object], prefix: str = "Remote") -> ev.Rusage:
    """``Rusage`` from ``RemoteUserCpu`` / ``RemoteSysCpu`` (or ``Cumulative...``) values."""
    def num(key: str) -> float:
        value = usage.get(key, 0.0)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
    return ev.Rusage(num(f"{prefix}UserCpu"), num(f"{prefix}SysCpu"))


def resources(job_request: Mapping[str, float | None], slot: Mapping[str, object],
              usage: Mapping[str, object]) -> tuple[ev.ResourceRow, ...]:
    """The Partitionable Resources table: usage, request and allocation of Cpus, Disk, Memory."""
    def num(ad: Mapping[str, object], key: str) -> float | None:
        value = ad.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    return (
        ev.ResourceRow("Cpus", None, job_request.get("RequestCpus"), num(slot, "Cpus")),
        ev.ResourceRow("Disk", num(usage, "DiskUsage"), job_request.get("RequestDisk"), num(slot, "Disk")),
        ev.ResourceRow("Memory", num(usage, "MemoryUsage"), job_request.get("RequestMemory"), num(slot, "Memory")),
    )


#: the longest notes line HTCondor writes (``%.8191s`` in SubmitEvent::formatBody)
_MAX_NOTES = 8191


def _notes(job: Mapping[str, str], name: str) -> str | None:
    value = literal(job, name)
    return value[:_MAX_NOTES] if isinstance(value, str) and value else None


def awaits_spooled_input(job: Mapping[str, str]) -> bool:
    """Whether ``job`` was submitted with ``-spool`` and waits for its input (held with
    HoldReasonCode 16, SpoolingInput): its ``UserLog`` names a file on the submitter's machine,
    which the schedd must not write; its SUBMIT event goes to the spool's copy of the log when
    the input arrives (:mod:`htc.daemons.schedd.spool`)."""
    status = job.status if isinstance(job, JobAd) else literal(job, "JobStatus")
    return status == JobStatus.HELD and literal(job, "HoldReasonCode") == HoldReasonCode.SpoolingInput


def submit_writes(job: Mapping[str, str], submit_host: str, now: float) -> list[WriteUserLog]:
    """The SUBMIT event of a job entering the queue at ``now`` (submitted, or materialized by a
    late-materialization cluster), for its logs (:func:`write`).

    A job that awaits spooled input (:func:`awaits_spooled_input`) gets it in its DAG nodes log
    only: its ``UserLog`` is the submitter's file, and its SUBMIT event goes to the spool's copy
    of that log when its input arrives (:mod:`htc.daemons.schedd.spool`), dated when it entered
    the queue (:func:`entered_queue`). HTCondor does the same: its ``rewriteSpooledJobAd``
    rewrites ``UserLog`` into the spool before the SUBMIT event is written, but not
    ``DAGManNodesLog``, which ``WriteUserLog::initialize`` then writes where the job names it.
    """
    event = submit_event(job, submit_host, now)
    if not awaits_spooled_input(job):
        return write(job, event)
    return [action for action in write(job, event) if action.path != log_path(job)]


def entered_queue(job: Mapping[str, str]) -> float:
    """When a job that awaits spooled input entered the queue: submitted or materialized, it
    has been held since (``EnteredCurrentStatus``; a held job is held only once), which a
    materialized proc's ``QDate``, the cluster's, does not say."""
    qdate = job.qdate if isinstance(job, JobAd) else number(job, "QDate")
    return number(job, "EnteredCurrentStatus", float(qdate))


def submit_event(job: Mapping[str, str], submit_host: str, now: float) -> ev.SubmitEvent:
    """000: the job is in the queue; its notes lines are ``SubmitEventNotes`` (condor_submit's
    ``submit_event_notes``; DAGMan's ``DAG Node: NAME``) and ``SubmitEventUserNotes``."""
    return ev.SubmitEvent(**ids(job), timestamp=now, submit_host=submit_host,
                          log_notes=_notes(job, "SubmitEventNotes"), user_notes=_notes(job, "SubmitEventUserNotes"))


def startd_sinful(startd: str, slot_name: str) -> str:
    """The startd's address as HTCondor writes it in the user log (a sinful string whose
    ``sock=`` is the startd's socket and ``alias`` the host of ``slot_name``; htc.config.hostname)."""
    return sinful(startd, slot_name.rpartition("@")[2])  # slot1@alt@host: the host


def execute_event(job: Mapping[str, str], startd: str, slot_name: str, slot: Mapping[str, object],
                  now: float) -> ev.ExecuteEvent:
    """001: the job runs on ``slot_name`` (props: the slot's Cpus, Memory, Disk)."""
    props = {key: str(slot[key]) for key in ("Cpus", "Disk", "Memory")
             if isinstance(slot.get(key), (int, float)) and not isinstance(slot.get(key), bool)}
    return ev.ExecuteEvent(**ids(job), timestamp=now, execute_host=startd_sinful(startd, slot_name), slot_name=slot_name or None,
                           props=props)


def terminated_event(job: Mapping[str, str], exit_code: int | None, exit_signal: int | None,
                     core_dumped: bool, usage: Mapping[str, object], total: Mapping[str, object],
                     job_request: Mapping[str, float | None], slot: Mapping[str, object],
                     now: float) -> ev.JobTerminatedEvent:
    """005: the job finished (normally with ``exit_code``, or by ``exit_signal``)."""
    normal = exit_signal is None
    return ev.JobTerminatedEvent(
        **ids(job), timestamp=now, terminated_normally=normal,
        return_value=exit_code if normal else None, signal=None if normal else exit_signal,
        core_file="core" if core_dumped else None,
        run_remote_usage=usage_rusage(usage), total_remote_usage=usage_rusage(total, "CumulativeRemote"),
        resources=resources(job_request, slot, usage))


def requeued_event(job: Mapping[str, str], exit_code: int | None, exit_signal: int | None,
                   usage: Mapping[str, object], reason: str, now: float) -> ev.JobEvictedEvent:
    """004 ``Job terminated and was requeued``: the job exited and its policy runs it again."""
    normal = exit_signal is None
    return ev.JobEvictedEvent(**ids(job), timestamp=now, terminated_and_requeued=True,
                              terminated_normally=normal, return_value=exit_code if normal else None,
                              signal=None if normal else exit_signal, run_remote_usage=usage_rusage(usage),
                              reason=reason)


#: what a vacated standard-universe job's exit report says of its vacate's image
#: (:mod:`htc.daemons.startd.reports`): kept by the checkpoint store, or why not
VACATE_CHECKPOINT_ATTRS = ("VacateCheckpointed", "VacateCheckpointError")


def evicted_event(job: Mapping[str, str], usage: Mapping[str, object], reason: str,
                  now: float) -> ev.JobEvictedEvent:
    """004: the job left its slot without finishing and is idle again.

    ``(1) Job was checkpointed.`` when the run's ``usage`` says its vacate's image was kept
    (``VacateCheckpointed``), as HTCondor's standard universe wrote it; when it says why the
    image was not (``VacateCheckpointError``), the reason notes it and what the job resumes
    from: its previous image (``CheckpointNumber``), or the start.
    """
    error = usage.get("VacateCheckpointError")
    if isinstance(error, str) and error:
        kept = int(number(job, "CheckpointNumber"))
        resume = f"it resumes from its checkpoint {kept}" if kept > 0 else "it has no checkpoint: it starts again"
        reason = f"{reason}; {error}: {resume}" if reason else f"{error}: {resume}"
    return ev.JobEvictedEvent(**ids(job), timestamp=now, run_remote_usage=usage_rusage(usage), reason=reason,
                              checkpointed=usage.get("VacateCheckpointed") is True)


def held_event(job: Mapping[str, str], reason: str, code: int, subcode: int, now: float) -> ev.JobHeldEvent:
    """012: the job is held."""
    return ev.JobHeldEvent(**ids(job), timestamp=now, reason=reason, code=code, subcode=subcode)


def released_event(job: Mapping[str, str], reason: str, now: float) -> ev.JobReleasedEvent:
    """013: the job was released from hold."""
    return ev.JobReleasedEvent(**ids(job), timestamp=now, reason=reason or None)


def aborted_event(job: Mapping[str, str], reason: str, now: float) -> ev.JobAbortedEvent:
    """009: the job was removed."""
    return ev.JobAbortedEvent(**ids(job), timestamp=now, reason=reason or None)


def image_size_event(job: Mapping[str, str], usage: Mapping[str, object], now: float) -> ev.ImageSizeEvent:
    """006: the job's memory use grew."""
    def whole(key: str) -> int | None:
        value = usage.get(key)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return ev.ImageSizeEvent(**ids(job), timestamp=now, size=whole("ImageSize") or 0,
                             memory_usage=whole("MemoryUsage"), resident_set_size=whole("ResidentSetSize"))


def shadow_exception_event(job: Mapping[str, str], message: str, now: float) -> ev.ShadowExceptionEvent:
    """007: the shadow could not run the job; it is idle again."""
    return ev.ShadowExceptionEvent(**ids(job), timestamp=now, message=message)


def suspended_event(job: Mapping[str, str], num_pids: int, now: float) -> ev.JobSuspendedEvent:
    """010: the job was suspended."""
    return ev.JobSuspendedEvent(**ids(job), timestamp=now, num_pids=num_pids)


def unsuspended_event(job: Mapping[str, str], now: float) -> ev.JobUnsuspendedEvent:
    """011: the job runs again."""
    return ev.JobUnsuspendedEvent(**ids(job), timestamp=now)


def disconnected_event(job: Mapping[str, str], reason: str, slot_name: str, startd: str,
                       now: float) -> ev.JobDisconnectedEvent:
    """022: the shadow lost its starter and will try to reconnect."""
    return ev.JobDisconnectedEvent(**ids(job), timestamp=now, reason=reason, startd_name=slot_name,
                                   startd_addr=startd_sinful(startd, slot_name))


def reconnected_event(job: Mapping[str, str], slot_name: str, startd: str, now: float) -> ev.JobReconnectedEvent:
    """023: the shadow found its starter again within the job lease."""
    return ev.JobReconnectedEvent(**ids(job), timestamp=now, startd_name=slot_name, startd_addr=startd_sinful(startd, slot_name),
                                  starter_addr=startd_sinful(startd, slot_name))


def reconnect_failed_event(job: Mapping[str, str], reason: str, slot_name: str,
                           now: float) -> ev.JobReconnectFailedEvent:
    """024: the job could not be found again; it is rescheduled."""
    return ev.JobReconnectFailedEvent(**ids(job), timestamp=now, reason=reason, startd_name=slot_name)


def attribute_update_event(job: Mapping[str, str], attr: str, value: str, old: str | None,
                           now: float) -> ev.AttributeUpdateEvent:
    """033: a tool changed a job attribute."""
    return ev.AttributeUpdateEvent(**ids(job), timestamp=now, attribute=attr, value=value, old_value=old)


__all__ = [name for name in dir() if name.endswith("_event")] + [
    "WriteUserLog", "awaits_spooled_input", "entered_queue", "submit_writes", "open_log", "owner", "literal",
    "number", "log_path", "nodes_log_path", "nodes_mask", "write", "ids", "usage_rusage", "resources"]
