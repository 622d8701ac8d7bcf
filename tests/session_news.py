"""What the tests of the schedd's executor sessions (htc.daemons.schedd.sessions) share: two
events of one job as its session's log holds them, and a connection that keeps what is sent."""

from __future__ import annotations

from htc.wire import messages as m

EXECUTE = b"001 (007.000.000) 2026-11-28 04:00:00 Job executing on host: <10.0.0.1:9618>\n...\n"
TERMINATED = (b"005 (007.000.000) 2026-11-28 04:00:01 Job terminated.\n\t(1) Normal termination (return value 0)\n"
              b"...\n")


class FakeConn:
    """A session's connection: ``sent`` keeps every message the schedd sends on it."""

    def __init__(self):
        self.sent: list[m.Message] = []

    async def send(self, msg):
        """Keep ``msg``."""
        self.sent.append(msg)
