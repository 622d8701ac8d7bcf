"""Authorization of peers from other hosts (htc.wire.authz with htc.wire.identity).

A network peer is what the shared port says it is (PeerInfo host/identity/authenticated_by); the
host part of a list entry matches *its* address; a peer that proved nothing is
``unauthenticated@unmapped`` and reads only where ALLOW_READ is configured to let it; the pool
key makes a peer the daemon identity ``condor_pool@TRUST_DOMAIN``.
"""

from __future__ import annotations

import logging

import pytest

from htc.config.config import Config, load_config
from htc.wire import authz
from htc.wire import messages as m
from htc.wire.authz import Level as L
from htc.wire.transport import PeerInfo

D = "host.example"
TD = "cm.example:9618"
USERS = {0: "root", 1001: "alice", 990: "condor"}


def policy(config: dict[str, str] | None = None, *, trust_domain: str | None = TD) -> authz.Policy:
    config = config or {}

    def lookup(name):
        return (config[name], "test") if name in config else (None, "")

    return authz.build_policy("SCHEDD", lookup, uid_domain=D, pool_user="root", pool_is_root=True,
                              local_hosts=("host.example", "10.200.0.1"), trust_domain=trust_domain)


def remote(identity, host="10.200.0.5", by="token", names=()):
    return authz.identify_remote(identity, host, by, trust_domain=TD, host_names=names)


ALICE = remote("alice@pool")
BOB = remote("bob@pool")
ANON = remote(None, by="")
POOL = remote(None, host="10.200.0.2", by="pool")


def test_a_network_identity_is_what_the_peer_proved_with_its_address():
    assert (ALICE.name, ALICE.user, ALICE.uid, ALICE.host, ALICE.remote) == ("alice@pool", "alice", None,
                                                                           "10.200.0.5", True)
    assert ALICE.describe() == "alice@pool (from 10.200.0.5, by token)"
    assert (ANON.name, ANON.user, ANON.unmapped) == ("unauthenticated@unmapped", None, True)
    assert "unauthenticated" in ANON.describe() and "10.200.0.5" in ANON.describe()
    # a claimed name without proof is no identity
    assert remote("alice@pool", by="").unmapped


def test_the_pool_key_makes_the_daemon_identity_of_the_trust_domain():
    assert POOL.name == f"condor_pool@{TD}" and f"condor@{TD}" in POOL.names
    p = policy()
    for level in (L.DAEMON, L.NEGOTIATOR, L.ADMINISTRATOR, L.ADVERTISE_STARTD, L.ADVERTISE_SCHEDD,
                  L.ADVERTISE_MASTER):
        assert p.allows(level, POOL), level
    # a user's token gives none of them by default
    for level in (L.DAEMON, L.NEGOTIATOR, L.ADMINISTRATOR, L.ADVERTISE_STARTD):
        assert not p.allows(level, ALICE), level
    # HTCondor's recommended lists name condor_pool@* and condor@*: both match
    rec = policy({"ALLOW_DAEMON": "condor_pool@*", "ALLOW_ADMINISTRATOR": "condor@*"})
    assert rec.allows(L.DAEMON, POOL) and rec.allows(L.ADMINISTRATOR, POOL)
    assert not rec.allows(L.DAEMON, ALICE)


def test_network_defaults_let_authenticated_users_write_and_nobody_else():
    p = policy()
    assert p.allows(L.WRITE, ALICE) and p.allows(L.READ, ALICE)
    assert not p.allows(L.WRITE, ANON)
    # the built-in READ default does not extend to a peer that proved nothing
    d = p.check(L.READ, ANON)
    assert not d and "ALLOW_READ is configured" in d.reason
    # ... a configured ALLOW_READ does
    assert policy({"ALLOW_READ": "*"}).allows(L.READ, ANON)
    assert policy({"ALLOW_READ": "*/10.200.0.0/24"}).allows(L.READ, ANON)
    assert not policy({"ALLOW_READ": "*/10.9.0.0/24"}).allows(L.READ, ANON)
    # and never more than READ, whatever the lists say
    d = policy({"ALLOW_WRITE": "*", "ALLOW_ADMINISTRATOR": "*"}).check(L.WRITE, ANON)
    assert not d and "proved no identity" in d.reason


