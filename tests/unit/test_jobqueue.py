"""The durable job queue: storage shape, submission, states, edits, history, files it refuses."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import sqlite3
import threading

import pytest

from htc.errors import UsageError
from htc.eventlog.events import EventType
from htc.jobqueue import (TRANSITIONS, IllegalTransition, JobNotFound, JobQueue, JobStatus,
                          QueueFileError)
from htc.jobqueue.states import diagram
from htc.jobqueue.testing import SimpleCluster

S = JobStatus
BASE_AD = {
    "Owner": '"alice"', "JobPrio": "0", "JobStatus": "1", "QDate": "1700000000",
    "Cmd": '"/bin/sleep"', "RequestMemory": "2048", "NumCkpts": "0", "NumJobStarts": "0",
}


@pytest.fixture
def queue():
    with JobQueue.open(":memory:") as q:
        yield q


def submit(q, n=3, ad=None, per_proc=None, **kw):
    cid = q.next_cluster_id()
    q.submit(SimpleCluster(cid, {**BASE_AD, **(ad or {})}, n, per_proc=per_proc, **kw), now=1700000000)
    return cid


def test_submit_stores_the_cluster_ad_once_and_only_per_proc_differences(queue):
    cid = submit(queue, 3, per_proc=lambda i: {"Args": f'"{i}"', "RequestMemory": "2048"})
    job = queue.get_job((cid, 2))
    assert job["Args"] == '"2"' and job["args"] == '"2"'  # case-insensitive like ClassAds
    assert job["Cmd"] == '"/bin/sleep"'
    assert (job["ClusterId"], job["ProcId"], job["JobStatus"], job["Owner"]) == (str(cid), "2", "1", '"alice"')
    raw = queue._conn.execute("SELECT ad FROM clusters WHERE cluster_id = ?", (cid,)).fetchone()[0]
    assert '"Cmd"' in raw and "JobStatus" not in raw  # hot attributes live in columns
    procs = queue._conn.execute("SELECT ad FROM jobs WHERE cluster_id = ? ORDER BY proc_id", (cid,)).fetchall()
    # RequestMemory equals the cluster's value, so it is not repeated per proc.
    assert [p[0] for p in procs] == ['{"Args":"\\"0\\""}', '{"Args":"\\"1\\""}', '{"Args":"\\"2\\""}']
    assert dict(job) == job.to_dict() and len(job) == len(job.to_dict())


def test_cluster_ids_are_reserved_once_and_survive_reopening(tmp_path):
    path = str(tmp_path / "q.db")
    with JobQueue.open(path) as q:
        first = q.next_cluster_id()
        submit(q)
    with JobQueue.open(path) as q:
        assert q.next_cluster_id() == first + 2


def test_submit_refuses_unreserved_or_reused_ids(queue):
    with pytest.raises(UsageError, match="never reserved"):
        queue.submit(SimpleCluster(99, BASE_AD))
    cid = submit(queue)
    with pytest.raises(UsageError, match="already submitted"):
        queue.submit(SimpleCluster(cid, BASE_AD))


def test_a_bad_expression_refuses_the_whole_cluster(queue):
    cid = queue.next_cluster_id()
    bad = SimpleCluster(cid, BASE_AD, 5, per_proc=lambda i: {"Foo": "1 +" if i == 4 else "1"})
    with pytest.raises(UsageError, match="Foo"):
        queue.submit(bad)
    assert queue.statistics().jobs == 0 and queue.statistics().clusters == 0


def test_submitting_on_hold_and_refusing_other_initial_states(queue):
    cid = submit(queue, 1, ad={"JobStatus": "5", "HoldReasonCode": "15",
                               "HoldReason": '"submitted on hold at user\'s request"'})
    assert queue.get_job((cid, 0)).status == S.HELD
    with pytest.raises(UsageError, match="Idle"):
        submit(queue, 1, ad={"JobStatus": "2"})
    # Releasing a job submitted on hold hides the cluster's hold attributes for that proc.
    queue.release((cid, 0), "ok")
    job = queue.get_job((cid, 0))
    assert job["HoldReason"] == "undefined" and job["LastHoldReasonCode"] == "15"


def _drive_to(q, job, state):
    paths = {S.IDLE: [], S.RUNNING: [S.RUNNING], S.HELD: [S.HELD],
             S.SUSPENDED: [S.RUNNING, S.SUSPENDED],
             S.TRANSFERRING_OUTPUT: [S.RUNNING, S.TRANSFERRING_OUTPUT]}
    for step in paths[state]:
        q.set_status(job, step)


@pytest.mark.parametrize("old,new", sorted(TRANSITIONS))
def test_every_legal_transition_applies_and_names_its_event(queue, old, new):
    cid = submit(queue, 1)
    _drive_to(queue, (cid, 0), old)
    change = queue.set_status((cid, 0), new, reason="r", code=3)
    assert (change.old, change.new, change.event) == (old, new, TRANSITIONS[old, new])
    if change.left_queue:
        assert new in (S.REMOVED, S.COMPLETED)
        assert queue.history()[0]["JobStatus"] == str(int(new))
    else:
        assert queue.get_job((cid, 0)).status == new


ILLEGAL = [(o, n) for o in (S.IDLE, S.RUNNING, S.HELD, S.SUSPENDED, S.TRANSFERRING_OUTPUT)
           for n in S if (o, n) not in TRANSITIONS]


@pytest.mark.parametrize("old,new", ILLEGAL)
def test_every_illegal_transition_is_refused_with_a_clear_error(queue, old, new):
    cid = submit(queue, 1)
    _drive_to(queue, (cid, 0), old)
    with pytest.raises(IllegalTransition) as info:
        queue.set_status((cid, 0), new)
    message = str(info.value)
    assert f"job {cid}.0" in message and old.name in message and new.name in message
    assert queue.get_job((cid, 0)).status == old  # nothing changed


def test_unknown_status_number_and_missing_job(queue):
    cid = submit(queue, 1)
    with pytest.raises(UsageError, match="not a job status"):
        queue.set_status((cid, 0), 9)
    with pytest.raises(JobNotFound, match=f"{cid}.7"):
        queue.set_status((cid, 7), S.HELD)


def test_hold_and_release_record_reasons_and_codes(queue):
    cid = submit(queue, 1)
    change = queue.hold((cid, 0), "via condor_hold (by user alice)\nsecond line", now=1700000100)
    assert change.event == EventType.JOB_HELD
    job = queue.get_job((cid, 0))
    assert job["HoldReason"] == '"via condor_hold (by user alice)|second line"'
    assert (job["HoldReasonCode"], job["HoldReasonSubCode"], job["NumHolds"]) == ("1", "0", "1")
    assert job["EnteredCurrentStatus"] == "1700000100" and job["LastJobStatus"] == "1"
    queue.release((cid, 0), "via condor_release")
    job = queue.get_job((cid, 0))
    assert "HoldReason" not in job and job["LastHoldReasonCode"] == "1"
    assert job["ReleaseReason"] == '"via condor_release"'


def test_removed_idle_jobs_leave_at_once_running_ones_after_retire(queue):
    cid = submit(queue, 2)
    change = queue.remove((cid, 0), "via condor_rm")
    assert change.left_queue and not change.cluster_removed
    with pytest.raises(JobNotFound):
        queue.get_job((cid, 0))
    queue.set_status((cid, 1), S.RUNNING)
    change = queue.remove((cid, 1))
    assert not change.left_queue and queue.get_job((cid, 1)).status == S.REMOVED
    with pytest.raises(IllegalTransition, match="terminal"):
        queue.set_status((cid, 1), S.IDLE)
    assert queue.retire((cid, 1)) is True  # last job: the cluster is gone too
    assert queue.statistics().clusters == 0
    history = queue.history()
    assert [(h["ProcId"], h["JobStatus"]) for h in history] == [("1", "3"), ("0", "3")]
    assert history[1]["RemoveReason"] == '"via condor_rm"'
    with pytest.raises(UsageError, match="already submitted"):
        queue.submit(SimpleCluster(cid, BASE_AD))  # an id is never reused, even from history


def test_completed_jobs_move_to_history_unless_leave_job_in_queue(queue):
    texts = ["false", " TRUE ", "ProcId * 2 == 4", "ProcId * 2 == 4"]  # plain, and an expression
    cid = submit(queue, 4, per_proc=lambda i: {"LeaveJobInQueue": texts[i]})
    for p in (0, 1, 2, 3):
        queue.set_status((cid, p), S.RUNNING)
        change = queue.set_status((cid, p), S.COMPLETED, now=1700000500)
        assert change.left_queue is (p in (0, 3))
    assert queue.get_job((cid, 1)).status == S.COMPLETED
    assert queue.history(owner="alice")[0]["CompletionDate"] == "1700000500"
    assert queue.retire((cid, 1)) is False  # proc 2 is left
    assert queue.retire((cid, 2)) is True
    with pytest.raises(JobNotFound):
        queue.retire((cid, 1))


def test_retire_refuses_jobs_that_are_still_active(queue):
    cid = submit(queue, 1)
    with pytest.raises(UsageError, match="only Removed or Completed"):
        queue.retire((cid, 0))


def test_history_constraint_limit_and_order(queue):
    a = submit(queue, 3)
    b = submit(queue, 2, ad={"Owner": '"bob"'})
    for job, when in (((a, 0), 10), ((b, 1), 30), ((a, 2), 20)):
        queue.remove(job, now=1700000000 + when)
    assert [(h["ClusterId"], h["ProcId"]) for h in queue.history()] == [
        (str(b), "1"), (str(a), "2"), (str(a), "0")]
    assert len(queue.history(limit=2)) == 2
    assert [h["ProcId"] for h in queue.history('Owner == "alice" && ProcId > 0')] == ["2"]
    assert [h["ProcId"] for h in queue.history(owner="bob")] == ["1"]


def test_edit_refuses_protected_attributes_and_returns_old_values(queue):
    cid = submit(queue, 2)
    for attr in ("JobStatus", "ClusterId", "procid", "Owner", "QDate", "EnteredCurrentStatus"):
        with pytest.raises(UsageError, match="protected"):
            queue.edit((cid, 0), attr, "1")
    with pytest.raises(UsageError, match="not a valid ClassAd expression"):
        queue.edit((cid, 0), "Foo", "1 +")
    assert queue.edit((cid, 0), "RequestMemory", "4096") == "2048"
    assert queue.edit((cid, 0), "Foo", '"bar"') is None
    assert queue.get_job((cid, 0))["RequestMemory"] == "4096"
    assert queue.get_job((cid, 1))["RequestMemory"] == "2048"
    assert [j.proc_id for j in queue.query("RequestMemory > 3000")] == [0]


def test_edit_cluster_changes_every_proc_and_drops_overrides(queue):
    cid = submit(queue, 3, per_proc=lambda i: {"Foo": str(i)})
    queue.edit_cluster(cid, "Foo", "42")
    assert {queue.get_job((cid, p))["Foo"] for p in range(3)} == {"42"}
    queue.edit_cluster(cid, "JobPrio", "7")
    assert [j.prio for j in queue.query(f"ClusterId == {cid}")] == [7, 7, 7]


def test_set_prio_updates_the_column_and_returns_the_old_priority(queue):
    cid = submit(queue, 2)
    assert queue.set_prio((cid, 1), 10) == 0
    assert queue.set_prio((cid, 1), -3) == 10
    assert [j.proc_id for j in queue.query("JobPrio < 0")] == [1]
    with pytest.raises(UsageError):
        queue.set_prio((cid, 1), "high")


def test_query_uses_hot_columns_cluster_attributes_and_per_proc_attributes(queue):
    a = submit(queue, 4, per_proc=lambda i: {"Args": f'"{i}"'})
    b = submit(queue, 2, ad={"Owner": '"Bob"', "RequestMemory": "8192"})
    queue.hold((a, 1), "x")
    ids = lambda c: [j.job_id for j in queue.query(c)]  # noqa: E731
    assert ids('Owner == "bob"') == [(b, 0), (b, 1)]          # == ignores case
    assert ids('Owner =?= "bob"') == []                        # =?= does not
    assert ids("JobStatus == 5") == [(a, 1)]
    assert ids("RequestMemory > 4096") == [(b, 0), (b, 1)]
    assert ids('Args == "2" || ProcId == 3') == [(a, 2), (a, 3)]
    assert ids('JobStatus == "1"') == []                       # int vs string is ERROR
    assert ids("NoSuchAttr == 1") == []
    assert len(queue.query(None)) == 6 and len(queue.query("true", limit=4)) == 4
    assert queue.query(f"ClusterId == {b}", projection=["Owner", "Nope"]) == [{"Owner": '"Bob"'}] * 2
    assert queue.count("JobStatus == 1") == 5 and queue.count("RequestMemory > 4096") == 2
    assert [j.job_id for j in queue.jobs_by_owner("alice", S.HELD)] == [(a, 1)]
    with pytest.raises(UsageError, match="not a valid ClassAd expression"):
        queue.query("Owner ==")


def test_statistics_counts(queue):
    cid = submit(queue, 3)
    queue.hold((cid, 0), "x")
    queue.remove((cid, 1))
    stats = queue.statistics()
    assert (stats.clusters, stats.jobs, stats.history) == (1, 2, 1)
    assert stats.by_status == {S.IDLE: 1, S.HELD: 1}


def test_idle_jobs_follow_the_prio_expression(queue):
    old = submit(queue, 1, ad={"QDate": "1600000000"})
    new = submit(queue, 1, ad={"QDate": "1700000000"})
    ckpt = submit(queue, 1, ad={"QDate": "1700000000", "NumCkpts": "2"})
    high = submit(queue, 1, ad={"QDate": "1700000000", "JobPrio": "5"})
    order = [j.cluster_id for j in queue.idle_jobs()]
    assert order == [high, ckpt, old, new]
    assert [j.cluster_id for j in queue.idle_jobs(owner="alice", limit=2)] == [high, ckpt]


def test_prio_expression_is_a_knob():
    with JobQueue.open(":memory:", prio_expr="ClusterId") as q:  # newest cluster first
        ids = [submit(q, 1) for _ in range(3)]
        assert [j.cluster_id for j in q.idle_jobs()] == ids[::-1]
    with pytest.raises(UsageError, match="not a valid ClassAd expression"):
        JobQueue.open(":memory:", prio_expr="1 +")


def test_autoclusters_group_jobs_by_significant_attributes(queue):
    a = submit(queue, 3)
    b = submit(queue, 2, ad={"RequestMemory": "4096"})
    c = submit(queue, 2, per_proc=lambda i: {"RequestMemory": str(2048 * (i + 1))})
    groups = queue.assign_autoclusters(["RequestMemory", "Owner"])
    by_jobs = sorted(sorted(g) for g in groups.values())
    assert by_jobs == sorted([[(a, 0), (a, 1), (a, 2), (c, 0)], [(b, 0), (b, 1), (c, 1)]])
    first = queue.get_job((a, 0))["AutoClusterId"]
    assert [j.job_id for j in queue.jobs_in_autocluster(int(first))][:3] == [(a, 0), (a, 1), (a, 2)]
    queue.edit((a, 0), "RequestMemory", "4096")  # an edit forgets the job's autocluster
    assert "AutoClusterId" not in queue.get_job((a, 0))
    groups = queue.assign_autoclusters(["RequestMemory", "Owner"])
    assert (a, 0) in groups[int(queue.get_job((b, 0))["AutoClusterId"])]


def test_concurrent_submits_share_commits(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        ids = [[q.next_cluster_id() for _ in range(40)] for _ in range(8)]
        before = q.statistics().commits
        errors: list[BaseException] = []

        def client(mine):
            try:
                for cid in mine:
                    assert q.submit(SimpleCluster(cid, BASE_AD, 2)) == cid
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(m,)) for m in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        stats = q.statistics()
        assert stats.clusters == 320 and stats.jobs == 640
        assert stats.commits - before <= 320


def test_submitters_waiting_for_a_commit_share_the_next_one(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        ids = [q.next_cluster_id() for _ in range(8)]
        before = q.statistics().commits
        with q._lock:  # a leader is busy committing: submitters queue up behind it
            threads = [threading.Thread(target=q.submit, args=(SimpleCluster(cid, BASE_AD),)) for cid in ids]
            for t in threads:
                t.start()
            while len(q._pending) < 8:
                threading.Event().wait(0.001)
        for t in threads:
            t.join()
        assert q.statistics().clusters == 8
        assert q.statistics().commits - before == 1  # one fsync acknowledged all eight


def test_one_bad_cluster_in_a_group_fails_alone(queue):
    good = SimpleCluster(queue.next_cluster_id(), BASE_AD)
    bad = SimpleCluster(queue.next_cluster_id(), {**BASE_AD, "X": "(("})
    from htc.jobqueue.queue import _Ticket

    # Two submitters' clusters committed by one leader, as group commit does.
    tickets = [_Ticket(good, 0), _Ticket(bad, 0)]
    queue._pending = list(tickets)
    queue._commit_pending()
    assert tickets[0].done and tickets[0].result == good.cluster_id and tickets[0].error is None
    assert tickets[1].done and isinstance(tickets[1].error, UsageError)
    assert queue.statistics().clusters == 1
    assert queue.get_job((good.cluster_id, 0)).status == S.IDLE
    with pytest.raises(UsageError):
        queue.submit_many([SimpleCluster(queue.next_cluster_id(), BASE_AD), bad])
    assert queue.statistics().clusters == 1  # submit_many is all or nothing


def test_submit_async(queue):
    cid = queue.next_cluster_id()
    assert asyncio.run(queue.submit_async(SimpleCluster(cid, BASE_AD, 2))) == cid
    assert queue.count() == 2


def test_queue_survives_reopen_with_all_state(tmp_path):
    path = str(tmp_path / "q.db")
    with JobQueue.open(path) as q:
        cid = submit(q, 3, per_proc=lambda i: {"Args": f'"{i}"'})
        q.hold((cid, 1), "why")
        q.remove((cid, 2))
    with JobQueue.open(path) as q:
        assert [j.status for j in q.query()] == [S.IDLE, S.HELD]
        assert q.get_job((cid, 1))["HoldReason"] == '"why"' and q.get_job((cid, 0))["Args"] == '"0"'
        assert q.history()[0]["ProcId"] == "2"


def _digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.mark.parametrize("kind", ["random", "text", "empty", "other-sqlite", "newer", "damaged"])
def test_foreign_or_damaged_files_are_refused_and_left_untouched(tmp_path, kind):
    path = str(tmp_path / "q.db")
    if kind == "random":
        open(path, "wb").write(os.urandom(8192))
    elif kind == "text":
        open(path, "w").write("Owner = alice\n" * 100)
    elif kind == "empty":
        open(path, "wb").close()
    elif kind == "other-sqlite":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE jobs (x)")
        conn.commit()
        conn.close()
    else:
        with JobQueue.open(path) as q:
            submit(q, 200, per_proc=lambda i: {"Args": f'"{"x" * 200}{i}"'})
            q._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if kind == "newer":
            conn = sqlite3.connect(path)
            conn.execute("PRAGMA user_version = 99")
            conn.commit()
            conn.close()
        else:
            size = os.path.getsize(path)
            with open(path, "r+b") as f:  # scribble over interior pages, keep the header
                f.seek(4096)
                f.write(os.urandom(size - 8192))
    before = _digest(path)
    with pytest.raises(QueueFileError) as info:
        JobQueue.open(path)
    assert path in str(info.value)
    assert _digest(path) == before


def test_missing_file_without_create_and_directories(tmp_path):
    with pytest.raises(QueueFileError, match="no job queue here"):
        JobQueue.open(str(tmp_path / "none.db"), create=False)
    with pytest.raises(QueueFileError, match="directory"):
        JobQueue.open(str(tmp_path))
    with pytest.raises(QueueFileError, match="does not exist"):
        JobQueue.open(str(tmp_path / "nodir" / "q.db"))


def test_docs_show_the_state_diagram_generated_from_the_table():
    docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "jobqueue.md")
    assert diagram() in open(docs).read(), "regenerate the diagram: python -c 'from htc.jobqueue.states import diagram; print(diagram())'"


def test_submit_inside_a_transaction_joins_it(queue):
    cid = queue.next_cluster_id()
    with pytest.raises(RuntimeError):
        with queue.transaction():
            queue.submit(SimpleCluster(cid, BASE_AD, 2))
            assert queue.count() == 2
            raise RuntimeError("changed my mind")
    assert queue.count() == 0  # rolled back with the caller's transaction
    with queue.transaction():
        queue.submit(SimpleCluster(cid, BASE_AD, 2))
    assert queue.count() == 2


def test_a_job_change_that_fails_before_writing_leaves_the_rest_of_the_transaction_to_commit(queue):
    cid = submit(queue, 2)
    with queue.transaction():
        queue.set_attributes((cid, 0), {"Note": '"kept"'})
        with pytest.raises(IllegalTransition):  # Idle -> Completed: refused before any write
            queue.set_status((cid, 1), S.COMPLETED)
        with pytest.raises(UsageError, match="not a valid ClassAd expression"):
            queue.set_attributes((cid, 1), {"Good": "1", "Bad": "(("})
    assert queue.get_job((cid, 0))["Note"] == '"kept"'
    assert "Good" not in queue.get_job((cid, 1)) and queue.get_job((cid, 1)).status == S.IDLE


def test_a_change_that_fails_after_writing_cannot_be_committed_by_a_caller_that_goes_on(queue):
    from htc.jobqueue.store import QueueStorageError
    cid = submit(queue, 2)
    with pytest.raises(QueueStorageError, match="nothing of the transaction was committed"):
        with queue.transaction():
            queue.set_attributes((cid, 0), {"Note": '"lost"'})
            with contextlib.suppress(RuntimeError):  # the caller goes on: it must not commit half a change
                with queue.transaction(savepoint=False):
                    queue.set_attributes((cid, 1), {"Half": "1"})
                    raise RuntimeError("fails after writing")
    assert "Note" not in queue.get_job((cid, 0)) and "Half" not in queue.get_job((cid, 1))
    # With a savepoint (the default) the failed part rolls back alone and the rest commits.
    with queue.transaction():
        queue.set_attributes((cid, 0), {"Note": '"kept"'})
        with pytest.raises(RuntimeError):
            with queue.transaction():
                queue.set_attributes((cid, 1), {"Half": "1"})
                raise RuntimeError("fails after writing")
    assert queue.get_job((cid, 0))["Note"] == '"kept"' and "Half" not in queue.get_job((cid, 1))
    queue.set_attributes((cid, 1), {"Whole": "1"})  # and the queue goes on
    assert queue.get_job((cid, 1))["Whole"] == "1"
    # A half-made change inside a savepoint is undone with it: the rest still commits.
    with queue.transaction():
        queue.set_attributes((cid, 0), {"Note": '"kept again"'})
        with pytest.raises(RuntimeError):
            with queue.transaction():
                with queue.transaction(savepoint=False):
                    queue.set_attributes((cid, 1), {"Half": "2"})
                    raise RuntimeError("fails after writing")
    assert queue.get_job((cid, 0))["Note"] == '"kept again"' and "Half" not in queue.get_job((cid, 1))


def test_a_second_process_sees_changes_made_by_another(tmp_path):
    path = str(tmp_path / "q.db")
    with JobQueue.open(path) as a, JobQueue.open(path) as b:
        cid = submit(a, 2)
        assert b.get_job((cid, 1))["RequestMemory"] == "2048"
        a.edit_cluster(cid, "RequestMemory", "4096")  # b has the cluster ad cached
        assert b.get_job((cid, 1))["RequestMemory"] == "4096"
        b.hold((cid, 0), "from b")
        assert a.get_job((cid, 0)).status == S.HELD


def test_non_durable_commits_wait_for_one_fsync_of_the_wal(tmp_path, monkeypatch):
    """transaction(durable=False) commits at once; sync() (or the next durable commit) makes it durable."""
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr("htc.jobqueue.queue.os.fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")),
                                                                    real_fsync(fd)))
    path = str(tmp_path / "q.db")
    with JobQueue.open(path) as q:
        cid = submit(q, 2)
        synced.clear()  # creating the file fsyncs it (and its directory)
        with q.transaction(durable=False):
            q.set_attributes((cid, 0), {"Note": '"one"'})
        # Committed: another connection sees it, and a crash of this process would not lose it.
        other = sqlite3.connect(path)
        assert 'one' in other.execute("SELECT ad FROM jobs WHERE proc_id = 0").fetchone()[0]
        other.close()
        assert q._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL: durable transactions set FULL
        q.sync()
        assert synced == [path + "-wal"]
        q.sync()  # nothing pending: no second fsync
        with q.transaction(durable=False):
            q.set_attributes((cid, 1), {"Note": '"two"'})
        q.set_attributes((cid, 1), {"Note": '"three"'})  # a durable commit covers the earlier one
        q.sync()
        assert synced == [path + "-wal"]
        with pytest.raises(RuntimeError), q.transaction(durable=False):
            q.set_attributes((cid, 0), {"Note": '"lost"'})
            raise RuntimeError("rolled back")
        assert q.get_job((cid, 0))["Note"] == '"one"' and q._conn.execute("PRAGMA synchronous").fetchone()[0] == 1


def test_a_status_change_can_set_other_attributes_in_the_same_update(queue):
    cid = submit(queue, 1)
    queue.set_status((cid, 0), JobStatus.RUNNING, now=1700000100,
                     attrs={"RemoteHost": '"slot1@a"', "requestmemory": "4096"})
    job = queue.get_job((cid, 0))
    assert job.status == JobStatus.RUNNING and job["RemoteHost"] == '"slot1@a"'
    assert job["RequestMemory"] == "4096" and job["JobCurrentStartDate"] == "1700000100"
    with pytest.raises(UsageError, match="JobPrio cannot be set along with a status change"):
        queue.set_status((cid, 0), JobStatus.IDLE, attrs={"JobPrio": "5"})
    assert queue.get_job((cid, 0)).status == JobStatus.RUNNING  # nothing changed


def test_to_dict_is_the_ad_as_iterating_and_indexing_give_it_in_order(queue):
    cid = submit(queue, 2, per_proc=lambda i: {"Args": f'"{i}"'})
    queue.set_attributes((cid, 1), {"Cmd": '"/bin/true"', "NewThing": "42", "JobPrio": "7"})
    for proc in (0, 1):
        job = queue.get_job((cid, proc))
        assert list(job.to_dict().items()) == [(name, job[name]) for name in job]
    job = queue.get_job((cid, 1))
    assert job.to_dict()["Cmd"] == '"/bin/true"' and job.to_dict()["NewThing"] == "42"
    assert job.to_dict()["JobPrio"] == "7" and job.to_dict()["Owner"] == '"alice"'


def test_reads_inside_a_transaction_see_every_change_made_in_it(queue):
    cid = submit(queue, 2)
    with queue.transaction():
        assert queue.get_job((cid, 0)).status == S.IDLE
        queue.set_status((cid, 0), S.RUNNING, now=1700000001, attrs={"RemoteHost": '"slot1@x"'})
        job = queue.get_job((cid, 0))
        assert job.status == S.RUNNING and job["RemoteHost"] == '"slot1@x"'
        queue.set_attributes((cid, 0), {"Extra": "1"})
        assert queue.get_job((cid, 0))["Extra"] == "1"
        queue.edit_cluster(cid, "JobPrio", "5")  # a cluster-wide write
        assert queue.get_job((cid, 0)).prio == 5 and queue.get_job((cid, 1)).prio == 5
        with pytest.raises(UsageError):
            with queue.transaction():
                queue.set_attributes((cid, 1), {"Doomed": "1"})
                assert queue.get_job((cid, 1))["Doomed"] == "1"
                raise UsageError("undo the inner block")
        assert "Doomed" not in queue.get_job((cid, 1))  # rolled back, and not read from a stale copy
        assert queue.set_status((cid, 1), S.REMOVED, reason="gone", now=1700000002).left_queue  # idle: gone at once
        with pytest.raises(JobNotFound):
            queue.get_job((cid, 1))
    assert queue.get_job((cid, 0))["Extra"] == "1" and queue.get_job((cid, 0)).status == S.RUNNING


def test_literal_texts_are_read_the_same_the_first_time_and_after():
    from htc.jobqueue import ads

    cases = {"42": 42, " -7 ": -7, "1.5e3": 1500.0, '"a\\"b\\n"': 'a"b\n', '"plain"': "plain", "TRUE": True,
             "false": False, "undefined": None}
    for _ in range(2):  # the second time from memory
        assert {text: ads.parse_literal(text) for text in cases} == cases
        for expression in ("1 + 2", '"a" "b"', "RequestMemory"):
            with pytest.raises(ValueError, match="literal"):
                ads.parse_literal(expression)
    kept = ads._literal.cache_info().maxsize
    for i in range(kept + 100):
        assert ads.parse_literal(str(i)) == i
    assert ads._literal.cache_info().currsize <= kept


_NAMES = ["Cmd", "cmd", "Args", "ARGS", "Note", "note", "RequestMemory", "requestmemory", "LastJobStatus"]


@pytest.mark.parametrize("seed", range(20))
def test_a_job_ad_as_a_dict_is_what_iterating_and_indexing_give(queue, seed):
    import random
    rnd = random.Random(seed)
    base = {n: v for n, v in BASE_AD.items() if n.lower() not in ("cmd", "args")}
    cid = queue.next_cluster_id()
    ad = {**base, rnd.choice(["Cmd", "cmd"]): '"c0"', rnd.choice(["Args", "ARGS"]): '"c1"'}
    queue.submit(SimpleCluster(cid, ad, 1), now=1700000000)
    for _ in range(3):  # per-job values over cluster names, in whatever case they are set
        queue.set_attributes((cid, 0), {rnd.choice(_NAMES): f'"j{rnd.randrange(99)}"'})
    job = queue.get_job((cid, 0))
    assert job.to_dict() == {name: job[name] for name in job} == dict(job)
