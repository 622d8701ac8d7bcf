"""A tool talking to a daemon that the master holds off says so (htc off -daemon SCHEDD; htc q)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from htc.cli.main import main
from htc.client.pool import pool_status
from htc.config.execute import SHARED_EXECUTE_ROOT
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


@pytest.mark.skipif(os.geteuid() != 0, reason="EXECUTE moves only for a root startd; run the tests as root, as CI does")
def test_config_val_execute_says_where_root_runs_jobs_and_nothing_is_left(monkeypatch, capsys):
    """Root's default EXECUTE under a 0700 directory is out of the job users' reach: the knob's
    value is the per-pool directory under /var/lib/htc where jobs really run."""
    private = Path(tempfile.mkdtemp(prefix="htcx-", dir="/tmp"))  # mode 0700, like /root
    home = private / "h"
    work = Path(tempfile.mkdtemp(prefix="htcw-", dir="/tmp"))
    work.chmod(0o777)
    monkeypatch.setenv("HTC_HOME", str(home))
    seen: set[int] = set()
    try:
        assert main(["config_val", "EXECUTE"]) == 0
        execute = Path(capsys.readouterr().out.strip())
        assert execute.parent == SHARED_EXECUTE_ROOT, execute
        assert main(["pool", "start"]) == 0
        status = pool_status()
        seen.add(status.master_pid)
        seen.update(d.pid for d in status.daemons if d.pid)
        sub = work / "pwd.sub"
        sub.write_text(f"executable = /bin/pwd\noutput = {work}/pwd.out\nlog = {work}/pwd.log\nqueue\n")
        assert main(["submit", str(sub)]) == 0
        out = work / "pwd.out"
        wait_for(lambda: out.exists() and out.read_text().strip(), 90, what="the job's output")
        assert Path(out.read_text().strip()).parent == execute
        assert main(["pool", "stop"]) == 0
        assert not execute.exists()
    finally:
        stop_pool_and_reap(home, seen, timeout=15)
        shutil.rmtree(private, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
