"""Flocking in the schedd core (htc.daemons.schedd.flock) and what it grants (htc.wire.flock_access).

The harness of test_schedd_core plays the negotiators of the schedd's own pool (``<cma.test:9618>``)
and of two FLOCK_TO pools; each says its pool in GetResourceRequests and MatchNotify.
"""

from __future__ import annotations

import pytest
from test_schedd_core import SLOT_AD, Harness, job

from htc.daemons import core as c
from htc.daemons.schedd.flock import FlockPool, flock_pools
from htc.errors import UsageError
from htc.wire import messages as m
from htc.wire import authz
from htc.wire.flock_access import flock_entries, host_of
from htc.wire.identity import identify_remote

OWN = "<cma.test:9618>"
B = FlockPool("cmb.test", "<cmb.test:9618>", "<cmb.test:9618?sock=negotiator>")
C = FlockPool("cmc.test:9700", "<cmc.test:9700>", "<cmc.test:9700?sock=negotiator>")
ALICE = "alice@localhost"


@pytest.fixture
def h() -> Harness:
    harness = Harness(collector=OWN, flock_pools=(B, C))
    harness.start()
    return harness


def ask(h: Harness, pool: str) -> list[c.Action]:
    before = len(h.actions)
    reply = h.request(m.GetResourceRequests(submitter=ALICE, significant_attributes=("RequestMemory",), pool=pool))
    assert isinstance(reply, m.ResourceRequests)
    return h.actions[before:]


def sends(out: list[c.Action], to: str, kind: type) -> list[m.Message]:
    return [a.msg for a in out if isinstance(a, c.Send) and a.to == to and isinstance(a.msg, kind)]


def advertise(h: Harness) -> list[c.Action]:
    return h.tick(h.now + 1.0)


def test_a_pool_that_leaves_jobs_waiting_a_whole_cycle_brings_in_the_next_pool(h):
    h.submit(job(queue="queue 2"))
    out = advertise(h)
    assert sends(out, OWN, m.UpdateAd) and not sends(out, B.collector, m.UpdateAd)
    ask(h, OWN)  # the first cycle offers the jobs
    assert h.core.flocking.level(ALICE) == 0
    out = ask(h, OWN) + advertise(h)  # the next finds them still waiting: B hears of them
    assert h.core.flocking.level(ALICE) == 1
    assert any("flocking: alice@localhost has idle jobs that this pool did not match" in str(a) for a in out)
    [ad] = sends(out, B.collector, m.UpdateAd)
    assert ad.ad_type is m.AdType.Submitter and ad.name == ALICE and "IdleJobs = 2" in ad.ad_text
    assert 'CollectorHost = "<cma.test:9618>"' in ad.ad_text
    assert sends(out, B.negotiator, m.Reschedule) and not sends(out, C.collector, m.UpdateAd)
    # The own pool asking again changes nothing now; B leaving them waiting brings in C.
    ask(h, OWN)
    ask(h, OWN)
    assert h.core.flocking.level(ALICE) == 1
    ask(h, B.collector)
    out = ask(h, B.collector) + advertise(h)
    assert h.core.flocking.level(ALICE) == 2 and sends(out, C.collector, m.UpdateAd)
    assert sends(out, B.collector, m.UpdateAd)  # B keeps hearing of them too


def test_no_flocking_while_the_own_pool_serves_the_jobs(h):
    h.submit(job())
    h.match()  # the own pool matches the only job: nothing waits
    ask(h, OWN)
    assert h.core.flocking.level(ALICE) == 0
    assert not sends(advertise(h), B.collector, m.UpdateAd)


def test_a_submitter_without_idle_jobs_drops_back_to_its_own_pool(h):
    h.submit(job())
    ask(h, OWN)
    ask(h, OWN)
    assert h.core.flocking.level(ALICE) == 1 and sends(advertise(h), B.collector, m.UpdateAd)
    h.request(m.ActOnJobs(action=m.JobAction.Hold, ids=("1.0",)))
    out = advertise(h)
    assert h.core.flocking.level(ALICE) == 0
    [last] = sends(out, B.collector, m.UpdateAd)  # once more, with no idle job, then no more
    assert "IdleJobs = 0" in last.ad_text
    assert not sends(advertise(h), B.collector, m.UpdateAd)


