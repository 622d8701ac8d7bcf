"""The startd daemon: its wire adapter (startd/adapter.py, no event loop), then the service on real
sockets with a real collector and real jobs, in this process and as ``python -m htc.daemons startd``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.startd import events as ev
from htc.client import query_collector_async, send_command_async
from htc.daemons.collector.core import Collector
from htc.daemons.collector.settings import CollectorSettings
from htc.daemons.calls import CallDone, CallFailed
from htc.daemons.clock import FakeClock
from htc.daemons.startd.sensors import SensorSettings, write_sensor_override
from htc.daemons.service import DaemonPaths, DaemonService
from htc.daemons.startd.policy import DESKTOP, ClassAdPolicy
from htc.daemons.startd.service import StartdService
from htc.daemons.startd.events import (
    RunStarter, Sampled, SampleSensors, StarterExited, StarterFailed, StarterStarted,
)
from htc.daemons.startd.settings import StartdServiceSettings
from htc.daemons.startd.settings import StartdSettings
from htc.daemons.startd.adapter import StartdDaemon
from htc.daemons.starter.service import ExitRecord, Usage
from htc.submit import Submit
from htc.wire import messages as m
from htc.wire.errors import ConnectionClosed, DaemonUnreachable, RemoteError
from htc.wire.transport import UnixTransport

MACHINE = "node1.test"
IDLE = {"KeyboardIdle": 7200, "ConsoleIdle": 7200, "LoadAvg": 0.0, "CondorLoadAvg": 0.0}


def settings(home: Path, policy=None, static_slots=0, **kw) -> StartdServiceSettings:
    startd = StartdSettings(name=MACHINE, machine=MACHINE, policy=policy or ClassAdPolicy(), cpus=2, memory=2048,
                            disk=20_000_000, static_slots=static_slots, update_interval=60, polling_interval=0.1)
    values = dict(sample_interval=0.1, starter_initial_update_interval=0.2, starter_update_interval=0.2,
                  retry_interval=0.2, stop_timeout=10, fast_stop_timeout=5)
    values.update(kw)
    return StartdServiceSettings(
        startd=startd, execute_dir=home / "execute", **values,
        sensors=SensorSettings(execute_dir=home / "execute", daemon_name="startd", override_file=home / "override"))


def submit_job(iwd: Path, text: str, cluster: int = 7) -> str:
    """A job ad exactly as htc.submit builds it (its Requirements included), as wire text."""
    ad = next(iter(Submit(f"initialdir = {iwd}\n{text}\nqueue\n", filename="job.sub").jobs(clusterid=cluster)))
    ad["Owner"] = "alice"
    ad["User"] = "alice@test"
    return str(ad)


# --------------------------------------------------------------------------- the adapter alone

T0 = 1_800_000_000.0


def adapter(tmp_path, **kw) -> tuple[StartdDaemon, list]:
    daemon = StartdDaemon(settings(tmp_path, static_slots=1, **kw), T0)
    out = daemon.handle(c.Started(), T0)
    assert any(isinstance(a, SampleSensors) for a in out)
    out = daemon.handle(Sampled(dict(IDLE)), T0)
    return daemon, out


def sends(actions, kind=None):
    return [a for a in actions if isinstance(a, c.Send) and (kind is None or isinstance(a.msg, kind))]


def claim_static_slot(daemon: StartdDaemon, now: float, conn: int = 1) -> str:
    slot = daemon.startd.slots[f"slot1@{MACHINE}"]
    job = '[ ClusterId = 3; ProcId = 0; Cmd = "/bin/true"; RequestCpus = 1; RequestMemory = 64 ]'
    out = daemon.handle(c.Received(m.RequestClaim(claim_id=slot.claim_id, schedd_name="schedd@s", schedd_address="schedd",
                                                  submitter="alice@test", job_ad=job), conn_id=conn), now)
    (reply,) = [a for a in out if isinstance(a, c.Reply)]
    assert reply.conn_id == conn and reply.msg.accepted, reply
    return reply.msg.claim_id


def test_slot_ads_of_one_slot_go_out_in_order_and_failed_ones_are_retried(tmp_path):
    daemon, out = adapter(tmp_path)
    (first,) = sends(out, m.UpdateAd)
    ad = ClassAd(first.msg.ad_text)
    assert ad["State"] == "Unclaimed" and ad["ClaimId"] == daemon.startd.slots[f"slot1@{MACHINE}"].claim_id
    assert ad["MyAddress"] == "startd" and first.to == "collector"
    assert str(ad.lookup("SlotWeight")) == "Cpus" and ad.eval("SlotWeight") == 2
    # A change while the first update is on its way waits for it, so the collector ends with the newest.
    out = daemon.handle(c.Received(m.DrainJobs(how="graceful")), T0 + 1)
    assert sends(out, m.UpdateAd) == [] and any(isinstance(a, c.Reply) for a in out)
    out = daemon.handle(c.SendDone("collector", first.msg, m.Ack(), first.cookie), T0 + 1)
    (second,) = sends(out, m.UpdateAd)
    assert ClassAd(second.msg.ad_text)["State"] == "Drained"
    out = daemon.handle(c.SendFailed("collector", second.msg, "no collector", second.cookie), T0 + 2)
    assert any("retrying" in a.text for a in out if isinstance(a, c.Log))
    assert daemon.next_deadline() <= T0 + 2.2
    out = daemon.handle(c.Tick(), T0 + 2.3)
    assert [s.msg for s in sends(out, m.UpdateAd)] == [second.msg]


def test_unknown_slots_claims_and_bad_ads_get_clear_error_replies(tmp_path):
    daemon, _ = adapter(tmp_path)
    out = daemon.handle(c.Received(m.RequestClaim(claim_id="slot9@x#1#ab", schedd_name="s", schedd_address="s",
                                                  submitter="a@b", job_ad="[ A = 1 ]"), conn_id=4), T0)
    (reply,) = out
    assert reply.msg.code == "not_found" and "has no slot 'slot9@x'" in reply.msg.message
    out = daemon.handle(c.Received(m.ActivateClaim(claim_id="slot1@node1.test#9#ff", job_ad="[ A = 1 ]",
                                                   shadow_address="schedd"), conn_id=5), T0)
    assert out[0].msg.code == "not_found" and "holds no claim slot1@node1.test#9#..." in out[0].msg.message
    out = daemon.handle(c.Received(m.ClaimKeepAlive(claim_id="nope"), conn_id=6), T0)
    assert out[0].msg.code == "not_found"
    slot = daemon.startd.slots[f"slot1@{MACHINE}"]
    out = daemon.handle(c.Received(m.RequestClaim(claim_id=slot.claim_id, schedd_name="s", schedd_address="s",
                                                  submitter="a@b", job_ad="[ A = ]"), conn_id=7), T0)
    assert out[0].msg.code == "bad_request" and "not a ClassAd" in out[0].msg.message
    out = daemon.handle(c.Received(m.QueryJobs(), conn_id=8), T0)
    assert out[0].msg.code == "unknown_request"


def test_a_reconnecting_shadow_never_starts_the_job_twice(tmp_path):
    daemon, _ = adapter(tmp_path)
    claim_id = claim_static_slot(daemon, T0 + 1)
    job = '[ ClusterId = 3; ProcId = 0; Cmd = "/bin/true"; RequestCpus = 1; RequestMemory = 64 ]'
    activate = m.ActivateClaim(claim_id=claim_id, job_ad=job, shadow_address="schedd")
    out = daemon.handle(c.Received(activate, conn_id=2), T0 + 2)
    assert [type(a) for a in out if isinstance(a, (RunStarter, c.Reply))] == [RunStarter, c.Reply]
    assert [a.msg for a in out if isinstance(a, c.Reply)] == [m.Ack(detail="starting job 3.0")]
    # The schedd restarted and asks again: the job is running, nothing new starts.
    out = daemon.handle(c.Received(activate, conn_id=3), T0 + 3)
    assert not [a for a in out if isinstance(a, RunStarter)]
    assert out[-1].msg.code == "bad_request" and "already running job 3.0" in out[-1].msg.message
    record = ExitRecord(0, None, False, False, False, Usage())
    out = daemon.handle(StarterExited(claim_id, record), T0 + 4)
    (report,) = [a for a in out if isinstance(a.msg if hasattr(a, "msg") else None, m.JobExited)]
    assert report.msg.exit_code == 0 and report.to == "schedd"
    out = daemon.handle(CallFailed("schedd", report.msg, "unreachable", "schedd is down", report.cookie), T0 + 5)
    # Ended but not yet reported: a new activation of the same job is refused and the report re-sent.
    out = daemon.handle(c.Received(activate, conn_id=4), T0 + 5.1)
    assert not [a for a in out if isinstance(a, RunStarter)]
    assert "already ended" in [a for a in out if isinstance(a, c.Reply)][0].msg.message
    assert [a.msg for a in out if hasattr(a, "msg") and isinstance(a.msg, m.JobExited)] == [report.msg]
    out = daemon.handle(CallDone("schedd", report.msg, m.Ack(), report.cookie), T0 + 6)
    assert daemon.contacts[claim_id].exit_report is None
    # Once reported, the next activation (the next job of the claim) runs.
    out = daemon.handle(c.Received(activate, conn_id=5), T0 + 7)
    assert [a for a in out if isinstance(a, RunStarter)]


def test_a_job_the_starter_cannot_start_is_reported_for_holding(tmp_path):
    daemon, _ = adapter(tmp_path)
    claim_id = claim_static_slot(daemon, T0 + 1)
    job = '[ ClusterId = 3; ProcId = 1; Cmd = "/no/such"; RequestCpus = 1 ]'
    daemon.handle(c.Received(m.ActivateClaim(claim_id=claim_id, job_ad=job, shadow_address="sh"), conn_id=2), T0 + 2)
    daemon.handle(StarterStarted(claim_id), T0 + 2)
    out = daemon.handle(StarterFailed(claim_id, "cannot start /no/such: No such file", 6), T0 + 3)
    (report,) = [a for a in out if hasattr(a, "msg") and isinstance(a.msg, m.JobExited)]
    usage = ClassAd(report.msg.usage_ad)
    assert report.to == "sh" and report.msg.job_id == "3.1" and report.msg.vacated
    assert usage["StarterError"].startswith("cannot start /no/such") and usage["HoldReasonCode"] == 6
    assert daemon.startd.slots[f"slot1@{MACHINE}"].activity.value == "Idle"


def test_a_lease_that_expires_while_preempting_does_not_spin_the_timer(tmp_path):
    daemon, _ = adapter(tmp_path)
    claim_id = claim_static_slot(daemon, T0 + 1)
    daemon.handle(c.Received(m.ActivateClaim(claim_id=claim_id, job_ad="[ ClusterId = 3; Cmd = \"/bin/true\" ]",
                                             shadow_address="sh")), T0 + 2)
    out = daemon.handle(c.Received(m.Vacate(claim_id=claim_id)), T0 + 3)
    assert [a for a in out if isinstance(a, ev.VacateJob)]
    late = T0 + 10_000  # long past the claim's lease; the job is still vacating
    daemon.handle(c.Tick(), late)
    assert daemon.next_deadline() > late


def delivered(daemon: StartdDaemon, actions, now: float) -> list:
    """Acknowledge every ad update in ``actions``; return what the adapter does next."""
    out = []
    for send in sends(actions, m.UpdateAd):
        out += daemon.handle(c.SendDone(send.to, send.msg, m.Ack(), send.cookie), now)
    return out


def test_a_slot_that_becomes_free_asks_for_a_cycle_once_the_collector_has_its_ad(tmp_path):
    daemon, out = adapter(tmp_path)
    assert sends(out, m.Reschedule) == []  # not before the collector has the ad
    (ask,) = delivered(daemon, out, T0)
    assert ask.to == "negotiator" and isinstance(ask.msg, m.Reschedule)
    slot = daemon.startd.slots[f"slot1@{MACHINE}"]
    out = daemon.handle(c.Received(m.RequestClaim(
        claim_id=slot.claim_id, schedd_name="schedd@s", schedd_address="schedd", submitter="alice@test",
        job_ad='[ ClusterId = 3; ProcId = 0; Cmd = "/bin/true"; RequestCpus = 1 ]'), conn_id=8), T0 + 1)
    (reply,) = [a for a in out if isinstance(a, c.Reply)]
    assert sends(delivered(daemon, out, T0 + 1), m.Reschedule) == []  # claimed: nothing to offer
    out = daemon.handle(c.Received(m.ReleaseClaim(claim_id=reply.msg.claim_id, reason="done"), conn_id=9), T0 + 2)
    (update,) = sends(out, m.UpdateAd)
    assert ClassAd(update.msg.ad_text)["State"] == "Unclaimed"
    assert sends(delivered(daemon, out, T0 + 2), m.Reschedule)  # free again: news for the negotiator
    # An ad that offers nothing new (the periodic refresh) asks for nothing.
    out = daemon.handle(c.Tick(), T0 + 10_000)
    assert sends(out, m.UpdateAd) and sends(delivered(daemon, out, T0 + 10_000), m.Reschedule) == []


def test_a_claimed_slot_sends_activity_changes_once_a_second_and_state_changes_at_once(tmp_path):
    daemon, out = adapter(tmp_path)
    delivered(daemon, out, T0)
    slot = daemon.startd.slots[f"slot1@{MACHINE}"]
    out = daemon.handle(c.Received(m.RequestClaim(
        claim_id=slot.claim_id, schedd_name="schedd@s", schedd_address="schedd", submitter="alice@test",
        job_ad='[ ClusterId = 3; ProcId = 0; Cmd = "/bin/true"; RequestCpus = 1 ]'), conn_id=8), T0 + 1)
    (claimed,) = sends(out, m.UpdateAd)  # Unclaimed -> Claimed: at once
    (reply,) = [a for a in out if isinstance(a, c.Reply)]
    delivered(daemon, out, T0 + 1)
    claim_id = reply.msg.claim_id
    activate = m.ActivateClaim(claim_id=claim_id, job_ad='[ ClusterId = 3; ProcId = 0; Cmd = "/bin/true" ]',
                               shadow_address="schedd")
    out = daemon.handle(c.Received(activate, conn_id=9), T0 + 2)
    assert sends(out, m.UpdateAd) == []  # Claimed/Idle -> Claimed/Busy: later
    assert [a for a in out if isinstance(a, RunStarter)]
    daemon.handle(StarterStarted(claim_id), T0 + 2.1)
    out = daemon.handle(StarterExited(claim_id, ExitRecord(0, None, False, False, False, Usage())), T0 + 2.2)
    assert sends(out, m.UpdateAd) == [] and daemon.next_deadline() <= T0 + 3
    (update,) = sends(daemon.handle(c.Tick(), T0 + 3), m.UpdateAd)
    assert ClassAd(update.msg.ad_text)["Activity"] == "Idle"  # only the newest
    # A state change is not deferred: it waits only for the update on its way to be delivered.
    out = daemon.handle(c.Received(m.ReleaseClaim(claim_id=claim_id, reason="done"), conn_id=10), T0 + 3.5)
    assert sends(out, m.UpdateAd) == []
    (freed,) = sends(daemon.handle(c.SendDone(update.to, update.msg, m.Ack(), update.cookie), T0 + 3.5), m.UpdateAd)
    assert ClassAd(freed.msg.ad_text)["State"] == "Unclaimed"


def test_reconfig_applies_a_new_policy_and_readvertises(tmp_path):
    daemon, out = adapter(tmp_path)
    assert sends(delivered(daemon, out, T0), m.Reschedule)  # the new slot is news for the negotiator
    stricter = settings(tmp_path, policy=ClassAdPolicy({"START": "KeyboardIdle > 100000",
                                                             "IS_OWNER": "(START =?= False)"}), static_slots=1)
    out = daemon.handle(c.Reconfigured(stricter), T0 + 1)
    assert len(sends(out, m.UpdateAd)) == 1  # every slot is advertised again at once
    delivered(daemon, out, T0 + 1)
    assert daemon.next_deadline() <= T0 + 1  # and the new policy is evaluated on a fresh sample
    assert any(isinstance(a, SampleSensors) for a in daemon.handle(c.Tick(), T0 + 1))
    (update,) = sends(daemon.handle(Sampled(dict(IDLE)), T0 + 1.1), m.UpdateAd)
    assert ClassAd(update.msg.ad_text)["State"] == "Owner"  # 7200 s idle is not enough any more
    base = settings(tmp_path, static_slots=1)
    bigger = replace(base, startd=replace(base.startd, cpus=64))
    out = daemon.handle(c.Reconfigured(bigger), T0 + 2)
    assert any("keep their old resources" in a.text for a in out if isinstance(a, c.Log))
    assert daemon.startd.settings.cpus == 2


# --------------------------------------------------------------------------- the service, in process


class Peer:
    """A schedd/shadow stand-in listening on the pool's sockets: records and acknowledges
    (a CallsDone with an answer that brings no more calls)."""

    def __init__(self):
        self.got: list[m.Message] = []
        self.arrived = asyncio.Event()

    async def serve(self, conn):
        while True:
            msg = await conn.recv(timeout=60)
            self.got.append(msg)
            self.arrived.set()
            await conn.send(m.MoreCalls() if isinstance(msg, m.CallsDone) else m.Ack())

    async def wait_for(self, kind, where=lambda msg: True, timeout=10.0):
        async with asyncio.timeout(timeout):
            while True:
                found = [x for x in self.got if isinstance(x, kind) and where(x)]
                if found:
                    return found[0]
                self.arrived.clear()
                await self.arrived.wait()


async def wait_for_ads(t, constraint: str, timeout: float = 10.0, count: int = 1) -> list[ClassAd]:
    async with asyncio.timeout(timeout):
        while True:
            # with ClaimId: these tests claim slots as a schedd would after the negotiator's private query
            ads = await query_collector_async(m.AdType.Startd, constraint, transport=t, private=True)
            if len(ads) >= count:
                return ads
            await asyncio.sleep(0.05)


async def wait_serving(t, address: str) -> None:
    async with asyncio.timeout(10):
        while True:
            try:
                await send_command_async(address, m.Ping(), transport=t)
                return
            except DaemonUnreachable:
                await asyncio.sleep(0.02)


async def with_pool(home: Path, startd_settings: StartdServiceSettings, body, peers=()):
    """Run a collector, the startd and ``peers`` ({address: Peer}) while ``body(transport)`` runs."""
    t = DaemonPaths(home).transport()
    collector = DaemonService("collector", Collector(CollectorSettings()), t)
    startd = StartdService(startd_settings, t, log_file=home / "StartLog")
    async with asyncio.TaskGroup() as tg:
        servers = [await t.start_server(name, peer.serve, task_group=tg) for name, peer in dict(peers).items()]
        collector_run = tg.create_task(collector.run())
        await wait_serving(t, "collector")
        startd_run = tg.create_task(startd.run())
        try:
            await wait_serving(t, "startd")
            result = await body(t, startd)
        finally:
            startd.feed(c.StopRequested(fast=True))
            status = await asyncio.wait_for(startd_run, 15)
            collector.feed(c.StopRequested())
            await collector_run
            for server in servers:
                await server.aclose()
    assert status == 0
    return result


def test_a_fake_clock_decides_when_the_service_samples_and_readvertises(home):
    """The service reads the time and waits only through its clock: with a FakeClock the machine
    is sampled, and the slot ad sent again at UPDATE_INTERVAL, only when the test moves the clock."""
    clock = FakeClock()
    start = clock.time()

    async def body():
        t = DaemonPaths(home).transport()
        collector = DaemonService("collector", Collector(CollectorSettings()), t)
        startd = StartdService(settings(home), t, log_file=home / "StartLog", clock=clock)
        samples = []
        sample = startd.sensors.sample
        startd.sensors.sample = lambda now=None, job_cpu=None: samples.append(now) or sample(now, job_cpu)
        async with asyncio.TaskGroup() as tg:
            collector_run = tg.create_task(collector.run())
            await wait_serving(t, "collector")
            startd_run = tg.create_task(startd.run())
            try:
                await wait_serving(t, "startd")
                (first,) = await wait_for_ads(t, "PartitionableSlot")
                await asyncio.sleep(0.5)  # five sample intervals of real time: nothing happens
                quiet = list(samples)
                clock.advance(0.1)  # one sample interval of the startd's time
                for _ in range(200):
                    await clock.settle()
                    if len(samples) > 1:
                        break
                    await asyncio.sleep(0.01)
                sampled = list(samples)
                (still,) = await wait_for_ads(t, "PartitionableSlot")
                clock.advance(60)  # UPDATE_INTERVAL: the core refreshes every slot ad
                await clock.settle()
                (again,) = await wait_for_ads(t, f"UpdateSequenceNumber > {first['UpdateSequenceNumber']}")
            finally:
                startd.feed(c.StopRequested(fast=True))
                status = await asyncio.wait_for(startd_run, 15)
                collector.feed(c.StopRequested())
                await collector_run
        assert status == 0
        return first, quiet, sampled, still, again

    first, quiet, sampled, still, again = asyncio.run(body())
    assert quiet == [start] and sampled == [start, start + 0.1]
    assert first["EnteredCurrentState"] == int(start) and first["MyCurrentTime"] == int(start)
    assert first["DaemonStartTime"] == int(start)
    assert still["UpdateSequenceNumber"] == first["UpdateSequenceNumber"]  # no refresh before UPDATE_INTERVAL
    assert again["DaemonStartTime"] == int(start) and again["State"] == "Unclaimed"


def test_slot_ads_carry_measured_attributes_that_submit_requirements_match(home):
    iwd = home / "iwd"
    iwd.mkdir()
    job = ClassAd(submit_job(iwd, "executable = /bin/echo"))

    async def body(t, startd):
        (ad,) = await wait_for_ads(t, "SlotType == \"Partitionable\"")
        return ad

    ad = asyncio.run(with_pool(home, settings(home), body))
    assert ad["Name"] == f"slot1@{MACHINE}" and ad["State"] == "Unclaimed" and ad["Cpus"] == 2
    for attr in ("Arch", "OpSys", "OpSysAndVer", "KeyboardIdle", "LoadAvg", "CondorLoadAvg", "Mips", "KFlops"):
        assert attr in ad, attr
    assert ad["CondorVersion"].startswith("$CondorVersion: 25.14.1 ") and ad["HasFileTransfer"] is True
    assert ad["MyAddress"] == "startd" and isinstance(ad["ClaimId"], str)
    # The job's Requirements (Arch, OpSys, versionGE(CondorVersion), FileSystemDomain, Memory, Disk)
    # and the slot's Requirements (START and the partitionable fit) hold both ways.
    assert job.eval("Requirements", target=ad) is True
    assert ad.eval("Requirements", target=job) is True
    assert ad["FileSystemDomain"] == job.get("FileSystemDomain", ad["FileSystemDomain"])


def test_sensor_override_takes_the_slot_from_owner_to_unclaimed(home):
    write_sensor_override({"KeyboardIdle": 0, "LoadAvg": 0.0}, home / "override")
    policy = ClassAdPolicy(DESKTOP)

    async def body(t, startd):
        (owner,) = await wait_for_ads(t, 'State == "Owner"')
        write_sensor_override({"KeyboardIdle": 3600, "ConsoleIdle": 3600, "LoadAvg": 0.0, "CondorLoadAvg": 0.0},
                              home / "override")
        (free,) = await wait_for_ads(t, 'State == "Unclaimed"')
        return owner, free

    owner, free = asyncio.run(with_pool(home, settings(home, policy=policy), body))
    assert owner["KeyboardIdle"] == 0 and owner["IsOwner"] is True
    assert free["KeyboardIdle"] == 3600 and free["IsOwner"] is False
    assert free["EnteredCurrentState"] >= owner["EnteredCurrentState"]


def test_claim_and_activation_run_a_real_echo_job_and_report_its_exit(home):
    iwd = home / "iwd"
    iwd.mkdir()
    iwd.chmod(0o777)
    job = submit_job(iwd, "executable = /bin/echo\narguments = hello from htc\noutput = out.txt\nerror = err.txt")
    shadow = Peer()

    async def body(t, startd):
        (slot,) = await wait_for_ads(t, "PartitionableSlot")
        claim = await send_command_async("startd", m.RequestClaim(
            claim_id=slot["ClaimId"], schedd_name="schedd@test", schedd_address="shadow", submitter="alice@test",
            job_ad=job), transport=t)
        assert claim.accepted and claim.claim_id != slot["ClaimId"]  # a dynamic slot, with its own claim
        dslot = ClassAd(claim.slot_ad)
        ack = await send_command_async("startd", m.ActivateClaim(claim_id=claim.claim_id, job_ad=job,
                                                                 shadow_address="shadow"), transport=t)
        exited = await shadow.wait_for(m.JobExited)
        (busy,) = await wait_for_ads(t, f'Name == "{dslot["Name"]}" && State == "Claimed"')
        release = await send_command_async("startd", m.ReleaseClaim(claim_id=claim.claim_id), transport=t)
        (back,) = await wait_for_ads(t, "PartitionableSlot && Cpus == 2 && NumDynamicSlots == 0")
        return claim, dslot, ack, exited, release

    claim, dslot, ack, exited, release = asyncio.run(with_pool(home, settings(home), body, {"shadow": shadow}))
    assert dslot["Name"] == f"slot1_1@{MACHINE}" and dslot["Cpus"] == 1 and dslot["Memory"] == 128
    assert ack == m.Ack(detail="starting job 7.0")
    assert exited.claim_id == claim.claim_id and exited.job_id == "7.0"
    assert (exited.exit_code, exited.exit_signal, exited.vacated) == (0, None, False)
    usage = ClassAd(exited.usage_ad)
    assert usage["ExitCode"] == 0 and usage["ExitBySignal"] is False and "RemoteSysCpu" in usage
    assert (iwd / "out.txt").read_text() == "hello from htc\n"
    assert release == m.Ack()
    assert list((home / "execute").iterdir()) == []  # the sandbox is gone
    log = (home / "StartLog").read_text() if (home / "StartLog").exists() else ""
    assert "claimed by schedd@test" in log and "ended with exit code 0" in log


def test_suspend_continue_and_vacate_reach_the_running_job(home):
    iwd = home / "iwd"
    iwd.mkdir()
    iwd.chmod(0o777)
    job = submit_job(iwd, "executable = /bin/sleep\narguments = 30", cluster=9)
    peer = Peer()

    async def body(t, startd):
        (slot,) = await wait_for_ads(t, "PartitionableSlot")
        claim = await send_command_async("startd", m.RequestClaim(
            claim_id=slot["ClaimId"], schedd_name="schedd@test", schedd_address="schedd", submitter="alice@test",
            job_ad=job), transport=t)
        await send_command_async("startd", m.ActivateClaim(claim_id=claim.claim_id, job_ad=job,
                                                           shadow_address="schedd"), transport=t)
        running = await peer.wait_for(m.StarterUpdate, lambda u: "RemoteUserCpu" in ClassAd(u.update_ad))
        await send_command_async("startd", m.Suspend(claim_id=claim.claim_id), transport=t)
        suspended = await peer.wait_for(m.StarterUpdate, lambda u: ClassAd(u.update_ad)["JobState"] == "Suspended")
        await send_command_async("startd", m.Continue(claim_id=claim.claim_id), transport=t)
        started = time.monotonic()
        await send_command_async("startd", m.Vacate(claim_id=claim.claim_id), transport=t)
        exited = await peer.wait_for(m.JobExited)
        took = time.monotonic() - started
        ended = await peer.wait_for(m.ReleaseClaim)
        with pytest.raises(RemoteError, match="holds no claim"):
            await send_command_async("startd", m.Suspend(claim_id=claim.claim_id), transport=t)
        return claim, running, suspended, exited, took, ended

    claim, running, suspended, exited, took, ended = asyncio.run(
        with_pool(home, settings(home), body, {"schedd": peer}))
    assert ClassAd(running.update_ad)["JobState"] == "Running"
    assert suspended.job_id == "9.0"
    assert exited.vacated and exited.exit_signal == signal.SIGTERM and took < 5
    assert ClassAd(exited.usage_ad)["VacateReason"] == "condor_vacate"
    assert ended.claim_id == claim.claim_id and ended.reason == "condor_vacate"


def test_a_graceful_stop_vacates_the_job_tells_the_schedd_and_withdraws_the_ads(home):
    iwd = home / "iwd"
    iwd.mkdir()
    iwd.chmod(0o777)
    job = submit_job(iwd, "executable = /bin/sleep\narguments = 30", cluster=10)
    peer = Peer()

    async def body(t, startd):
        (slot,) = await wait_for_ads(t, "PartitionableSlot")
        claim = await send_command_async("startd", m.RequestClaim(
            claim_id=slot["ClaimId"], schedd_name="schedd@test", schedd_address="schedd", submitter="alice@test",
            job_ad=job), transport=t)
        await send_command_async("startd", m.ActivateClaim(claim_id=claim.claim_id, job_ad=job,
                                                           shadow_address="schedd"), transport=t)
        await peer.wait_for(m.StarterUpdate)
        startd.feed(c.StopRequested())
        exited = await peer.wait_for(m.JobExited)
        ended = await peer.wait_for(m.ReleaseClaim)
        async with asyncio.timeout(10):
            while True:
                try:
                    await send_command_async("startd", m.Ping(), transport=t)
                except (DaemonUnreachable, ConnectionClosed):  # gone, or closing as we connected
                    break
                await asyncio.sleep(0.05)
        return exited, ended, await query_collector_async(m.AdType.Startd, transport=t)

    exited, ended, ads = asyncio.run(with_pool(home, settings(home), body, {"schedd": peer}))
    assert exited.vacated and exited.exit_signal == signal.SIGTERM
    assert ClassAd(exited.usage_ad)["VacateReason"] == f"the startd on {MACHINE} is shutting down"
    assert ended.reason == f"the startd on {MACHINE} is shutting down"
    assert ads == []
    assert list((home / "execute").iterdir()) == []


def test_the_exit_of_a_job_reaches_a_schedd_that_was_away_when_it_ended(home):
    iwd = home / "iwd"
    iwd.mkdir()
    iwd.chmod(0o777)
    job = submit_job(iwd, "executable = /bin/true", cluster=11)
    shadow = Peer()

    async def body(t, startd):
        (slot,) = await wait_for_ads(t, "PartitionableSlot")
        claim = await send_command_async("startd", m.RequestClaim(
            claim_id=slot["ClaimId"], schedd_name="schedd@test", schedd_address="away", submitter="alice@test",
            job_ad=job, lease_duration=60), transport=t)
        await send_command_async("startd", m.ActivateClaim(claim_id=claim.claim_id, job_ad=job,
                                                           shadow_address="away"), transport=t)
        async with asyncio.timeout(10):
            while claim.claim_id in startd.daemon_core.running or "cannot tell away" not in \
                    (home / "StartLog").read_text():
                await asyncio.sleep(0.05)
        # The schedd comes back (within the lease) and gets the report it missed.
        async with asyncio.TaskGroup() as tg:
            server = await t.start_server("away", shadow.serve, task_group=tg)
            try:
                return await shadow.wait_for(m.JobExited)
            finally:
                await server.aclose()

    exited = asyncio.run(with_pool(home, settings(home), body))
    assert exited.job_id == "11.0" and exited.exit_code == 0


def test_a_missing_executable_is_reported_with_a_hold_code(home):
    iwd = home / "iwd"
    iwd.mkdir()
    job = submit_job(iwd, "executable = missing.sh", cluster=12)
    peer = Peer()

    async def body(t, startd):
        (slot,) = await wait_for_ads(t, "PartitionableSlot")
        claim = await send_command_async("startd", m.RequestClaim(
            claim_id=slot["ClaimId"], schedd_name="schedd@test", schedd_address="schedd", submitter="alice@test",
            job_ad=job), transport=t)
        await send_command_async("startd", m.ActivateClaim(claim_id=claim.claim_id, job_ad=job,
                                                           shadow_address="schedd"), transport=t)
        return await peer.wait_for(m.JobExited)

    exited = asyncio.run(with_pool(home, settings(home), body, {"schedd": peer}))
    usage = ClassAd(exited.usage_ad)
    assert exited.vacated and "missing.sh" in usage["StarterError"] and usage["HoldReasonCode"] in (6, 13)


def test_drain_empties_the_machine_and_cancel_reopens_it(home):
    async def body(t, startd):
        await wait_for_ads(t, 'State == "Unclaimed"')
        await send_command_async("startd", m.DrainJobs(how="quick", reason="kernel update"), transport=t)
        (drained,) = await wait_for_ads(t, 'State == "Drained"')
        await send_command_async("startd", m.CancelDrainJobs(), transport=t)
        await wait_for_ads(t, 'State == "Unclaimed"')
        return drained

    drained = asyncio.run(with_pool(home, settings(home), body))
    assert drained["Requirements"] is False


# --------------------------------------------------------------------------- a real process


@pytest.mark.slow
def test_startd_process_advertises_runs_a_job_and_stops_on_sigterm(home):
    env = dict(os.environ, HTC_HOME=str(home), _HTC_POLLING_INTERVAL="1", _HTC_STARTER_INITIAL_UPDATE_INTERVAL="1",
               _HTC_NUM_CPUS="2", _HTC_MEMORY="1024", _HTC_DISK="5000000")
    procs = [subprocess.Popen([sys.executable, "-m", "htc.daemons", name], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("collector", "startd")]
    iwd = home / "iwd"
    iwd.mkdir()
    iwd.chmod(0o777)
    job = submit_job(iwd, "executable = /bin/echo\narguments = from a process\noutput = out.txt")
    shadow = Peer()
    t = UnixTransport(home / "sockets")

    async def body():
        async with asyncio.TaskGroup() as tg:
            server = await t.start_server("schedd", shadow.serve, task_group=tg)
            try:
                async with asyncio.timeout(20):
                    while True:
                        try:
                            ads = await query_collector_async(m.AdType.Startd, transport=t, private=True)
                        except DaemonUnreachable:
                            ads = []
                        if ads:
                            break
                        for proc in procs:
                            assert proc.poll() is None, proc.communicate()
                        await asyncio.sleep(0.1)
                (slot,) = ads
                claim = await send_command_async("startd", m.RequestClaim(
                    claim_id=slot["ClaimId"], schedd_name="schedd@test", schedd_address="schedd",
                    submitter="alice@test", job_ad=job), transport=t)
                await send_command_async("startd", m.ActivateClaim(claim_id=claim.claim_id, job_ad=job,
                                                                   shadow_address="schedd"), transport=t)
                return slot, await shadow.wait_for(m.JobExited, timeout=15)
            finally:
                await server.aclose()

    try:
        slot, exited = asyncio.run(body())
        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(timeout=15) == 0
        remaining = asyncio.run(query_collector_async(m.AdType.Startd, transport=t))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)
    assert slot["Cpus"] == 2 and slot["TotalMemory"] == 1024 and slot["Disk"] == 5000000
    assert {"Arch", "OpSys", "KeyboardIdle", "LoadAvg", "CondorVersion"} <= set(slot)
    assert exited.exit_code == 0 and (iwd / "out.txt").read_text() == "from a process\n"
    assert remaining == []  # the stopping startd withdrew its ads
    log = (home / "log" / "StartLog").read_text()
    assert "got SIGTERM" in log and "exiting with status 0" in log
