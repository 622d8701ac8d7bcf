"""The master's view of one daemon it runs, as a table.

Theory of operation
-------------------
Each daemon of DAEMON_LIST is a small state machine, :data:`DAEMON_MACHINE`, keyed by
``(state, event)`` and valued ``(new state, effect)``. The states are the ones ``htc status
-master`` shows (``Running``, ``Backoff``, ``GaveUp`` ...); the events are what can happen to a
daemon: an administrator's command (on, off, restart), the service's report of a spawn or an
exit, or a timer ending (a backoff, a kill grace). The core (:mod:`htc.daemons.master.core`)
decides which event an exit is -- a crash, a crash too many, an exit asking not to be restarted
-- and applies the table with :func:`htc.transitions.transition`; the :class:`Effect` of a row
says what the core does on that step (the core maps each effect to one of its methods).

A step that is not in the table is a bug in the master and raises
:class:`~htc.transitions.IllegalTransition` naming the daemon, the state and the event.

The Starting state lasts only until the service reports the spawn, which it does before any other
event, so it needs no other rows. docs/daemons.md embeds :func:`machine_table` (a test keeps it
current).
"""

from __future__ import annotations

import enum


class DState(enum.Enum):
    """Where one daemon of the master stands."""

    OFF = "Off"
    STARTING = "Starting"
    RUNNING = "Running"
    STOPPING = "Stopping"
    RESTARTING = "Restarting"
    BACKOFF = "Backoff"
    GAVE_UP = "GaveUp"


class Ev(enum.Enum):
    """What can happen to one daemon of the master."""

    ON = "on"
    OFF = "off"
    RESTART = "restart"
    SPAWNED = "spawned"
    SPAWN_FAILED = "spawn failed"
    SPAWN_FAILED_TOO_OFTEN = "spawn failed too often"
    CRASHED = "crashed"
    CRASHED_TOO_OFTEN = "crashed too often"
    EXITED_NO_RESTART = "exited asking not to be restarted"
    EXITED = "exited"
    BACKOFF_DONE = "backoff done"
    KILL_TIMEOUT = "kill timeout"


class Effect(enum.Enum):
    """What the master does on a step (docs/daemons.md says what each one means)."""

    SPAWN = "spawn"                        # start ``python -m htc.daemons <name>``
    RUNNING = "running"                    # record the pid and the start time
    SCHEDULE_RESTART = "schedule_restart"  # set the backoff timer
    GIVE_UP = "give_up"                    # log, and mail the administrator
    TERMINATE = "terminate"                # SIGTERM / SIGQUIT, and set the kill timer
    KILL = "kill"                          # SIGKILL
    STOPPED = "stopped"                    # record the exit
    CANCEL_RESTART = "cancel_restart"      # drop the backoff timer


S, E, X = DState, Ev, Effect
#: (state, event) -> (new state, effect); effect None means no action
DAEMON_MACHINE: dict[tuple[DState, Ev], tuple[DState, Effect | None]] = {
    (S.OFF, E.ON): (S.STARTING, X.SPAWN),
    (S.OFF, E.RESTART): (S.STARTING, X.SPAWN),
    (S.OFF, E.OFF): (S.OFF, None),
    (S.STARTING, E.SPAWNED): (S.RUNNING, X.RUNNING),
    (S.STARTING, E.SPAWN_FAILED): (S.BACKOFF, X.SCHEDULE_RESTART),
    (S.STARTING, E.SPAWN_FAILED_TOO_OFTEN): (S.GAVE_UP, X.GIVE_UP),
    (S.RUNNING, E.ON): (S.RUNNING, None),
    (S.RUNNING, E.OFF): (S.STOPPING, X.TERMINATE),
    (S.RUNNING, E.RESTART): (S.RESTARTING, X.TERMINATE),
    (S.RUNNING, E.CRASHED): (S.BACKOFF, X.SCHEDULE_RESTART),
    (S.RUNNING, E.CRASHED_TOO_OFTEN): (S.GAVE_UP, X.GIVE_UP),
    (S.RUNNING, E.EXITED_NO_RESTART): (S.OFF, X.STOPPED),
    (S.STOPPING, E.ON): (S.RESTARTING, None),
    (S.STOPPING, E.RESTART): (S.RESTARTING, None),
    (S.STOPPING, E.OFF): (S.STOPPING, X.TERMINATE),  # a fast off hurries a graceful one
    (S.STOPPING, E.EXITED): (S.OFF, X.STOPPED),
    (S.STOPPING, E.KILL_TIMEOUT): (S.STOPPING, X.KILL),
    (S.RESTARTING, E.ON): (S.RESTARTING, None),
    (S.RESTARTING, E.RESTART): (S.RESTARTING, None),
    (S.RESTARTING, E.OFF): (S.STOPPING, X.TERMINATE),
    (S.RESTARTING, E.EXITED): (S.STARTING, X.SPAWN),
    (S.RESTARTING, E.KILL_TIMEOUT): (S.RESTARTING, X.KILL),
    (S.BACKOFF, E.BACKOFF_DONE): (S.STARTING, X.SPAWN),
    (S.BACKOFF, E.ON): (S.STARTING, X.SPAWN),
    (S.BACKOFF, E.RESTART): (S.STARTING, X.SPAWN),
    (S.BACKOFF, E.OFF): (S.OFF, X.CANCEL_RESTART),
    (S.GAVE_UP, E.ON): (S.STARTING, X.SPAWN),
    (S.GAVE_UP, E.RESTART): (S.STARTING, X.SPAWN),
    (S.GAVE_UP, E.OFF): (S.OFF, None),
}
del S, E, X

#: events by which an administrator (not a crash) starts a daemon: they clear its restart count
BY_COMMAND = frozenset({Ev.ON, Ev.RESTART, Ev.EXITED})


def machine_table() -> str:
    """:data:`DAEMON_MACHINE` as a Markdown table (docs/daemons.md embeds it; a test keeps it current)."""
    lines = ["| state | event | new state | effect |", "|---|---|---|---|"]
    for (state, ev), (new, effect) in DAEMON_MACHINE.items():
        lines.append(f"| {state.value} | {ev.value} | {new.value} | {effect.value if effect else '-'} |")
    return "\n".join(lines)
