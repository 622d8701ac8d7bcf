"""Where schedds and startds send their Reschedule in network mode: the negotiator behind the
shared port of NEGOTIATOR_HOST, by default the central manager's (htc.daemons.network)."""

from __future__ import annotations

import pytest

from htc.config import load_config
from htc.daemons.network import pool_addresses
from htc.wire.errors import BadAddress


def config(subsystem: str, **knobs):
    env = {"HTC_CONFIG": "ONLY_ENV", **{f"_HTC_{k}": str(v) for k, v in knobs.items()}}
    return load_config(subsystem, env=env)


def test_the_negotiator_is_beside_the_collector_unless_negotiator_host_says_otherwise():
    cm = config("SCHEDD", COLLECTOR_HOST="cm.example.org:9620")
    assert pool_addresses(cm, "schedd").negotiator == "<cm.example.org:9620?sock=negotiator>"
    elsewhere = config("SCHEDD", COLLECTOR_HOST="cm.example.org:9620", NEGOTIATOR_HOST="neg.example.org")
    assert pool_addresses(elsewhere, "schedd").negotiator == "<neg.example.org:9618?sock=negotiator>"
    port = config("SCHEDD", COLLECTOR_HOST="cm.example.org", NEGOTIATOR_HOST="10.0.0.7:9700")
    assert pool_addresses(port, "schedd").negotiator == "<10.0.0.7:9700?sock=negotiator>"
    # a personal pool: local names, whatever the knob says
    assert pool_addresses(config("SCHEDD", NEGOTIATOR_HOST="neg.example.org"), "schedd").negotiator == "negotiator"


def test_a_malformed_negotiator_host_is_named_in_the_error():
    with pytest.raises(BadAddress, match="NEGOTIATOR_HOST = neg:x"):
        pool_addresses(config("SCHEDD", COLLECTOR_HOST="cm.example.org", NEGOTIATOR_HOST="neg:x"), "schedd")


def test_schedds_and_startds_send_their_reschedule_to_it(tmp_path):
    from htc.daemons.schedd.service import settings_from_config as schedd_settings
    from htc.daemons.startd.service import settings_from_config as startd_settings

    knobs = {"COLLECTOR_HOST": "cm.example.org", "NEGOTIATOR_HOST": "neg.example.org",
             "EXECUTE": str(tmp_path / "execute")}
    want = "<neg.example.org:9618?sock=negotiator>"
    assert schedd_settings(config("SCHEDD", **knobs)).negotiator == want
    # (an execute host has no negotiator of its own: a local name reached nobody)
    assert startd_settings(config("STARTD", **knobs), tmp_path).negotiator == want