def test_a_personal_pool_keeps_its_defaults():
    p = policy(trust_domain=None)
    assert p.check(L.DAEMON, POOL).allowed is False  # no condor_pool@ entry without network mode


@pytest.mark.parametrize("entry,who,allowed", [
    ("alice@pool", ALICE, True),
    ("alice@pool", BOB, False),
    ("*@pool", BOB, True),
    ("*@other", BOB, False),
    ("alice@pool/10.200.0.*", ALICE, True),
    ("alice@pool/10.200.0.*", remote("alice@pool", host="10.201.0.5"), False),
    ("10.200.0.0/24", ALICE, True),
    ("10.200.0.0/24", remote("alice@pool", host="10.201.0.5"), False),
    ("*/10.200.0.5", ALICE, True),
    ("alice@pool/10.200.0.0/24", ALICE, True),
    ("*/cm.example", remote("alice@pool", names=("cm.example",)), True),
    ("*/cm.example", ALICE, False),
    ("*/*.example", remote("alice@pool", names=("sub.cm.example",)), True),
    ("condor_pool@*", POOL, True),
    ("condor_pool@*", ALICE, False),
    # this host's own name does not match a peer from elsewhere
    ("*/host.example", ALICE, False),
    ("*/10.200.0.1", ALICE, False),
])
def test_host_and_identity_patterns_match_the_peers_address(entry, who, allowed):
    p = policy({"ALLOW_WRITE": entry})
    assert p.allows(L.WRITE, who) is allowed, (entry, who)


def test_local_peers_keep_the_this_host_rule():
    local = authz.identify(1001, 7, uid_domain=D, user_of_uid=USERS.get)
    p = policy({"ALLOW_WRITE": "alice@host.example/host.example"})
    assert p.allows(L.WRITE, local)
    assert not p.allows(L.WRITE, remote("alice@host.example", host="10.200.0.9"))


def test_deny_beats_allow_for_network_peers():
    p = policy({"ALLOW_WRITE": "*@pool", "DENY_WRITE": "*/10.200.0.5"})
    assert not p.allows(L.WRITE, ALICE)
    assert p.allows(L.WRITE, remote("alice@pool", host="10.200.0.6"))


def test_host_names_are_looked_up_only_when_a_list_names_hosts():
    asked = []

    def names(host):
        asked.append(host)
        return ("cm.example",)

    plain = authz.Authorizer("schedd", policy({"ALLOW_WRITE": "*/10.200.0.0/24"}), D, frozenset({0}), USERS.get,
                             TD, names)
    who = plain.identify_peer(PeerInfo(host="10.200.0.5", identity="alice@pool", authenticated_by="token"))
    assert who.name == "alice@pool" and asked == []
    named = authz.Authorizer("schedd", policy({"ALLOW_WRITE": "*/cm.example"}), D, frozenset({0}), USERS.get,
                             TD, names)
    who = named.identify_peer(PeerInfo(host="10.200.0.5", identity="alice@pool", authenticated_by="token"))
    assert asked == ["10.200.0.5"] and named.check(m.Submit(cluster_ad="[]", proc_ads=("[]",)), who).allowed
    # a local peer is still named by its uid
    assert named.identify_peer(PeerInfo(uid=1001, pid=5)).name == f"alice@{D}"


def test_refusals_name_the_identity_and_the_address():
    a = authz.Authorizer("master", policy(), D, frozenset({0}), USERS.get, TD)
    d = a.check(m.DaemonsOff(), ALICE)
    text = a.refusal(m.DaemonsOff(), ALICE, d)
    assert not d and "alice@pool (from 10.200.0.5, by token)" in text and "ADMINISTRATOR" in text


def _config(tmp_path, text: str) -> Config:
    path = tmp_path / "htc_config"
    path.write_text(text)
    return load_config("SCHEDD", env={"HTC_CONFIG": str(path), "HTC_HOME": str(tmp_path)})


