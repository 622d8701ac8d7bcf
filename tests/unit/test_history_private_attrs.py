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
