"""The startd's half of the job lease (the wire adapter alone): a schedd cut off the network
closes the claim's watch; the job keeps running within the lease, and once the lease runs out
with no word from the schedd the claim is evicted, the job killed and the slot freed, so a job the
schedd rescheduled elsewhere does not also run here. A schedd that comes back later finds the
claim gone (``not_found``)."""

from __future__ import annotations

from htc.daemons import core as c
from htc.daemons.startd import events as ev
from htc.daemons.startd.events import RunStarter, StarterExited, StarterStarted, WatchClosed
from htc.daemons.startd.states import State
from htc.daemons.starter.records import ExitRecord, Usage
from htc.wire import messages as m
from test_startd_service import MACHINE, T0, adapter, settings  # noqa: F401

LEASE = 15.0
JOB = '[ ClusterId = 3; ProcId = 0; Cmd = "/bin/sleep"; RequestCpus = 1; RequestMemory = 64 ]'


def slot(daemon):
    return daemon.startd.slots[f"slot1@{MACHINE}"]


def test_a_silent_schedd_for_the_whole_lease_gets_its_job_killed_and_its_claim_dropped(tmp_path):
    daemon, _ = adapter(tmp_path)
    s = slot(daemon)
    out = daemon.handle(c.Received(m.RequestClaim(claim_id=s.claim_id, schedd_name="schedd@s", schedd_address="schedd",
                                                  submitter="alice@test", job_ad=JOB, lease_duration=LEASE),
                                   conn_id=1), T0 + 1)
    claim_id = [a for a in out if isinstance(a, c.Reply)][0].msg.claim_id
    out = daemon.handle(c.Received(m.ActivateClaim(claim_id=claim_id, job_ad=JOB, shadow_address="schedd"),
                                   conn_id=2), T0 + 2)
    assert [a for a in out if isinstance(a, RunStarter)]
    daemon.handle(StarterStarted(claim_id), T0 + 2)
    daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=claim_id, watch=5.0), conn_id=9), T0 + 3)
    # The link is cut: SSH keepalives close the watch's connection; the job runs on, within the lease.
    out = daemon.handle(WatchClosed(9), T0 + 6)
    assert not [a for a in out if isinstance(a, (ev.VacateJob, ev.KillJob))]
    out = daemon.handle(c.Tick(), T0 + 3 + LEASE - 0.5)
    assert not [a for a in out if isinstance(a, (ev.VacateJob, ev.KillJob))]
    assert s.state is State.CLAIMED and claim_id in daemon.running
    # The lease (counted from the watch's arrival) runs out: the job is stopped.
    assert daemon.next_deadline() <= T0 + 3 + LEASE
    out = daemon.handle(c.Tick(), T0 + 3 + LEASE)
    assert [a for a in out if isinstance(a, (ev.VacateJob, ev.KillJob))], out
    # The job is gone: the slot is free again, its report to the unreachable schedd is the vacate.
    out = daemon.handle(StarterExited(claim_id, ExitRecord(None, 15, False, False, False, Usage())), T0 + LEASE + 4)
    assert slot(daemon).state is not State.CLAIMED and claim_id not in daemon.running
    # The link is back: the schedd's keep-alive for the old claim finds it gone.
    out = daemon.handle(c.Received(m.ClaimKeepAlive(claim_id=claim_id, watch=5.0), conn_id=12), T0 + LEASE + 30)
    [reply] = [a for a in out if isinstance(a, c.Reply) and a.conn_id == 12]
    assert reply.msg.code == "not_found"
