"""htc drain and htc reschedule against a real pool (condor_drain, condor_reschedule)."""

from __future__ import annotations

import json

import pytest

from htc.cli.main import main
from poolutil import open_pool, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def pool(monkeypatch):
    with open_pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD") as started:
        monkeypatch.setenv("HTC_HOME", str(started.home))
        yield started


def _states(pool) -> set[str]:
    return {str(s.get("State")) for s in pool.slots()}


def _status(pool, job: str = "1.0") -> int | None:
    cluster, proc = job.split(".")
    jobs = pool.jobs(f"ClusterId == {cluster} && ProcId == {proc}", "JobStatus")
    return jobs[0]["JobStatus"] if jobs else None


def test_drain_fast_evicts_and_keeps_new_jobs_off_until_cancelled(pool, capsys):
    machine = wait_for(lambda: next((s.get("Machine") for s in pool.slots()), None), what="the startd's slots")
    pool.submit(f"executable = /bin/sleep\narguments = 120\nlog = {pool.work}/drain.log\nqueue\n")
    wait_for(lambda: _status(pool) == 2, timeout=30, what="the job running")

    assert main(["drain", "-fast", "-reason", "kernel update", machine]) == 0
    assert capsys.readouterr().out.strip() == f"{machine}: draining (fast)"
    wait_for(lambda: _states(pool) == {"Drained"}, timeout=30, what="the machine drained")
    wait_for(lambda: _status(pool) == 1, timeout=30, what="the evicted job back to idle")
    # While drained nothing starts, whatever the negotiator does.
    assert main(["reschedule"]) == 0
    assert capsys.readouterr().out.strip() == "Sent reschedule command to local schedd"
    with pytest.raises(AssertionError):
        wait_for(lambda: _status(pool) == 2, timeout=3, what="(must not happen) the job running on a drained slot")

    assert main(["drain", "-cancel", machine, "-json"]) == 0
    assert json.loads(capsys.readouterr().out)["sent"] == [f"{machine}: drain cancelled"]
    wait_for(lambda: _status(pool) == 2, timeout=30, what="the job running again after the drain was cancelled")


def test_drain_needs_a_known_machine(pool, capsys):
    wait_for(lambda: pool.slots(), what="the startd's slots")
    assert main(["drain", "no-such-host"]) == 2
    err = capsys.readouterr().err
    assert "no-such-host" in err and "htc status" in err
    assert _states(pool) != {"Drained"}
