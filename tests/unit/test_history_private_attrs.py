"""A job's private attributes (ClaimId...) stay out of the history, whether the job or its
cluster carries them (htc.wire.private; the queue checks a cluster's names once)."""

from __future__ import annotations

from htc.jobqueue import JobQueue, JobStatus
from htc.jobqueue.testing import SimpleCluster


def test_private_attributes_of_the_job_and_of_its_cluster_stay_out_of_the_history():
    q = JobQueue.open(":memory:")
    cid = q.next_cluster_id()
    q.submit(SimpleCluster(cid, {"Owner": '"alice"', "Cmd": '"/bin/true"', "_condor_privSecret": '"s"',
                                 "Capability": '"cap"'}, 3,
                           per_proc=lambda i: {"Mine": str(i)}))
    for pid in range(3):
        q.set_status((cid, pid), JobStatus.RUNNING, attrs={"ClaimId": '"<1.2.3.4>#1#secret"'})
        q.set_status((cid, pid), JobStatus.COMPLETED)
    history = sorted(q.history(), key=lambda ad: ad["ProcId"])
    assert [ad["Mine"] for ad in history] == ["0", "1", "2"]
    for ad in history:
        assert {"ClaimId", "_condor_privSecret", "Capability"}.isdisjoint(ad), ad
        assert ad["Cmd"] == '"/bin/true"' and ad["JobStatus"] == str(int(JobStatus.COMPLETED))
    raw = q._conn.execute("SELECT ad FROM history").fetchall()
    assert all("secret" not in text and "cap" not in text for (text,) in raw)
    q.close()


def test_a_cluster_kept_after_a_proc_sets_a_new_attribute_is_the_one_a_read_gives():
    q = JobQueue.open(":memory:")
    cid = q.next_cluster_id()
    q.submit(SimpleCluster(cid, {"Owner": '"alice"', "Cmd": '"/bin/true"', "HTCLane": "true"}, 2))
    q.set_status((cid, 0), JobStatus.RUNNING, attrs={"ClaimId": '"c#1"', "htclane": "false"})
    kept = q._cluster(cid)
    q._clusters.clear()
    read = q._cluster(cid)
    assert kept is not read
    assert (kept.attrs, kept.canon, kept.proc_attrs) == (read.attrs, read.canon, read.proc_attrs)
    assert "claimid" in kept.proc_attrs and kept.canon["htclane"] == "HTCLane" and kept.cache == {}
    job0, job1 = q.get_job((cid, 0)), q.get_job((cid, 1))
    assert (job0["ClaimId"], job0["HTCLane"], job1.get("ClaimId"), job1["HTCLane"]) == ('"c#1"', "false", None, "true")
    q.close()
