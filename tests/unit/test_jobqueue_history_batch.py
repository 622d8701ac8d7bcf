"""The history rows of a transaction's ended jobs are written together at its commit
(htc.jobqueue.history): one statement, all or none with the transaction, visible inside it."""

from __future__ import annotations

import sqlite3

import pytest

from htc.jobqueue import JobQueue, JobStatus, QueueStorageError
from tests.unit.test_jobqueue import submit


def _end(q: JobQueue, job_id) -> None:
    q.set_status(job_id, JobStatus.RUNNING, now=1700000001)
    q.set_status(job_id, JobStatus.COMPLETED, now=1700000002)


def test_a_transactions_ended_jobs_reach_the_history_in_one_statement_at_its_commit(tmp_path):
    path = str(tmp_path / "q.db")
    with JobQueue.open(path) as q:
        cid = submit(q, 5)
        seen: list[str] = []
        q._conn.set_trace_callback(seen.append)
        with q.transaction(durable=False):
            for pid in range(4):
                _end(q, (cid, pid))
            assert [ad["ProcId"] for ad in q.history()] == ["3", "2", "1", "0"]  # its own, inside it
            _end(q, (cid, 4))
            other = sqlite3.connect(path)
            assert other.execute("SELECT count(*) FROM history").fetchone()[0] == 0  # not committed yet
        # (the trace shows each row of an executemany as a statement of its own)
        kinds = [s.split(" (")[0] for s in seen if s.startswith(("INSERT OR REPLACE INTO history", "DELETE FROM jobs"))]
        moves = [f"DELETE FROM jobs WHERE cluster_id = {cid} AND proc_id = {pid}" for pid in range(5)]
        assert kinds == [*moves[:4], *["INSERT OR REPLACE INTO history"] * 4,  # the read inside wrote those
                         moves[4], "INSERT OR REPLACE INTO history"]  # and the commit this one
        assert other.execute("SELECT count(*) FROM history").fetchone()[0] == 5
        assert q.statistics().history == 5 and not q.exists()
        other.close()


def test_a_rolled_back_transaction_or_savepoint_forgets_its_moves(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        cid = submit(q, 3)
        with pytest.raises(RuntimeError), q.transaction():
            _end(q, (cid, 0))
            raise RuntimeError("the caller fails")
        assert q.history() == [] and q.get_job((cid, 0)).status == JobStatus.IDLE
        with q.transaction():
            _end(q, (cid, 1))
            with pytest.raises(RuntimeError), q.transaction():  # a savepoint
                _end(q, (cid, 2))
                raise RuntimeError("the inner block fails")
        assert [ad["ProcId"] for ad in q.history()] == ["1"]
        assert q.get_job((cid, 2)).status == JobStatus.IDLE


def test_a_failed_commit_writes_no_history_and_the_next_one_does_not_replay_it(tmp_path, monkeypatch):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        cid = submit(q, 2)
        real = q._commit

        def failing() -> None:
            q._flush_history()
            raise QueueStorageError("disk full (a test)")

        monkeypatch.setattr(q, "_commit", failing)
        with pytest.raises(QueueStorageError):
            with q.transaction():
                _end(q, (cid, 0))
        monkeypatch.setattr(q, "_commit", real)
        with q.transaction():
            _end(q, (cid, 1))
        assert [ad["ProcId"] for ad in q.history()] == ["1"]
        assert q.get_job((cid, 0)).status == JobStatus.IDLE
