"""``htc checkpoint JOB`` in a personal pool (issue #20, "In the pool"): a running
standard-universe job is checkpointed on demand and keeps running.

No periodic checkpoints (CHECKPOINT_INTERVAL = 0), so every 003 event and every ``NumCkpts``
comes from the command: the schedd asks the job's startd (CheckpointClaim), whose starter
signals the runtime; the image streams to the schedd's spool and is recorded. The job stays
Running and keeps computing. A vanilla job and a job that does not exist get a clear refusal
(and the tool exits 1).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import htcondor2
import pytest

from ckpt_images import tools  # noqa: F401 (a fixture)
from poolutil import Pool, wait_for

pytestmark = pytest.mark.slow

T = htcondor2.JobEventType
EXAMPLE = Path(__file__).parents[2] / "examples" / "standard"


def _htc(pool: Pool, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "htc.cli.main", *args], env=pool.env, capture_output=True,
                          text=True, timeout=60)


def test_htc_checkpoint_checkpoints_a_running_standard_job_and_refuses_a_vanilla_one(tools):
    pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", config="CHECKPOINT_INTERVAL = 0\n", NUM_CPUS="2",
                NUM_SLOTS="2")
    work = pool.work
    try:
        pool.start()
        wait_for(lambda: len(pool.slots('State == "Unclaimed"')) == 2, timeout=60, what="two Unclaimed slots")
        shutil.copy(EXAMPLE / "count.py", work)
        (work / "count.py").chmod(0o644)
        log = work / "count.log"
        cluster = pool.submit(
            f"universe = standard\nexecutable = /usr/bin/python3\ntransfer_executable = false\n"
            f"arguments = count.py 1000000\ninitialdir = {work}\nlog = {log}\nerror = count.err\nqueue\n").cluster_id
        vanilla = pool.submit(f"executable = /bin/sleep\narguments = 600\ninitialdir = {work}\nqueue\n").cluster_id

        def computed() -> int:
            try:
                return len((work / "work.log").read_text().splitlines())
            except FileNotFoundError:
                return 0

        wait_for(lambda: computed() >= 20, timeout=120, what="the standard job computing")
        done = _htc(pool, "checkpoint", f"{cluster}.0")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"Sent checkpoint command for job {cluster}.0"
        events = pool.log_events(log, until=lambda evs: any(e.type == T.CHECKPOINTED for e in evs), timeout=120)
        assert [e.type for e in events if e.type != T.IMAGE_SIZE][:3] == [T.SUBMIT, T.EXECUTE, T.CHECKPOINTED]

        def recorded():
            ads = pool.jobs(f"ClusterId == {cluster}", "NumCkpts", "JobStatus", "CkptSize")
            return ads[0] if ads and ads[0].get("NumCkpts") == 1 else None

        ad = wait_for(recorded, timeout=60, what="NumCkpts = 1")
        assert ad["JobStatus"] == 2 and ad["CkptSize"] > 0  # still running: a checkpoint does not stop it
        before = computed()
        wait_for(lambda: computed() > before + 20, timeout=120, what="the job computing after its checkpoint")

        # a second request: a second image
        assert _htc(pool, "checkpoint", str(cluster)).returncode == 0
        wait_for(lambda: pool.jobs(f"ClusterId == {cluster}", "NumCkpts")[0].get("NumCkpts") == 2, timeout=120,
                 what="NumCkpts = 2")
        assert pool.jobs(f"ClusterId == {cluster}", "JobStatus")[0]["JobStatus"] == 2
        assert "Job was evicted" not in log.read_text() and "Job terminated" not in log.read_text()

        refused = _htc(pool, "checkpoint", f"{vanilla}.0", "9999.0")
        assert refused.returncode == 1 and refused.stdout == ""
        assert f"Couldn't checkpoint job {vanilla}.0: not a standard-universe job" in refused.stderr
        assert "Couldn't checkpoint job 9999.0: no such job in the queue" in refused.stderr
        bad = _htc(pool, "checkpoint", "slot1@host")
        assert bad.returncode != 0 and "is not a job id" in bad.stderr
    except BaseException:
        for path in [work / "count.err", *sorted((pool.home / "log").glob("*Log"))]:
            if path.exists():
                print(f"--- {path}\n" + path.read_text()[-6000:])
        raise
    finally:
        pool.stop()


def test_periodic_checkpoint_checkpoints_a_running_standard_job_when_true(tools):
    config = ("CHECKPOINT_INTERVAL = 0\nPOLLING_INTERVAL = 1\n"
              "PERIODIC_CHECKPOINT = (time() - LastPeriodicCheckpoint) > 3 && TARGET.JobUniverse == 1\n")
    pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", config=config)
    work = pool.work
    try:
        pool.start()
        wait_for(lambda: pool.slots('State == "Unclaimed"'), timeout=60, what="an Unclaimed slot")
        shutil.copy(EXAMPLE / "count.py", work)
        (work / "count.py").chmod(0o644)
        log = work / "count.log"
        cluster = pool.submit(
            f"universe = standard\nexecutable = /usr/bin/python3\ntransfer_executable = false\n"
            f"arguments = count.py 1000000\ninitialdir = {work}\nlog = {log}\nerror = count.err\nqueue\n").cluster_id
        events = pool.log_events(log, until=lambda evs: sum(e.type == T.CHECKPOINTED for e in evs) >= 2, timeout=180)
        assert T.JOB_EVICTED not in [e.type for e in events]
        ad = wait_for(lambda: (pool.jobs(f"ClusterId == {cluster}", "NumCkpts", "JobStatus") or [None])[0],
                      timeout=30, what="the job's ad")
        assert ad["JobStatus"] == 2 and ad.get("NumCkpts", 0) >= 2
        startd_log = (pool.home / "log" / "StartLog").read_text()
        assert "checkpoint (PERIODIC_CHECKPOINT)" in startd_log
    except BaseException:
        for path in [work / "count.err", *sorted((pool.home / "log").glob("*Log"))]:
            if path.exists():
                print(f"--- {path}\n" + path.read_text()[-6000:])
        raise
    finally:
        pool.stop()
