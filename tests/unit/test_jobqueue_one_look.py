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
