"""Requests whose failures a core must tell apart: refused by the peer, or never answered.

The generic :class:`~htc.daemons.core.Send` reports every failure as one string. The schedd
and the startd need more: a startd that answers ``ErrorReply(not_found)`` to a keep-alive has
*dropped* the claim (the job is gone), while a startd that does not answer may only be
restarting (the job may still run, within its lease). So these daemons use :class:`Call`,
whose outcome is :class:`CallDone` or :class:`CallFailed` carrying the error's ``code``:
the peer's ErrorReply code (``not_found``, ``bad_request``, ...) when it refused, or one of
:data:`UNANSWERED` when it could not be asked.

:func:`install_calls` teaches a :class:`~htc.daemons.service.DaemonService` to execute calls;
each runs as a task of the service's TaskGroup and feeds its outcome back as one event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from htc.daemons import core as c
from htc.errors import HTCError
from htc.wire import messages as m
from htc.wire.errors import RemoteError

#: codes of a failure in which the peer never decided anything (it may do what was asked later)
UNANSWERED = frozenset({"unreachable", "timeout", "closed", "malformed", "too_large", "error"})


@dataclass(frozen=True)
class Call(c.Action):
    """Send the request ``msg`` to ``to``; the outcome comes back as CallDone or CallFailed."""

    to: str
    msg: m.Message
    cookie: Any = None
    timeout: float = 30.0


@dataclass(frozen=True)
class CallDone(c.Event):
    """A :class:`Call` was answered with ``reply``."""

    to: str
    msg: m.Message
    reply: m.Message
    cookie: Any = None


@dataclass(frozen=True)
class CallFailed(c.Event):
    """A :class:`Call` failed; ``code`` is the peer's ErrorReply code or one of UNANSWERED."""

    to: str
    msg: m.Message
    code: str
    error: str
    cookie: Any = None

    @property
    def refused(self) -> bool:
        """True when the peer answered and said no (as opposed to not answering at all)."""
        return self.code not in UNANSWERED


async def perform_call(peers, call: Call) -> c.Event:
    """Carry out ``call`` through ``peers`` (a :class:`~htc.wire.peers.PeerConnections`); return its outcome."""
    try:
        reply = await peers.request(call.to, call.msg, timeout=call.timeout)
    except RemoteError as exc:
        return CallFailed(call.to, call.msg, exc.code, str(exc), call.cookie)
    except HTCError as exc:
        return CallFailed(call.to, call.msg, getattr(exc, "code", "error") or "error", str(exc), call.cookie)
    return CallDone(call.to, call.msg, reply, call.cookie)


def install_calls(service) -> None:
    """Register the :class:`Call` executor with ``service`` (a DaemonService)."""

    async def run(call: Call) -> None:
        service.feed(await perform_call(service.peers, call))

    def execute(call: Call) -> None:
        service.start_task(run(call), f"call {type(call.msg).__name__} to {call.to}")

    service.register_action(Call, execute)


__all__ = ["Call", "CallDone", "CallFailed", "UNANSWERED", "install_calls", "perform_call"]
