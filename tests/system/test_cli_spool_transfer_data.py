"""``htc submit -spool`` and ``htc transfer_data`` on a real pool.

The input travels to the schedd's spool over the connection (the job waits on hold with code
16 meanwhile), so the submitter may change its copies at once; the job runs from the spool,
its output stays there and the job stays in the queue, Completed, until ``htc transfer_data``
fetches the output over the connection into the submit directory; then the job leaves.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from poolutil import Pool, open_pool, wait_for

pytestmark = pytest.mark.slow

SCRIPT = """#!/bin/sh
sha256sum data.txt
cat indir/x.txt
cat > stdin_copy.txt
echo made > made.txt
"""


#: an event of another job, in the log before the spooled job is submitted
EARLIER = "000 (4242.000.000) 2026-11-28 10:00:00 Job submitted from host: <127.0.0.1:9618>\n...\n"


@pytest.fixture(scope="module")
def pool():
    with open_pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD") as started:
        yield started


def _htc(pool: Pool, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "htc.cli.main", *args], cwd=cwd, env=pool.env, capture_output=True,
                          text=True, timeout=120)


def _status(pool: Pool, cluster: int):
    rows = pool.jobs(f"ClusterId == {cluster}", "JobStatus", "Iwd", "HoldReasonCode")
    return rows[0] if rows else None


def test_spooled_input_runs_from_the_spool_and_transfer_data_fetches_the_output(pool):
    sub = pool.work / "spooler"
    (sub / "indir").mkdir(parents=True)
    data = os.urandom(2 * 1024 * 1024 + 3)
    (sub / "data.txt").write_bytes(data)
    (sub / "indir" / "x.txt").write_text("from indir\n")
    (sub / "in.txt").write_text("stdin text\n")
    (sub / "job.sh").write_text(SCRIPT)
    (sub / "job.sh").chmod(0o755)
    (sub / "job.sub").write_text(
        "executable = job.sh\nshould_transfer_files = YES\ntransfer_input_files = data.txt, indir\n"
        "input = in.txt\noutput = out.txt\nerror = err.txt\nlog = job.log\n"
        'transfer_output_remaps = "made.txt = results/made.txt"\nqueue\n')
    (sub / "results").mkdir()
    (sub / "job.log").write_text(EARLIER)  # the log is shared with an earlier job
    done = _htc(pool, sub, "submit", "-spool", "job.sub")
    assert done.returncode == 0, done.stderr
    assert "Spooling data files for 1 jobs..." in done.stdout
    cluster = int(done.stdout.split("submitted to cluster ")[1].split(".")[0])
    # the submitter's copies may change at once: the job has its own in the spool
    (sub / "data.txt").write_bytes(b"changed after submit\n")
    (sub / "indir" / "x.txt").unlink()
    job = wait_for(lambda: (lambda j: j if j and j["JobStatus"] == 4 else None)(_status(pool, cluster)), timeout=90,
                   what=f"job {cluster}.0 completed and still in the queue")
    assert Path(job["Iwd"]).is_relative_to(pool.home / "spool")
    assert not (sub / "out.txt").exists()  # the output waits in the spool
    done = _htc(pool, sub, "transfer_data", str(cluster))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Fetching data files...")
    out = (sub / "out.txt").read_text().splitlines()
    assert out[0].split()[0] == hashlib.sha256(data).hexdigest()
    assert out[1] == "from indir"
    assert (sub / "stdin_copy.txt").read_text() == "stdin text\n"
    assert (sub / "results" / "made.txt").read_text() == "made\n"
    assert not (sub / "condor_exec.exe").exists() and not (sub / "made.txt").exists()
    # the log is brought up to date, not replaced (htc.client.spool_log): the earlier job's event
    # and this job's SUBMIT event stay, the events of its run in the spool follow them
    log = (sub / "job.log").read_text()
    assert log.startswith(EARLIER), log
    assert log.count(f"000 ({cluster:03d}.000.000)") == 1 and "Job terminated" in log, log
    assert log.index(f"000 ({cluster:03d}.000.000)") < log.index(f"001 ({cluster:03d}.000.000)"), log
    assert _status(pool, cluster) is None  # fetched: the job left the queue
    assert not Path(job["Iwd"]).exists()
    again = _htc(pool, sub, "transfer_data", str(cluster))
    assert again.returncode == 1 and "No completed jobs with spooled output" in again.stderr


def test_a_spooled_job_waits_on_hold_16_until_its_input_arrives(pool):
    sub = pool.work / "missing"
    sub.mkdir()
    (sub / "job.sub").write_text("executable = /bin/true\ntransfer_input_files = absent.txt\n"
                                 "should_transfer_files = YES\nqueue\n")
    (sub / "absent.txt").write_text("here at submit time\n")

    from htc.client import submit
    from htc.client.spool import SPOOL_COMMANDS, spool_input

    result = submit((sub / "job.sub").read_text(), cwd=str(sub), append=SPOOL_COMMANDS, transport=pool.transport)
    job = _status(pool, result.cluster_id)
    assert (job["JobStatus"], job["HoldReasonCode"]) == (5, 16)
    (sub / "absent.txt").unlink()
    with pytest.raises(Exception, match="absent.txt"):
        spool_input(result.cluster_id, transport=pool.transport)
    job = _status(pool, result.cluster_id)
    assert (job["JobStatus"], job["HoldReasonCode"]) == (5, 16)  # still waiting for its input


def test_remote_names_the_schedd_and_spools(pool):
    sub = pool.work / "remote"
    sub.mkdir()
    (sub / "in.txt").write_text("x\n")
    (sub / "job.sub").write_text("executable = /bin/cat\ninput = in.txt\noutput = out.txt\n"
                                 "should_transfer_files = YES\nqueue\n")
    done = _htc(pool, sub, "submit", "-remote", "schedd", "job.sub")
    assert done.returncode == 0, done.stderr
    assert "Spooling data files for 1 jobs..." in done.stdout
    cluster = int(done.stdout.split("submitted to cluster ")[1].split(".")[0])
    rows = pool.jobs(f"ClusterId == {cluster}", "HTCSpooledInput", "SUBMIT_Iwd")
    assert rows[0]["HTCSpooledInput"] == "condor_exec.exe,in.txt" and rows[0]["SUBMIT_Iwd"] == str(sub)
    wait_for(lambda: _status(pool, cluster)["JobStatus"] == 4, timeout=90, what="the job completed")
    assert _htc(pool, sub, "transfer_data", "-all").returncode == 0
    assert (sub / "out.txt").read_text() == "x\n"


def test_the_schedd_writes_no_event_to_the_submitters_log_path(pool):
    """The log a spooled job's description names is a file on the submitter's machine: the
    schedd neither creates nor writes it (its SUBMIT event goes to the spool's copy of the log,
    first there), and ``htc transfer_data`` brings every event back, each once, SUBMIT first."""
    sub = pool.work / "ownlog"
    sub.mkdir()
    (sub / "job.sub").write_text("executable = /bin/true\nshould_transfer_files = YES\nlog = fresh.log\nqueue\n")
    done = _htc(pool, sub, "submit", "-spool", "job.sub")
    assert done.returncode == 0, done.stderr
    cluster = int(done.stdout.split("submitted to cluster ")[1].split(".")[0])
    job = wait_for(lambda: (lambda j: j if j and j["JobStatus"] == 4 else None)(_status(pool, cluster)), timeout=90,
                   what=f"job {cluster}.0 completed and still in the queue")
    assert not (sub / "fresh.log").exists()  # nothing of the job's was written to the submitter's path
    spooled = (Path(job["Iwd"]) / "fresh.log").read_text()
    assert spooled.startswith(f"000 ({cluster:03d}.000.000)"), spooled
    done = _htc(pool, sub, "transfer_data", str(cluster))
    assert done.returncode == 0, done.stderr
    log = (sub / "fresh.log").read_text()
    numbers = [line[:3] for line in log.splitlines() if line[:4].strip().isdigit() and f"({cluster:03d}." in line]
    assert numbers[0] == "000" and numbers.count("000") == 1 and numbers[-1] == "005", log


def _events(text: str, cluster: int) -> list[tuple[str, int, str]]:
    """(event number, proc, ``date time``) of each event of ``cluster`` in a user log's text."""
    out = []
    for line in text.splitlines():
        if line[:3].isdigit() and line[4:5] == "(" and line[5:].startswith(f"{cluster:03d}."):
            out.append((line[:3], int(line[5:].split(".")[1]), " ".join(line.split()[2:4])))
    return out


