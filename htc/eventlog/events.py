"""The job events htc writes to and reads from a job event log ("user log").

One frozen dataclass per event type, named as HTCondor's C++ classes and the ``MyType`` the
``htcondor2`` reader reports (``SubmitEvent``, ``JobTerminatedEvent``, ...). Every event carries
the job it is about (``cluster``, ``proc``, ``subproc``) and its time (``timestamp``, Unix
seconds). Field names are Python names for the attributes ``htcondor2.JobEvent`` exposes; the
docstring of each class names those attributes where they differ.

:mod:`htc.eventlog.writer` turns these objects into HTCondor's text format and
:mod:`htc.eventlog.reader` turns the text back into them.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import ClassVar, Mapping


class EventType(enum.IntEnum):
    """Event numbers, as ``htcondor2.JobEventType`` numbers them (the 3-digit code of a header)."""

    SUBMIT = 0
    EXECUTE = 1
    EXECUTABLE_ERROR = 2
    CHECKPOINTED = 3
    JOB_EVICTED = 4
    JOB_TERMINATED = 5
    IMAGE_SIZE = 6
    SHADOW_EXCEPTION = 7
    GENERIC = 8
    JOB_ABORTED = 9
    JOB_SUSPENDED = 10
    JOB_UNSUSPENDED = 11
    JOB_HELD = 12
    JOB_RELEASED = 13
    NODE_EXECUTE = 14
    NODE_TERMINATED = 15
    POST_SCRIPT_TERMINATED = 16
    GLOBUS_SUBMIT = 17
    GLOBUS_SUBMIT_FAILED = 18
    GLOBUS_RESOURCE_UP = 19
    GLOBUS_RESOURCE_DOWN = 20
    REMOTE_ERROR = 21
    JOB_DISCONNECTED = 22
    JOB_RECONNECTED = 23
    JOB_RECONNECT_FAILED = 24
    GRID_RESOURCE_UP = 25
    GRID_RESOURCE_DOWN = 26
    GRID_SUBMIT = 27
    JOB_AD_INFORMATION = 28
    JOB_STATUS_UNKNOWN = 29
    JOB_STATUS_KNOWN = 30
    JOB_STAGE_IN = 31
    JOB_STAGE_OUT = 32
    ATTRIBUTE_UPDATE = 33
    PRESKIP = 34
    CLUSTER_SUBMIT = 35
    CLUSTER_REMOVE = 36
    FACTORY_PAUSED = 37
    FACTORY_RESUMED = 38
    NONE = 39
    FILE_TRANSFER = 40
    RESERVE_SPACE = 41
    RELEASE_SPACE = 42
    FILE_COMPLETE = 43
    FILE_USED = 44
    FILE_REMOVED = 45
    DATAFLOW_JOB_SKIPPED = 46
    COMMON_FILES = 47


class FileTransferType(enum.IntEnum):
    """The ``Type`` of a FILE_TRANSFER event; each has one fixed first line."""

    IN_QUEUED = 1
    IN_STARTED = 2
    IN_FINISHED = 3
    OUT_QUEUED = 4
    OUT_STARTED = 5
    OUT_FINISHED = 6


@dataclass(frozen=True, slots=True)
class Rusage:
    """CPU time of a process group, printed as ``Usr D HH:MM:SS, Sys D HH:MM:SS``."""

    user: float = 0.0
    system: float = 0.0


@dataclass(frozen=True, slots=True)
class ResourceRow:
    """One row of the "Partitionable Resources" table of a terminate or evict event.

    ``name`` is the machine attribute (``Cpus``, ``Disk``, ``Memory``, ``Gpus``,
    ``TimeExecute``...); a value of ``None`` leaves that column empty.
    """

    name: str
    usage: float | None = None
    request: float | None = None
    allocated: float | None = None
    assigned: str | None = None


@dataclass(frozen=True, kw_only=True)
class Event:
    """Fields every event has: the job (cluster.proc.subproc) and the time (Unix seconds)."""

    type: ClassVar[EventType]
    cluster: int
    proc: int = 0
    subproc: int = 0
    timestamp: float = field(default_factory=time.time)

    @property
    def job_id(self) -> str:
        """The job as ``cluster.proc``, the way users name it."""
        return f"{self.cluster}.{self.proc}"


@dataclass(frozen=True, kw_only=True)
class SubmitEvent(Event):
    """000: the job entered the queue. ``log_notes`` carries ``DAG Node: X`` for DAGMan."""

    type = EventType.SUBMIT
    submit_host: str = ""
    log_notes: str | None = None
    user_notes: str | None = None
    warnings: str | None = None


@dataclass(frozen=True, kw_only=True)
class ExecuteEvent(Event):
    """001: the job started on ``execute_host``; ``props`` are ``Attr = expr`` lines (Cpus, Memory...)."""

    type = EventType.EXECUTE
    execute_host: str = ""
    slot_name: str | None = None
    props: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ExecutableErrorEvent(Event):
    """002: the executable could not run: 1 not executable, 2 not properly linked."""

    type = EventType.EXECUTABLE_ERROR
    error_type: int = 1


@dataclass(frozen=True, kw_only=True)
class CheckpointedEvent(Event):
    """003: the job wrote a checkpoint (``sent_bytes`` is the checkpoint's size)."""

    type = EventType.CHECKPOINTED
    run_remote_usage: Rusage = Rusage()
    run_local_usage: Rusage = Rusage()
    sent_bytes: float = 0


@dataclass(frozen=True, kw_only=True)
class JobEvictedEvent(Event):
    """004: the job left its machine without finishing (preempted, vacated, requeued).

    When ``terminated_and_requeued`` the job did exit (normally with ``return_value``, or by
    ``signal``) and its policy put it back in the queue.
    """

    type = EventType.JOB_EVICTED
    checkpointed: bool = False
    run_remote_usage: Rusage = Rusage()
    run_local_usage: Rusage = Rusage()
    sent_bytes: float = 0
    received_bytes: float = 0
    terminated_and_requeued: bool = False
    terminated_normally: bool = False
    return_value: int | None = None
    signal: int | None = None
    core_file: str | None = None
    reason: str | None = None
    reason_code: int | None = None
    reason_subcode: int | None = None
    resources: tuple[ResourceRow, ...] = ()


@dataclass(frozen=True, kw_only=True)
class JobTerminatedEvent(Event):
    """005: the job finished, normally (``return_value``) or by a ``signal``."""

    type = EventType.JOB_TERMINATED
    terminated_normally: bool = True
    return_value: int | None = 0
    signal: int | None = None
    core_file: str | None = None
    run_remote_usage: Rusage = Rusage()
    run_local_usage: Rusage = Rusage()
    total_remote_usage: Rusage = Rusage()
    total_local_usage: Rusage = Rusage()
    sent_bytes: float = 0
    received_bytes: float = 0
    total_sent_bytes: float = 0
    total_received_bytes: float = 0
    resources: tuple[ResourceRow, ...] = ()
    toe: str | None = None


@dataclass(frozen=True, kw_only=True)
class ImageSizeEvent(Event):
    """006: memory use update: image size (KB), MemoryUsage (MB), RSS and PSS (KB)."""

    type = EventType.IMAGE_SIZE
    size: int = 0
    memory_usage: int | None = None
    resident_set_size: int | None = None
    proportional_set_size: int | None = None


@dataclass(frozen=True, kw_only=True)
class ShadowExceptionEvent(Event):
    """007: the shadow failed; the job goes back to idle."""

    type = EventType.SHADOW_EXCEPTION
    message: str = ""
    sent_bytes: float = 0
    received_bytes: float = 0


@dataclass(frozen=True, kw_only=True)
class GenericEvent(Event):
    """008: one line of free text (``Info``)."""

    type = EventType.GENERIC
    info: str = ""


@dataclass(frozen=True, kw_only=True)
class JobAbortedEvent(Event):
    """009: the job was removed (``via condor_rm (by user alice)``)."""

    type = EventType.JOB_ABORTED
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class JobSuspendedEvent(Event):
    """010: the job was suspended (``NumberOfPIDs``)."""

    type = EventType.JOB_SUSPENDED
    num_pids: int = 0


@dataclass(frozen=True, kw_only=True)
class JobUnsuspendedEvent(Event):
    """011: the job was resumed."""

    type = EventType.JOB_UNSUSPENDED


@dataclass(frozen=True, kw_only=True)
class JobHeldEvent(Event):
    """012: the job was held (``HoldReason``, ``HoldReasonCode``, ``HoldReasonSubCode``)."""

    type = EventType.JOB_HELD
    reason: str | None = None
    code: int = 0
    subcode: int = 0


@dataclass(frozen=True, kw_only=True)
class JobReleasedEvent(Event):
    """013: the job was released from hold."""

    type = EventType.JOB_RELEASED
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class PostScriptTerminatedEvent(Event):
    """016: a DAGMan POST script finished."""

    type = EventType.POST_SCRIPT_TERMINATED
    terminated_normally: bool = True
    return_value: int | None = 0
    signal: int | None = None
    dag_node_name: str | None = None


@dataclass(frozen=True, kw_only=True)
class RemoteErrorEvent(Event):
    """021: an error (or, when not ``critical``, a message) from a daemon on the execute side."""

    type = EventType.REMOTE_ERROR
    daemon: str = ""
    execute_host: str = ""
    error_msg: str = ""
    critical: bool = True
    hold_code: int = 0
    hold_subcode: int = 0


@dataclass(frozen=True, kw_only=True)
class JobDisconnectedEvent(Event):
    """022: the shadow lost the starter; it will try to reconnect."""

    type = EventType.JOB_DISCONNECTED
    reason: str = ""
    startd_name: str = ""
    startd_addr: str = ""


@dataclass(frozen=True, kw_only=True)
class JobReconnectedEvent(Event):
    """023: the shadow reconnected to the starter within the job lease."""

    type = EventType.JOB_RECONNECTED
    startd_name: str = ""
    startd_addr: str = ""
    starter_addr: str = ""


@dataclass(frozen=True, kw_only=True)
class JobReconnectFailedEvent(Event):
    """024: the lease expired before a reconnect; the job is rescheduled."""

    type = EventType.JOB_RECONNECT_FAILED
    reason: str = ""
    startd_name: str = ""


@dataclass(frozen=True, kw_only=True)
class JobAdInformationEvent(Event):
    """028: selected job attributes (``Attr = expr`` lines)."""

    type = EventType.JOB_AD_INFORMATION
    attrs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class AttributeUpdateEvent(Event):
    """033: the schedd changed a job attribute (``condor_prio``, ``condor_qedit``)."""

    type = EventType.ATTRIBUTE_UPDATE
    attribute: str = ""
    value: str = ""
    old_value: str | None = None


@dataclass(frozen=True, kw_only=True)
class PreSkipEvent(Event):
    """034: a DAGMan PRE script returned the PRE_SKIP value."""

    type = EventType.PRESKIP
    dag_node_name: str = ""


@dataclass(frozen=True, kw_only=True)
class ClusterSubmitEvent(Event):
    """035: a late-materialization cluster (job factory) was submitted."""

    type = EventType.CLUSTER_SUBMIT
    submit_host: str = ""
    log_notes: str | None = None
    user_notes: str | None = None


@dataclass(frozen=True, kw_only=True)
class ClusterRemoveEvent(Event):
    """036: a job factory is finished.

    ``completion`` is HTCondor's number: 1 Complete, 0 Incomplete, 2 Paused, negative Error.
    """

    type = EventType.CLUSTER_REMOVE
    COMPLETE: ClassVar[int] = 1
    INCOMPLETE: ClassVar[int] = 0
    PAUSED: ClassVar[int] = 2
    next_proc_id: int = 0
    next_row: int = 0
    completion: int = 1
    notes: str | None = None


@dataclass(frozen=True, kw_only=True)
class FactoryPausedEvent(Event):
    """037: late materialization of a cluster paused (held cluster, materialization error)."""

    type = EventType.FACTORY_PAUSED
    reason: str | None = None
    pause_code: int = 0
    hold_code: int = 0


@dataclass(frozen=True, kw_only=True)
class FactoryResumedEvent(Event):
    """038: late materialization of a cluster resumed."""

    type = EventType.FACTORY_RESUMED
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class FileTransferEvent(Event):
    """040: a sandbox transfer was queued, started or finished (``Type`` 1-6)."""

    type = EventType.FILE_TRANSFER
    transfer_type: FileTransferType = FileTransferType.IN_QUEUED
    queueing_delay: int | None = None
    host: str | None = None


@dataclass(frozen=True, kw_only=True)
class UnknownEvent(Event):
    """An event this reader has no class for: its number, first line and raw body lines."""

    type = EventType.NONE
    number: int = -1
    head: str = ""
    body: tuple[str, ...] = ()


#: Event class for each event number htc knows how to write and read.
EVENT_CLASSES: dict[EventType, type[Event]] = {
    cls.type: cls
    for cls in (
        SubmitEvent, ExecuteEvent, ExecutableErrorEvent, CheckpointedEvent, JobEvictedEvent,
        JobTerminatedEvent, ImageSizeEvent, ShadowExceptionEvent, GenericEvent,
        JobAbortedEvent, JobSuspendedEvent, JobUnsuspendedEvent, JobHeldEvent,
        JobReleasedEvent, PostScriptTerminatedEvent, RemoteErrorEvent, JobDisconnectedEvent,
        JobReconnectedEvent, JobReconnectFailedEvent, JobAdInformationEvent,
        AttributeUpdateEvent, PreSkipEvent, ClusterSubmitEvent, ClusterRemoveEvent,
        FactoryPausedEvent, FactoryResumedEvent, FileTransferEvent,
    )
}
