"""SshTransport reuses a connection only within the event loop that made it.

A tool runs one ``asyncio.run`` per request (``htc q -allusers -pool cm`` makes two), so a
connection cached by the first loop must not be handed to the second: its futures belong to a
closed loop ("attached to a different loop")."""

from __future__ import annotations

import asyncio

from htc.wire.ssh_client import SshTransport


class _Open:
    def is_closed(self) -> bool:
        return False


def test_a_new_event_loop_starts_with_no_cached_connections():
    transport = SshTransport(lambda: None)

    async def cache():
        transport._adopt_loop()
        transport._conns[("cm", 9618)] = (_Open(), None)
        transport._adopt_loop()  # the same loop: kept
        return dict(transport._conns)

    assert list(asyncio.run(cache())) == [("cm", 9618)]

    async def later():
        transport._adopt_loop()
        return dict(transport._conns)

    assert asyncio.run(later()) == {}
