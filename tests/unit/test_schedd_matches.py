"""The schedd's answer to MatchNotify (htc.daemons.schedd.matches): MAX_JOBS_RUNNING counts the
running jobs and the claims being requested, and the claims are walked only near the limit."""

from __future__ import annotations

from htc.daemons.schedd.matches import public_ad
from htc.daemons.schedd.states import ClaimState
from htc.wire import messages as m
from tests.unit.test_schedd_core import SLOT_AD, Harness, job


def notify(h: Harness, k: int) -> m.Message:
    reqs = h.request(m.GetResourceRequests(submitter="alice@localhost", significant_attributes=("RequestMemory",)))
    return h.request(m.MatchNotify(claim_id=f"slot{k}@exec#1#aa", submitter="alice@localhost",
                                   slot_name=f"slot{k}@exec", startd_address="startd", slot_ad=SLOT_AD,
                                   autocluster_id=reqs.requests[0].autocluster_id))


def test_max_jobs_running_counts_the_claims_being_requested():
    h = Harness(max_jobs_running=2)
    h.start()
    h.submit(job(queue="queue 4"))
    assert [notify(h, k).detail for k in range(3)] == ["", "", m.MATCH_LAPSED + "MAX_JOBS_RUNNING (2) reached"]
    assert h.core.claims.counts()[ClaimState.REQUESTED] == 2


def test_the_claims_are_counted_only_when_they_could_reach_the_limit(monkeypatch):
    h = Harness(max_jobs_running=3)
    h.start()
    h.submit(job(queue="queue 4"))
    counted = []
    counts = h.core.claims.counts
    monkeypatch.setattr(h.core.claims, "counts", lambda: counted.append(len(h.core.claims)) or counts())
    assert [notify(h, k).detail for k in range(4)] == ["", "", "", m.MATCH_LAPSED + "MAX_JOBS_RUNNING (3) reached"]
    assert counted == [3]  # (the first three matches found 0, 1 and 2 claims: below 3 without a walk)


def test_public_ad_is_the_jobs_items_in_order_without_its_claim_id():
    h = Harness()
    h.start()
    cluster = h.submit(job("request_memory = 512\n+Note = \"$(Process)\"", queue="queue 2"))
    h.queue.set_attributes((cluster, 1), {"ClaimId": '"secret"', "RequestMemory": "1024", "Extra": "7"})
    for proc in (0, 1):
        stored = h.queue.get_job((cluster, proc))
        expected = {k: v for k, v in stored.items() if k != "ClaimId"}
        assert list(public_ad(stored).items()) == list(expected.items())
    assert "ClaimId" not in public_ad(h.queue.get_job((cluster, 1))) and "ClaimId" in h.queue.get_job((cluster, 1))
    assert public_ad({"ClaimId": "x", "A": "1"}) == {"A": "1"}
