"""The names judged once by the history's private-attribute filter (htc.jobqueue.history):
a name seen before is answered from the sets, in whatever case a job spells it."""

from __future__ import annotations

from htc.jobqueue import JobQueue, JobStatus
from htc.jobqueue import history as changes
from htc.jobqueue.testing import SimpleCluster


def test_names_seen_before_and_new_spellings_are_judged_alike(monkeypatch):
    monkeypatch.setattr(changes, "_NAMES_KEPT", 8)  # forgetting happens, and answers stay right
    q = JobQueue.open(":memory:")
    cid = q.next_cluster_id()
    q.submit(SimpleCluster(cid, {"Owner": '"alice"', "Cmd": '"/bin/true"'}, 4))
    spellings = ["ClaimId", "claimid", "CLAIMID", "ClaimId"]
    for pid, claim in enumerate(spellings):
        q.set_status((cid, pid), JobStatus.RUNNING, attrs={claim: '"c#1#secret"', f"_condor_PRIV{pid}": '"k"',
                                                           f"Note{pid}": str(pid)})
        q.set_status((cid, pid), JobStatus.COMPLETED)
    history = sorted(q.history(), key=lambda ad: ad["ProcId"])
    assert [ad[f"Note{i}"] for i, ad in enumerate(history)] == ["0", "1", "2", "3"]
    for ad in history:
        assert not [name for name in ad if name.lower() == "claimid" or name.lower().startswith("_condor_priv")]
    assert changes._private_names(["Cmd", "Capability", "TransferKey", "Cmd"]) == {"Capability", "TransferKey"}
    q.close()
