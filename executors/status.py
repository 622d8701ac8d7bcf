"""A call's life, as one table: the statuses a future shows and the events that move them.

Theory of operation
-------------------
A call's *status* (``future.status``) is finer than a ``concurrent.futures.Future``'s state:
the future only knows pending, running and finished, while a job can also wait for its
parents, be evicted and go back to idle, or be retried after the pool failed it. The executor
feeds every job change it learns of (from the schedd, or the local backend) into
:func:`advance`, which looks ``(status, event)`` up in :data:`TRANSITIONS`. The executor then
makes the future follow, calling exactly one of the ``Future`` methods per change:

=====================  =========================================================
new status             the future
=====================  =========================================================
RUNNING (first time)   ``set_running_or_notify_cancel()``
COMPLETED              ``set_result(value)``
FAILED                 ``set_exception(exc)``
anything else          nothing: the future stays pending (or running)
=====================  =========================================================

An evicted call stays *running* as far as ``concurrent.futures`` goes (a future cannot go
back to pending), while ``status`` says ``evicted`` and then ``idle`` and ``evictions``
counts. :func:`advance` applies the table through :func:`htc.transitions.transition`, like
every state table of htc: a step that is not in it raises
:class:`~htc.transitions.IllegalTransition`, naming the call, its status and the event, and
listing the legal events -- a bug, never a user error.

The diagram in docs/executor.md is generated from the table by :func:`diagram`.
"""

from __future__ import annotations

import enum

from htc.transitions import legal_events, transition

__all__ = ["CallEvent", "CallStatus", "TRANSITIONS", "advance", "diagram"]


class CallStatus(str, enum.Enum):
    """What a call is doing, as ``future.status`` shows it."""

    WAITING = "waiting"  # for the futures among its arguments
    SUBMITTING = "submitting"  # batched in the client, not yet in the queue
    IDLE = "idle"  # in the queue, waiting for a slot
    RUNNING = "running"
    EVICTED = "evicted"  # was running; the slot was taken back; will run again
    RETRYING = "retrying"  # the pool failed it (transfer, starter); it will run again
    COMPLETED = "completed"  # returned a value
    FAILED = "failed"  # raised, died, was held, or could not run
    CANCELLED = "cancelled"  # cancel() or shutdown(cancel_futures=True) removed it

    @property
    def done(self) -> bool:
        """True for the statuses a call never leaves."""
        return self in (CallStatus.COMPLETED, CallStatus.FAILED, CallStatus.CANCELLED)


class CallEvent(str, enum.Enum):
    """Something that happened to a call's job."""

    PARENTS_DONE = "parents done"
    SUBMITTED = "submitted"
    STARTED = "started"
    REQUEUED = "requeued"  # an evicted or retried job is idle again
    EVICTED = "evicted"
    INFRA_FAILURE = "infrastructure failure"  # retried automatically
    RETURNED = "returned"
    FAILED = "failed"  # raised (retries exhausted), died, held, removed by others, parent failed
    CANCELLED = "cancelled"


W, SUB, I, R, EV, RT, C, F, X = (CallStatus.WAITING, CallStatus.SUBMITTING, CallStatus.IDLE, CallStatus.RUNNING,
                                 CallStatus.EVICTED, CallStatus.RETRYING, CallStatus.COMPLETED, CallStatus.FAILED,
                                 CallStatus.CANCELLED)
E = CallEvent

#: (status, event) -> new status; nothing else is legal
TRANSITIONS: dict[tuple[CallStatus, CallEvent], CallStatus] = {
    (W, E.PARENTS_DONE): SUB,
    (W, E.FAILED): F,
    (W, E.CANCELLED): X,
    (SUB, E.SUBMITTED): I,
    (SUB, E.FAILED): F,
    (SUB, E.CANCELLED): X,
    (I, E.STARTED): R,
    (I, E.INFRA_FAILURE): RT,
    (I, E.RETURNED): C,  # it ran and finished between two looks
    (I, E.FAILED): F,
    (I, E.CANCELLED): X,
    (R, E.STARTED): R,  # a new run (after a user-exception retry) while we looked away
    (R, E.EVICTED): EV,
    (R, E.INFRA_FAILURE): RT,
    (R, E.REQUEUED): I,  # max_retries: the call raised and runs again
    (R, E.RETURNED): C,
    (R, E.FAILED): F,
    (R, E.CANCELLED): X,
    (EV, E.REQUEUED): I,
    (EV, E.STARTED): R,
    (EV, E.EVICTED): EV,
    (EV, E.INFRA_FAILURE): RT,
    (EV, E.RETURNED): C,
    (EV, E.FAILED): F,
    (EV, E.CANCELLED): X,
    (RT, E.REQUEUED): I,
    (RT, E.STARTED): R,
    (RT, E.EVICTED): EV,
    (RT, E.INFRA_FAILURE): RT,
    (RT, E.RETURNED): C,
    (RT, E.FAILED): F,
    (RT, E.CANCELLED): X,
}

del W, SUB, I, R, EV, RT, C, F, X, E


def advance(call: str, status: CallStatus, event: CallEvent) -> CallStatus:
    """The status after ``event``.

    Args:
        call: the call's name (job id or call id) for the message.
        status: its status now.
        event: what happened.

    Returns:
        The new status.

    Raises:
        IllegalTransition: the table has no such step; the message names the call, its
            status and the event, and lists the legal events.
    """
    def explain() -> str:
        legal = sorted(e.value for e in legal_events(TRANSITIONS, status))
        hint = f"from {status.value} the legal events are {', '.join(legal)}" if legal else \
            f"{status.value} is final"
        return f"call {call} is {status.value} and cannot take the event {event.value!r}: {hint}"

    return transition(TRANSITIONS, f"call {call}", status, event, explain=explain)


def diagram() -> str:
    """The table as a Mermaid state diagram (docs/executor.md embeds it; a test keeps it current)."""
    lines = ["stateDiagram-v2", "    [*] --> submitting", "    [*] --> waiting: a future among the arguments"]
    for (old, event), new in TRANSITIONS.items():
        if old is not new:
            lines.append(f"    {old.value} --> {new.value}: {event.value}")
    for final in ("completed", "failed", "cancelled"):
        lines.append(f"    {final} --> [*]")
    return "\n".join(lines)
