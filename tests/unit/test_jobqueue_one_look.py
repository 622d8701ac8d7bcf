"""``JobQueue.one_look``: one ``data_version`` question for a turn's reads, and what it still sees."""

from __future__ import annotations

import threading

from htc.jobqueue import JobQueue
from tests.unit.test_jobqueue import submit


def _asked(q: JobQueue) -> list[str]:
    seen: list[str] = []
    q._conn.set_trace_callback(lambda sql: seen.append(sql) if sql == "PRAGMA data_version" else None)
    return seen


def test_the_reads_of_a_block_ask_once_and_those_outside_ask_each(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        cid = submit(q, 3)
        asked = _asked(q)
        for proc in range(3):
            q.get_job((cid, proc))
        assert len(asked) == 3
        asked.clear()
        with q.one_look():
            for proc in range(3):
                q.get_job((cid, proc))
            with q.one_look():  # nested: the same turn
                q.exists("JobStatus == 1")
        assert len(asked) == 1
        q.get_job((cid, 0))
        assert len(asked) == 2  # the block is over: the next read asks again


def test_another_process_commit_is_seen_by_the_next_transaction_and_after_the_block(tmp_path):
    path = str(tmp_path / "q.db")
    with JobQueue.open(path) as a, JobQueue.open(path) as b:
        cid = submit(a, 2)
        with b.one_look():
            assert b.get_job((cid, 1))["RequestMemory"] == "2048"  # the cluster ad is cached now
            a.edit_cluster(cid, "RequestMemory", "4096")
            with b.transaction(durable=False):  # a transaction asks under its write lock
                assert b.get_job((cid, 1))["RequestMemory"] == "4096"
        with b.one_look():
            b.get_job((cid, 0))
            a.edit_cluster(cid, "RequestMemory", "1024")
        assert b.get_job((cid, 1))["RequestMemory"] == "1024"


def test_another_threads_reads_during_a_block_ask_as_usual(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db"), ) as q:
        cid = submit(q, 1)
        asked = _asked(q)
        done = threading.Event()

        def other() -> None:
            q.get_job((cid, 0))
            q.get_job((cid, 0))
            done.set()

        with q.one_look():
            q.get_job((cid, 0))
            thread = threading.Thread(target=other)
            thread.start()
            thread.join(timeout=120)
            assert done.is_set()
        assert len(asked) == 3


def _selects(q: JobQueue) -> list[str]:
    seen: list[str] = []
    q._conn.set_trace_callback(lambda sql: seen.append(sql) if sql.startswith("SELECT") and "FROM jobs" in sql else None)
    return seen


def test_a_block_reads_a_job_row_once_until_a_write(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        cid = submit(q, 2)
        selects = _selects(q)
        with q.one_look():
            assert q.get_job((cid, 0)).status == q.get_job((cid, 0)).status == 1
            assert len(selects) == 1  # the second read took the block's row
            q.set_attributes((cid, 0), {"Foo": "7"})  # a write: the block's rows are dropped
            selects.clear()
            assert q.get_job((cid, 0))["Foo"] == "7"
            assert len(selects) == 1
        selects.clear()
        q.get_job((cid, 0))
        q.get_job((cid, 0))
        assert len(selects) == 2  # outside a block each read reads the row


def test_a_row_kept_in_a_block_is_not_served_to_the_next_block_after_another_process_wrote(tmp_path):
    path = str(tmp_path / "q.db")
    with JobQueue.open(path) as a, JobQueue.open(path) as b:
        cid = submit(a, 1)
        with b.one_look():
            assert "Foo" not in b.get_job((cid, 0))
        a.set_attributes((cid, 0), {"Foo": "1"})
        with b.one_look():
            assert b.get_job((cid, 0))["Foo"] == "1"
        with b.one_look():
            assert b.get_job((cid, 0))["Foo"] == "1"
            a.set_attributes((cid, 0), {"Foo": "2"})
            with b.transaction(durable=False):  # the block's next transaction reads the file's row
                assert b.get_job((cid, 0))["Foo"] == "2"
