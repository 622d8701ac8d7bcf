"""The master's conversation: turning its daemons off, on and over, and reporting on them."""

from __future__ import annotations

from typing import Literal

from htc.wire.messages.common import Ack
from htc.wire.messages.schema import Count, DaemonName, Message, NonEmpty, Record, Seconds

ShutdownHow = Literal["graceful", "fast"]


class DaemonsOff(Message, frozen=True):
    """Stop ``daemons`` (empty: all but the master); ``include_master`` stops the master too."""

    reply_type = Ack
    daemons: tuple[DaemonName, ...] = ()
    how: ShutdownHow = "graceful"
    include_master: bool = False


class DaemonsOn(Message, frozen=True):
    """Start ``daemons`` (empty: every daemon of DAEMON_LIST), also ones the master gave up on."""

    reply_type = Ack
    daemons: tuple[DaemonName, ...] = ()


class DaemonsRestart(Message, frozen=True):
    """Stop then start ``daemons`` (empty: every daemon the master runs)."""

    reply_type = Ack
    daemons: tuple[DaemonName, ...] = ()
    how: ShutdownHow = "graceful"


class DaemonStatus(Record, frozen=True):
    """One daemon as its master sees it."""

    name: DaemonName
    state: NonEmpty
    pid: Count | None = None
    restarts: Count = 0
    since: Seconds = 0.0
    next_start: Seconds | None = None


class MasterStatus(Message, frozen=True):
    """The master's view of its daemons."""

    master_pid: Count
    shutting_down: bool = False
    daemons: tuple[DaemonStatus, ...] = ()


class QueryMaster(Message, frozen=True):
    """Ask a master for the state of its daemons."""

    reply_type = MasterStatus
