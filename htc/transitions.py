"""State machines as tables: one way to apply them, one error when a step is not in the table.

Every state machine of htc -- a job's status in the queue, a startd slot's state and activity,
the master's view of a child daemon, the schedd's shadow of a running job -- is a dictionary
whose keys are ``(state, event)`` and whose values say where the step leads (the new state, or a
row with the new state and the manual's labels). The table is the documentation: the docs'
diagrams are drawn from it, and :func:`transition` is the only code that applies one.

A step that is not in the table raises :class:`IllegalTransition`. Whether that is the user's
mistake (holding a job that already completed) or a bug in a daemon (a starter that reports a
job it was never given) is for the machine to say, through ``explain``; the default message
names the machine, the state and the event.

This module sits at the bottom of the layers (beside :mod:`htc.errors`) because the job queue
and the daemons both use it.
"""

from __future__ import annotations

from typing import Callable, Hashable, Mapping, TypeVar

from htc.errors import UsageError

V = TypeVar("V")


def name_of(x: object) -> str:
    """How a state or an event is named in messages: an enum's name, else its text."""
    if isinstance(x, tuple):
        return "/".join(name_of(part) for part in x)
    return getattr(x, "name", None) or str(x)


class IllegalTransition(UsageError):
    """A state machine was asked for a step its table has no row for.

    Attributes:
        machine: which machine (``"master: COLLECTOR"``, ``"job 12.0"``, ``"startd: slot1"``).
        state: where it was (a tuple for machines keyed by several parts, like a slot's
            state and activity).
        event: the step it was asked for.
    """

    def __init__(self, machine: str, state: object, event: object, message: str | None = None):
        super().__init__(message or (
            f"{machine}: no transition from state {name_of(state)} on event {name_of(event)}; "
            "this is a bug in htc, please report it with the daemon log"))
        self.machine = machine
        self.state = state
        self.event = event


def transition(table: Mapping[tuple, V], machine: str, state: Hashable, event: Hashable, *,
               explain: Callable[[], str] | None = None) -> V:
    """Look up the step ``event`` causes from ``state`` in ``table``.

    Args:
        table: the machine, ``{(state, event): value}``; a machine whose state has several
            parts keys its rows ``(part1, part2, event)`` and passes ``state`` as the tuple
            ``(part1, part2)``.
        machine: names the machine in the error.
        state, event: where the machine is and what happened.
        explain: builds the error's message when the step is illegal (default: a message that
            names machine, state and event and calls it a bug).

    Returns:
        The table's value for the step.

    Raises:
        IllegalTransition: the table has no such row.
    """
    key = (*state, event) if isinstance(state, tuple) else (state, event)
    try:
        return table[key]
    except KeyError:
        raise IllegalTransition(machine, state, event, explain() if explain else None) from None


def legal_events(table: Mapping[tuple, object], state: Hashable) -> list[object]:
    """The events ``table`` accepts from ``state`` (for messages that list them)."""
    prefix = state if isinstance(state, tuple) else (state,)
    return [key[-1] for key in table if tuple(key[:-1]) == prefix]
