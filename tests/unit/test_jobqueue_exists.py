"""JobQueue.exists: whether any job matches, stopping at the first (the lanes ask it per batch)."""

from __future__ import annotations

from htc.jobqueue import JobQueue, JobStatus
from htc.jobqueue.testing import SimpleCluster


def test_exists_answers_as_count_does_for_sql_and_classad_constraints():
    q = JobQueue.open(":memory:")
    assert not q.exists("JobStatus == 1") and not q.exists()
    cid = q.next_cluster_id()
    q.submit(SimpleCluster(cid, {"Owner": '"alice"', "Cmd": '"/bin/true"'}, 3,
                           per_proc=lambda i: {"Color": f'"c{i}"'}))
    q.set_status((cid, 0), JobStatus.RUNNING)
    assert q.exists("JobStatus == 1") and q.exists("JobStatus == 2") and not q.exists("JobStatus == 5")
    assert q.exists('Color == "c2"') and not q.exists('Color == "c9"')  # a residual ClassAd check
    for pid in (1, 2):
        q.set_status((cid, pid), JobStatus.HELD, reason="x")
    assert not q.exists("JobStatus == 1") and q.count("JobStatus == 1") == 0
    q.close()


def test_exists_reads_one_row_of_a_large_idle_set():
    q = JobQueue.open(":memory:")
    cid = q.next_cluster_id()
    q.submit(SimpleCluster(cid, {"Owner": '"alice"', "Cmd": '"/bin/true"'}, 2000))
    steps = []
    q._conn.set_progress_handler(lambda: steps.append(1), 100)
    assert q.exists("JobStatus == 1")
    exists_steps = len(steps)
    steps.clear()
    assert q.count("JobStatus == 1") == 2000
    q._conn.set_progress_handler(None, 0)
    assert exists_steps * 20 < len(steps)  # (a count walks all 2,000 index entries)
    q.close()
