"""The collector's core with a fake clock: no event loop, no sockets."""

from __future__ import annotations

import pytest

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.collector.core import Collector
from htc.daemons.collector.settings import CollectorSettings
from htc.wire import messages as m

T0 = 1_700_000_000.0


class Harness:
    def __init__(self, **settings):
        self.core = Collector(CollectorSettings(**{"name": "pool@cm", "machine": "cm", **settings}))
        self.now = T0
        self.core.handle(c.Started(), self.now)

    def ask(self, msg) -> m.Message:
        [reply] = [a for a in self.core.handle(c.Received(msg=msg, conn_id=3), self.now) if isinstance(a, c.Reply)]
        assert reply.conn_id == 3
        return reply.msg

    def update(self, name, text, ad_type=m.AdType.Startd, lifetime=None):
        return self.ask(m.UpdateAd(ad_type=ad_type, name=name, ad_text=text, lifetime=lifetime))

    def query(self, ad_type=m.AdType.Startd, **kw) -> list[ClassAd]:
        reply = self.ask(m.QueryAds(ad_type=ad_type, **kw))
        assert isinstance(reply, m.AdsReply)
        return [ClassAd(t) for t in reply.ads]

    def at(self, when) -> list[c.Action]:
        self.now = when
        return self.core.handle(c.Tick(), when)


def slot(name, cpus, state="Unclaimed", extra=""):
    return f'[ Name = "{name}"; Cpus = {cpus}; State = "{state}"; Memory = Cpus * 1024 {extra}]'


def names(ads):
    return [ad["Name"] for ad in ads]


@pytest.fixture
def h():
    h = Harness()
    for i, cpus in enumerate([1, 4, 8]):
        assert h.update(f"slot1@n{i}", slot(f"slot1@n{i}", cpus)) == m.Ack()
    return h


def test_query_by_type_constraint_projection_and_limit(h):
    assert names(h.query()) == ["slot1@n0", "slot1@n1", "slot1@n2"]
    assert names(h.query(constraint="Memory >= 4096")) == ["slot1@n1", "slot1@n2"]
    assert names(h.query(constraint="Cpus > 2", limit=1)) == ["slot1@n1"]
    [ad] = h.query(constraint='Name == "slot1@n2"', projection=("Name", "Memory", "NoSuchAttr"))
    assert dict(ad.items()).keys() == {"Name", "Memory"}
    assert ad.eval("Memory") is not None
    assert h.query(ad_type=m.AdType.Schedd) == []


def test_ads_are_stamped_and_typed(h):
    [ad] = h.query(constraint='Name == "slot1@n0"')
    assert ad["MyType"] == "Machine"
    assert ad["LastHeardFrom"] == int(T0)


def test_any_query_includes_the_collectors_own_ad(h):
    ads = h.query(ad_type=m.AdType.Any)
    assert names(ads) == ["pool@cm", "slot1@n0", "slot1@n1", "slot1@n2"]
    [own] = h.query(ad_type=m.AdType.Collector)
    assert own["MyType"] == "Collector" and own["Machine"] == "cm"


def test_constraint_truth_follows_evalbool(h):
    assert len(h.query(constraint="Cpus - 1")) == 2, "non-zero numbers are true"
    assert h.query(constraint='"yes"') == [], "strings are not true"
    assert h.query(constraint="NoSuchAttr") == [], "undefined is not true"


def test_lifetime_from_update_then_ad_then_default():
    h = Harness(classad_lifetime=900)
    h.update("a", '[ Name = "a" ]', lifetime=10)
    h.update("b", '[ Name = "b"; ClassAdLifetime = 20 ]')
    h.update("c", '[ Name = "c" ]')
    assert h.core.next_deadline() == T0 + 10
    assert h.at(T0 + 9.9) == []
    out = h.at(T0 + 10)
    assert names(h.query()) == ["b", "c"]
    assert any("'a' expired: not refreshed since 10 s ago" in a.text for a in out if isinstance(a, c.Log))
    assert h.core.next_deadline() == T0 + 20
    h.at(T0 + 20)
    assert names(h.query()) == ["c"]
    h.at(T0 + 900)
    assert names(h.query()) == []


def test_refresh_extends_the_lifetime():
    h = Harness()
    h.update("a", '[ Name = "a"; X = 1 ]', lifetime=10)
    h.now = T0 + 8
    h.update("a", '[ Name = "a"; X = 2 ]', lifetime=10)
    assert h.core.next_deadline() == T0 + 18, "the first expiry is stale and skipped"
    h.at(T0 + 10)
    [ad] = h.query()
    assert ad["X"] == 2 and ad["LastHeardFrom"] == int(T0 + 8)


