"""htc q -better-analyze with FLOCK_TO (htc.client.jobs.analyze): the slots of the schedd's own
pool and of each flocked pool are counted, and a pool that cannot be asked says why."""

from __future__ import annotations

from htc.classad import ClassAd, ExprTree
from htc.client import jobs
from htc.client import request
from htc.wire.errors import DaemonUnreachable

JOB = ClassAd({"ClusterId": 1, "ProcId": 0, "Owner": "alice", "JobStatus": 1, "Requirements": ExprTree("TARGET.Cpus >= 2")})


def slot(name: str, cpus: int, busy: bool = False) -> ClassAd:
    ad = {"Name": name, "Machine": name.split("@")[1], "Cpus": cpus, "Requirements": True, "State": "Unclaimed"}
    if busy:
        ad.update(State="Claimed", RemoteUser="bob@b")
    return ClassAd(ad)


def test_each_pool_says_how_many_of_its_slots_match(monkeypatch):
    slots = {"own": [slot("slot1@a", 1)], "B": [slot("slot1@b1", 4), slot("slot1@b2", 4, busy=True), slot("slot1@b3", 1)]}

    def query_collector(ad_type, constraint, *, transport, timeout):
        if transport == "C":
            raise DaemonUnreachable("cmc.test:9618 did not answer")
        return slots[transport]

    monkeypatch.setattr(jobs, "query", lambda constraint, **kw: [JOB])
    monkeypatch.setattr(request, "query_collector", query_collector)
    [analysis] = jobs.analyze(None, transport="schedd", collector_transport="own", own_pool="cma.test",
                              flock_pools=[("cmb.test", "B"), ("cmc.test", "C")])
    own, b, c = analysis.pools
    assert (own.name, own.slots, own.matching, own.willing, own.flocked) == ("cma.test", 1, 0, 0, False)
    assert (b.slots, b.matching, b.willing, b.flocked) == (3, 2, 1, True)
    assert c.error == "cmc.test:9618 did not answer"
    text = analysis.render()
    assert "Pools where the job could run:" in text
    assert "2 of 3 slots in pool cmb.test match (1 willing to run it now); a FLOCK_TO pool" in text
    assert "pool cmc.test (a FLOCK_TO pool) could not be asked: cmc.test:9618 did not answer" in text


def test_without_flock_to_the_analysis_is_as_before(monkeypatch):
    monkeypatch.setattr(jobs, "query", lambda constraint, **kw: [JOB])
    monkeypatch.setattr(request, "query_collector", lambda *a, **kw: [slot("slot1@a", 4)])
    [analysis] = jobs.analyze(None, transport="schedd")
    assert analysis.pools == () and "Pools where" not in analysis.render()