def _completed(pool: Pool, cluster: int, proc: int):
    rows = pool.jobs(f"ClusterId == {cluster} && ProcId == {proc}", "JobStatus", "Iwd")
    return rows[0] if rows and rows[0]["JobStatus"] == 4 else None


def test_a_late_materialized_proc_of_a_spooled_cluster_logs_as_its_first_procs(pool):
    """A proc that late materialization adds to a spooled cluster waits for its input as the
    first procs did; the schedd writes nothing at the submitter's log path for it either: its
    SUBMIT event is in the spool's copy of the log when its input arrives, dated when it was
    materialized (as HTCondor writes it then), and ``htc transfer_data`` brings it back."""
    from htc.client.spool import spool_input

    sub = pool.work / "late"
    sub.mkdir()
    (sub / "job.sub").write_text("executable = /bin/true\nshould_transfer_files = YES\nlog = late.log\n"
                                 "max_materialize = 1\nqueue 2\n")
    done = _htc(pool, sub, "submit", "-spool", "job.sub")
    assert done.returncode == 0, done.stderr
    cluster = int(done.stdout.split("submitted to cluster ")[1].split(".")[0])
    wait_for(lambda: _completed(pool, cluster, 0), timeout=90, what=f"job {cluster}.0 completed")
    assert not (sub / "late.log").exists()
    # 1.1's SUBMIT event must be dated after the cluster's QDate to tell the two apart (the log
    # counts whole seconds): the clock passes QDate's second before 1.1 can materialize
    [qdate] = [row["QDate"] for row in pool.jobs(f"ClusterId == {cluster}", "QDate")]
    wait_for(lambda: time.time() >= qdate + 1, timeout=5, what="the clock past the cluster's QDate")
    assert _htc(pool, sub, "transfer_data", str(cluster)).returncode == 0  # 1.0 leaves: room for 1.1
    wait_for(lambda: pool.jobs(f"ClusterId == {cluster} && ProcId == 1 && JobStatus == 5 && HoldReasonCode == 16"),
             timeout=60, what=f"job {cluster}.1 materialized, waiting for its input")
    first = _events((sub / "late.log").read_text(), cluster)
    assert [(n, p) for n, p, _ in first] == [("000", 0), ("001", 0), ("005", 0)], first
    assert spool_input(cluster, transport=pool.transport) == 1  # 1.1 only: 1.0 is gone
    job = wait_for(lambda: _completed(pool, cluster, 1), timeout=90, what=f"job {cluster}.1 completed")
    spooled = _events((Path(job["Iwd"]) / "late.log").read_text(), cluster)
    assert [(n, p) for n, p, _ in spooled][:1] == [("000", 1)], spooled
    assert spooled[0][2] > time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(qdate))  # when it materialized
    assert not [e for e in _events((sub / "late.log").read_text(), cluster) if e[1] == 1]
    assert _htc(pool, sub, "transfer_data", str(cluster)).returncode == 0
    log = _events((sub / "late.log").read_text(), cluster)
    assert log[:3] == first and [n for n, p, _ in log[3:]] == ["000", "001", "005"], log