def test_collector_readvertises_itself():
    h = Harness(update_interval=60)
    assert h.core.next_deadline() == T0 + 60
    h.update("slot1@x", slot("slot1@x", 2, "Claimed"), lifetime=1000)
    h.ask(m.UpdateAd(ad_type=m.AdType.Submitter, name="alice@x", ad_text="[ RunningJobs = 3; IdleJobs = 4 ]"))
    h.at(T0 + 60)
    [own] = h.query(ad_type=m.AdType.Collector)
    assert (own["HostsTotal"], own["HostsClaimed"], own["RunningJobs"], own["IdleJobs"]) == (1, 1, 3, 4)
    assert own["UpdatesTotal"] == 2
    assert h.core.next_deadline() == T0 + 120


def test_submitter_ads_are_kept_per_schedd():
    h = Harness()
    for schedd in ("s1", "s2"):
        h.update("alice@x", f'[ ScheddName = "{schedd}"; IdleJobs = 1 ]', ad_type=m.AdType.Submitter)
    assert len(h.query(ad_type=m.AdType.Submitter)) == 2
    h.update("alice@x", '[ ScheddName = "s1"; IdleJobs = 5 ]', ad_type=m.AdType.Submitter)
    assert sorted(ad["IdleJobs"] for ad in h.query(ad_type=m.AdType.Submitter)) == [1, 5]


def test_invalidate_by_name_and_constraint(h):
    assert h.ask(m.InvalidateAd(ad_type=m.AdType.Startd, name="slot1@n0")) == m.Ack(detail="1 ad(s) removed")
    assert h.ask(m.InvalidateAd(ad_type=m.AdType.Any, constraint="Cpus >= 8")) == m.Ack(detail="1 ad(s) removed")
    assert names(h.query()) == ["slot1@n1"]
    assert h.ask(m.InvalidateAd(ad_type=m.AdType.Schedd, name="slot1@n1")).detail == "0 ad(s) removed"


@pytest.mark.parametrize(
    "msg, words",
    [
        (m.UpdateAd(ad_type=m.AdType.Startd, name="a", ad_text="[ a = ]"), "'a' is not a ClassAd"),
        (m.UpdateAd(ad_type=m.AdType.Startd, name="a", ad_text='[ Name = "b" ]'), "Name is 'b' but the update says 'a'"),
        (m.UpdateAd(ad_type=m.AdType.Startd, name="a", ad_text='[ MyType = "Scheduler" ]'), "MyType is 'Scheduler'"),
        (m.QueryAds(ad_type=m.AdType.Startd, constraint="Cpus >"), "constraint is not a ClassAd expression"),
        (m.InvalidateAd(ad_type=m.AdType.Startd, constraint="(("), "constraint is not a ClassAd expression"),
    ],
)
def test_bad_requests_are_answered_with_reasons(h, msg, words):
    reply = h.ask(msg)
    assert isinstance(reply, m.ErrorReply) and reply.code == "bad_request"
    assert words in reply.message


def test_other_daemons_messages_are_unknown_requests(h):
    reply = h.ask(m.QueryMaster())
    assert reply.code == "unknown_request" and "collector does not handle QueryMaster" in reply.message


def test_stop_exits_at_once(h):
    assert c.Exit(0) in h.core.handle(c.StopRequested(), h.now)


def test_collector_ad_totals_are_current_when_queried():
    """HostsTotal, RunningJobs, ... count the live ads at the query, as HTCondor names them."""
    h = Harness(update_interval=900)
    [own] = h.query(ad_type=m.AdType.Collector)
    assert (own["HostsTotal"], own["MachineAds"], own["SubmitterAds"]) == (0, 0, 0)
    h.update("slot1@x", slot("slot1@x", 2, "Claimed"), lifetime=1000)
    h.update("slot2@x", slot("slot2@x", 2, "Unclaimed"), lifetime=1000)
    h.update("slot3@x", slot("slot3@x", 2, "Owner"), lifetime=30)
    h.ask(m.UpdateAd(ad_type=m.AdType.Submitter, name="alice@x", ad_text="[ RunningJobs = 3; IdleJobs = 4 ]"))
    h.ask(m.UpdateAd(ad_type=m.AdType.Submitter, name="bob@x", ad_text="[ RunningJobs = 5 ]"))
    h.now = T0 + 10
    [own] = h.query(ad_type=m.AdType.Collector)
    assert (own["HostsTotal"], own["HostsClaimed"], own["HostsUnclaimed"], own["HostsOwner"]) == (3, 1, 1, 1)
    assert (own["RunningJobs"], own["IdleJobs"]) == (3, 4), "a submitter ad without IdleJobs is not counted"
    assert (own["MachineAds"], own["SubmitterAds"]) == (3, 2)
    assert own["LastHeardFrom"] == int(T0), "the ad keeps the time it was advertised"
    h.at(T0 + 40)
    [own] = [ad for ad in h.query(ad_type=m.AdType.Any) if ad["MyType"] == "Collector"]
    assert (own["HostsTotal"], own["HostsOwner"]) == (2, 0), "an expired slot ad no longer counts"
