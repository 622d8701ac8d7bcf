"""A cycle with nothing to match builds no slot classes, yet counts the same candidates and
gives the same shares as a cycle that does build them."""

from __future__ import annotations

from htc.classad import ClassAd, ExprTree
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.cycle import negotiate_cycle
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slotreads import claimed_resources
from htc.daemons.negotiator.submitters import SubmitterAd


def slot(i: int, user: str | None = None) -> ClassAd:
    ad = ClassAd({"Name": f"slot1@n{i}", "Machine": f"n{i}", "MyAddress": f"<n{i}:9618>",
                  "State": "Unclaimed", "Activity": "Idle", "OpSys": "LINUX", "Cpus": 1,
                  "Memory": 1024 * (1 + i % 3), "Rank": 0.0, "CurrentRank": 0.0})
    if user:
        ad.update({"State": "Claimed", "Activity": "Busy", "RemoteUser": user,
                   "RemoteOwner": user})
    ad["Start"] = ExprTree("True")
    ad["Requirements"] = ExprTree("START")
    return ad


def run(requests):
    slots = [slot(i, "a@x" if i < 4 else None) for i in range(10)]
    settings = NegotiatorSettings(preemption_requirements="True")
    acct = Accountant(now=0.0)
    acct.update_priorities(0.0)
    acct.check_matches(claimed_resources(slots), 0.0)
    subs = [SubmitterAd("a@x", "s1", "<s1>", 0, 4), SubmitterAd("b@x", "s1", "<s1>", 1, 0)]
    return negotiate_cycle(slots, subs, requests, acct, settings, 0.0)


def test_no_request_builds_no_classes_but_keeps_candidates_and_shares():
    job = ClassAd({"Owner": "b", "RequestCpus": 1, "RequestMemory": 1, "JobUniverse": 5})
    job["Requirements"] = ExprTree("TARGET.Memory > 100000")  # matches nothing
    with_request = run({("s1", "b@x"): [ResourceRequest(autocluster_id=1, job=job, count=1)]})
    without = run({})
    assert with_request.matches == without.matches == ()
    assert with_request.statistics.slot_classes > 0
    assert without.statistics.slot_classes == 0
    assert without.statistics.candidate_slots == with_request.statistics.candidate_slots == 10
    assert without.shares == with_request.shares
    assert without.statistics.pie_spins == with_request.statistics.pie_spins