def test_a_spooled_jobs_dag_nodes_log_is_written_where_the_job_names_it(pool):
    """``DAGManNodesLog`` is not rewritten into the spool (HTCondor's rewriteSpooledJobAd
    rewrites ``UserLog`` only): the schedd writes the job's events there, its SUBMIT event
    first, as for a job that was not spooled; its ``UserLog`` gets none at the submitter's path."""
    sub = pool.work / "nodes"
    sub.mkdir()
    nodes = sub / "d.nodes.log"
    (sub / "job.sub").write_text("executable = /bin/true\nshould_transfer_files = YES\nlog = own.log\n"
                                 f"dagman_log = {nodes}\nqueue\n")
    done = _htc(pool, sub, "submit", "-spool", "job.sub")
    assert done.returncode == 0, done.stderr
    cluster = int(done.stdout.split("submitted to cluster ")[1].split(".")[0])
    job = wait_for(lambda: _completed(pool, cluster, 0), timeout=90, what=f"job {cluster}.0 completed")
    assert [n for n, _, _ in _events(nodes.read_text(), cluster)] == ["000", "001", "005"], nodes.read_text()
    assert not (sub / "own.log").exists()
    own = _events((Path(job["Iwd"]) / "own.log").read_text(), cluster)
    assert [n for n, _, _ in own] == ["000", "001", "005"], own
