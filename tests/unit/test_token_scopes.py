"""Token scopes (``htc token create -authz READ``, HTCondor's ``condor:/READ``): an upper bound.

The levels a token's scope names travel from the shared port (which checked the token) to the
daemon in the Forwarded preamble, become the Identity's ``scopes``, and every daemon's Policy
refuses a level they do not cover before it looks at ALLOW/DENY: a READ token of someone
ALLOW_WRITE or ALLOW_ADMINISTRATOR names still only reads.
"""

from __future__ import annotations

import msgspec
import pytest

from htc.wire import authz
from htc.wire import messages as m
from htc.wire import tokens
from htc.wire.authz import Level as L
from htc.wire.errors import MessageInvalid
from htc.wire.ssh_server import SharedPortServer, _ServerConn
from htc.wire.transport import PeerInfo

D = "host.example"
TD = "cm.example:9618"
KEY = b"k" * 64


def policy(config: dict[str, str]) -> authz.Policy:
    return authz.build_policy("SCHEDD", lambda n: (config[n], "test") if n in config else (None, ""),
                              uid_domain=D, pool_user="root", pool_is_root=True, trust_domain=TD)


def alice(*scopes: str) -> authz.Identity:
    return authz.identify_remote("alice@pool", "10.200.0.5", "token", trust_domain=TD, scopes=scopes)


@pytest.mark.parametrize("level,scopes,allowed", [
    (L.READ, ("READ",), True),
    (L.WRITE, ("READ",), False),
    (L.READ, ("WRITE",), True),            # WRITE implies READ, as in HTCondor's permission hierarchy
    (L.WRITE, ("ADMINISTRATOR",), True),
    (L.ADMINISTRATOR, ("WRITE",), False),
    (L.DAEMON, ("READ", "WRITE"), False),
    (L.ADVERTISE_STARTD, ("DAEMON",), False),  # ADVERTISE_* fall back to DAEMON's lists, not its rights
    (L.ALLOW, ("READ",), True),            # Ping: anyone
    (L.READ, ("NOSUCHLEVEL",), False),     # a name that is no level grants nothing
])
def test_a_level_is_in_scope_when_a_scope_level_implies_it(level, scopes, allowed):
    assert authz.in_scope(level, scopes) is allowed


def test_the_scope_caps_what_allow_lists_grant():
    p = policy({"ALLOW_WRITE": "*", "ALLOW_ADMINISTRATOR": "alice@pool"})
    assert p.allows(L.ADMINISTRATOR, alice()) and p.allows(L.WRITE, alice())
    scoped = alice("READ")
    assert p.allows(L.READ, scoped)
    for level in (L.WRITE, L.ADMINISTRATOR):
        decision = p.check(level, scoped)
        assert not decision and "limited by its scope to READ" in decision.reason, decision.reason
    # the decision cache tells the scoped and the unscoped token of one name apart
    assert p.allows(L.WRITE, alice()) and not p.allows(L.WRITE, alice("READ"))


def test_a_scope_never_grants_what_the_lists_refuse():
    p = policy({"ALLOW_WRITE": "bob@pool"})
    assert not p.allows(L.WRITE, alice("WRITE"))


def test_a_scoped_administrator_is_no_administrator_and_the_refusal_says_why():
    p = policy({"ALLOW_ADMINISTRATOR": "alice@pool"})
    a = authz.Authorizer("master", p, D, frozenset({0}), {0: "root"}.get, TD)
    assert a.is_administrator(alice()) and not a.is_administrator(alice("READ", "WRITE"))
    decision = a.check(m.DaemonsOff(), alice("READ"))
    text = a.refusal(m.DaemonsOff(), alice("READ"), decision)
    assert "alice@pool (from 10.200.0.5, by token scoped to READ)" in text and "its scope" in text, text


def test_the_peers_scopes_become_the_identitys():
    a = authz.Authorizer("schedd", policy({}), D, frozenset({0}), {0: "root"}.get, TD)
    peer = PeerInfo(host="10.200.0.5", identity="alice@pool", authenticated_by="token", scopes=("READ",))
    who = a.identify_peer(peer)
    assert who.scopes == ("READ",)
    assert a.check(m.QueryJobs(constraint="true"), who) and not a.check(m.Submit(cluster_ad="[ ]", proc_ads=("[ ]",)), who)
    assert a.identify_peer(PeerInfo(uid=0)).scopes == ()  # a local peer has no token, so no scope


def test_the_preamble_carries_the_scopes_and_validates_them():
    sent = m.Forwarded(host="10.200.0.5", identity="alice@pool", authenticated_by="token", scopes=("READ", "WRITE"))
    assert m.decode(m.encode(sent)).scopes == ("READ", "WRITE")
    assert m.decode(m.encode(m.Forwarded(host="10.0.0.1"))).scopes == ()
    for bad in (("read",), ("A" * 33,), ("READ",) * 17):
        with pytest.raises((msgspec.ValidationError, MessageInvalid)):
            m.decode(m.encode(m.Forwarded(host="10.0.0.1", scopes=bad)))


def _login(token: str) -> _ServerConn:
    def verify(text: str) -> tokens.TokenClaims:
        return tokens.verify(text, KEY, now=1000.0, issuer=TD)

    conn = _ServerConn(SharedPortServer("/nonexistent", None, verify))
    assert conn.validate_password("alice", token)
    return conn


def test_the_shared_port_keeps_the_scope_of_the_token_it_checked():
    scoped = tokens.mint(KEY, "alice@pool", issuer=TD, now=1000.0, scopes=("READ",))
    assert _login(scoped).scopes == ("READ",)
    assert _login(tokens.mint(KEY, "alice@pool", issuer=TD, now=1000.0)).scopes == ()
    # a scope the preamble could not carry is not dropped silently: it leaves a scope that grants nothing
    odd = tokens.mint(KEY, "alice@pool", issuer=TD, now=1000.0, scopes=("X" * 40,))
    assert _login(odd).scopes == ("NONE",) and not authz.in_scope(L.READ, ("NONE",))
