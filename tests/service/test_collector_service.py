"""The collector core driven by the real asyncio service, in this process, over real sockets."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from htc.daemons import core as c
from htc.client import query_collector_async, send_command_async
from htc.daemons.clock import FakeClock
from htc.daemons.collector.core import Collector
from htc.daemons.collector.service import make_service
from htc.daemons.collector.settings import CollectorSettings
from htc.daemons.service import DaemonPaths, DaemonService
from htc.errors import UsageError
from htc.wire import messages as m
from htc.wire.errors import DaemonUnreachable, RemoteError


@pytest.fixture
def paths():
    home = Path(tempfile.mkdtemp(prefix="htcs-", dir="/tmp"))
    yield DaemonPaths(home)
    shutil.rmtree(home, ignore_errors=True)


def collector_service(paths, reload=None, **settings) -> DaemonService:
    core = Collector(CollectorSettings(name="pool@test", **settings))
    return DaemonService("collector", core, paths.transport(), log_file=paths.log_file("collector"),
                         reload_settings=reload)


async def serve_while(service: DaemonService, body):
    """Run ``service`` while ``body()`` runs; then stop it and return (body's result, exit status)."""
    task = asyncio.create_task(service.run())
    try:
        await _wait_for_socket(service)
        result = await body()
    finally:
        service.feed(c.StopRequested())
    return result, await asyncio.wait_for(task, 10)


async def _wait_for_socket(service):
    async with asyncio.timeout(10):
        while True:
            try:
                await send_command_async(service.address, m.Ping(), transport=service.transport)
                return
            except DaemonUnreachable:
                await asyncio.sleep(0.01)


def test_update_query_ping_and_clean_exit(paths):
    service = collector_service(paths)
    t = service.transport

    async def body():
        pong = await send_command_async("collector", m.Ping(), transport=t)
        ack = await send_command_async("collector", m.UpdateAd(
            ad_type=m.AdType.Startd, name="slot1@n", ad_text='[ Name = "slot1@n"; Cpus = 2 ]'), transport=t)
        ads = await query_collector_async(m.AdType.Startd, "Cpus == 2", ["Name"], transport=t)
        with pytest.raises(RemoteError, match="constraint is not a ClassAd expression"):
            await query_collector_async(m.AdType.Startd, "Cpus ==", transport=t)
        with pytest.raises(RemoteError, match="collector does not handle DaemonsOn"):
            await send_command_async("collector", m.DaemonsOn(), transport=t)
        return pong, ack, ads

    (pong, ack, ads), status = asyncio.run(serve_while(service, body))
    assert (pong.daemon, pong.pid) == ("collector", os.getpid())
    assert ack == m.Ack()
    assert [dict(ad) for ad in ads] == [{"Name": "slot1@n"}]
    assert status == 0
    assert not (paths.sockets / "collector.sock").exists()
    log = paths.log_file("collector").read_text()
    assert "collector (pid" in log and "serving as 'collector'" in log and "exiting with status 0" in log


def test_ads_expire_on_the_collectors_own_clock(paths):
    service = collector_service(paths, classad_lifetime=0.3)
    t = service.transport

    async def body():
        await send_command_async("collector", m.UpdateAd(
            ad_type=m.AdType.Startd, name="slot1@n", ad_text="[ Cpus = 2 ]"), transport=t)
        assert len(await query_collector_async(m.AdType.Startd, transport=t)) == 1
        start = time.monotonic()
        while await query_collector_async(m.AdType.Startd, transport=t):
            await asyncio.sleep(0.02)
        return time.monotonic() - start

    waited, _ = asyncio.run(serve_while(service, body))
    assert waited < 2


def test_ads_expire_when_the_services_clock_says_so_not_before(paths, monkeypatch):
    """The service takes its time from the clock it is given: with a FakeClock, real time passing
    expires nothing, and advancing the clock past CLASSAD_LIFETIME does."""
    monkeypatch.setenv("_HTC_CLASSAD_LIFETIME", "1")
    clock = FakeClock()
    service = make_service(paths, clock=clock)
    t = service.transport
    key = (m.AdType.Startd, "slot1@n", "")

    async def startd_ads():
        return await query_collector_async(m.AdType.Startd, transport=t)

    async def body():
        pong = await send_command_async("collector", m.Ping(), transport=t)
        assert pong.started_at == clock.time()
        await send_command_async("collector", m.UpdateAd(
            ad_type=m.AdType.Startd, name="slot1@n", ad_text="[ Cpus = 2 ]"), transport=t)
        [ad] = await startd_ads()
        assert ad["LastHeardFrom"] == int(clock.time()), "the ad is stamped with the clock's time"
        await asyncio.sleep(1.2)  # longer than the lifetime, in real time
        assert len(await startd_ads()) == 1 and key in service.core.ads
        clock.advance(0.5)
        await clock.settle()
        assert len(await startd_ads()) == 1 and key in service.core.ads
        clock.advance(0.6)
        await clock.settle()
        async with asyncio.timeout(5):
            while key in service.core.ads:  # the service's Tick, woken by the clock, dropped it
                await asyncio.sleep(0.01)
        return await startd_ads()

    after, status = asyncio.run(serve_while(service, body))
    assert after == [] and status == 0
    assert "Machine ad 'slot1@n' expired: not refreshed since 1 s ago" in paths.log_file("collector").read_text()


def test_reconfig_reloads_settings_or_keeps_old_ones(paths):
    calls = []

    def reload():
        calls.append(1)
        if len(calls) == 2:
            raise UsageError("condor_config line 3: bad value for CLASSAD_LIFETIME")
        return CollectorSettings(name="renamed@test")

    service = collector_service(paths, reload=reload)
    t = service.transport

    async def body():
        ok = await send_command_async("collector", m.Reconfig(), transport=t)
        with pytest.raises(RemoteError, match="line 3: bad value"):
            await send_command_async("collector", m.Reconfig(), transport=t)
        return ok, await query_collector_async(m.AdType.Collector, transport=t)

    (ok, own), _ = asyncio.run(serve_while(service, body))
    assert ok == m.Ack(detail="configuration re-read")
    assert [ad["Name"] for ad in own] == ["renamed@test"], "the old own ad is withdrawn"
    assert "keeping the old configuration" in paths.log_file("collector").read_text()


@dataclass
class Advertiser:
    """A test core: on start it sends its ad to the collector and to a daemon that does not exist."""

    outcomes: list

    def next_deadline(self):
        return None

    def handle(self, event, now):
        if isinstance(event, c.Started):
            ad = m.UpdateAd(ad_type=m.AdType.Schedd, name="schedd@n", ad_text="[ TotalIdleJobs = 3 ]")
            return [c.Send("collector", ad, cookie="a"), c.Send("nowhere", ad, cookie="b")]
        if isinstance(event, (c.SendDone, c.SendFailed)):
            self.outcomes.append(event)
            return [c.Log(f"outcome {event.cookie}")]
        if isinstance(event, c.StopRequested):
            return [c.Exit(3)]
        return []


def test_send_actions_report_their_outcome(paths):
    collector = collector_service(paths)
    outcomes = []
    advertiser = DaemonService("schedd", Advertiser(outcomes), paths.transport(), log_file=paths.log_file("schedd"))

    async def body():
        status = await asyncio.wait_for(_run_until(advertiser, lambda: len(outcomes) == 2), 10)
        return status, await query_collector_async(m.AdType.Schedd, transport=paths.transport())

    (status, ads), _ = asyncio.run(serve_while(collector, body))
    assert status == 3
    done, failed = sorted(outcomes, key=lambda e: e.cookie)
    assert isinstance(done, c.SendDone) and done.reply == m.Ack()
    assert isinstance(failed, c.SendFailed) and "no nowhere daemon is listening" in failed.error
    assert [ad["TotalIdleJobs"] for ad in ads] == [3]
    assert "outcome a" in paths.log_file("schedd").read_text()


async def _run_until(service, condition):
    task = asyncio.create_task(service.run())
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.01)
    service.feed(c.StopRequested())
    return await task


