"""kill -9 of a startd under a running job: the job keeps the time it ran, and the startd the
master starts again removes the sandbox and the job cgroups its predecessor left (HTCondor's
startd cleans its execute directory when it starts)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from htc.daemons.starter.limits import detect_cgroups
from poolutil import Pool, wait_for

pytestmark = pytest.mark.slow


def _cgroups_of(sandbox: Path) -> list[Path]:
    layout = detect_cgroups()
    parents = [layout.base] if layout.version == 2 and layout.base else [p for _, p in layout.v1]
    # named htc_<sandbox>_ns<pid namespace> (htc.daemons.starter.limits.JobCgroup.create)
    return [group for parent in parents for group in parent.glob(f"htc_{sandbox.name}_ns*")]


def test_a_restarted_startd_removes_what_its_killed_predecessor_left():
    pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD")
    try:
        pool.start()
        where = pool.work / "where"
        stamp = pool.work / "started"
        job = (f"executable = /bin/sh\narguments = \"-c 'date +%s.%N > {stamp} && pwd > {where}.tmp && "
               f"mv {where}.tmp {where} && exec sleep 600'\"\nlog = {pool.work}/crash.log\nqueue\n")
        cluster = pool.submit(job).cluster_id
        sandbox = Path(wait_for(lambda: where.exists() and where.read_text().strip(), 60, what="the job running"))
        started = float(stamp.read_text())
        assert sandbox.is_dir() and sandbox.name.startswith("dir_")
        groups = [g for g in _cgroups_of(sandbox) if g.is_dir()]
        if os.geteuid() == 0 and detect_cgroups().version:
            assert groups, f"no job cgroup for {sandbox}"
        old = pool.status("STARTD").pid
        wait_for(lambda: time.time() >= started + 1.0, 10, what="a second of running")
        os.kill(old, signal.SIGKILL)
        ran = time.time() - started
        # The run its machine's death ended is the job's too (RemoteWallClockTime, as HTCondor's
        # schedd adds it when the shadow gives the run up).
        [ad] = wait_for(lambda: [a for a in pool.jobs(f"ClusterId == {cluster}")
                                 if a.eval("RemoteWallClockTime") > 0], 60, what="the lost run recorded")
        assert ad.eval("RemoteWallClockTime") >= ran >= 1.0
        pool.running_pid("STARTD", other_than=old, timeout=60)
        wait_for(lambda: not sandbox.exists(), 30, what=f"{sandbox} removed")
        wait_for(lambda: not any(g.exists() for g in groups), 30, what=f"{groups} removed")
    finally:
        pool.stop()
