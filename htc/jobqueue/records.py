"""Small records the job queue returns, and its not-found error."""

from __future__ import annotations

from dataclasses import dataclass, field

from htc.errors import UsageError
from htc.eventlog.events import EventType
from htc.jobqueue.states import JobStatus

#: A job's id: (ClusterId, ProcId).
JobId = tuple[int, int]


class JobNotFound(UsageError):
    """No job with that id is in the queue (it may have left for the history)."""


@dataclass(frozen=True)
class StatusChange:
    """The result of one job-state change: what to log and whether the job left the queue."""

    job_id: JobId
    old: JobStatus
    new: JobStatus
    event: EventType
    left_queue: bool = False
    cluster_removed: bool = False


@dataclass(frozen=True)
class QueueStatistics:
    """Counts of what the queue holds."""

    clusters: int
    jobs: int
    by_status: dict[JobStatus, int] = field(default_factory=dict)
    history: int = 0
    #: transactions this JobQueue object committed since it was opened (group commit
    #: makes this smaller than the number of submits)
    commits: int = 0
