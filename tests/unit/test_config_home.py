"""$HTC_HOME: its location, first-use creation of a personal-pool config, and its layout."""

from __future__ import annotations

import os

import pytest

from htc.config import ConfigError, ensure_home, htc_home, load_config
from htc.config.execute import execute_default
from htc.config.home import PERSONAL_CONFIG


def test_home_location(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert htc_home({}) == str(tmp_path / ".htc")
    assert htc_home({"HTC_HOME": "~/elsewhere"}) == str(tmp_path / "elsewhere")
    monkeypatch.setenv("HTC_HOME", str(tmp_path / "viaenv"))
    assert htc_home() == str(tmp_path / "viaenv")


def test_ensure_home_creates_the_layout_once(tmp_path):
    env = {"HTC_HOME": str(tmp_path / "h")}
    path = ensure_home(env)
    assert path == str(tmp_path / "h" / "htc_config")
    assert open(path).read() == PERSONAL_CONFIG
    for sub in ("config.d", "spool", "execute", "log"):
        assert (tmp_path / "h" / sub).is_dir()
    with open(path, "a") as fh:
        fh.write("MINE = kept\n")
    assert ensure_home(env) == path
    assert "MINE = kept" in open(path).read()
    assert [n for n in os.listdir(tmp_path / "h") if ".tmp." in n] == []


def test_personal_config_is_a_working_personal_pool(tmp_path):
    home = tmp_path / "h"
    cfg = load_config("MASTER", env={"HTC_HOME": str(home)})
    assert cfg.param("DAEMON_LIST") == ["MASTER", "COLLECTOR", "NEGOTIATOR", "STARTD", "SCHEDD"]
    assert cfg.param("CONDOR_HOST") == "127.0.0.1"
    assert cfg.param("COLLECTOR_HOST") == "127.0.0.1:0"
    assert cfg.param("LOCAL_DIR") == str(home)
    assert cfg.param("SPOOL") == str(home / "spool")
    # (as root under a private directory, EXECUTE is where root's jobs can run: htc.config.execute)
    assert cfg.param("EXECUTE") == (execute_default(str(home / "execute"), home) or str(home / "execute"))
    assert cfg.param("LOG") == str(home / "log")
    assert cfg.param("LOCK") == str(home / "log")
    assert cfg.param("JOB_QUEUE_DB") == str(home / "spool" / "job_queue.db")
    assert cfg.param("SCHEDD_LOG") == str(home / "log" / "SchedLog")
    assert cfg.param("LOCAL_CONFIG_DIR") == [str(home / "config.d")]
    assert cfg.files == [str(home / "htc_config")]


def test_unwritable_home_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigError, match=r"cannot create the htc home .*file/h: .*set HTC_HOME"):
        ensure_home({"HTC_HOME": str(blocker / "h")})
