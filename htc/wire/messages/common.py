"""Messages every daemon answers: acknowledgements, errors, liveness, reconfiguration."""

from __future__ import annotations

from htc.wire.messages.schema import Count, Message, NonEmpty, Seconds

#: codes an ErrorReply carries, with what the receiver should make of them
ERROR_CODES = {
    "malformed": "the request was not a valid frame or message; the connection is closed",
    "too_large": "the frame exceeded the receiver's size limit; the connection is closed",
    "unknown_request": "this daemon does not handle that kind of message",
    "bad_request": "the message was well formed but makes no sense here (see the text)",
    "not_found": "the thing named in the request does not exist",
    "denied": "the requester may not do this",
    "unavailable": "the daemon is shutting down or not ready; try again later",
    "internal": "the daemon failed while handling the request; see its log",
}


class Ack(Message, frozen=True):
    """A request was done; ``detail`` may say what happened. ``sequence`` orders answers against
    reports sent on other connections (a Suspend/Continue answer carries the job state's
    sequence number, which the StarterUpdates' ``JobStateSequence`` also carry)."""

    detail: str = ""
    sequence: Count | None = None


class ErrorReply(Message, frozen=True):
    """A request failed; ``code`` is one of ERROR_CODES, ``message`` says why and what to do."""

    code: NonEmpty
    message: str


class Pong(Message, frozen=True):
    """Answer to Ping: who answered, and since when it runs."""

    daemon: NonEmpty
    pid: Count
    started_at: Seconds
    version: str = ""


class Ping(Message, frozen=True):
    """Is the daemon alive and answering?"""

    reply_type = Pong


class Reconfig(Message, frozen=True):
    """Re-read the configuration (condor_reconfig); a master also passes it to its daemons."""

    reply_type = Ack
