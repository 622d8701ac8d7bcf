"""A cluster's memos that depend on its attributes alone (its parsed ClassAd, what an expression
reaches through them) outlive a proc's first setting of a new attribute; the memos that depend
on which attributes procs set do not."""

from __future__ import annotations

from htc.jobqueue import JobQueue, JobStatus
from htc.jobqueue.expr import GroupedEvaluator, cluster_classad, job_classad, reachable
from htc.jobqueue.testing import SimpleCluster


def test_a_proc_setting_a_new_attribute_keeps_the_parsed_cluster_ad():
    q = JobQueue.open(":memory:")
    cid = q.next_cluster_id()
    q.submit(SimpleCluster(cid, {"Owner": '"alice"', "Cmd": '"/bin/true"', "Rank": "Memory * 2",
                                 "Memory": "Base + 1", "Base": "10"}, 1))
    before = q.get_job((cid, 0))
    parsed = cluster_classad(before.cluster)
    assert reachable("Rank", before.cluster) == frozenset({"rank", "memory", "base"})
    before.cluster.cache["per-proc memo"] = 1
    q.set_status((cid, 0), JobStatus.RUNNING, attrs={"RemoteHost": '"slot1@exec"', "Base": "20"})
    after = q.get_job((cid, 0))
    assert after.cluster is not before.cluster and "base" in after.cluster.proc_attrs
    assert cluster_classad(after.cluster) is parsed           # not parsed again
    assert "per-proc memo" not in after.cluster.cache         # (those may depend on proc_attrs)
    ad = job_classad(after)                                   # the proc's own values on top
    assert ad.eval("Rank") == 42 and ad["RemoteHost"] == "slot1@exec" and ad["JobStatus"] == 2
    assert cluster_classad(after.cluster).eval("Rank") == 22  # the cluster's own, untouched
    assert GroupedEvaluator("Rank").value(after) == 42
    q.close()
