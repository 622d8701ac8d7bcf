"""The job tools against a real pool: htc pool start, submit, q, hold, release, qedit, prio,
rm, history, wait, q -better-analyze, status, pool stop -- real daemons in a temporary HTC_HOME.

Each test starts its own pool through ``htc pool start`` and always stops it (then kills
whatever is left), so a failing assertion never leaves processes behind.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest

from htc.cli.main import main
from htc.client.pool import pool_status
from poolutil import stop_pool_and_reap

pytestmark = pytest.mark.slow

FAST = {"MASTER_BACKOFF_CONSTANT": "0", "MASTER_UPDATE_INTERVAL": "5", "CONDOR_ADMIN": "",
        "SCHEDD_MIN_INTERVAL": "0", "SCHEDD_INTERVAL": "5", "NEGOTIATOR_INTERVAL": "2",
        "NEGOTIATOR_CYCLE_DELAY": "0", "NEGOTIATOR_MIN_INTERVAL": "0", "UPDATE_INTERVAL": "2",
        "STARTER_INITIAL_UPDATE_INTERVAL": "1", "STARTER_UPDATE_INTERVAL": "2", "POLLING_INTERVAL": "1",
        "ALIVE_INTERVAL": "2", "PERIODIC_EXPR_INTERVAL": "1", "NUM_CPUS": "2"}


def _pool(monkeypatch, daemons: str):
    root = Path(tempfile.mkdtemp(prefix="htcj-", dir="/tmp"))
    root.chmod(0o755)  # jobs run as 'nobody' when the tests run as root: the sandbox must be reachable
    monkeypatch.setenv("HTC_HOME", str(root))
    for knob, value in {**FAST, "DAEMON_LIST": daemons}.items():
        monkeypatch.setenv(f"_HTC_{knob}", value)
    monkeypatch.chdir(root)
    return root


def _teardown(root: Path) -> None:
    stop_pool_and_reap(root, set())


@pytest.fixture
def queue_pool(monkeypatch):
    """A pool with a collector and a schedd only: jobs stay idle, so every tool sees them."""
    root = _pool(monkeypatch, "MASTER, COLLECTOR, SCHEDD")
    try:
        yield root
    finally:
        _teardown(root)


@pytest.fixture
def full_pool(monkeypatch):
    """The whole personal pool: jobs are matched and run."""
    root = _pool(monkeypatch, "MASTER, COLLECTOR, NEGOTIATOR, STARTD, SCHEDD")
    try:
        yield root
    finally:
        _teardown(root)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_submit_q_hold_release_edit_rm_history_wait(queue_pool, capsys):
    assert run(capsys, "pool", "start")[0] == 0
    (queue_pool / "job.sub").write_text(
        "executable = /bin/echo\narguments = hi $(Process)\nlog = job.log\noutput = out.$(Cluster).$(Process)\n"
        "queue 3\n")
    assert run(capsys, "submit", "job.sub") == (0, "Submitting job(s)...\n3 job(s) submitted to cluster 1.\n", "")
    assert run(capsys, "submit", "-terse", "-queue", "1", "job.sub")[1] == "2.0 - 2.0\n"

    status, out, _ = run(capsys, "q", "-af", "ClusterId", "ProcId", "JobStatus", "Out")
    assert out == "1 0 1 out.1.0\n1 1 1 out.1.1\n1 2 1 out.1.2\n2 0 1 out.2.0\n"
    out = run(capsys, "q")[1]
    assert "Total for query: 4 jobs; 0 completed, 0 removed, 4 idle, 0 running, 0 held, 0 suspended" in out
    assert any(line.split()[1:3] == ["ID:", "1"] and line.split()[-2:] == ["3", "1.0-2"] for line in out.splitlines())

    assert run(capsys, "hold", "1.1") == (0, "Job 1.1 held\n", "")
    held = json.loads(run(capsys, "q", "-hold", "-json")[1])
    assert [(a["ProcId"], a["HoldReasonCode"]) for a in held] == [(1, 1)]
    assert run(capsys, "release", "1.2") == (1, "", "Job 1.2 not held to be released\n")
    assert run(capsys, "release", "1")[1] == "All jobs in cluster 1 have been released\n"
    assert run(capsys, "qedit", "1", "JobBatchName", '"night"')[1] == \
        'Set attribute "JobBatchName" for 3 matching jobs.\n'
    assert run(capsys, "prio", "-p", "7", "1.0")[0] == 0
    assert run(capsys, "q", "-af", "ProcId", "JobPrio", "JobBatchName", "-constraint", "ClusterId == 1")[1] == \
        "0 7 night\n1 0 night\n2 0 night\n"

    assert run(capsys, "rm", "1.0") == (0, "Job 1.0 marked for removal\n", "")
    assert run(capsys, "rm", "-constraint", "ClusterId == 1")[1] == \
        "All jobs matching constraint (ClusterId == 1) have been marked for removal\n"
    assert run(capsys, "q", "-af", "ClusterId", "ProcId")[1] == "2 0\n"
    assert run(capsys, "history", "-af", "ClusterId", "ProcId", "JobStatus")[1] == "1 2 3\n1 1 3\n1 0 3\n"

    # every job of cluster 1 is aborted in the log: wait says so at once; cluster 2 is still idle
    assert run(capsys, "wait", "-wait", "5", "job.log", "1") == (0, "All jobs done.\n", "")
    assert run(capsys, "wait", "-wait", "0.5", "job.log") == (1, "Time expired.\n", "")

    assert run(capsys, "pool", "stop")[0] == 0
    assert not pool_status().running


def test_jobs_run_wait_reports_them_done_and_better_analyze_explains_a_misfit(full_pool, capsys):
    assert run(capsys, "pool", "start")[0] == 0
    (full_pool / "job.sub").write_text(
        "executable = /bin/echo\narguments = hello $(Process)\nlog = job.log\noutput = out.$(Process)\nqueue 2\n")
    (full_pool / "big.sub").write_text("executable = /bin/true\nrequest_memory = 100000000\nqueue\n")
    assert run(capsys, "submit", "job.sub")[0] == 0
    assert run(capsys, "submit", "big.sub")[1].endswith("1 job(s) submitted to cluster 2.\n")

    status, out, _ = run(capsys, "wait", "-wait", "25", "job.log")
    assert (status, out) == (0, "All jobs done.\n")
    assert (full_pool / "out.0").read_text() == "hello 0\n" and (full_pool / "out.1").read_text() == "hello 1\n"
    # newest first; the two jobs ran side by side on two slots, so either may have ended last
    assert sorted(run(capsys, "history", "-af", "ClusterId", "ProcId", "JobStatus", "ExitCode")[1].splitlines()) == \
        ["1 0 4 0", "1 1 4 0"]

    slots = run(capsys, "status", "-af", "Name", "State")[1]
    assert slots.strip(), "the startd advertises its slots"
    status, out, _ = run(capsys, "q", "-better-analyze", "2.0")
    assert status == 0
    assert "The Requirements expression for job 2.000 reduces to these conditions:" in out
    assert "slots are rejected by your job's requirements" in out
    assert "Why job 2.0 is not running:" in out
    assert "no slot satisfies" in out and "TARGET.Memory >= RequestMemory" in out.split("Why job 2.0")[1]

    # a long job: evicted by htc vacate_job, then (matched again) by htc vacate on its slot
    (full_pool / "long.sub").write_text("executable = /bin/sleep\narguments = 120\nlog = long.log\nqueue\n")
    assert run(capsys, "submit", "long.sub")[0] == 0
    for command, expected in ((["vacate_job", "3.0"], "Job 3.0 vacated\n"), (["vacate"], None)):
        wait_until(lambda: run(capsys, "q", "3.0", "-af", "JobStatus")[1] == "2\n", "job 3.0 running")
        evictions = (full_pool / "long.log").read_text().count("004 (003.000.000)")
        status, out, _ = run(capsys, *command)
        assert status == 0
        if expected:
            assert out == expected
        else:
            assert out.startswith('Sent "Vacate-Claim" command for "slot1_') and out.endswith('" to local startd\n')
        wait_until(lambda: (full_pool / "long.log").read_text().count("004 (003.000.000)") > evictions,
                   f"an eviction event after htc {command[0]}")

    assert run(capsys, "pool", "stop", "-fast")[0] == 0


def wait_until(condition, what: str, timeout: float = 15.0) -> None:
    """Poll another process's state (no event to await across processes here)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)
