"""Roles, host names and the pool key of a multi-host pool, from the configuration alone:
``use ROLE : CentralManager|Submit|Execute`` (combined), CONDOR_HOST -> COLLECTOR_HOST on port
9618, daemon names as HTCondor builds them, and what ``htc pool start`` checks about the key."""

from __future__ import annotations

import os

import pytest

from htc.client.pool_role import host_role, prepare_pool_key
from htc.config import load_config
from htc.config.hostname import daemon_name
from htc.daemons.master.service import settings_from_config as master_settings
from htc.daemons.schedd.service import settings_from_config as schedd_settings
from htc.daemons.startd import events as ev
from htc.daemons.startd.core import Startd, StartdSettings
from htc.daemons.startd.policy import ClassAdPolicy
from htc.errors import UsageError
from htc.wire.poolkey import PoolKeyError

HOST = "submit.example.org"


def config_of(tmp_path, text: str, subsystem: str = "MASTER"):
    path = tmp_path / "htc_config"
    path.write_text(f"LOCAL_DIR = {tmp_path}\nNETWORK_HOSTNAME = {HOST}\n{text}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("_HTC_", "HTC_"))}
    env.update(HTC_CONFIG=str(path), HTC_HOME=str(tmp_path))
    return load_config(subsystem, env=env)


@pytest.mark.parametrize("roles, daemons", [
    (["CentralManager"], ["MASTER", "COLLECTOR", "NEGOTIATOR"]),
    (["Submit"], ["MASTER", "SCHEDD"]),
    (["Execute"], ["MASTER", "STARTD"]),
    (["CentralManager", "Submit"], ["MASTER", "COLLECTOR", "NEGOTIATOR", "SCHEDD"]),
    (["Submit", "Execute"], ["MASTER", "SCHEDD", "STARTD"]),
    (["CentralManager", "Submit", "Execute"], ["MASTER", "COLLECTOR", "NEGOTIATOR", "SCHEDD", "STARTD"]),
])
def test_roles_combine_into_the_daemon_list(tmp_path, roles, daemons):
    text = "CONDOR_HOST = cm.example.org\n" + "".join(f"use ROLE : {r}\n" for r in roles)
    config = config_of(tmp_path, text)
    assert config.param("DAEMON_LIST") == daemons
    # in network mode the master runs the shared port first (h18/ssh), then the roles' daemons
    assert master_settings(config, pid=1).daemon_list == ("SHARED_PORT", *daemons[1:])
    role = host_role(config)
    assert role.network and role.central_manager == ("CentralManager" in roles)
    assert (role.collector.host, role.collector.port, role.collector.name) == ("cm.example.org", 9618, "collector")


def test_collector_host_follows_condor_host_with_its_port(tmp_path):
    config = config_of(tmp_path, "use ROLE : Execute\nCONDOR_HOST = cm.example.org")
    assert config.param("COLLECTOR_HOST") == "cm.example.org"
    assert str(host_role(config).collector) == "<cm.example.org:9618>"
    moved = config_of(tmp_path, "use ROLE : Execute\nCONDOR_HOST = cm.example.org\nCOLLECTOR_HOST = $(CONDOR_HOST):9700")
    assert str(host_role(moved).collector) == "<cm.example.org:9700>"


def test_a_personal_pool_is_not_in_network_mode(tmp_path):
    config = config_of(tmp_path, "use ROLE : Personal")
    assert config.param("COLLECTOR_HOST") == "127.0.0.1:0"
    role = host_role(config)
    assert not role.network and role.central_manager
    assert prepare_pool_key(role) == ""
    assert not (tmp_path / "passwords.d").exists()  # a personal pool needs no key


def test_a_host_that_names_no_pool_is_refused(tmp_path):
    with pytest.raises(UsageError, match="set CONDOR_HOST = <the central manager's host name>"):
        host_role(config_of(tmp_path, "use ROLE : Execute"))


def test_the_central_manager_creates_the_pool_key_once(tmp_path):
    role = host_role(config_of(tmp_path, "use ROLE : CentralManager\nuse ROLE : Submit\nCONDOR_HOST = " + HOST))
    assert role.key_file == str(tmp_path / "passwords.d" / "POOL")
    assert prepare_pool_key(role) == role.key_file
    assert os.stat(role.key_file).st_mode & 0o777 == 0o600 and os.path.getsize(role.key_file) == 64
    key = open(role.key_file, "rb").read()
    assert prepare_pool_key(role) == ""  # there already: kept as it is
    assert open(role.key_file, "rb").read() == key


def test_another_host_without_the_key_is_told_where_to_copy_it_from(tmp_path):
    role = host_role(config_of(tmp_path, "use ROLE : Execute\nCONDOR_HOST = cm.example.org"))
    with pytest.raises(PoolKeyError) as refused:
        prepare_pool_key(role)
    text = str(refused.value)
    assert role.key_file in text and "from cm.example.org" in text and "mode 0600" in text
    os.makedirs(os.path.dirname(role.key_file))
    with open(role.key_file, "wb") as f:
        f.write(os.urandom(64))
    os.chmod(role.key_file, 0o644)
    with pytest.raises(PoolKeyError, match="chmod 600"):
        prepare_pool_key(role)
    os.chmod(role.key_file, 0o600)
    assert prepare_pool_key(role) == ""


def test_daemon_names_as_htcondor_builds_them():
    assert daemon_name("", HOST) == HOST
    assert daemon_name(None, HOST) == HOST
    assert daemon_name("alt", HOST) == f"alt@{HOST}"
    assert daemon_name("mine@elsewhere", HOST) == "mine@elsewhere"


def test_the_schedd_is_named_after_its_host(tmp_path):
    assert schedd_settings(config_of(tmp_path, "", "SCHEDD")).name == HOST
    named = schedd_settings(config_of(tmp_path, "SCHEDD_NAME = alt", "SCHEDD"))
    assert (named.name, named.machine) == (f"alt@{HOST}", HOST)


def test_a_named_startd_has_slots_of_its_own_names():
    def slots(name: str) -> list[str]:
        settings = StartdSettings(name=name, machine=HOST, slots_at=name, policy=ClassAdPolicy({}), cpus=2,
                                  memory=2048, disk=10**6, static_slots=2)
        startd = Startd(settings, 0.0)
        startd.handle(ev.SensorSample({"KeyboardIdle": 0, "LoadAvg": 0.0, "CondorLoadAvg": 0.0}), 0.0)
        assert startd.slot("slot2").name == f"slot2@{name}"
        return sorted(startd.slots)

    assert slots(HOST) == [f"slot1@{HOST}", f"slot2@{HOST}"]
    assert slots(daemon_name("second", HOST)) == [f"slot1@second@{HOST}", f"slot2@second@{HOST}"]
