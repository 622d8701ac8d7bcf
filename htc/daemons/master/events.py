"""What the master's core and its service say to each other, beyond the shared vocabulary.

The service reports what happened to a child process (:class:`ChildStarted`,
:class:`SpawnFailed`, :class:`ChildExited`); the core asks it to start one (:class:`Spawn`),
signal one (:class:`SignalChild`) or tell the administrator (:class:`Notify`). The generic
events and actions (``Started``, ``Tick``, ``Received``, ``Send``, ``Log`` ...) are in
:mod:`htc.daemons.core`.

:data:`DAEMON_NO_RESTART` is the exit status by which a daemon asks its master not to restart
it; ``python -m htc.daemons`` exits with it when restarting cannot help.
"""

from __future__ import annotations

from dataclasses import dataclass

from htc.daemons import core as c

#: exit status with which a daemon tells its master not to restart it (HTCondor's value)
DAEMON_NO_RESTART = 4


@dataclass(frozen=True)
class ChildStarted(c.Event):
    """The service started ``daemon`` as process ``pid``."""

    daemon: str
    pid: int


@dataclass(frozen=True)
class SpawnFailed(c.Event):
    """The service could not start ``daemon``."""

    daemon: str
    error: str


@dataclass(frozen=True)
class ChildExited(c.Event):
    """Process ``pid`` of ``daemon`` ended; ``returncode`` < 0 means killed by that signal."""

    daemon: str
    pid: int
    returncode: int


@dataclass(frozen=True)
class Spawn(c.Action):
    """Start ``daemon`` (``python -m htc.daemons <daemon>``); answer ChildStarted or SpawnFailed."""

    daemon: str


@dataclass(frozen=True)
class SignalChild(c.Action):
    """Send ``signum`` to process ``pid`` of ``daemon``."""

    daemon: str
    pid: int
    signum: int


@dataclass(frozen=True)
class Notify(c.Action):
    """Tell the administrator: run ``argv`` with ``body`` on its standard input."""

    argv: tuple[str, ...]
    body: str
