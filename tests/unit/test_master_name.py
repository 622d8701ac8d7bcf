"""MASTER_NAME and the master's default name, as HTCondor's (its manual's MASTER_NAME entry;
default_daemon_name and build_valid_daemon_name in its source)."""

from __future__ import annotations

import os
import pwd

from htc.config import load_config
from htc.config.hostname import full_hostname
from htc.daemons.master.service import settings_from_config
from htc.daemons.master.settings import master_name


def test_unset_it_is_the_host_for_root_and_user_at_host_otherwise(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert master_name("", "cm.example.org") == "cm.example.org"
    alice = pwd.struct_passwd(("alice", "x", 1234, 1234, "", "/home/alice", "/bin/sh"))
    condor = pwd.struct_passwd(("condor", "x", 999, 999, "", "/var/lib/condor", "/bin/sh"))
    monkeypatch.setattr(os, "geteuid", lambda: 1234)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: alice)
    assert master_name(None, "cm.example.org") == "alice@cm.example.org"
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: condor)
    assert master_name(None, "cm.example.org") == "cm.example.org"


def test_a_set_name_gets_the_host_unless_it_has_an_at_or_is_the_host():
    assert master_name("second", "cm.example.org") == "second@cm.example.org"
    assert master_name("ha@pool.example.org", "cm.example.org") == "ha@pool.example.org"
    assert master_name("CM.example.org", "cm.example.org") == "cm.example.org"


def test_the_masters_settings_use_the_configured_host():
    env = {"HTC_CONFIG": "ONLY_ENV", "_HTC_NETWORK_HOSTNAME": "node7.example.org", "_HTC_MASTER_NAME": "alt"}
    assert settings_from_config(load_config("MASTER", env=env), 1).name == "alt@node7.example.org"
    unset = settings_from_config(load_config("MASTER", env={"HTC_CONFIG": "ONLY_ENV"}), 1).name
    assert unset == (full_hostname() if os.geteuid() == 0 else f"{pwd.getpwuid(os.geteuid()).pw_name}@{full_hostname()}")
    assert not unset.startswith("master@")  # (htc named it master@host, which HTCondor never does)
