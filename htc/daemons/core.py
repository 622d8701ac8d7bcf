"""The vocabulary between a daemon's sans-IO core and its asyncio service.

A core is a plain object::

    class Collector:
        def handle(self, event: Event, now: float) -> list[Action]: ...
        def next_deadline(self) -> float | None: ...

The service (:mod:`htc.daemons.service`) turns the world into *events* (a message arrived, a
deadline passed, SIGTERM), calls ``handle`` with the wall-clock time, and carries out the
*actions* it gets back (send a reply, send a message to another daemon, write a log line,
exit).  ``next_deadline`` is how a core schedules: the service wakes it with :class:`Tick` once
the time returned has come.  A core test is a list of events and a number for ``now``.

Generic events and actions live here; a daemon adds its own (the master's ``Spawn``,
``ChildExited``) in its module, and its service subclass executes them.

State machines are dictionaries ``{(state, event): new_state}`` applied by :func:`transition`
(:mod:`htc.transitions`), so the table is the documentation; an illegal step raises
:class:`IllegalTransition`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from htc import transitions as _transitions
from htc.wire import messages
from htc.wire.transport import PeerInfo

# --- events: the service tells the core -----------------------------------------------------


class Event:
    """Base of everything a service feeds into a core."""


@dataclass(frozen=True)
class Started(Event):
    """The service is listening; the core may start its work."""


@dataclass(frozen=True)
class Tick(Event):
    """The time returned by ``next_deadline`` has come."""


@dataclass(frozen=True)
class Received(Event):
    """A message arrived on connection ``conn_id``; answer with :class:`Reply` to that id."""

    msg: messages.Message
    conn_id: int = 0
    peer: PeerInfo = PeerInfo()


@dataclass(frozen=True)
class SendDone(Event):
    """A :class:`Send` was answered with ``reply`` (None for messages that expect no reply)."""

    to: str
    msg: messages.Message
    reply: messages.Message | None
    cookie: Any = None


@dataclass(frozen=True)
class SendFailed(Event):
    """A :class:`Send` could not be delivered or was refused; ``error`` says why."""

    to: str
    msg: messages.Message
    error: str
    cookie: Any = None


@dataclass(frozen=True)
class StopRequested(Event):
    """SIGTERM (graceful) or SIGQUIT (``fast``): finish up and return :class:`Exit`."""

    fast: bool = False


@dataclass(frozen=True)
class Reconfigured(Event):
    """The configuration was re-read (SIGHUP or a Reconfig message); ``settings`` is new."""

    settings: Any


# --- actions: the core tells the service --------------------------------------------------------


class Action:
    """Base of everything a core asks its service to do."""


@dataclass(frozen=True)
class Reply(Action):
    """Send ``msg`` on the connection a :class:`Received` came from."""

    conn_id: int
    msg: messages.Message


@dataclass(frozen=True)
class Send(Action):
    """Deliver ``msg`` to the daemon at ``to``; the outcome comes back as SendDone / SendFailed."""

    to: str
    msg: messages.Message
    cookie: Any = None
    timeout: float = 30.0


@dataclass(frozen=True)
class Log(Action):
    """Write one line to the daemon log."""

    text: str
    level: int = logging.INFO


@dataclass(frozen=True)
class Exit(Action):
    """Stop serving and leave the process with ``status``."""

    status: int = 0


class Core(Protocol):
    """What a service drives; see the module header."""

    def handle(self, event: Event, now: float) -> list[Action]: ...

    def next_deadline(self) -> float | None: ...


def dispatch(table: Mapping[type, Callable[..., None]], daemon: str, core: object, event: Event, now: float,
             out: list[Action]) -> None:
    """Run the handler ``table`` holds for the type of ``event``: ``handler(core, event, now, out)``.

    A core's ``handle`` is this lookup in its table of functions (never a chain of isinstance
    tests or method names built from strings), so a reader finds every event's handler in one place.

    Raises:
        TypeError: the table has no handler for this type of event (a bug in the service).
    """
    handler = table.get(type(event))
    if handler is None:
        raise TypeError(f"{daemon}: unexpected event {event!r}")
    handler(core, event, now, out)


def unknown_request(event: Received, daemon: str) -> Reply:
    """The reply to a message this daemon does not handle."""
    return Reply(event.conn_id, messages.ErrorReply(
        code="unknown_request",
        message=f"the {daemon} does not handle {type(event.msg).__name__} messages; "
                "check which daemon the tool should talk to"))


def bad_request(event: Received, text: str) -> Reply:
    """The reply to a well-formed message that makes no sense here."""
    return Reply(event.conn_id, messages.ErrorReply(code="bad_request", message=text))


# --- state machines ------------------------------------------------------------------------------

# One way to apply a table and one error, shared with the job queue (:mod:`htc.transitions`).
IllegalTransition = _transitions.IllegalTransition
transition = _transitions.transition
