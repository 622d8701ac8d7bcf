"""Claim watches at the startd (htc.daemons.startd.watches): the wire adapter alone, then the
service on a real socket whose client dies."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

from htc.daemons import core as c
from htc.daemons.startd import events as ev
from htc.daemons.startd.service import StartdService
from htc.daemons.startd.events import HoldWatch, RunStarter, StarterStarted, WatchClosed
from htc.daemons.startd.states import State
from htc.daemons.startd.watches import MAX_WATCH, UNWATCHED_GRACE
from htc.wire import messages as m
from htc.wire.transport import PeerInfo, UnixTransport
from test_startd_service import IDLE, MACHINE, T0, adapter, claim_static_slot, settings, sends  # noqa: F401

JOB = '[ ClusterId = 3; ProcId = 0; Cmd = "/bin/true"; RequestCpus = 1; RequestMemory = 64 ]'


def replies(out):
    return [a for a in out if isinstance(a, c.Reply)]


def slot_state(daemon):
    return daemon.startd.slots[f"slot1@{MACHINE}"].state


def test_a_watch_is_held_renews_the_lease_and_is_answered_when_its_time_is_up(tmp_path):
    daemon, _ = adapter(tmp_path)
    claim_id = claim_static_slot(daemon, T0 + 1)
    out = daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=claim_id, watch=5.0), conn_id=9), T0 + 2)
    assert replies(out) == [] and [a for a in out if isinstance(a, HoldWatch)] == [HoldWatch(9)]
    assert daemon.startd.slots[f"slot1@{MACHINE}"].claim.last_alive == T0 + 2
    assert daemon.next_deadline() <= T0 + 7
    out = daemon.handle(c.Tick(), T0 + 7)
    assert [(r.conn_id, r.msg) for r in replies(out)] == [(9, m.Ack(detail="still claimed"))]
    assert daemon.startd.slots[f"slot1@{MACHINE}"].claim.last_alive == T0 + 7
    # A watch is held at most MAX_WATCH seconds; a newer watch of the claim answers the older one.
    daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=claim_id, watch=1e9), conn_id=10), T0 + 8)
    assert daemon.watches[claim_id].until == T0 + 8 + MAX_WATCH
    out = daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=claim_id, watch=3.0), conn_id=11), T0 + 9)
    assert [r.conn_id for r in replies(out)] == [10]
    # A closed connection that no longer holds the watch changes nothing.
    daemon.handle(WatchClosed(10), T0 + 9.5)
    assert slot_state(daemon) is State.CLAIMED


def test_a_watch_on_a_claim_that_ended_is_answered_not_found(tmp_path):
    daemon, _ = adapter(tmp_path)
    claim_id = claim_static_slot(daemon, T0 + 1)
    daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=claim_id, watch=5.0), conn_id=9), T0 + 2)
    daemon.handle(c.Received(m.ReleaseClaim(claim_id=claim_id), conn_id=3), T0 + 3)
    out = daemon.handle(c.Tick(), T0 + 8)
    [reply] = [r for r in replies(out) if r.conn_id == 9]
    assert reply.msg.code == "not_found" and "ended" in reply.msg.message
    assert daemon.watches == {}


def test_the_schedd_gone_an_idle_claim_is_released_at_once(tmp_path):
    daemon, _ = adapter(tmp_path)
    claim_id = claim_static_slot(daemon, T0 + 1)
    daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=claim_id, watch=60.0), conn_id=9), T0 + 2)
    out = daemon.handle(WatchClosed(9), T0 + 3)
    assert slot_state(daemon) is not State.CLAIMED
    assert daemon.startd.slots[f"slot1@{MACHINE}"].claim is None
    assert sends(out, m.ReleaseClaim) == []  # nobody to tell
    assert any("the schedd is gone" in a.text for a in out if isinstance(a, c.Log))


def test_the_schedd_gone_a_job_keeps_running_within_its_lease_and_a_lane_ends(tmp_path):
    daemon, _ = adapter(tmp_path)
    claim_id = claim_static_slot(daemon, T0 + 1)
    out = daemon.handle(c.Received(m.ActivateClaim(claim_id=claim_id, job_ad=JOB, shadow_address="schedd"),
                                   conn_id=2), T0 + 2)
    assert [a for a in out if isinstance(a, RunStarter)]
    daemon.handle(StarterStarted(claim_id), T0 + 2)
    daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=claim_id, watch=60.0), conn_id=9), T0 + 3)
    out = daemon.handle(WatchClosed(9), T0 + 4)
    assert not [a for a in out if isinstance(a, (ev.VacateJob, ev.KillJob))]
    assert slot_state(daemon) is State.CLAIMED and claim_id in daemon.running
    assert any("keeps running within the claim lease" in a.text for a in out if isinstance(a, c.Log))
    # A restarted schedd reconnects with a keep-alive and watches again.
    out = daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=claim_id), conn_id=12), T0 + 5)
    assert [r.msg for r in replies(out)] == [m.Ack()]

    lane_daemon, _ = adapter(tmp_path)
    lane_claim = claim_static_slot(lane_daemon, T0 + 1)
    lane_daemon.handle(c.Received(m.ActivateClaim(claim_id=lane_claim, job_ad=JOB, shadow_address="schedd",
                                                  lane=True), conn_id=2), T0 + 2)
    lane_daemon.handle(StarterStarted(lane_claim), T0 + 2)
    lane_daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=lane_claim, watch=60.0), conn_id=9), T0 + 3)
    out = lane_daemon.handle(WatchClosed(9), T0 + 4)
    assert [a for a in out if isinstance(a, ev.KillJob)], out  # the orphaned worker ends at once
    assert any("its call lane ends" in a.text for a in out if isinstance(a, c.Log))


def test_a_granted_claim_no_schedd_comes_to_watch_is_released_after_the_grace(tmp_path):
    daemon, _ = adapter(tmp_path)
    claim_id = claim_static_slot(daemon, T0 + 1)  # the schedd died before it could watch it
    assert daemon.next_deadline() <= T0 + 1 + UNWATCHED_GRACE
    daemon.handle(c.Tick(), T0 + UNWATCHED_GRACE)
    assert slot_state(daemon) is State.CLAIMED
    out = daemon.handle(c.Tick(), T0 + 1 + UNWATCHED_GRACE)
    assert daemon.startd.slots[f"slot1@{MACHINE}"].claim is None
    assert any("no watch from its schedd" in a.text for a in out if isinstance(a, c.Log))
    # A claim that was watched in time is not.
    other, _ = adapter(tmp_path)
    watched_id = claim_static_slot(other, T0 + 1)
    other.handle(c.Received(m.ClaimKeepAlive(claim_id=watched_id, watch=60.0), conn_id=9), T0 + 2)
    other.handle(c.Tick(), T0 + 1 + UNWATCHED_GRACE)
    assert other.startd.slots[f"slot1@{MACHINE}"].claim is not None


def test_only_the_uid_that_claimed_may_watch_the_claim(tmp_path):
    daemon, _ = adapter(tmp_path)
    slot = daemon.startd.slots[f"slot1@{MACHINE}"]
    out = daemon.handle(c.Received(m.RequestClaim(claim_id=slot.claim_id, schedd_name="schedd@s",
                                                  schedd_address="schedd", submitter="alice@test", job_ad=JOB),
                                   conn_id=1, peer=PeerInfo(uid=1000)), T0 + 1)
    [reply] = replies(out)
    claim_id = reply.msg.claim_id
    # Another user who read the claim id in an old slot ad cannot watch it (and end it by closing).
    out = daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=claim_id, watch=60.0), conn_id=2,
                                   peer=PeerInfo(uid=1001)), T0 + 2)
    [denied] = replies(out)
    assert denied.msg.code == "denied" and "only its claimant may watch it" in denied.msg.message
    assert daemon.watches == {}
    out = daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=claim_id, watch=60.0), conn_id=3,
                                   peer=PeerInfo(uid=1000)), T0 + 3)
    assert replies(out) == [] and claim_id in daemon.watches


# --------------------------------------------------------------------------- the service


_CLIENT = textwrap.dedent("""
    import socket, sys, time
    from htc.wire import messages as m
    from htc.wire.framing import frame
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(frame(m.encode(m.ClaimKeepAlive(claim_id=sys.argv[2], watch=60.0)), 1 << 20))
    print("sent", flush=True)
    time.sleep(600)
