"""The schedd's durable job queue (sqlite, WAL) and the job states and policy it enforces.

* :class:`JobQueue` -- open, submit (group commit), query by ClassAd constraint, change states
  through the one transition table, edit, periodic / on-exit policy decisions, history, late
  materialization, job order (the PRIO knob) and autoclusters.
* :mod:`htc.jobqueue.states` -- ``JobStatus`` (HTCondor's numbers), ``HoldReasonCode``, the
  transition table.
* :mod:`htc.jobqueue.policy` -- ``Decision``, ``Action``, ``ExitInfo``, ``SystemPolicy``.

Only this package talks to sqlite. See ``docs/jobqueue.md``.
"""

from htc.jobqueue.ads import JobAd
from htc.jobqueue.policy import Action, Decision, ExitInfo, SystemPolicy
from htc.jobqueue.queue import DEFAULT_PRIO_EXPR, JobQueue
from htc.jobqueue.records import JobId, JobNotFound, QueueStatistics, StatusChange
from htc.jobqueue.states import (TRANSITIONS, HoldReasonCode, IllegalTransition, JobStatus,
                                 check_transition)
from htc.jobqueue.store import QueueFileError, QueueStorageError

__all__ = [
    "Action", "DEFAULT_PRIO_EXPR", "Decision", "ExitInfo", "HoldReasonCode", "IllegalTransition",
    "JobAd", "JobId", "JobNotFound", "JobQueue", "JobStatus", "QueueFileError",
    "QueueStatistics", "QueueStorageError", "StatusChange", "SystemPolicy", "TRANSITIONS",
    "check_transition",
]
