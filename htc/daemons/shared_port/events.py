"""The shared port's own events and actions (beyond the shared ones of :mod:`htc.daemons.core`)."""

from __future__ import annotations

from dataclasses import dataclass

from htc.daemons.core import Action, Event


@dataclass(frozen=True)
class Listen(Action):
    """Start the SSH server on ``interface:port`` (``""``: every interface)."""

    interface: str
    port: int


@dataclass(frozen=True)
class ListenFailed(Event):
    """The SSH server could not start (the port is taken, say); ``error`` says why."""

    error: str