def test_network_mode_and_trust_domain_come_from_the_configuration(tmp_path):
    personal = _config(tmp_path, "use ROLE : Personal\n")
    assert authz.network_trust_domain(personal) is None
    pool = _config(tmp_path, "CONDOR_HOST = cm.example\nuse ROLE : Submit\n")
    assert authz.network_trust_domain(pool) == "cm.example"  # TRUST_DOMAIN defaults to COLLECTOR_HOST
    named = _config(tmp_path, "CONDOR_HOST = cm.example\nTRUST_DOMAIN = pool.example\n")
    assert authz.network_trust_domain(named) == "pool.example"
    a = authz.authorizer_from_config("schedd", named, pool_uid=0, user_of_uid=USERS.get)
    assert a.trust_domain == "pool.example"
    assert a.policy.allows(L.DAEMON, authz.identify_remote(None, "10.0.0.1", "pool", trust_domain="pool.example"))
    assert a.warnings() == []


def test_the_service_logs_a_network_refusal_with_identity_and_address(caplog):
    from htc.daemons.service import DaemonService

    class Conn:
        peer = PeerInfo(host="10.200.0.5", identity="bob@pool", authenticated_by="token")
        sent: list = []

        def send_nowait(self, msg):
            self.sent.append(msg)

    svc = DaemonService.__new__(DaemonService)
    svc.authorizer = authz.Authorizer("master", policy(), D, frozenset({0}), USERS.get, TD)
    svc.log = logging.getLogger("test-authz-network")
    conn = Conn()
    with caplog.at_level(logging.WARNING, logger="test-authz-network"):
        assert svc._authorize(conn, m.DaemonsOff(), None) is None
    assert "PERMISSION DENIED to bob@pool (from 10.200.0.5, by token) for DaemonsOff" in caplog.text
    assert conn.sent[0].code == "denied"


@pytest.mark.parametrize("template", ["recommended_v9_0", "recommended"])
def test_htcondors_recommended_security_works_across_hosts(tmp_path, template):
    config = _config(tmp_path, f"CONDOR_HOST = cm.example\nuse ROLE : Submit\nuse SECURITY : {template}\n")
    a = authz.authorizer_from_config("schedd", config, pool_uid=0, user_of_uid=USERS.get)
    pool = authz.identify_remote(None, "10.0.0.2", "pool", trust_domain="cm.example")
    alice = authz.identify_remote("alice@pool", "10.0.0.3", "token", trust_domain="cm.example")
    anon = authz.identify_remote(None, "10.0.0.4", "", trust_domain="cm.example")
    for level in (L.DAEMON, L.NEGOTIATOR, L.ADMINISTRATOR):
        assert a.policy.allows(level, pool) and not a.policy.allows(level, alice), level
    assert a.policy.allows(L.WRITE, alice) and not a.policy.allows(L.WRITE, anon)
    assert a.policy.allows(L.READ, anon)  # ALLOW_READ = * is configured by the template
    assert a.warnings() == []


def test_the_collector_gives_claim_ids_only_to_a_private_query_which_needs_negotiator():
    from htc.classad import ClassAd
    from htc.daemons import core as c
    from htc.daemons.collector.core import Collector
    from htc.daemons.collector.settings import CollectorSettings

    assert authz.level_for("collector", m.QueryAds(ad_type=m.AdType.Startd)) is L.READ
    assert authz.level_for("collector", m.QueryAds(ad_type=m.AdType.Startd, private=True)) is L.NEGOTIATOR
    core = Collector(CollectorSettings(name="pool@cm", machine="cm"))
    ad = '[ Name = "slot1@x"; MyType = "Machine"; ClaimId = "slot1@x#1#s3cr3t"; Capability = "k"; Cpus = 1 ]'
    core.handle(c.Received(msg=m.UpdateAd(ad_type=m.AdType.Startd, name="slot1@x", ad_text=ad), conn_id=1), 10.0)

    def query(**kw):
        msg = m.QueryAds(ad_type=m.AdType.Startd, **kw)
        [reply] = [a.msg for a in core.handle(c.Received(msg=msg, conn_id=2), 11.0) if isinstance(a, c.Reply)]
        return [ClassAd(t) for t in reply.ads]

    [public] = query()
    assert "ClaimId" not in public and "Capability" not in public and public.eval("Cpus") == 1
    assert query(constraint="ClaimId =!= undefined") == []
    assert query(constraint='regexp("s3cr3t", ClaimId)') == []
    assert [a.eval("ClaimId") for a in query(private=True, constraint='regexp("s3cr3t", ClaimId)')] == [
        "slot1@x#1#s3cr3t"]