""")


def test_the_service_releases_an_idle_claim_when_the_watching_process_is_killed(home):  # noqa: F811
    """A real client process holds a watch on a real socket and dies of SIGKILL: the startd
    service sees the connection close and releases the claim within a second or so."""

    async def scenario():
        transport = UnixTransport(home / "sockets")
        service = StartdService(settings(home, static_slots=1), transport)
        runner = asyncio.create_task(service.run())
        try:
            for _ in range(200):
                if service.daemon_core._sampled:
                    break
                await asyncio.sleep(0.02)
            daemon = service.daemon_core
            slot = daemon.startd.slots[f"slot1@{MACHINE}"]
            conn = await transport.open_connection("startd")
            reply = await conn.request(m.RequestClaim(claim_id=slot.claim_id, schedd_name="schedd@s",
                                                      schedd_address="schedd", submitter="alice@test", job_ad=JOB))
            assert reply.accepted
            await conn.aclose()
            claim_id = reply.claim_id
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _CLIENT, str(home / "sockets" / "startd.sock"), claim_id,
                stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
            assert (await asyncio.wait_for(proc.stdout.readline(), 30)).strip() == b"sent"
            deadline = time.monotonic() + 30
            while claim_id not in daemon.watches:
                assert time.monotonic() < deadline, "the watch was never held"
                await asyncio.sleep(0.02)
            killed = time.monotonic()
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            while slot.claim is not None:
                assert time.monotonic() - killed < 10, "the claim outlived its schedd"
                await asyncio.sleep(0.01)
            return time.monotonic() - killed
        finally:
            service.feed(c.StopRequested(fast=True))
            await asyncio.wait_for(runner, 30)

    took = asyncio.run(scenario())
    print(f"\nstartd released the idle claim {took:.3f} s after its watcher's kill -9")
