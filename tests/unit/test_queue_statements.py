"""What the job queue asks sqlite for each commit and read on the schedd's per-call path.

A busy schedd's commits are mostly bookkeeping (``transaction(durable=False)``): such a commit
is BEGIN, one ``data_version`` read, its writes and COMMIT -- no PRAGMA switching the
connection's ``synchronous`` back and forth, which only a durable transaction does (it runs
at FULL, so sqlite fsyncs the WAL at its commit). Recent constraints keep their plans, and a
submit reads its cluster back by the key.
"""

from __future__ import annotations

from htc.jobqueue import JobQueue, JobStatus
from htc.jobqueue.query import plan
from tests.unit.test_jobqueue import submit


def _statements(q: JobQueue) -> list[str]:
    seen: list[str] = []
    q._conn.set_trace_callback(seen.append)
    return seen


def test_a_bookkeeping_commit_switches_no_pragma_and_reads_data_version_once(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        cid = submit(q, 1)
        seen = _statements(q)
        with q.transaction(durable=False):
            q.set_attributes((cid, 0), {"Note": '"x"'})
        pragmas = [s for s in seen if s.startswith("PRAGMA")]
        assert pragmas == ["PRAGMA data_version"], seen
        assert seen[0] == "BEGIN IMMEDIATE" and seen[-1] == "COMMIT"


def test_a_durable_transaction_commits_at_full_and_the_connection_rests_at_normal(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        cid = submit(q, 1)
        level = q._conn.execute("PRAGMA synchronous").fetchone()[0]
        assert level == 1  # NORMAL between transactions
        with q.transaction():
            inside = q._conn.execute("PRAGMA synchronous").fetchone()[0]
            q.set_attributes((cid, 0), {"Note": '"y"'})
        assert inside == 2  # FULL: sqlite fsyncs the WAL at this commit
        assert not q._unsynced
        with q.transaction(durable=False):
            assert q._conn.execute("PRAGMA synchronous").fetchone()[0] == 1
            q.set_attributes((cid, 0), {"Note": '"z"'})
        assert q._unsynced  # until the next sync or durable commit


def test_plans_of_recent_constraints_are_kept():
    assert plan("JobStatus == 1") is plan("JobStatus == 1")
    assert plan(None).where == "1" and plan("  ").where == "1"


def test_cluster_jobs_and_cluster_count_read_one_cluster_by_the_key(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        first, second = submit(q, 3), submit(q, 2)
        q.hold((second, 1), "held")
        assert [j.job_id for j in q.cluster_jobs(second)] == [j.job_id for j in q.query(f"ClusterId == {second}")]
        assert [j.proc_id for j in q.cluster_jobs(first)] == [0, 1, 2]
        assert q.cluster_count(second, JobStatus.IDLE) == 1 and q.cluster_count(second, JobStatus.HELD) == 1
        assert q.cluster_count(first, JobStatus.IDLE) == 3
        seen = _statements(q)
        q.cluster_jobs(first)
        assert not any("count(" in s.lower() for s in seen), seen  # no estimate of the cluster's share
