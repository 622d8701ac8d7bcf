"""The shared port's token check with flocking: another pool's daemon token (same pool key, its
own trust domain) comes in only when this host flocks (FLOCK_FROM or FLOCK_TO), and never as
this pool's daemon identity."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from htc.daemons.shared_port.service import SharedPortService
from htc.daemons.shared_port.settings import SharedPortSettings
from htc.wire import tokens

KEY = b"k" * 64



def verify(token: str, **settings) -> tuple[str, str]:
    service = SimpleNamespace(core=SimpleNamespace(settings=SharedPortSettings(trust_domain="cmb.test", **settings)),
                              pool_key=KEY)
    claims, method = SharedPortService._verify(service, token)
    return claims.identity, method


def mint(identity: str, issuer: str, key: bytes = KEY) -> str:
    return tokens.mint(key, identity, issuer=issuer, now=time.time(), lifetime=3600)


def test_own_pools_daemons_and_users_as_before():
    assert verify(mint("condor_pool@cmb.test", "cmb.test")) == ("condor_pool@cmb.test", "pool")
    assert verify(mint("alice@cmb.test", "cmb.test")) == ("alice@cmb.test", "token")


def test_another_pools_daemon_is_refused_unless_this_host_flocks():
    token = mint("condor_pool@cma.test", "cma.test")
    with pytest.raises(tokens.TokenError, match="issued by 'cma.test'.*list its host in FLOCK_FROM"):
        verify(token)
    assert verify(token, flock_from=("suba.test",)) == ("condor_pool@cma.test", "token")
    assert verify(token, flock_to=("cma.test",)) == ("condor_pool@cma.test", "token")


def test_flocking_lets_in_no_user_of_another_pool_and_no_other_key():
    with pytest.raises(tokens.TokenError, match="issued by 'cma.test'"):
        verify(mint("alice@cma.test", "cma.test"), flock_from=("suba.test",))
    with pytest.raises(tokens.TokenError, match="issued by 'cma.test'"):
        verify(mint("condor_pool@cmb.test", "cma.test"), flock_from=("suba.test",))  # not its own domain's
    with pytest.raises(tokens.TokenError, match="signature"):
        verify(mint("condor_pool@cma.test", "cma.test", key=b"x" * 64), flock_from=("suba.test",))
