"""htc pool start / status / stop, off / on / reconfig: real daemon processes in a temporary HTC_HOME.

Every test stops its pool and then kills whatever process of it is still alive, so a failing
assertion never leaves daemons behind.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from htc.cli.main import main
from htc.client.pool import pool_status
from poolutil import stop_pool_and_reap

pytestmark = pytest.mark.slow


def _alive(pid: int | None) -> bool:
    try:
        return bool(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def home(monkeypatch):
    """A short HTC_HOME (Unix socket paths are limited) whose pool is always torn down."""
    path = Path(tempfile.mkdtemp(prefix="htcp-", dir="/tmp"))
    monkeypatch.setenv("HTC_HOME", str(path))
    monkeypatch.setenv("_HTC_MASTER_UPDATE_INTERVAL", "1")
    monkeypatch.setenv("_HTC_MASTER_BACKOFF_CONSTANT", "0")
    seen: set[int] = set()
    try:
        yield path, seen
    finally:
        stop_pool_and_reap(path, seen, timeout=15)


def test_start_status_stop(home, capsys):
    path, seen = home
    assert main(["pool", "start"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"htc pool under {path} is running (master pid ")
    status = pool_status()
    seen.add(status.master_pid)
    seen.update(d.pid for d in status.daemons if d.pid)
    assert status.running and _alive(status.master_pid)
    collector = next(d for d in status.daemons if d.name == "COLLECTOR")
    assert collector.state == "Running" and collector.answering
    assert all(d.answering or d.state in ("Off", "GaveUp") for d in status.daemons)
    master = psutil.Process(status.master_pid)
    assert master.ppid() != os.getpid(), "the master is detached, not the tool's child"

    # starting again is harmless: the same master answers
    assert main(["pool", "start"]) == 0
    capsys.readouterr()
    assert pool_status().master_pid == status.master_pid

    assert main(["pool", "status", "-json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["running"] and data["master_pid"] == status.master_pid
    assert {d["name"] for d in data["daemons"]} >= {"COLLECTOR"}

    assert main(["pool", "stop"]) == 0
    assert capsys.readouterr().out == f"htc pool under {path} stopped (master pid {status.master_pid})\n"
    assert not _alive(status.master_pid) and not _alive(collector.pid)
    assert not list((path / "sockets").glob("*.sock"))

    assert main(["pool", "status"]) == 1
    assert "is not running" in capsys.readouterr().out
    assert main(["pool", "stop"]) == 0
    assert capsys.readouterr().out == f"htc pool under {path} is not running\n"


def test_off_on_restart_reconfig(home, capsys):
    path, seen = home
    assert main(["pool", "start"]) == 0
    capsys.readouterr()
    first = next(d for d in pool_status().daemons if d.name == "COLLECTOR")
    seen.add(first.pid)

    assert main(["off", "-daemon", "collector"]) == 0
    assert capsys.readouterr().out == 'Sent "Kill-Daemon" command for "collector" to local master\n'
    deadline = time.monotonic() + 15
    while _alive(first.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(first.pid)

    assert main(["on", "-daemon", "collector"]) == 0
    assert capsys.readouterr().out == 'Sent "Spawn-Daemon" command for "collector" to local master\n'
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        st = next(d for d in pool_status().daemons if d.name == "COLLECTOR")
        if st.answering and st.pid != first.pid:
            seen.add(st.pid)
            break
        time.sleep(0.05)
    else:
        pytest.fail("the collector did not come back after 'htc on'")

    assert main(["reconfig"]) == 0
    assert capsys.readouterr().out == 'Sent "Reconfig" command to local master\n'
    assert main(["reconfig", "-daemon", "collector", "-json"]) == 0
    assert json.loads(capsys.readouterr().out)["sent"] == ['Sent "Reconfig" command to local collector']

    assert main(["off", "-master", "-fast"]) == 0
    assert capsys.readouterr().out == 'Sent "Kill-Daemon" command for "master" to local master\n'


def test_tools_without_a_pool_say_how_to_start_it(home, capsys):
    assert main(["off"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("htc off: no master daemon is listening") and "htc pool start" in err
    assert main(["status"]) == 1
    assert "no collector daemon is listening" in capsys.readouterr().err


def test_a_master_that_cannot_start_is_reported_with_its_log(home, capsys, monkeypatch):
    monkeypatch.setenv("_HTC_MASTER_BACKOFF_FACTOR", "abc")
    assert main(["pool", "start"]) == 1
    err = capsys.readouterr().err
    assert "exited while starting" in err and "MASTER_BACKOFF_FACTOR" in err and "'abc' is not a valid float" in err
    assert not pool_status().running


def test_foreground_runs_the_master_until_it_is_told_to_stop(home):
    import signal
    import subprocess
    import sys

    path, seen = home
    proc = subprocess.Popen([sys.executable, "-m", "htc.cli.main", "pool", "start", "-foreground"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen.add(proc.pid)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status = pool_status()
            if status.running and any(d.answering for d in status.daemons):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the foreground pool did not answer")
        assert status.master_pid == proc.pid, "the master is the htc process itself"
        seen.update(d.pid for d in status.daemons if d.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert not any(_alive(d.pid) for d in status.daemons)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=5)
