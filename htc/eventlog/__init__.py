"""The job event log ("user log"): HTCondor's text format, written and read.

* :mod:`htc.eventlog.events` -- one dataclass per event type (``SubmitEvent``,
  ``JobTerminatedEvent``, ...), and ``EventType`` with HTCondor's event numbers.
* :mod:`htc.eventlog.writer` -- :class:`EventLogWriter` appends events, safe to share.
* :mod:`htc.eventlog.reader` -- :func:`read_events` and :class:`EventLogReader`, which follows
  a growing log and returns complete events only.
* :mod:`htc.eventlog.parsing` -- one event's date and lines read into its event object.

See ``docs/eventlog.md``.
"""

from htc.eventlog.events import (EVENT_CLASSES, AttributeUpdateEvent, CheckpointedEvent,
                                 ClusterRemoveEvent, ClusterSubmitEvent, Event, EventType,
                                 ExecutableErrorEvent, ExecuteEvent, FactoryPausedEvent,
                                 FactoryResumedEvent, FileTransferEvent, FileTransferType,
                                 GenericEvent, ImageSizeEvent, JobAbortedEvent,
                                 JobAdInformationEvent, JobDisconnectedEvent, JobEvictedEvent,
                                 JobHeldEvent, JobReconnectedEvent, JobReconnectFailedEvent,
                                 JobReleasedEvent, JobSuspendedEvent, JobTerminatedEvent,
                                 JobUnsuspendedEvent, PostScriptTerminatedEvent, PreSkipEvent,
                                 RemoteErrorEvent, ResourceRow, Rusage, ShadowExceptionEvent,
                                 SubmitEvent, UnknownEvent)
from htc.eventlog.reader import EventLogReader, parse_time, read_events
from htc.eventlog.writer import EventLogWriter, format_event

__all__ = [
    "EVENT_CLASSES", "Event", "EventType", "FileTransferType", "ResourceRow", "Rusage",
    "EventLogReader", "EventLogWriter", "format_event", "parse_time", "read_events",
    "AttributeUpdateEvent", "CheckpointedEvent", "ClusterRemoveEvent", "ClusterSubmitEvent",
    "ExecutableErrorEvent", "ExecuteEvent", "FactoryPausedEvent", "FactoryResumedEvent",
    "FileTransferEvent", "GenericEvent", "ImageSizeEvent", "JobAbortedEvent",
    "JobAdInformationEvent", "JobDisconnectedEvent", "JobEvictedEvent", "JobHeldEvent",
    "JobReconnectedEvent", "JobReconnectFailedEvent", "JobReleasedEvent", "JobSuspendedEvent",
    "JobTerminatedEvent", "JobUnsuspendedEvent", "PostScriptTerminatedEvent", "PreSkipEvent",
    "RemoteErrorEvent", "ShadowExceptionEvent", "SubmitEvent", "UnknownEvent",
]
