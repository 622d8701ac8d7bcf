"""kill -9 of a startd under a running job: the startd the master starts again removes the
sandbox and the job cgroups its predecessor left (HTCondor's startd cleans its execute
directory when it starts)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from htc.daemons.starter.limits import detect_cgroups
from poolutil import Pool, wait_for

pytestmark = pytest.mark.slow


def _cgroups_of(sandbox: Path) -> list[Path]:
    layout = detect_cgroups()
    parents = [layout.base] if layout.version == 2 and layout.base else [p for _, p in layout.v1]
    return [parent / f"htc_{sandbox.name}" for parent in parents]


def test_a_restarted_startd_removes_what_its_killed_predecessor_left():
    pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD")
    try:
        pool.start()
        where = pool.work / "where"
        job = (f"executable = /bin/sh\narguments = \"-c 'pwd > {where}.tmp && mv {where}.tmp {where}"
               f" && exec sleep 600'\"\nlog = {pool.work}/crash.log\nqueue\n")
        pool.submit(job)
        sandbox = Path(wait_for(lambda: where.exists() and where.read_text().strip(), 60, what="the job running"))
        assert sandbox.is_dir() and sandbox.name.startswith("dir_")
        groups = [g for g in _cgroups_of(sandbox) if g.is_dir()]
        if os.geteuid() == 0 and detect_cgroups().version:
            assert groups, f"no job cgroup for {sandbox}"
        old = pool.status("STARTD").pid
        os.kill(old, signal.SIGKILL)
        pool.running_pid("STARTD", other_than=old, timeout=60)
        wait_for(lambda: not sandbox.exists(), 30, what=f"{sandbox} removed")
        wait_for(lambda: not any(g.exists() for g in groups), 30, what=f"{groups} removed")
    finally:
        pool.stop()