class Buggy:
    """A core with a bug on requests (Reschedule) and, if asked, on its own work (a Tick)."""

    def __init__(self, tick_bug: bool = False):
        self.tick_bug = tick_bug

    def next_deadline(self):
        return time.time() if self.tick_bug else None

    def handle(self, event, now):
        if isinstance(event, c.Received):
            raise ZeroDivisionError("a bug in a core")
        if isinstance(event, c.Tick):
            raise ZeroDivisionError("a bug in a core's own work")
        return []


def test_a_core_bug_on_a_request_is_answered_logged_and_the_daemon_serves_on(paths):
    service = DaemonService("buggy", Buggy(), paths.transport(), log_file=paths.log_file("buggy"))

    async def main():
        task = asyncio.create_task(service.run())
        await _wait_for_socket(service)
        for _ in range(3):
            with pytest.raises(RemoteError) as info:
                await send_command_async("buggy", m.Reschedule(), transport=service.transport, timeout=5)
            assert info.value.code == "internal"
            assert "Reschedule" in str(info.value) and "ZeroDivisionError: a bug in a core" in str(info.value)
        pong = await send_command_async("buggy", m.Ping(), transport=service.transport, timeout=5)
        assert isinstance(pong, m.Pong)
        assert not task.done()
        task.cancel()  # (this core never exits by itself)
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    log = paths.log_file("buggy").read_text()
    assert log.count("handling Reschedule from") == 3 and "serving on" in log
    assert "Traceback" in log and "ZeroDivisionError: a bug in a core" in log


def test_a_core_bug_in_its_own_work_ends_the_daemon_with_a_traceback_in_its_log(paths):
    service = DaemonService("buggy", Buggy(tick_bug=True), paths.transport(), log_file=paths.log_file("buggy"))

    with pytest.raises(ExceptionGroup) as info:
        asyncio.run(service.run())
    assert info.group_contains(ZeroDivisionError)
    log = paths.log_file("buggy").read_text()
    assert "buggy (pid" in log and "failed" in log and "ZeroDivisionError: a bug in a core's own work" in log
    assert not logging.getLogger("htc").handlers, "the service removes its log handler"
