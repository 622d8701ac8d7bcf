"""The shared port's sans-IO core: listen once started, exit when asked or when listening failed.

Theory of operation
-------------------
Everything the shared port does per client (logins, forwarding) happens inside the SSH server,
below any decision; what is left to decide is the daemon's life: on ``Started`` it asks the
service to :class:`~htc.daemons.shared_port.events.Listen` on SHARED_PORT_PORT; if that fails
(the port is taken) it exits with status 1, so the master restarts it with its usual backoff; on
``StopRequested`` it exits at once (connections end with the process; clients reconnect).
Messages sent to its own Unix socket other than Ping/Reconfig (answered by the service) are
answered ``unknown_request``. A reconfiguration that changes the port or the SSH settings takes
effect at the next start, and the log says so.
"""

from __future__ import annotations

import logging

from htc.daemons import core as c
from htc.daemons.shared_port.events import Listen, ListenFailed
from htc.daemons.shared_port.settings import SharedPortSettings
from htc.wire import messages as m


class SharedPort:
    """Decides when the shared port listens and exits (module header)."""

    def __init__(self, settings: SharedPortSettings):
        self.settings = settings

    def next_deadline(self) -> float | None:
        """The shared port has no timers."""
        return None

    def handle(self, event: c.Event, now: float) -> list[c.Action]:
        """React to one event."""
        if isinstance(event, c.Started):
            where = listen_address(self.settings)
            return [c.Log(f"listening for SSH on {where}"), Listen(self.settings.interface, self.settings.port)]
        if isinstance(event, ListenFailed):
            return [c.Log(f"cannot listen on {listen_address(self.settings)}: {event.error}", logging.ERROR),
                    c.Exit(1)]
        if isinstance(event, c.StopRequested):
            return [c.Exit(0)]
        if isinstance(event, c.Reconfigured):
            old, self.settings = self.settings, event.settings or self.settings
            if old != self.settings:
                return [c.Log("the shared port's new settings take effect when it next starts "
                              "(htc restart -daemon shared_port)")]
            return []
        if isinstance(event, c.Received):
            if event.msg.reply_type is None:
                return []
            return [c.Reply(event.conn_id, m.ErrorReply(
                code="unknown_request",
                message=f"the shared port does not handle {type(event.msg).__name__}"))]
        return []


def listen_address(settings: SharedPortSettings) -> str:
    """``*:9618`` or ``10.0.0.1:9618``: where the shared port listens."""
    return f"{settings.interface or '*'}:{settings.port}"
