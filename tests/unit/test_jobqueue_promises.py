"""The queue's memory of submissions and of results owed to disk (htc.jobqueue.promises)."""

from __future__ import annotations

import sqlite3

import pytest

from htc.jobqueue import JobQueue, promises


def test_a_queue_file_made_before_the_tables_gets_them_when_opened(tmp_path):
    path = str(tmp_path / "q.db")
    JobQueue.open(path).close()
    conn = sqlite3.connect(path)
    conn.executescript("DROP TABLE submissions; DROP TABLE outbox;")
    conn.close()
    with JobQueue.open(path) as q:
        assert q.owed() == [] and q.find_submission("alice", "x") is None


def test_owed_entries_survive_a_reopen_until_paid(tmp_path):
    path = str(tmp_path / "q.db")
    with JobQueue.open(path) as q:
        with q.transaction(durable=False):
            first = q.owe(b"one")
            second = q.owe(b"two")
        q.owe(b"three")  # outside a transaction: one of its own
    with JobQueue.open(path) as q:  # (as a restarted schedd opens it)
        assert [e for _, e in q.owed()] == [b"one", b"two", b"three"]
        q.paid([first, second])
        assert [e for _, e in q.owed()] == [b"three"]


def test_an_owed_entry_goes_with_a_transaction_that_fails(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        try:
            with q.transaction():
                q.owe(b"lost with its calls")
                raise RuntimeError("the ends of the calls failed")
        except RuntimeError:
            pass
        assert q.owed() == []


def test_submissions_are_kept_per_owner_and_pruned_by_age_and_count(tmp_path, monkeypatch):
    monkeypatch.setattr(promises, "SUBMISSION_LIMIT", 3)
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        for i in range(5):
            q.remember_submission("alice", f"s{i}", i + 1, 1, "d", now=100.0 + i)
        assert [q.find_submission("alice", f"s{i}") is not None for i in range(5)] == [False, False, True, True, True]
        assert q.find_submission("bob", "s4") is None
        q.remember_submission("bob", "s4", 9, 2, "e", now=100.0 + promises.SUBMISSION_LIFETIME + 10)
        assert q.find_submission("bob", "s4") == (9, 2, "e")
        assert q.find_submission("alice", "s4") is None  # a week old: forgotten


def _owed_in_file(path):
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT entry FROM outbox ORDER BY seq")]
    finally:
        conn.close()


def test_entries_paid_later_go_with_the_next_commit_not_one_of_their_own(tmp_path):
    path = str(tmp_path / "q.db")
    with JobQueue.open(path) as q:
        first, second = q.owe(b"one"), q.owe(b"two")
        commits = q._commits
        q.paid([first], later=True)
        assert q._commits == commits  # no commit of its own
        assert [e for _, e in q.owed()] == [b"two"] and q.paid_later == 1
        assert _owed_in_file(path) == [b"one", b"two"]  # a crash now writes it once more
        with pytest.raises(RuntimeError, match="this change fails"), q.transaction(durable=False):
            q.owe(b"three")
            raise RuntimeError("this change fails")
        assert _owed_in_file(path) == [b"one", b"two"] and q.paid_later == 1  # still to take out
        with q.transaction(durable=False):
            q.owe(b"four")
        assert _owed_in_file(path) == [b"two", b"four"] and q.paid_later == 0
        q.paid([second], later=True)
    assert _owed_in_file(path) == [b"four"]  # closing takes out what waited


def test_pay_now_commits_the_entries_paid_later(tmp_path):
    path = str(tmp_path / "q.db")
    with JobQueue.open(path) as q:
        seq = q.owe(b"one")
        q.paid([seq], later=True)
        q.pay_now()
        assert _owed_in_file(path) == [] and q.paid_later == 0
        q.pay_now()  # nothing waits: no commit
