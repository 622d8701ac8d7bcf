"""Self-checkpointing (``checkpoint_exit_code``) on a real pool with two slots.

The example job (examples/self_checkpoint/count.sh) counts to 8, one step (a second) at a
time; every second step it saves its count to ``state`` and exits with 85. Each time, the
starter sends ``state`` and the captured stdout to the schedd's spool and runs the job again
in the same sandbox. Once the queue shows two stored
checkpoints, ``htc vacate_job`` evicts it; matched again, its new starter brings the
checkpoint into a fresh sandbox and the job carries on from there. It must finish with the
right result and the stdout of an uninterrupted run, having redone at most the one step it was
in when evicted (a trace outside the sandbox records every step each process ran), and its
user log must read as HTCondor's: two executions, one eviction, a transfer pair per
checkpoint, one termination. The same runs with the files travelling by the file system (the
personal pool) and over the connection (a startd in another FileSystemDomain).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import htcondor2
import pytest

from htc.cli.main import main
from poolutil import open_pool, wait_for

pytestmark = pytest.mark.slow

T = htcondor2.JobEventType
STEPS, EVERY = 8, 2

SCRIPT = (Path(__file__).resolve().parents[2] / "examples" / "self_checkpoint" / "count.sh").read_text()


@pytest.fixture(scope="module", params=["shared file system", "over the connection"])
def pool(request):
    config = "STARTD.FILESYSTEM_DOMAIN = elsewhere.example\n" if request.param == "over the connection" else ""
    with open_pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", config=config) as started:
        yield started


def _htc(pool, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "htc.cli.main", *args], env=pool.env, capture_output=True,
                          text=True, timeout=60)


def test_a_vacated_job_resumes_from_its_checkpoint_and_finishes(pool, monkeypatch, capsys):
    iwd = pool.work / "ckpt"
    iwd.mkdir()
    iwd.chmod(0o777)
    (iwd / "count.sh").write_text(SCRIPT)
    (iwd / "count.sh").chmod(0o755)
    trace = iwd / "trace.txt"
    trace.touch()
    trace.chmod(0o666)  # the job (nobody, under root) appends to it from every sandbox
    cluster = pool.submit(f"executable = {iwd}/count.sh\narguments = {STEPS} {EVERY} {trace}\n"
                          f"initialdir = {iwd}\nshould_transfer_files = YES\ncheckpoint_exit_code = 85\n"
                          "transfer_checkpoint_files = state\ntransfer_output_files = result.txt\n"
                          "output = out.txt\nerror = err.txt\nlog = job.log\nqueue\n").cluster_id
    job = f"{cluster}.0"

    def checkpoints() -> int:
        rows = pool.jobs(f"ClusterId == {cluster}", "CheckpointNumber")
        return rows[0].get("CheckpointNumber", 0) if rows else 0

    wait_for(lambda: checkpoints() >= 2, timeout=90, what=f"job {job}'s second checkpoint")
    monkeypatch.setenv("HTC_HOME", str(pool.home))  # htc vacate_job, in this process: no start-up delay
    assert main(["vacate_job", job]) == 0, capsys.readouterr()
    events = pool.log_events(iwd / "job.log", until=lambda evs: any(e.type == T.JOB_TERMINATED for e in evs),
                             timeout=120)

    # the result, and the stdout of a run that was never interrupted
    assert (iwd / "result.txt").read_text() == f"counted to {STEPS}\n"
    assert (iwd / "out.txt").read_text() == "".join(f"step {k}\n" for k in range(1, STEPS + 1))
    assert not (iwd / "state").exists()  # a checkpoint file is not output unless asked for

    # every step ran once, but for at most the one the eviction interrupted
    lines = trace.read_text().splitlines()
    sandboxes: dict[str, list[int]] = {}
    for line in lines:
        if line.startswith("start"):
            sandboxes.setdefault(line.split()[2], []).append(int(line.split()[1]))
    runs = Counter(int(line.split()[1]) for line in lines if line.startswith("step"))
    assert sorted(runs) == list(range(1, STEPS + 1)), lines
    assert sum(runs.values()) - STEPS <= 1, lines
    # restarted in its sandbox after each checkpoint; the fresh sandbox of its next match began
    # from the second stored checkpoint or a later one, never from 0
    first, second = sandboxes.values()
    assert first == list(range(0, first[-1] + 1, EVERY)), lines
    assert second[0] >= 2 * EVERY and second == list(range(second[0], STEPS, EVERY)), lines

    # the user log, as HTCondor writes it for a self-checkpointing job
    types = [e.type for e in events]
    assert types.count(T.EXECUTE) == 2, types
    assert types.count(T.JOB_EVICTED) == 1, types
    assert types.count(T.JOB_TERMINATED) == 1 and types[-1] == T.JOB_TERMINATED, types
    transfers = [e for e in events if e.type == T.FILE_TRANSFER]
    assert len(transfers) == 2 * (STEPS // EVERY - 1), types
    # (Type 5: "Started transferring output files", 6: "Finished transferring output files")
    assert [e["Type"] for e in transfers] == [5, 6] * (STEPS // EVERY - 1), [dict(e) for e in transfers]
    assert events[-1]["ReturnValue"] == 0

    # the job's attributes: the checkpoints counted and their work committed
    ad = wait_for(lambda: (_htc(pool, "history", job, "-af", "CheckpointNumber", "JobLastCheckpointTime",
                                "CommittedTime", "JobStatus").stdout.split() or None), timeout=30,
                  what=f"job {job} in the history")
    number, last, committed, status = ad
    assert int(number) == STEPS // EVERY - 1
    assert int(last) > 0 and float(committed) > 0 and status == "4"


def test_checkpoints_of_runs_the_schedd_does_not_follow_are_refused(pool):
    import asyncio

    from htc.wire import messages as m

    async def ask(msg: m.Message) -> m.Message:
        conn = await pool.transport.open_connection("schedd")
        try:
            await conn.send(msg)
            return await conn.recv(timeout=20)
        finally:
            await conn.aclose()

    for msg in (m.SendCheckpoint(claim_id="not-a-claim", job_id="1.0", number=9),
                m.FetchCheckpoint(claim_id="not-a-claim", job_id="1.0")):
        reply = asyncio.run(ask(msg))
        assert isinstance(reply, m.ErrorReply) and "no run of job 1.0 on that claim" in reply.message, reply
