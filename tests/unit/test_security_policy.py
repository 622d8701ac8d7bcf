"""The authorization policy (htc.wire.authz) against HTCondor's documented semantics.

HTCondor's admin manual ("Authorization", "Access Level Descriptions") and IpVerify::Verify:
DENY beats ALLOW; ``DENY_<L> = *`` refuses everyone; a level other than READ/WRITE with no
ALLOW list is refused to all; WRITE, NEGOTIATOR, CONFIG and ADVERTISE_* imply READ;
ADMINISTRATOR and DAEMON imply WRITE; ``*@unmapped`` never manages jobs; the per-daemon
``ALLOW_<L>_<SUBSYS>`` beats ``ALLOW_<L>``; ADVERTISE_* lists default to the DAEMON ones.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htc.daemons import core as c
from htc.daemons.schedd.core import Schedd, ScheddSettings
from htc.jobqueue import JobQueue
from htc.wire import authz
from htc.wire import messages as m
from htc.wire.authz import Level as L
from htc.wire.transport import PeerInfo

D = "host.example"
USERS = {0: "root", 1001: "alice", 1002: "bob", 1003: "carol", 990: "condor"}


def policy(config: dict[str, str] | None = None, *, subsys: str = "SCHEDD", pool_uid: int = 0,
           hosts=("host.example", "host", "192.0.2.7")) -> authz.Policy:
    config = config or {}

    def lookup(name):
        return (config[name], "test") if name in config else (None, "")

    return authz.build_policy(subsys, lookup, uid_domain=D, pool_user=USERS[pool_uid], pool_is_root=pool_uid == 0,
                              local_hosts=hosts)


def who(uid: int | None, pool_uid: int = 0) -> authz.Identity:
    return authz.identify(uid, 4242, uid_domain=D, user_of_uid=USERS.get, daemon_uids={0, pool_uid})


ROOT, ALICE, BOB, NOBODY = who(0), who(1001), who(1002), who(54321)


def test_levels_imply_what_the_manual_says():
    assert authz.implied_levels(L.ADMINISTRATOR) == (L.ADMINISTRATOR, L.WRITE, L.READ)
    assert authz.implied_levels(L.DAEMON) == (L.DAEMON, L.WRITE, L.READ)
    assert authz.implied_levels(L.WRITE) == (L.WRITE, L.READ)
    for level in (L.NEGOTIATOR, L.CONFIG, L.ADVERTISE_STARTD, L.ADVERTISE_SCHEDD, L.ADVERTISE_MASTER):
        assert authz.implied_levels(level) == (level, L.READ)  # READ only, not WRITE
    # and the policy follows it: ADMINISTRATOR for alice gives her WRITE though ALLOW_WRITE does not name her
    p = policy({"ALLOW_WRITE": "bob@host.example", "ALLOW_ADMINISTRATOR": "alice@host.example"})
    assert p.allows(L.WRITE, ALICE) and p.allows(L.READ, ALICE)
    assert "implied by ADMINISTRATOR" in p.check(L.WRITE, ALICE).reason
    # NEGOTIATOR implies READ but not WRITE
    p = policy({"ALLOW_WRITE": "bob@host.example", "ALLOW_READ": "bob@host.example",
                "ALLOW_NEGOTIATOR": "alice@host.example"})
    assert p.allows(L.READ, ALICE) and not p.allows(L.WRITE, ALICE)


def test_deny_beats_allow():
    p = policy({"ALLOW_WRITE": "*@host.example", "DENY_WRITE": "alice@host.example"})
    assert not p.allows(L.WRITE, ALICE) and p.allows(L.WRITE, BOB)
    assert "DENY_WRITE" in p.check(L.WRITE, ALICE).reason
    # a DENY entry wins over an ALLOW entry naming the very same user, and over implication
    p = policy({"ALLOW_WRITE": "alice@host.example", "DENY_WRITE": "alice@host.example",
                "ALLOW_ADMINISTRATOR": "alice@host.example"})
    assert not p.allows(L.WRITE, ALICE) and p.allows(L.ADMINISTRATOR, ALICE)


def test_deny_star_refuses_everyone_root_included():
    p = policy({"DENY_WRITE": "*"})
    for identity in (ROOT, ALICE, BOB):
        decision = p.check(L.WRITE, identity)
        assert not decision.allowed and "DENY_WRITE (test) = * refuses everyone" in decision.reason
    assert p.allows(L.READ, ALICE)  # READ is another level
    assert p.allows(L.ADMINISTRATOR, ROOT)  # and so is ADMINISTRATOR: HTCondor checks each level's own lists


def test_deny_only_list_allows_the_rest():
    p = policy({"ALLOW_WRITE": "*", "DENY_WRITE": "bob@*"})
    assert p.allows(L.WRITE, ALICE) and not p.allows(L.WRITE, BOB)


@pytest.mark.parametrize("entry, alice, bob", [
    ("alice@host.example", True, False),
    ("*@host.example", True, True),
    ("ALICE@HOST.EXAMPLE", True, False),           # names compare without case
    ("al*@host.example", True, False),             # one wildcard anywhere
    ("alice@*", True, False),
    ("*", True, True),
    ("alice@host.example/host.example", True, False),
    ("alice@host.example/*.example", True, False),
    ("alice@host.example/192.0.2.7", True, False),
    ("alice@host.example/192.0.2.0/24", True, False),  # user/net/mask
    ("alice@host.example/127.0.0.1", True, False),
    ("alice@host.example/other.example", False, False),  # another host: never a local peer
    ("host.example", True, True),                  # a host alone: any user from it
    ("127.0.0.0/8", True, True),
    ("10.0.0.0/8", False, False),
    ("alice@other.domain", False, False),
])
def test_patterns(entry, alice, bob):
    p = policy({"ALLOW_WRITE": entry})
    assert (p.allows(L.WRITE, ALICE), p.allows(L.WRITE, BOB)) == (alice, bob)


def test_unmapped_is_refused_above_read_whatever_the_lists_say():
    assert NOBODY.name == authz.UNMAPPED and NOBODY.uid == 54321
    p = policy({"ALLOW_WRITE": "*", "ALLOW_ADMINISTRATOR": "*", "ALLOW_DAEMON": "*"})
    for level in (L.WRITE, L.ADMINISTRATOR, L.DAEMON, L.NEGOTIATOR, L.ADVERTISE_STARTD):
        decision = p.check(level, NOBODY)
        assert not decision.allowed and "above READ" in decision.reason, level
    assert p.allows(L.READ, NOBODY)
    assert not policy({"ALLOW_READ": "*@host.example", "ALLOW_WRITE": "alice@host.example"}).allows(L.READ, NOBODY)
    # unauthenticated@unmapped can be named in a list, as in HTCondor
    assert not policy({"DENY_READ": "unauthenticated@unmapped"}).allows(L.READ, NOBODY)
    assert who(None).name == authz.UNMAPPED  # a peer the transport cannot name at all


def test_a_level_without_allow_list_is_refused_except_read_and_write():
    # ALLOW_ADMINISTRATOR set but empty: HTCondor's param() returns nothing, so there is no list
    p = policy({"ALLOW_ADMINISTRATOR": ""})
    assert not p.allows(L.ADMINISTRATOR, ROOT)
    assert "no ALLOW_ADMINISTRATOR list" in p.check(L.ADMINISTRATOR, ROOT).reason
    # ALLOW_WRITE set empty: only what implies WRITE (ADMINISTRATOR, DAEMON) gives it
    p = policy({"ALLOW_WRITE": ""})
    assert not p.allows(L.WRITE, ALICE) and p.allows(L.WRITE, ROOT)
    assert not policy().allows(L.CONFIG, ROOT)  # CONFIG has no default list: nobody


def test_defaults_of_a_root_pool_and_of_a_personal_pool():
    p = policy()
    assert p.allows(L.WRITE, ALICE) and p.allows(L.READ, ALICE)
    for level in (L.ADMINISTRATOR, L.DAEMON, L.NEGOTIATOR, L.ADVERTISE_STARTD, L.ADVERTISE_SCHEDD):
        assert not p.allows(level, ALICE), level
        assert p.allows(level, ROOT), level
    # a pool run by bob: bob is the daemon identity, alice may only look
    p = policy(pool_uid=1002)
    bob = who(1002, pool_uid=1002)
    assert p.allows(L.WRITE, bob) and p.allows(L.ADMINISTRATOR, bob) and p.allows(L.DAEMON, bob)
    assert p.allows(L.READ, who(1001, 1002)) and not p.allows(L.WRITE, who(1001, 1002))


def test_daemon_identity_answers_to_condor():
    p = policy({"ALLOW_DAEMON": "condor@host.example"}, pool_uid=990)
    assert p.allows(L.DAEMON, who(990, pool_uid=990)) and p.allows(L.DAEMON, who(0, pool_uid=990))
    assert not p.allows(L.DAEMON, who(1001, pool_uid=990))


def test_per_daemon_lists_and_the_advertise_fallback():
    carol = who(1003)
    config = {"ALLOW_WRITE": "alice@host.example", "ALLOW_WRITE_SCHEDD": "bob@host.example",
              "ALLOW_DAEMON": "carol@host.example"}
    schedd = policy(config, subsys="SCHEDD")
    assert schedd.allows(L.WRITE, BOB) and not schedd.allows(L.WRITE, ALICE)
    assert policy(config, subsys="COLLECTOR").allows(L.WRITE, ALICE)
    # ADVERTISE_STARTD falls back to ALLOW_DAEMON when unset ...
    assert policy(config, subsys="COLLECTOR").allows(L.ADVERTISE_STARTD, carol)
    assert not policy(config, subsys="COLLECTOR").allows(L.ADVERTISE_STARTD, ALICE)
    # ... and is its own list once set
    config["ALLOW_ADVERTISE_STARTD"] = "bob@host.example"
    assert not policy(config, subsys="COLLECTOR").allows(L.ADVERTISE_STARTD, carol)
    assert policy(config, subsys="COLLECTOR").allows(L.ADVERTISE_STARTD, BOB)
    # an empty per-daemon value is skipped, as HTCondor's param returns nothing for it
    assert policy({"ALLOW_WRITE_SCHEDD": "", "ALLOW_WRITE": "alice@host.example"}).allows(L.WRITE, ALICE)


def test_every_message_has_its_level():
    lv = authz.level_for
    assert lv("schedd", m.Ping()) is L.ALLOW and lv("collector", m.Reconfig()) is L.ADMINISTRATOR
    assert lv("schedd", m.Submit(cluster_ad="[ A = 1 ]", proc_ads=("[ ]",))) is L.WRITE
    assert lv("schedd", m.QueryJobs()) is L.READ
    assert lv("schedd", m.MatchNotify(claim_id="c", submitter="s", slot_name="n", startd_address="a",
                                      slot_ad="[ ]")) is L.NEGOTIATOR
    assert lv("collector", m.UpdateAd(ad_type=m.AdType.Startd, name="n", ad_text="[ ]")) is L.ADVERTISE_STARTD
    assert lv("collector", m.UpdateAd(ad_type=m.AdType.Submitter, name="n", ad_text="[ ]")) is L.ADVERTISE_SCHEDD
    assert lv("collector", m.InvalidateAd(ad_type=m.AdType.Master, name="n")) is L.ADVERTISE_MASTER
    assert lv("master", m.DaemonsOff()) is L.ADMINISTRATOR
    assert lv("startd", m.DrainJobs()) is L.ADMINISTRATOR
    assert lv("startd", m.Vacate(slot_names=("slot1@x",))) is L.ADMINISTRATOR
    assert lv("startd", m.Vacate(claim_id="c")) is L.DAEMON
    assert lv("negotiator", m.SetUserPriority(submitter="a", factor=2.0)) is L.ADMINISTRATOR
    assert lv("collector", m.Submit(cluster_ad="[ A = 1 ]", proc_ads=("[ ]",))) is L.DAEMON  # unlisted: closed
    # every request on the wire is listed for some daemon
    listed = set(authz.COMMON) | {t for table in authz.REQUIRED.values() for t in table}
    requests = {t for t in m.MESSAGE_TYPES if t.reply_type is not None}
    assert requests <= listed, requests - listed


alice_names = st.sampled_from(["alice@host.example", "*@host.example", "al*@*", "*", "alice@*/host",
                               "bob@host.example", "*@other", "host.example", "alice@host.example/10.0.0.0/8"])


@settings(max_examples=200, deadline=None)
@given(allow=st.lists(alice_names, max_size=3), deny=st.lists(alice_names, max_size=3),
       level=st.sampled_from([L.READ, L.WRITE, L.ADMINISTRATOR, L.DAEMON]))
def test_a_matching_deny_entry_always_refuses(allow, deny, level):
    config = {f"ALLOW_{level.value}": " ".join(allow), f"DENY_{level.value}": " ".join(deny)}
    p = policy(config)
    denied = authz.AccessList(authz.parse_list(" ".join(deny)), "x").match(ALICE, p.local_hosts) if deny else None
    if denied is not None:
        assert not p.allows(level, ALICE)
    allowed = authz.AccessList(authz.parse_list(" ".join(allow)), "x").match(ALICE, p.local_hosts) if allow else None
    if allowed is not None and denied is None:
        assert p.allows(level, ALICE)


# --- the schedd core: Owner from the authenticated account -------------------------------------

def _schedd() -> Schedd:
    return Schedd(ScheddSettings(min_interval=1.0, interval=300.0), JobQueue.open(":memory:"),
                  user_of_uid=USERS.get, own_uid=0)


def test_a_uid_without_account_cannot_submit_by_claiming_an_owner():
    core = _schedd()
    core.handle(c.Started(), 1000.0)
    msg = m.Submit(cluster_ad='[ Cmd = "/bin/true"; Owner = "root" ]', proc_ads=("[ ]",))
    out = core.handle(c.Received(msg, 1, PeerInfo(uid=54321, pid=7)), 1000.0)
    [reply] = [a.msg for a in out if isinstance(a, c.Reply)]
    assert isinstance(reply, m.ErrorReply) and reply.code == "denied" and "uid 54321" in reply.message
    assert any(isinstance(a, c.Log) and "PERMISSION DENIED" in a.text for a in out)
    assert core.queue.query("true") == []


def test_owner_and_user_come_from_the_account_and_admins_are_the_policys():
    core = _schedd()
    core.handle(c.Started(), 1000.0)
    msg = m.Submit(cluster_ad='[ Cmd = "/bin/true"; Owner = "alice"; User = "alice@x" ]', proc_ads=("[ ]",))
    out = core.handle(c.Received(msg, 1, PeerInfo(uid=1002, user="bob", administrator=False)), 1000.0)
    [reply] = [a.msg for a in out if isinstance(a, c.Reply)]
    assert isinstance(reply, m.ErrorReply) and "bob may not submit jobs owned by alice" in reply.message
    ok = m.Submit(cluster_ad='[ Cmd = "/bin/true"; User = "alice@x" ]', proc_ads=("[ ]",))
    core.handle(c.Received(ok, 2, PeerInfo(uid=1002, user="bob", administrator=False)), 1000.0)
    [job] = core.queue.query("true")
    assert (job["Owner"], job["User"]) == ('"bob"', '"bob@localhost"')
    # carol is an administrator by the policy (not uid 0): she may hold bob's job; root without it may not
    hold = m.ActOnJobs(action=m.JobAction.Hold, ids=("1.0",))
    out = core.handle(c.Received(hold, 3, PeerInfo(uid=0, user="root", administrator=False)), 1000.0)
    assert [a.msg.permission_denied for a in out if isinstance(a, c.Reply)] == [1]
    out = core.handle(c.Received(hold, 4, PeerInfo(uid=1003, user="carol", administrator=True)), 1000.0)
    assert [a.msg.success for a in out if isinstance(a, c.Reply)] == [1]
