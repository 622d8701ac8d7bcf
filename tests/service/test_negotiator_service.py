"""The negotiator's service: its adapter (no event loop), the accountant's file, then matchmaking
on real sockets with a real collector and startd, in this process and as real processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from htc.classad import ClassAd
from htc.client import query_collector_async, send_command_async
from htc.daemons import core as c
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.clock import FakeClock
from htc.daemons.collector.core import Collector
from htc.daemons.collector.settings import CollectorSettings
from htc.daemons.negotiator import events as n
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.service import NegotiatorService, load_accountant, save_accountant
from htc.daemons.negotiator.settings import NegotiatorServiceSettings, NegotiatorSettings
from htc.daemons.negotiator.adapter import NegotiatorDaemon
from htc.daemons.startd.sensors import SensorSettings, arch, condor_version
from htc.daemons.service import DaemonPaths, DaemonService
from htc.daemons.startd.policy import ClassAdPolicy
from htc.daemons.startd.service import StartdService, StartdServiceSettings
from htc.daemons.startd.settings import StartdSettings
from htc.errors import UsageError
from htc.submit import Submit
from htc.wire import messages as m
from htc.wire.errors import DaemonUnreachable
from htc.wire.transport import UnixTransport

T0 = 1_800_000_000.0
#: a slot ad with what submit's Requirements read (Arch, OpSys, CondorVersion, HasFileTransfer)
SLOT = ('[ Name = "slot1@n1"; MyAddress = "startd-n1"; State = "Unclaimed"; Activity = "Idle"; Cpus = 1; '
        f'Memory = 2048; Disk = 2000000; Arch = "{arch()}"; OpSys = "LINUX"; CondorVersion = "{condor_version()}"; '
        'HasFileTransfer = true; Requirements = true; Rank = 0.0; ClaimId = "slot1@n1#1#s3cr3t" ]')
SUBMITTER = '[ Name = "alice@test"; ScheddName = "schedd@test"; MyAddress = "schedd"; IdleJobs = 2; RunningJobs = 0 ]'


def job_text(cluster: int = 5) -> str:
    """An idle job as htc.submit builds it, Requirements and all."""
    ad = next(iter(Submit("executable = /bin/echo\nrequest_memory = 256\nqueue\n", filename="j.sub").jobs(
        clusterid=cluster)))
    ad["Owner"], ad["User"] = "alice", "alice@test"
    return str(ad)


def service_settings(home: Path, **core) -> NegotiatorServiceSettings:
    values = dict(interval=60.0, cycle_delay=0.0, min_interval=0.0, trigger_delay=0.05, timeout=5.0)
    values.update(core)
    return NegotiatorServiceSettings(core=NegotiatorSettings(**values), accountant_file=home / "spool" / "acct.json",
                                     inform_startd=True, name="negotiator@test")


# --------------------------------------------------------------------------- the adapter alone


def test_a_cycle_becomes_wire_sends_and_the_accountant_snapshot(tmp_path):
    daemon = NegotiatorDaemon(service_settings(tmp_path), None, T0)
    (fetch,) = daemon.handle(c.Tick(), T0)
    assert isinstance(fetch, n.FetchPoolAds)
    (ask,) = daemon.handle(n.PoolAds(fetch.cycle, (ClassAd(SLOT),), (ClassAd(SUBMITTER),)), T0 + 1)
    assert isinstance(ask, n.AskResourceRequests) and ask.schedd_address == "schedd"
    out = daemon.handle(n.RequestsReceived(fetch.cycle, "schedd@test", "alice@test",
                                           (ResourceRequest(3, ClassAd(job_text()), 2),)), T0 + 2)
    notes = [a for a in out if isinstance(a, c.Send) and isinstance(a.msg, m.MatchNotify)]
    assert [a.to for a in notes] == ["schedd", "startd-n1"]  # the schedd, and (INFORM_STARTD) the startd
    note = notes[0].msg
    assert (note.claim_id, note.slot_name, note.startd_address, note.autocluster_id, note.submitter) == (
        "slot1@n1#1#s3cr3t", "slot1@n1", "startd-n1", 3, "alice@test")
    assert ClassAd(note.slot_ad)["Name"] == "slot1@n1"
    (save,) = [a for a in out if isinstance(a, n.SaveAccountant)]
    assert "alice@test" in save.snapshot["customers"]
    ads = {a.msg.ad_type: ClassAd(a.msg.ad_text) for a in out if isinstance(a, c.Send) and isinstance(a.msg, m.UpdateAd)}
    assert ads[m.AdType.Accounting]["Name"] == "alice@test"
    assert ads[m.AdType.Negotiator]["LastNegotiationCycleMatches0"] == 1
    assert any("1 match(es)" in a.text for a in out if isinstance(a, c.Log))
    failed = daemon.handle(c.SendFailed("schedd", note, "schedd is down"), T0 + 3)
    assert "cannot send MatchNotify to schedd: schedd is down" in failed[0].text
    daemon.handle(c.Reconfigured(service_settings(tmp_path, interval=300.0)), T0 + 3)
    assert daemon.negotiator.settings.interval == 300.0 and daemon.settings.core.interval == 300.0
    out = daemon.handle(c.StopRequested(), T0 + 4)
    assert [type(a) for a in out] == [n.SaveAccountant, c.Send, c.Exit]
    assert out[1].msg == m.InvalidateAd(ad_type=m.AdType.Negotiator, name="negotiator@test")


def test_the_accountant_file_round_trips_and_a_damaged_one_is_refused_with_advice(tmp_path):
    settings = NegotiatorSettings()
    path = tmp_path / "spool" / "Accountantnew.log"
    fresh = load_accountant(path, settings, T0)
    assert fresh.records() == []
    acct = Accountant(settings.accountant, now=T0)
    acct.add_match("alice@test", "slot1@n1", 4.0, T0)
    acct.update_priorities(T0 + 3600)
    save_accountant(path, acct.snapshot())
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind
    back = load_accountant(path, settings, T0 + 3600)
    assert back.snapshot() == acct.snapshot() and back.real_priority("alice@test") > 0.5
    path.write_text("{ half a file")
    with pytest.raises(UsageError, match=r"Accountantnew.log is not JSON .*move it aside"):
        load_accountant(path, settings, T0)
    path.write_text(json.dumps({"version": 99}))
    with pytest.raises(UsageError, match=r"Accountantnew.log: .*version 99.*move the file aside"):
        load_accountant(path, settings, T0)


# --------------------------------------------------------------------------- the service, in process


class Schedd:
    """A schedd stand-in: answers GetResourceRequests with one autocluster, records the rest."""

    def __init__(self, job: str, count: int = 1):
        self.job, self.count = job, count
        self.got: list[m.Message] = []
        self.arrived = asyncio.Event()

    async def serve(self, conn):
        while True:
            msg = await conn.recv(timeout=60)
            self.got.append(msg)
            self.arrived.set()
            if isinstance(msg, m.GetResourceRequests):
                await conn.send(m.ResourceRequests(submitter=msg.submitter, requests=(
                    m.ResourceRequest(autocluster_id=1, job_ad=self.job, count=self.count),)))
            else:
                await conn.send(m.Ack())

    async def wait_for(self, kind, timeout=10.0):
        async with asyncio.timeout(timeout):
            while True:
                found = [x for x in self.got if isinstance(x, kind)]
                if found:
                    return found[0]
                self.arrived.clear()
                await self.arrived.wait()


async def wait_serving(t, address: str) -> None:
    async with asyncio.timeout(10):
        while True:
            try:
                await send_command_async(address, m.Ping(), transport=t)
                return
            except DaemonUnreachable:
                await asyncio.sleep(0.02)


def startd_settings(home: Path) -> StartdServiceSettings:
    startd = StartdSettings(name="n1.test", machine="n1.test", policy=ClassAdPolicy(), cpus=2, memory=2048,
                            disk=20_000_000, update_interval=60, polling_interval=0.1)
    return StartdServiceSettings(startd=startd, execute_dir=home / "execute", sample_interval=0.1,
                                 sensors=SensorSettings(execute_dir=home / "execute", daemon_name="startd",
                                                        override_file=home / "override"))


def test_reschedule_matches_a_submitters_request_to_a_slot_and_the_schedd_can_claim_it(home):
    t = DaemonPaths(home).transport()
    schedd = Schedd(job_text())

    async def main():
        collector = DaemonService("collector", Collector(CollectorSettings()), t)
        startd = StartdService(startd_settings(home), t)
        negotiator = NegotiatorService(service_settings(home), t, log_file=home / "NegotiatorLog")
        async with asyncio.TaskGroup() as tg:
            server = await t.start_server("schedd", schedd.serve, task_group=tg)
            runs = [tg.create_task(collector.run())]
            await wait_serving(t, "collector")
            runs.append(tg.create_task(startd.run()))
            await wait_serving(t, "startd")
            (slot,) = await query_collector_async(m.AdType.Startd, transport=t, private=True)
            runs.append(tg.create_task(negotiator.run()))
            await wait_serving(t, "negotiator")
            # The first cycle ran at start with nobody to serve; the next is a minute away...
            async with asyncio.timeout(5):
                while negotiator.negotiator.statistics().cycles_completed < 1:
                    await asyncio.sleep(0.02)
            await send_command_async("collector", m.UpdateAd(ad_type=m.AdType.Submitter, name="alice@test",
                                                             ad_text=SUBMITTER), transport=t)
            # ... but a Reschedule (what a schedd sends after a submit) brings it forward.
            ack = await send_command_async("negotiator", m.Reschedule(), transport=t)
            match = await schedd.wait_for(m.MatchNotify, timeout=5)
            ask = [x for x in schedd.got if isinstance(x, m.GetResourceRequests)][0]
            # The schedd's side: claim the slot with the claim id the match carries.
            claim = await send_command_async(match.startd_address, m.RequestClaim(
                claim_id=match.claim_id, schedd_name="schedd@test", schedd_address="schedd",
                submitter=match.submitter, job_ad=schedd.job), transport=t)
            accounting = await query_collector_async(m.AdType.Accounting, transport=t)
            negotiator_ads = await query_collector_async(m.AdType.Negotiator, transport=t)
            stats = negotiator.negotiator.statistics()
            for service in (negotiator, startd):
                service.feed(c.StopRequested(fast=True))
            statuses = [await runs[2], await runs[1]]
            collector.feed(c.StopRequested())
            await runs[0]
            await server.aclose()
        return slot, ack, match, ask, claim, accounting, negotiator_ads, stats, statuses

    slot, ack, match, ask, claim, accounting, negotiator_ads, stats, statuses = asyncio.run(main())
    assert statuses == [0, 0]
    assert ack == m.Ack(detail="negotiation cycle scheduled")
    assert ask.submitter == "alice@test" and "requestmemory" in ask.significant_attributes
    assert (match.slot_name, match.startd_address, match.claim_id, match.submitter) == (
        "slot1@n1.test", "startd", slot["ClaimId"], "alice@test")
    assert claim.accepted, claim.reason
    assert ClassAd(claim.slot_ad)["Memory"] == 256  # the dynamic slot carved for the job
    assert stats.cycles_completed >= 2 and stats.total_matches == 1
    assert [ad["Name"] for ad in accounting] == ["alice@test"]
    assert [ad["Name"] for ad in negotiator_ads] == ["negotiator@test"]
    log = (home / "NegotiatorLog").read_text()
    assert "match: alice@test (autocluster 1 at schedd@test) -> slot1@n1.test" in log
    # The accountant survives a restart: a new negotiator reads the file the old one saved.
    saved = json.loads((home / "spool" / "acct.json").read_text())
    assert "alice@test" in saved["customers"]
    again = NegotiatorService(service_settings(home), t)
    assert "alice@test" in again.negotiator.accountant.submitters()


def test_a_fake_clock_decides_when_the_periodic_cycle_runs(home):
    """The service reads the time only through its clock: NEGOTIATOR_INTERVAL passes when the fake
    clock is advanced, however long the test waits in real time."""
    t = DaemonPaths(home).transport()
    clock = FakeClock(start=T0)

    async def main():
        collector = DaemonService("collector", Collector(CollectorSettings()), t)
        negotiator = NegotiatorService(service_settings(home, interval=60.0), t, clock=clock)

        def completed() -> int:
            return negotiator.negotiator.statistics().cycles_completed

        async def until(check, what: str) -> None:
            for _ in range(250):  # 5 real seconds: only a hung service takes this long
                if check():
                    return
                await asyncio.sleep(0.02)
            raise AssertionError(f"no {what} after 5 s")

        async with asyncio.TaskGroup() as tg:
            runs = [tg.create_task(collector.run())]
            await wait_serving(t, "collector")
            runs.append(tg.create_task(negotiator.run()))
            await wait_serving(t, "negotiator")
            await until(lambda: completed() == 1, "the first cycle, due at start")
            first = negotiator.negotiator.statistics()
            await asyncio.sleep(0.3)  # real time passes, fake time does not: no second cycle
            clock.advance(59.0)
            await clock.settle()
            await asyncio.sleep(0.3)
            waited = completed()
            clock.advance(1.0)  # NEGOTIATOR_INTERVAL after the first cycle started
            await until(lambda: completed() == 2, "the periodic cycle")
            second = negotiator.negotiator.statistics()
            ads = []
            async with asyncio.timeout(5):
                while not ads or ads[0]["LastNegotiationCycleTime0"] != int(T0 + 60):
                    ads = await query_collector_async(m.AdType.Negotiator, transport=t)
                    await asyncio.sleep(0.02)
            negotiator.feed(c.StopRequested(fast=True))
            status = await runs[1]
            collector.feed(c.StopRequested())
            await runs[0]
        return first, waited, second, ads[0], status

    first, waited, second, ad, status = asyncio.run(main())
    assert status == 0
    assert (first.last_cycle.started, first.next_cycle) == (T0, T0 + 60)
    assert waited == 1  # 59 fake seconds (and half a real second) are not the interval
    assert second.last_cycle.started == T0 + 60 and second.next_cycle == T0 + 120
    assert ad["DaemonStartTime"] == int(T0) and ad["NumNegotiationCycles"] == 2


# --------------------------------------------------------------------------- real processes


@pytest.mark.slow
def test_negotiator_process_matches_and_saves_its_accountant(home):
    env = dict(os.environ, HTC_HOME=str(home), _HTC_NEGOTIATOR_INTERVAL="60", _HTC_NEGOTIATOR_CYCLE_DELAY="0",
               _HTC_NEGOTIATOR_MIN_INTERVAL="0", _HTC_NEGOTIATOR_INFORM_STARTD="true", _HTC_POLLING_INTERVAL="1",
               _HTC_NUM_CPUS="2", _HTC_MEMORY="2048", _HTC_DISK="5000000")
    names = ("collector", "startd", "negotiator")
    procs = {}
    t = UnixTransport(home / "sockets")
    schedd = Schedd(job_text())

    async def body():
        async with asyncio.TaskGroup() as tg:
            server = await t.start_server("schedd", schedd.serve, task_group=tg)
            try:
                for name in names:
                    procs[name] = subprocess.Popen([sys.executable, "-m", "htc.daemons", name], env=env,
                                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                   stderr=subprocess.PIPE, text=True)
                    async with asyncio.timeout(20):
                        while True:
                            assert procs[name].poll() is None, procs[name].communicate()
                            try:
                                await send_command_async(name, m.Ping(), transport=t)
                                break
                            except DaemonUnreachable:
                                await asyncio.sleep(0.05)
                async with asyncio.timeout(20):
                    while not await query_collector_async(m.AdType.Startd, transport=t):
                        await asyncio.sleep(0.05)
                await send_command_async("collector", m.UpdateAd(ad_type=m.AdType.Submitter, name="alice@test",
                                                                 ad_text=SUBMITTER), transport=t)
                await send_command_async("negotiator", m.Reschedule(), transport=t)
                return await schedd.wait_for(m.MatchNotify, timeout=15)
            finally:
                await server.aclose()

    try:
        match = asyncio.run(body())
        procs["negotiator"].send_signal(signal.SIGTERM)
        assert procs["negotiator"].wait(timeout=15) == 0
        procs["startd"].send_signal(signal.SIGTERM)
        assert procs["startd"].wait(timeout=15) == 0
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)
    assert match.slot_name.startswith("slot1@") and match.startd_address == "startd"
    assert match.claim_id.startswith(match.slot_name + "#")
    saved = json.loads((home / "spool" / "Accountantnew.log").read_text())
    assert "alice@test" in saved["customers"]
    log = (home / "log" / "NegotiatorLog").read_text()
    assert "match: alice@test" in log and "got SIGTERM" in log


def test_a_schedd_answer_that_a_match_lapsed_reaches_the_core(monkeypatch):
    settings = NegotiatorServiceSettings(core=NegotiatorSettings(), accountant_file=Path("/nonexistent"))
    daemon = NegotiatorDaemon(settings, None, now=0.0)
    told = []
    monkeypatch.setattr(daemon.negotiator, "match_lapsed", lambda *args: told.append(args) or True)
    notify = m.MatchNotify(claim_id="p#1#x", submitter="alice@x", slot_name="slot1@p", startd_address="<startd>",
                           slot_ad="[ Name = \"slot1@p\" ]", autocluster_id=7)
    assert daemon.handle(c.SendDone("<schedd>", notify, m.Ack()), 1.0) == []  # taken: nothing to do
    lapsed = m.Ack(detail=m.MATCH_LAPSED + "no idle job left for it")
    [log] = daemon.handle(c.SendDone("<schedd>", notify, lapsed), 1.0)
    assert told == [("slot1@p", "p#1#x", 7)]
    assert "lapsed at the schedd (no idle job left for it)" in log.text
