"""The one table of legal job-state transitions (the job status and hold reason numbers are
:mod:`htc.job_codes`, re-exported here).

Theory of operation
-------------------
A job's ``JobStatus`` uses HTCondor's own numbers (``htcondor2.JobStatus``): Idle 1,
Running 2, Removed 3, Completed 4, Held 5, Transferring output 6, Suspended 7. Every status
change in the queue goes through :func:`check_transition`, which looks the pair
``(old, new)`` up in :data:`TRANSITIONS`; a pair that is not in the table is refused with an
error naming the job, its state and the requested state. Nothing else in htc decides which
changes are legal.

Each entry of the table also names the job event log event that records the change (an
``EventType`` of :mod:`htc.eventlog.events`), so a caller that changed a status knows which
event to write: Idle -> Running is ``EXECUTE``, Running -> Idle is ``JOB_EVICTED``, and so on.

Removed and Completed are the two *terminal* states. A job that reaches one of them leaves
the queue for the history table: at once when nothing runs it, or, for a job that was still
running when it was removed, once the schedd reports that it stopped (``JobQueue.retire``).

The state diagram in ``docs/jobqueue.md`` is generated from the table by :func:`diagram`.
"""

from __future__ import annotations

from htc.errors import UsageError
from htc.eventlog.events import EventType
from htc.job_codes import HoldReasonCode, JobStatus  # noqa: F401  (re-exported)
from htc.transitions import IllegalTransition, transition  # noqa: F401  (IllegalTransition re-exported)




S = JobStatus

#: The legal job-state changes, and the user-log event that records each.
TRANSITIONS: dict[tuple[JobStatus, JobStatus], EventType] = {
    (S.IDLE, S.RUNNING): EventType.EXECUTE,
    (S.IDLE, S.HELD): EventType.JOB_HELD,
    (S.IDLE, S.REMOVED): EventType.JOB_ABORTED,
    (S.RUNNING, S.IDLE): EventType.JOB_EVICTED,
    (S.RUNNING, S.COMPLETED): EventType.JOB_TERMINATED,
    (S.RUNNING, S.TRANSFERRING_OUTPUT): EventType.FILE_TRANSFER,
    (S.RUNNING, S.SUSPENDED): EventType.JOB_SUSPENDED,
    (S.RUNNING, S.HELD): EventType.JOB_HELD,
    (S.RUNNING, S.REMOVED): EventType.JOB_ABORTED,
    (S.TRANSFERRING_OUTPUT, S.COMPLETED): EventType.JOB_TERMINATED,
    (S.TRANSFERRING_OUTPUT, S.IDLE): EventType.JOB_EVICTED,
    (S.TRANSFERRING_OUTPUT, S.HELD): EventType.JOB_HELD,
    (S.TRANSFERRING_OUTPUT, S.REMOVED): EventType.JOB_ABORTED,
    (S.SUSPENDED, S.RUNNING): EventType.JOB_UNSUSPENDED,
    (S.SUSPENDED, S.IDLE): EventType.JOB_EVICTED,
    (S.SUSPENDED, S.HELD): EventType.JOB_HELD,
    (S.SUSPENDED, S.REMOVED): EventType.JOB_ABORTED,
    (S.HELD, S.IDLE): EventType.JOB_RELEASED,
    (S.HELD, S.REMOVED): EventType.JOB_ABORTED,
}

#: States in which a shadow (and a starter somewhere) is attached to the job.
ACTIVE_STATES = frozenset({S.RUNNING, S.SUSPENDED, S.TRANSFERRING_OUTPUT})
#: States from which no transition leads anywhere: the job is on its way to history.
TERMINAL_STATES = frozenset({S.REMOVED, S.COMPLETED})
#: States a freshly submitted job may have (``hold = true`` submits on hold).
INITIAL_STATES = frozenset({S.IDLE, S.HELD})

del S


def _refusal(job: str, old: JobStatus, new: JobStatus) -> str:
    """The message of a refused change: what the job is, and where it may go from there."""
    allowed = sorted(n.name for (o, n) in TRANSITIONS if o == old)
    hint = (f"from {old.name} it may go to {', '.join(allowed)}" if allowed
            else f"{old.name} is terminal; the job is leaving the queue")
    return f"job {job} is {old.name} and cannot become {new.name}: {hint}"


def check_transition(job: str, old: int, new: int) -> EventType:
    """Check one job-state change against :data:`TRANSITIONS`.

    Args:
        job: the job's id as text (``"12.3"``), used in the error message.
        old: its current ``JobStatus``.
        new: the requested ``JobStatus``.

    Returns:
        The user-log event type that records this change.

    Raises:
        UsageError: ``new`` is not a job status number.
        IllegalTransition: the table has no such change; the message lists the legal ones.
    """
    try:
        new_status = JobStatus(new)
    except ValueError:
        raise UsageError(
            f"{new!r} is not a job status; use one of "
            + ", ".join(f"{s.value} ({s.name})" for s in JobStatus)
        ) from None
    old_status = JobStatus(old)
    return transition(TRANSITIONS, f"job {job}", old_status, new_status,
                      explain=lambda: _refusal(job, old_status, new_status))


def diagram() -> str:
    """The transition table as a Mermaid state diagram (the one in ``docs/jobqueue.md``).

    Returns:
        Mermaid source text, one line per transition, in table order.
    """
    lines = ["stateDiagram-v2", "    [*] --> IDLE", "    [*] --> HELD: hold = true"]
    for (old, new), event in TRANSITIONS.items():
        lines.append(f"    {old.name} --> {new.name}: {event.name}")
    lines.append("    REMOVED --> [*]: history")
    lines.append("    COMPLETED --> [*]: history")
    return "\n".join(lines)