def test_a_job_run_on_a_flocked_slot_records_its_pool(h):
    h.submit(job())
    ask(h, OWN)
    ask(h, OWN)
    reqs = h.request(m.GetResourceRequests(submitter=ALICE, significant_attributes=("RequestMemory",), pool=B.collector))
    before = len(h.actions)
    h.request(m.MatchNotify(claim_id="slot1@exb#1#aa", submitter=ALICE, slot_name="slot1@exec",
                            startd_address="<10.0.0.9:9618?sock=startd>", slot_ad=SLOT_AD,
                            autocluster_id=reqs.requests[0].autocluster_id, pool=B.collector))
    [claim_call] = h.calls(m.RequestClaim, h.actions[before:])
    [activate] = h.calls(m.ActivateClaim, h.grant(claim_call))
    assert h.queue.get_job((1, 0))["RemotePool"] == '"cmb.test"'
    h.ack(activate)
    h.exited(activate.msg.claim_id, "1.0", exit_code=0)
    [done] = h.queue.history("ProcId == 0")
    assert done["LastRemotePool"] == '"cmb.test"'


def test_a_local_match_sets_no_remote_pool(h):
    h.submit(job())
    [activate] = h.calls(m.ActivateClaim, h.grant(h.match()))
    assert "RemotePool" not in h.queue.get_job((1, 0))


class Config:
    def __init__(self, **values):
        self.values = values

    def param(self, name):
        return self.values.get(name)


def test_flock_pools_reads_flock_to_and_its_hosts():
    config = Config(COLLECTOR_HOST="cma.test", FLOCK_TO="cmb.test, cmc.test:9700")
    assert flock_pools(config) == (B, C)
    config.values.update(FLOCK_NEGOTIATOR_HOSTS="negb.test cmc.test:9700")
    assert flock_pools(config)[0].negotiator == "<negb.test:9618?sock=negotiator>"
    config.values.update(FLOCK_COLLECTOR_HOSTS="cmb.test")
    with pytest.raises(UsageError, match="FLOCK_TO has 2 pools, FLOCK_COLLECTOR_HOSTS 1"):
        flock_pools(config)
    with pytest.raises(UsageError, match="not in network mode"):
        flock_pools(Config(COLLECTOR_HOST="127.0.0.1:0", FLOCK_TO="cmb.test"))
    assert flock_pools(Config(COLLECTOR_HOST="127.0.0.1:0")) == ()


def test_flock_entries_grant_each_daemon_only_what_flocking_needs():
    get = {"FLOCK_FROM": "suba.test, *.example.org"}.get
    assert flock_entries("COLLECTOR", get) == {
        "ADVERTISE_SCHEDD": ["condor_pool@*/suba.test", "condor_pool@*/*.example.org"],
        "READ": ["*/suba.test", "*/*.example.org"]}
    assert flock_entries("STARTD", get)["DAEMON"] == ["condor_pool@*/suba.test", "condor_pool@*/*.example.org"]
    assert flock_entries("SCHEDD", get) == {}
    get = {"FLOCK_TO": "cmb.test:9618"}.get
    assert flock_entries("SCHEDD", get) == {"NEGOTIATOR": ["condor_pool@*/cmb.test"],
                                            "DAEMON": ["condor_pool@cmb.test:9618", "condor_pool@cmb.test"]}
    assert flock_entries("STARTD", get) == {}
    assert host_of("<10.0.0.1:9618?sock=negotiator>") == "10.0.0.1" and host_of("[::1]:9618") == "::1"


def _policy(subsys: str, config: dict[str, str]):
    return authz.build_policy(subsys, lambda name: (config.get(name), "cfg") if name in config else (None, ""),
                              uid_domain="cmb.test", pool_user="root", pool_is_root=True, trust_domain="cmb.test",
                              extra=flock_entries(subsys, config.get))


def test_another_pools_schedd_advertises_and_claims_only_from_a_flock_from_host():
    schedd_a = identify_remote("condor_pool@cma.test", "10.200.0.2", "token", trust_domain="cmb.test",
                               host_names=("suba.test",))
    elsewhere = identify_remote("condor_pool@cma.test", "10.200.0.9", "token", trust_domain="cmb.test",
                                host_names=("other.test",))
    collector = _policy("COLLECTOR", {"FLOCK_FROM": "suba.test"})
    assert collector.allows(authz.L.ADVERTISE_SCHEDD, schedd_a)
    assert not collector.allows(authz.L.ADVERTISE_SCHEDD, elsewhere)
    assert not collector.allows(authz.L.ADVERTISE_STARTD, schedd_a)  # a schedd, not a machine
    assert not _policy("COLLECTOR", {}).allows(authz.L.ADVERTISE_SCHEDD, schedd_a)
    startd = _policy("STARTD", {"FLOCK_FROM": "suba.test"})
    assert startd.allows(authz.L.DAEMON, schedd_a) and not startd.allows(authz.L.ADMINISTRATOR, schedd_a)
    # A DENY list still wins over FLOCK_FROM.
    denied = _policy("STARTD", {"FLOCK_FROM": "suba.test", "DENY_DAEMON": "*/suba.test"})
    assert not denied.allows(authz.L.DAEMON, schedd_a)
