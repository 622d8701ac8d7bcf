"""Network mode, daemon credentials, routing and the shared port's core: no sockets."""

from __future__ import annotations

import logging
import os

import pytest

from htc.config import load_config
from htc.daemons import core as c
from htc.daemons.master.service import settings_from_config as master_settings
from htc.daemons.network import daemon_credentials, daemon_transport, network_mode, ssh_options, trust_domain
from htc.daemons.shared_port.core import SharedPort
from htc.daemons.shared_port.events import Listen, ListenFailed
from htc.daemons.shared_port.service import settings_from_config
from htc.wire import messages as m
from htc.wire import tokens
from htc.wire.poolkey import PoolKeyError
from htc.wire.routing import RoutingTransport
from htc.wire.ssh_client import SshTransport
from htc.wire.transport import Transport, UnixTransport


def config(**knobs):
    env = {"HTC_CONFIG": "ONLY_ENV", **{f"_HTC_{k}": str(v) for k, v in knobs.items()}}
    return load_config("SHARED_PORT", env=env)


@pytest.mark.parametrize("collector_host, expected", [
    ("", False), ("127.0.0.1:0", False), ("cm.example.org", True), ("10.200.0.1:9618", True),
    ("<10.200.0.1:9618>", True)])
def test_network_mode_is_a_collector_host_with_a_real_port(collector_host, expected):
    assert network_mode(config(COLLECTOR_HOST=collector_host)) is expected


def test_master_runs_the_shared_port_first_in_network_mode_only():
    net = load_config("MASTER", env={"HTC_CONFIG": "ONLY_ENV", "_HTC_COLLECTOR_HOST": "cm:9618",
                                     "_HTC_DAEMON_LIST": "MASTER, COLLECTOR, SCHEDD"})
    assert master_settings(net, 1).daemon_list == ("SHARED_PORT", "COLLECTOR", "SCHEDD")
    off = load_config("MASTER", env={"HTC_CONFIG": "ONLY_ENV", "_HTC_COLLECTOR_HOST": "cm:9618",
                                     "_HTC_DAEMON_LIST": "MASTER, COLLECTOR", "_HTC_USE_SHARED_PORT": "false"})
    assert master_settings(off, 1).daemon_list == ("COLLECTOR",)
    personal = load_config("MASTER", env={"HTC_CONFIG": "ONLY_ENV", "_HTC_COLLECTOR_HOST": "127.0.0.1:0",
                                          "_HTC_DAEMON_LIST": "MASTER, COLLECTOR"})
    assert master_settings(personal, 1).daemon_list == ("COLLECTOR",)


def test_trust_domain_defaults_to_the_collector_host():
    assert trust_domain(config(COLLECTOR_HOST="cm.example.org:9618")) == "cm.example.org:9618"
    assert trust_domain(config(COLLECTOR_HOST="cm:9618", TRUST_DOMAIN="pool.example")) == "pool.example"
    assert settings_from_config(config(COLLECTOR_HOST="cm:9618")).trust_domain == "cm:9618"


def test_daemons_mint_short_lived_pool_tokens():
    key = os.urandom(64)
    user, token = daemon_credentials(key, "pool.example", clock=lambda: 1000.0)()
    assert user == "condor_pool@pool.example"
    claims = tokens.verify(token, key, now=1001.0, issuer="pool.example")
    assert claims.identity == user and claims.expires == 1000 + 3600


def test_ssh_options_follow_the_knobs():
    opts = ssh_options(config(SSH_KEEPALIVE_INTERVAL="0.5", SSH_KEEPALIVE_COUNT_MAX="2", SSH_CONNECT_TIMEOUT="3",
                              SSH_CIPHERS="aes256-gcm@openssh.com"), pool_key=os.urandom(32))
    assert (opts.keepalive_interval, opts.keepalive_count_max, opts.connect_timeout) == (0.5, 2, 3.0)
    assert opts.ciphers == ("aes256-gcm@openssh.com",)
    assert opts.trusted is not None
    assert ssh_options(config()).ciphers[0] == "aes128-gcm@openssh.com"  # AES-GCM preferred


class _Named(Transport):
    def __init__(self, name):
        self.name = name

    async def open_connection(self, address, *, timeout=None):
        return (self.name, address)

    async def start_server(self, address, handler, *, task_group):
        return (self.name, address)


def test_routing_sends_local_names_and_own_sinful_addresses_to_the_unix_side():
    router = RoutingTransport(_Named("unix"), _Named("ssh"), own_endpoints=[("10.0.0.1", 9618)])
    assert router.route("schedd") == (router.local, "schedd")
    assert router.route("<10.0.0.1:9618?sock=schedd>") == (router.local, "schedd")
    assert router.route("<10.0.0.1:9618>") == (router.local, "collector")
    assert router.route("<10.0.0.2:9618?sock=schedd>") == (router.remote, "<10.0.0.2:9618?sock=schedd>")
    assert router.route("<10.0.0.1:9619?sock=schedd>")[0] is router.remote


def test_shared_port_core_listens_once_started_and_exits_when_it_cannot():
    core = SharedPort(settings_from_config(config(COLLECTOR_HOST="cm:9618", SHARED_PORT_PORT="9700",
                                                  NETWORK_INTERFACE="10.0.0.1")))
    actions = core.handle(c.Started(), 0)
    assert Listen("10.0.0.1", 9700) in actions
    failed = core.handle(ListenFailed("address in use"), 1)
    assert c.Exit(1) in failed
    assert any(isinstance(a, c.Log) and a.level == logging.ERROR and "address in use" in a.text for a in failed)
    assert core.handle(c.StopRequested(), 2) == [c.Exit(0)]
    reply = core.handle(c.Received(m.QueryMaster(), conn_id=3), 3)
    assert reply[0].msg.code == "unknown_request"
    assert core.next_deadline() is None


def test_daemons_send_over_ssh_only_in_network_mode_and_only_with_the_pool_key(tmp_path):
    local = UnixTransport(tmp_path / "sockets")
    assert daemon_transport(local, config(COLLECTOR_HOST="127.0.0.1:0")) is local
    key = tmp_path / "POOL"
    with pytest.raises(PoolKeyError, match=str(key)):
        daemon_transport(local, config(COLLECTOR_HOST="cm:9618", SEC_TOKEN_POOL_SIGNING_KEY_FILE=key))
    key.write_bytes(os.urandom(64))
    key.chmod(0o600)
    routed = daemon_transport(local, config(COLLECTOR_HOST="cm:9618", SEC_TOKEN_POOL_SIGNING_KEY_FILE=key,
                                            SHARED_PORT_PORT="9620", NETWORK_INTERFACE="10.0.0.5"))
    assert isinstance(routed, RoutingTransport) and routed.local is local
    assert isinstance(routed.remote, SshTransport) and routed.remote.options.trusted is not None
    assert routed.route("<10.0.0.5:9620?sock=schedd>") == (local, "schedd")
    assert routed.remote.credentials()[0] == "condor_pool@cm:9618"
