"""The peer record a core gets with each request on a kept connection (htc.daemons.service).

The service makes a connection's peer record (the peer's account and whether the policy makes it
an administrator) once and reuses it for the connection's later requests; a reconfiguration that
replaces the policy must show in the very next request of a connection already open.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest

from htc.daemons import core as c
from htc.daemons.service import DaemonPaths, DaemonService
from htc.wire import authz
from htc.wire import messages as m

D = "host.example"


@pytest.fixture
def paths():
    home = Path(tempfile.mkdtemp(prefix="htcp-", dir="/tmp"))
    yield DaemonPaths(home)
    shutil.rmtree(home, ignore_errors=True)


class Recorder:
    """A core that answers every request with an Ack and keeps the peer record it came with."""

    def __init__(self):
        self.peers = []

    def next_deadline(self):
        return None  # no timers: it only answers

    def handle(self, event, now):
        if isinstance(event, c.Received):
            self.peers.append(event.peer)
            return [c.Reply(event.conn_id, m.Ack())]
        if isinstance(event, c.StopRequested):
            return [c.Exit(0)]
        return []


def _authorizer(admins: str) -> authz.Authorizer:
    me = pwd.getpwuid(os.geteuid()).pw_name
    config = {"ALLOW_ADMINISTRATOR": admins, "ALLOW_READ": "*"}

    def lookup(name):
        return (config[name], "test") if name in config else (None, "")

    users = {os.geteuid(): me}
    policy = authz.build_policy("COLLECTOR", lookup, uid_domain=D, pool_user=me, pool_is_root=os.geteuid() == 0)
    return authz.Authorizer("collector", policy, D, frozenset({os.geteuid()}), users.get)


def test_a_kept_connection_sees_each_requests_peer_and_a_new_policy_at_once(paths):
    me = pwd.getpwuid(os.geteuid()).pw_name
    core = Recorder()
    service = DaemonService("collector", core, paths.transport(), authorizer=_authorizer(f"{me}@{D}"))

    async def body():
        task = asyncio.create_task(service.run())
        try:
            async with asyncio.timeout(10):
                while not (paths.home / "sockets" / "collector.sock").exists():
                    await asyncio.sleep(0.01)
            conn = await service.transport.open_connection("collector")
            async with conn:
                query = m.QueryAds(ad_type=m.AdType.Startd)
                for _ in range(3):
                    assert await conn.request(query, expect=m.Ack) == m.Ack()
                service.authorizer = _authorizer("nobody@elsewhere")  # as a reconfiguration does
                assert await conn.request(query, expect=m.Ack) == m.Ack()
        finally:
            service.feed(c.StopRequested())
        return await asyncio.wait_for(task, 10)

    assert asyncio.run(body()) == 0
    assert [(p.user, p.administrator, p.uid) for p in core.peers] == [(me, True, os.geteuid())] * 3 + [
        (me, False, os.geteuid())]
