"""Slot and job ads and one-cycle runs for the negotiator's unit tests.

``make_slot``/``make_job`` build ads with HTCondor's usual attributes; ``run_cycle`` runs one cycle
of the real negotiator core over them (a fresh accountant brought up to date, as the core does);
``run_cycle_with`` does it with a search switch set; ``count_calls`` counts a method's calls;
``assert_same_cycles`` compares two runs of one cycle, decision by decision.
"""

from __future__ import annotations

from htc.classad import ClassAd, ExprTree
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.cycle import negotiate_cycle
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slotreads import claimed_resources
from htc.daemons.negotiator.submitters import SubmitterAd

JOB_REQUIREMENTS = 'TARGET.OpSys == "LINUX" && TARGET.Memory >= RequestMemory'


def make_slot(name: str, exprs: dict | None = None, **attrs) -> ClassAd:
    """A slot ad with HTCondor's usual attributes; ``exprs`` holds expression text."""
    slot_id = int(name.split("@")[0].removeprefix("slot").split("_")[0] or 1)
    ad = ClassAd({
        "Name": name, "Machine": name.split("@")[-1], "SlotID": slot_id,
        "MyAddress": f"<{name.split('@')[-1]}:9618>", "State": "Unclaimed", "Activity": "Idle",
        "OpSys": "LINUX", "Arch": "X86_64", "Cpus": 1, "Memory": 2048, "Disk": 1_000_000,
        "KFlops": 1000, "Mips": 100, "Rank": 0.0, "CurrentRank": 0.0,
    })
    ad["Start"] = ExprTree("True")
    ad["Requirements"] = ExprTree("START")
    for key, value in attrs.items():
        ad[key] = value
    for key, text in (exprs or {}).items():
        ad[key] = ExprTree(text)
    return ad


def make_job(owner: str = "alice", exprs: dict | None = None, **attrs) -> ClassAd:
    ad = ClassAd({"Owner": owner, "RequestCpus": 1, "RequestMemory": 1024, "RequestDisk": 1024,
                  "JobUniverse": 5})
    ad["Requirements"] = ExprTree(JOB_REQUIREMENTS)
    ad["Rank"] = 0.0
    for key, value in attrs.items():
        ad[key] = value
    for key, text in (exprs or {}).items():
        ad[key] = ExprTree(text)
    return ad


def claimed(slot: ClassAd, user: str, **attrs) -> ClassAd:
    slot = slot.copy()
    slot["State"] = "Claimed"
    slot["Activity"] = "Busy"
    slot["RemoteUser"] = user
    slot["RemoteOwner"] = user
    for key, value in attrs.items():
        slot[key] = value
    return slot


def run_cycle(slots, requests: dict, *, acct: Accountant | None = None, settings=None,
              now: float = 0.0, submitters=None):
    """One cycle. ``requests`` maps submitter (or (schedd, submitter)) to [(job, count), ...]."""
    acct = acct or Accountant(now=now)
    settings = settings or NegotiatorSettings()
    by_key, subs = {}, []
    for key, items in requests.items():
        schedd, name = key if isinstance(key, tuple) else ("schedd1", key)
        reqs = [ResourceRequest(autocluster_id=i + 1, job=job, count=count)
                for i, (job, count) in enumerate(items)]
        by_key[(schedd, name)] = reqs
        subs.append(SubmitterAd(name, schedd, f"<{schedd}>", sum(r.count for r in reqs), 0))
    acct.update_priorities(now)
    acct.check_matches(claimed_resources(slots, settings.use_slot_weights), now)
    result = negotiate_cycle(slots, submitters or subs, by_key, acct, settings, now)
    return result, acct


def run_cycle_with(owner, flag: str, value, slots, requests: dict, settings=None):
    """:func:`run_cycle`'s result with ``owner.flag`` set to ``value`` for the cycle's length
    (the search switches the tests compare: ``VectorSearch.enabled``, ``IdleSearch.runs``)."""
    saved = getattr(owner, flag)
    setattr(owner, flag, value)
    try:
        return run_cycle(slots, requests, settings=settings)[0]
    finally:
        setattr(owner, flag, saved)


def count_calls(monkeypatch, owner, name: str) -> list:
    """Patch the method ``owner.name`` to count its calls: the list returned grows by one per
    call."""
    calls: list = []
    real = getattr(owner, name)

    def counting(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


def matched(result) -> list[tuple[str, str]]:
    return [(m.submitter, m.slot_name) for m in result.matches]


def cycle_matches(result) -> list[tuple]:
    """Every match of a cycle as the tests compare them: who, which job, which slot, its claim
    id, the ad offered, the weight, the carve."""
    return [(m.submitter, m.autocluster_id, m.job_id, m.slot_name, m.claim_id, str(m.slot_ad),
             m.weight, m.carved) for m in result.matches]


def accountant_charges(acct) -> tuple[dict, dict]:
    """The accountant's customers and match records, as plain values."""
    return ({name: vars(rec) for name, rec in acct._customers.items()},
            {name: (m.customer, m.weight, m.start_time) for name, m in acct._matches.items()})


def assert_same_cycles(one, other) -> None:
    """Two runs of one cycle (``(CycleResult, Accountant)`` each, a search switch on and off)
    decided alike: neither skipped a request, and the same matches, rejections, share-limited
    submitters and accountant charges."""
    (a, acct_a), (b, acct_b) = one, other
    assert not a.skipped and not b.skipped
    assert cycle_matches(a) == cycle_matches(b)
    assert a.statistics.rejections_by_reason == b.statistics.rejections_by_reason
    assert a.statistics.submitters_share_limited == b.statistics.submitters_share_limited
    assert accountant_charges(acct_a) == accountant_charges(acct_b)
