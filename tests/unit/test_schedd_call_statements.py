"""The SQL a call lane's executor call costs the schedd: statements that were cut stay cut.

Each test counts the statements sqlite runs (``set_trace_callback``) for one step of a call:
the written entries' take-out, a cluster read back as it is submitted, a remembered
submission, the question whether a submit left idle work.
"""

from __future__ import annotations

import sqlite3

from test_schedd_core import Harness
from test_schedd_lanes import _read, done, lane_job, start_lane

from htc.jobqueue import JobQueue, JobStatus, promises


def _statements(queue: JobQueue, body) -> list[str]:
    seen: list[str] = []
    queue._conn.set_trace_callback(seen.append)
    try:
        body()
    finally:
        queue._conn.set_trace_callback(None)
    return seen


def _owed_in_file(path: str) -> list[bytes]:
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT entry FROM outbox ORDER BY seq")]
    finally:
        conn.close()


def test_written_entries_go_out_in_one_statement_outside_a_transaction(tmp_path):
    path = str(tmp_path / "q.db")
    with JobQueue.open(path) as q:
        seqs = [q.owe(b"e%d" % i) for i in range(3)]
        commits = q._commits
        sql = _statements(q, lambda: q.paid(seqs[:2]))
        assert len(sql) == 1 and sql[0].startswith("DELETE FROM outbox")  # no BEGIN, cache check or COMMIT
        assert _owed_in_file(path) == [b"e2"] and q.paid_later == 0 and q._commits == commits + 1
        many = [q.owe(b"m") for _ in range(1203)]
        q.paid(many)  # more than one statement's parameters: in chunks
        assert _owed_in_file(path) == [b"e2"]
        with q.transaction(durable=False):
            q.paid([seqs[2]])  # inside a transaction: its commit takes it out
            assert q.paid_later == 1
        assert _owed_in_file(path) == [] and q.paid_later == 0


def test_a_cluster_submitted_in_a_transaction_is_read_back_without_a_select_of_its_row(tmp_path):
    h = Harness(JobQueue.open(str(tmp_path / "q.db")))
    h.start()
    h.submit(lane_job(queue="queue 2"))
    h.submit(lane_job())
    # the same jobs as a fresh reader of the file sees them
    with JobQueue.open(str(tmp_path / "q.db")) as fresh:
        for cid in (1, 2):
            assert [j.to_dict() for j in fresh.cluster_jobs(cid)] == [j.to_dict() for j in h.queue.cluster_jobs(cid)]
    sql = _statements(h.queue, lambda: h.submit(lane_job()))
    assert not [s for s in sql if "FROM clusters WHERE cluster_id" in s and s.startswith("SELECT ad")]
    assert not [s for s in sql if s.startswith(("SAVEPOINT", "RELEASE"))]  # the cluster joins the submit's block
    h.queue.close()


def test_a_remembered_submission_is_one_statement_until_pruning_is_due(tmp_path, monkeypatch):
    monkeypatch.setattr(promises, "SUBMISSION_LIMIT", 4)
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        q.remember_submission("alice", "s0", 1, 1, "d", now=100.0)  # reads the table's figures once
        sql = _statements(q, lambda: q.remember_submission("alice", "s1", 2, 1, "d", now=101.0))
        assert [s.split()[0] for s in sql if "submissions" in s] == ["INSERT"]  # no pruning asked
        for i in range(2, 7):
            q.remember_submission("alice", f"s{i}", i + 1, 1, "d", now=100.0 + i)
        assert [q.find_submission("alice", f"s{i}") is not None for i in range(7)] == [False] * 3 + [True] * 4
        q.remember_submission("bob", "late", 9, 1, "d", now=100.0 + promises.SUBMISSION_LIFETIME + 3.5)
        assert [q.find_submission("alice", f"s{i}") is not None for i in range(7)] == [False] * 4 + [True] * 3
    with JobQueue.open(str(tmp_path / "q.db")) as q:  # a new process reads the figures again
        q.remember_submission("bob", "later", 10, 1, "d", now=100.0 + promises.SUBMISSION_LIFETIME + 10)
        assert q.find_submission("alice", "s6") is None and q.find_submission("bob", "late") is not None


def test_a_call_a_lane_takes_in_its_submit_asks_no_count_of_idle_jobs():
    h = Harness(claim_linger=10.0)
    h.core.read_input = _read
    h.start()
    h.submit(lane_job())
    claim_id, _ = start_lane(h)
    done(h, claim_id, "1.0")
    sql = _statements(h.queue, lambda: h.submit(lane_job()))
    assert h.status(2, 0) is JobStatus.RUNNING
    assert not [s for s in sql if "count(*)" in s]
    sql = _statements(h.queue, lambda: h.submit(lane_job(queue="queue 3")))  # more than the lane takes
    assert [s for s in sql if "count(*)" in s] and h.status(3, 2) is JobStatus.IDLE


def test_an_attribute_text_found_well_formed_is_not_checked_again(monkeypatch):
    from htc.jobqueue import submission

    checked = []
    monkeypatch.setattr(submission, "check_expression", lambda attr, text: checked.append(text))
    text = 'ifThenElse(a > 1, "x", strcat("y", b))  /* once */'
    submission.check_text("A", text)
    submission.check_text("B", text)  # an executor's template brings the same texts with every call
    assert checked == [text]


def test_a_cluster_ad_read_back_after_submit_has_the_canonical_names_a_fresh_read_gives(tmp_path):
    h = Harness(JobQueue.open(str(tmp_path / "q.db")))
    h.start()
    h.submit(lane_job())
    cached = h.queue.cluster_jobs(1)[0].cluster
    with JobQueue.open(str(tmp_path / "q.db")) as fresh:
        read = fresh.cluster_jobs(1)[0].cluster
        assert (cached.canon, cached.attrs, cached.proc_attrs, cached.owner, cached.qdate) == \
            (read.canon, read.attrs, read.proc_attrs, read.owner, read.qdate)
    h.queue.close()
