"""A tool talking to a daemon that the master holds off says so (htc off -daemon SCHEDD; htc q)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from htc.cli.main import main
from htc.client.pool import pool_status
from poolutil import stop_pool_and_reap, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def home(monkeypatch):
    """A short HTC_HOME (Unix socket paths are limited) whose pool is always torn down."""
    path = Path(tempfile.mkdtemp(prefix="htco-", dir="/tmp"))
    monkeypatch.setenv("HTC_HOME", str(path))
    monkeypatch.setenv("_HTC_MASTER_UPDATE_INTERVAL", "1")
    seen: set[int] = set()
    try:
        yield path, seen
    finally:
        stop_pool_and_reap(path, seen, timeout=15)


def _schedd():
    return next(d for d in pool_status().daemons if d.name == "SCHEDD")


def test_q_says_the_schedd_is_off_not_that_the_pool_may_not_run(home, capsys):
    path, seen = home
    assert main(["pool", "start"]) == 0
    status = pool_status()
    seen.add(status.master_pid)
    seen.update(d.pid for d in status.daemons if d.pid)
    assert main(["off", "-daemon", "SCHEDD"]) == 0
    wait_for(lambda: _schedd().state == "Off" and not _schedd().answering, 20, what="the schedd off")
    capsys.readouterr()
    assert main(["q"]) != 0
    err = capsys.readouterr().err
    assert "SCHEDD daemon is off" in err and "htc on -daemon SCHEDD" in err, err
    assert "is the pool running" not in err
    assert main(["on", "-daemon", "SCHEDD"]) == 0
    wait_for(lambda: _schedd().answering, 20, what="the schedd back")
    capsys.readouterr()
    assert main(["q"]) == 0
