"""Crash safety: a submitting process killed with SIGKILL at random moments, many times.

After every kill the queue must open, hold every cluster whose submit was acknowledged, and
hold no partial cluster. Kills also land while the queue file is being created.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from htc.jobqueue import JobQueue, JobStatus
from htc.jobqueue.testing import SimpleCluster

AD = {"Owner": '"alice"', "JobStatus": "1", "QDate": "1700000000", "JobPrio": "0",
      "Cmd": '"/bin/true"', "RequestMemory": "1024"}
SIZES = [1, 1, 2, 3, 10, 50, 400]


def _submitter(path: str, ack_fd: int, seed: int) -> None:
    """Child process: submit clusters forever, acknowledging each once submit() returned."""
    rng = random.Random(seed)
    q = JobQueue.open(path)
    while True:
        n = rng.choice(SIZES)
        cid = q.next_cluster_id()
        q.submit(SimpleCluster(cid, AD, n, per_proc=lambda i: {"Args": f'"{i} {"x" * (i % 50)}"'}))
        os.write(ack_fd, f"{cid} {n}\n".encode())
        if rng.random() < 0.2:  # status changes and history moves get killed too
            job = (cid, rng.randrange(n))
            if rng.random() < 0.5:
                q.hold(job, "crash test")
            else:
                q.remove(job, "crash test")


def _kill_after(path: str, delay: float, seed: int) -> list[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            os.close(read_fd)
            _submitter(path, write_fd, seed)
        finally:
            os._exit(1)
    os.close(write_fd)
    time.sleep(delay)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    data = b""
    while chunk := os.read(read_fd, 65536):
        data += chunk
    os.close(read_fd)
    return [tuple(map(int, line.split())) for line in data.decode().splitlines()]


def _check(path: str, acked: dict[int, int]) -> None:
    with JobQueue.open(path) as q:  # must open: verify=True runs sqlite's quick_check
        conn = q._conn
        clusters = {cid: (num, nxt) for cid, num, nxt in
                    conn.execute("SELECT cluster_id, num_procs, next_proc FROM clusters")}
        procs: dict[int, list[int]] = {}
        for table in ("jobs", "history"):
            for cid, pid in conn.execute(f"SELECT cluster_id, proc_id FROM {table}"):
                procs.setdefault(cid, []).append(pid)
        for cid, n in acked.items():
            assert sorted(procs.get(cid, [])) == list(range(n)), f"acknowledged cluster {cid} lost procs"
        for cid, pids in procs.items():
            # No half cluster: every cluster present is whole (in the queue or the history).
            expected = clusters[cid][0] if cid in clusters else acked.get(cid, len(pids))
            assert sorted(pids) == list(range(expected)), f"cluster {cid} is partial"
        for cid, (num, nxt) in clusters.items():
            assert num == nxt
        statuses = {s for (s,) in conn.execute("SELECT DISTINCT status FROM jobs")}
        assert statuses <= {JobStatus.IDLE, JobStatus.HELD}
        reserved = conn.execute("SELECT value FROM meta WHERE key = 'next_cluster_id'").fetchone()[0]
        assert all(cid < reserved for cid in procs)
    leftovers = [n for n in os.listdir(os.path.dirname(path)) if ".creating-" in n]
    assert leftovers == []


@pytest.mark.slow
def test_sigkill_at_random_moments_never_loses_or_tears_a_cluster(tmp_path):
    rng = random.Random(20240101)
    deadline = time.monotonic() + 18
    kills = 0
    path = None
    acked: dict[int, int] = {}
    while kills < 60 and time.monotonic() < deadline:
        if kills % 10 == 0:
            # A fresh queue, killed within the first milliseconds: during creation.
            path = str(tmp_path / f"queue{kills}.db")
            acked = {}
            delay = rng.uniform(0, 0.03)
        else:
            delay = rng.uniform(0.01, 0.25)
        for cid, n in _kill_after(path, delay, rng.randrange(1 << 30)):
            acked[cid] = n
        kills += 1
        # (Killed before the file existed, opening simply creates an empty queue.)
        _check(path, acked)
    assert kills >= 30
    assert sum(1 for _ in acked) > 0
