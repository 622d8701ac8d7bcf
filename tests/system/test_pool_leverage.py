"""Leverage in a personal pool: a finished job's ``htc history -af Leverage`` is its remote CPU
over the CPU the schedd spent on it (htc.daemons.schedd.leverage), both measured."""

from __future__ import annotations

import subprocess
import sys

import pytest

from poolutil import Pool, wait_for

pytestmark = pytest.mark.slow

BURN = "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end:\n    pass\n"


def _history(pool: Pool, cluster: int) -> list[str] | None:
    out = subprocess.run([sys.executable, "-m", "htc.cli.main", "history", f"{cluster}.0", "-af", "Leverage",
                          "SubmitSideCpu", "RemoteUserCpu", "RemoteSysCpu"], env=pool.env, capture_output=True,
                         text=True, timeout=60).stdout.split()
    return out or None


def test_a_finished_job_has_its_leverage_in_the_history():
    pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD")
    try:
        pool.start()
        (pool.work / "burn.py").write_text(BURN)
        cluster = pool.submit(f"executable = /usr/bin/python3\narguments = burn.py\ninitialdir = {pool.work}\n"
                              "transfer_executable = false\nshould_transfer_files = YES\n"
                              "transfer_input_files = burn.py\nqueue\n").cluster_id
        leverage, local, user, system = wait_for(lambda: _history(pool, cluster), timeout=180,
                                                 what=f"job {cluster}.0 in the history")
        remote = float(user) + float(system)
        assert remote >= 1.4
        assert 0 < float(local) < remote  # the schedd's handlers for this job took some CPU, far less
        assert float(leverage) == pytest.approx(remote / float(local), rel=0.01)
    except BaseException:
        for path in sorted((pool.home / "log").glob("*Log")):
            print(f"--- {path}\n" + path.read_text()[-4000:])
        raise
    finally:
        pool.stop()
