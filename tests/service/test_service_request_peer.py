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
from htc.daemons.clock import FakeClock
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


class Timed(Recorder):
    """A recorder with a deadline a request can set (``Ack`` for every request) that counts Ticks."""

    def __init__(self):
        super().__init__()
        self.deadline: float | None = None
        self.ticks: list[float] = []

    def next_deadline(self):
        return self.deadline

    def handle(self, event, now):
        if isinstance(event, c.Tick):
            self.ticks.append(now)
            self.deadline = None
            return []
        return super().handle(event, now)


class CountingClock(FakeClock):
    """A FakeClock that counts the main task's waits (one per time it looked at the deadline)."""

    def __init__(self):
        super().__init__()
        self.waits = 0

    async def wait_for(self, event, timeout):
        self.waits += 1
        return await super().wait_for(event, timeout)


def test_requests_wake_the_main_task_only_when_they_bring_the_deadline_earlier(paths):
    me = pwd.getpwuid(os.geteuid()).pw_name
    core, clock = Timed(), CountingClock()
    service = DaemonService("collector", core, paths.transport(), authorizer=_authorizer(f"{me}@{D}"), clock=clock)
    query = m.QueryAds(ad_type=m.AdType.Startd)

    async def body():
        task = asyncio.create_task(service.run())
        try:
            async with asyncio.timeout(10):
                while not (paths.home / "sockets" / "collector.sock").exists():
                    await asyncio.sleep(0.01)
            conn = await service.transport.open_connection("collector")
            async with conn:
                await conn.request(query, expect=m.Ack)
                await clock.settle()
                waits = clock.waits
                for _ in range(20):  # no deadline: nothing for the main task to look at
                    await conn.request(query, expect=m.Ack)
                await clock.settle()
                idle_waits = clock.waits - waits
                core.deadline = clock.time() + 60
                await conn.request(query, expect=m.Ack)  # a later deadline than none: wakes
                await clock.settle()
                core.deadline = clock.time() + 5
                await conn.request(query, expect=m.Ack)  # earlier than the one slept on: wakes
                await clock.settle()
                for _ in range(20):  # the same deadline: the main task sleeps on
                    await conn.request(query, expect=m.Ack)
                await clock.settle()
                clock.advance(5)
                await clock.settle()
        finally:
            service.feed(c.StopRequested())
        return idle_waits, await asyncio.wait_for(task, 10)

    idle_waits, status = asyncio.run(body())
    assert status == 0
    assert idle_waits == 0
    assert core.ticks == [clock.time()]  # the Tick came at the earlier deadline, 5 s in
    assert len(core.peers) == 43
