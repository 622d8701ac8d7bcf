"""The queue fed by the real submit language (htc.submit), and late materialization."""

from __future__ import annotations

import pytest

from htc.errors import UsageError
from htc.jobqueue import JobQueue, JobStatus
from htc.jobqueue.testing import SimpleCluster
from htc.submit import Submit

DESCRIPTION = """
universe = vanilla
executable = /bin/echo
arguments = hello $(Process)
output = out.$(Process)
error = err.$(Process)
log = job.log
request_memory = 2GB
request_cpus = 1
priority = 3
+ProjectName = "Physics"
queue {queue}
"""


@pytest.fixture
def queue(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        yield q


def test_a_real_submit_is_stored_and_read_back_exactly(queue, tmp_path):
    cid = queue.next_cluster_id()
    cluster = Submit(DESCRIPTION.format(queue=50), cwd=str(tmp_path)).cluster(cid, owner="alice")
    assert queue.submit(cluster) == cid
    assert queue.count() == 50
    for proc in (0, 17, 49):
        assert queue.get_job((cid, proc)).to_dict() == next(cluster.job_ads(proc, proc + 1))
    job = queue.get_job((cid, 17))
    assert (job.owner, job.prio, job.status) == ("alice", 3, JobStatus.IDLE)
    assert [j.proc_id for j in queue.query('ProjectName == "Physics" && Args == "hello 17"')] == [17]


def test_a_held_submit(queue, tmp_path):
    cid = queue.next_cluster_id()
    queue.submit(Submit("executable = /bin/true\nhold = true\nqueue 2", cwd=str(tmp_path)).cluster(cid, owner="bob"))
    assert {j.status for j in queue.query()} == {JobStatus.HELD}
    assert queue.get_job((cid, 1))["HoldReasonCode"] == "15"


def test_late_materialization_keeps_a_million_proc_cluster_small(queue, tmp_path):
    cid = queue.next_cluster_id()
    text = DESCRIPTION.format(queue=1_000_000).replace("queue 1000000", "max_materialize = 5\nmax_idle = 3\nqueue 1000000")
    queue.submit(Submit(text, cwd=str(tmp_path)).cluster(cid, owner="alice", qdate=1_700_000_000))
    # max_idle 3 is the tighter limit at first: 3 idle procs.
    assert [j.proc_id for j in queue.query()] == [0, 1, 2]
    assert queue.materialize(cid) == 0
    for p in (0, 1):
        queue.set_status((cid, p), JobStatus.RUNNING)
    assert queue.materialize(cid) == 2           # 1 idle + 2 = 3 idle; 5 present
    assert queue.materialize(cid) == 0           # max_materialize 5 reached
    queue.set_status((cid, 0), JobStatus.COMPLETED)
    assert queue.materialize_all() == {}         # 4 present, but 3 idle already
    row = queue._conn.execute("SELECT num_procs, next_proc FROM clusters WHERE cluster_id = ?", (cid,)).fetchone()
    assert row == (1_000_000, 5)
    assert queue.get_job((cid, 4)).to_dict()["Args"] == '"hello 4"'


def test_late_materialization_resumes_after_a_restart_from_the_stored_description(tmp_path):
    path = str(tmp_path / "q.db")
    text = "executable = /bin/echo\narguments = $(Item)\nmax_materialize = 2\nqueue Item in (a, b, c, d)"
    with JobQueue.open(path) as q:
        cid = q.next_cluster_id()
        q.submit(Submit(text, cwd=str(tmp_path)).cluster(cid, owner="alice"))
        for p in (0, 1):
            q.remove((cid, p))
    with JobQueue.open(path) as q:  # a new process: only the stored description is left
        assert q.materialize(cid) == 2
        assert [j["Args"] for j in q.query()] == ['"c"', '"d"']
        for p in (2, 3):
            q.remove((cid, p))
        assert q.statistics().clusters == 0 and len(q.history()) == 4


def test_factories_without_a_description_need_a_rebuild_hook(tmp_path):
    path = str(tmp_path / "q.db")
    ad = {"Owner": '"alice"', "JobMaterializeLimit": "1", "Cmd": '"/bin/true"'}
    with JobQueue.open(path) as q:
        cid = q.next_cluster_id()
        q.submit(SimpleCluster(cid, ad, 3))
        q.remove((cid, 0))
    with JobQueue.open(path) as q:
        with pytest.raises(UsageError, match="description was not stored"):
            q.materialize(cid)
    hook_calls = []

    def rebuild(record):
        hook_calls.append(record)
        return SimpleCluster(record["cluster_id"], ad, 3, per_proc=lambda i: {"Args": f'"{i}"'})

    with JobQueue.open(path, rebuild_factory=rebuild) as q:
        assert q.materialize(cid) == 1
        assert q.get_job((cid, 1))["Args"] == '"1"'
        assert hook_calls[0]["cluster_id"] == cid and hook_calls[0]["owner"] == "alice"
