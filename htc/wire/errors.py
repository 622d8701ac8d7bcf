"""Errors of the wire layer: malformed input, unreachable daemons, error replies.

The split follows :mod:`htc.errors`: something another process sent or did wrong is a
:class:`~htc.errors.PeerError`; something the caller asked for that cannot be done is a
:class:`~htc.errors.UsageError`.  Each error carries a short ``code`` that travels in an
:class:`~htc.wire.messages.ErrorReply` so that the other side can react without parsing prose.
"""

from __future__ import annotations

from htc.errors import HTCError, PeerError, UsageError


class WireError(PeerError):
    """A peer sent bytes that are not a valid frame or message."""

    code = "malformed"


class FrameTooLarge(WireError):
    """A frame announced a body longer than this side accepts."""

    code = "too_large"


class ConnectionClosed(PeerError):
    """The peer closed the connection before the expected message arrived."""

    code = "closed"


class RequestTimeout(PeerError):
    """A peer did not answer within the allowed time."""

    code = "timeout"


class RemoteError(PeerError):
    """The peer answered a request with an ErrorReply; ``code`` and ``message`` are its words."""

    def __init__(self, daemon: str, code: str, message: str):
        super().__init__(f"{daemon} refused the request ({code}): {message}")
        self.daemon = daemon
        self.code = code
        self.remote_message = message


class DaemonUnreachable(HTCError):
    """No daemon is listening at the address; usually the pool (or that daemon) is not running."""

    code = "unreachable"


class HostSilent(DaemonUnreachable):
    """The daemon's host does not answer at all (a connect that timed out, no route to it): the
    host may be cut off the network with its daemons still running, unlike a host where nobody
    listens. Its code is ``timeout``, so a core waiting on a lease keeps waiting."""

    code = "timeout"


class BadAddress(UsageError):
    """A daemon address is not a valid name for this transport."""


class AddressInUse(UsageError):
    """Another live daemon already serves the address this one wants to listen on."""


class MessageInvalid(UsageError, ValueError):
    """A message was built with a wrong field; raised where the message is constructed.

    It is also a ``ValueError`` so that msgspec treats it as a validation failure while decoding,
    where :func:`htc.wire.messages.decode` turns it into a :class:`WireError`.
    """
