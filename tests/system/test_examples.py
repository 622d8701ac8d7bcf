"""The runnable examples run under the tests, on a real personal pool in a fresh HTC_HOME."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_demo_runs_a_cluster_on_a_personal_pool(_isolated_htc_home):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "10 job(s) submitted to cluster" in proc.stdout
    assert "All jobs done." in proc.stdout
    for n in range(10):
        assert f"out.{n}: hello from job " in proc.stdout
    assert "[0, 1, 4, 9, 16, 25, 36, 49, 64, 81]" in proc.stdout  # HTCExecutor().map on the same pool
    assert "stopped" in proc.stdout
