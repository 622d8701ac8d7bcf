"""The negotiator evaluates ClassAd ``time()`` at the ``now`` it is given, not the real clock:
UWCS_PREEMPTION_REQUIREMENTS (``time() - EnteredCurrentState > 1 hour``) under a FakeClock."""

from __future__ import annotations

from htc.classad import ClassAd, ExprTree
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.clock import FakeClock
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.core import Negotiator
from htc.daemons.negotiator.cycle import negotiate_cycle
from htc.daemons.negotiator.events import (AskResourceRequests, NotifyMatches, PoolAds,
                                           RequestsReceived, Wakeup)
from htc.daemons.negotiator.preemption import PreemptState
from htc.daemons.negotiator.settings import UWCS_PREEMPTION_REQUIREMENTS, NegotiatorSettings
from htc.daemons.negotiator.slotreads import claimed_resources
from htc.daemons.negotiator.submitters import SubmitterAd

START = 50_000.0  # far from the real clock: with real time() every claim would look old


def busy_slot(i: int, entered: float) -> ClassAd:
    ad = ClassAd({"Name": f"slot1@n{i}", "Machine": f"n{i}", "MyAddress": f"<n{i}:9618>",
                  "State": "Claimed", "Activity": "Busy", "OpSys": "LINUX", "Cpus": 1,
                  "Memory": 2048, "Rank": 0.0, "CurrentRank": 0.0, "RemoteUser": "heavy@x",
                  "RemoteOwner": "heavy@x", "EnteredCurrentState": int(entered)})
    ad["Start"] = ExprTree("True")
    ad["Requirements"] = ExprTree("START")
    return ad


def light_job() -> ClassAd:
    job = ClassAd({"Owner": "light", "RequestCpus": 1, "RequestMemory": 1024, "JobUniverse": 5})
    job["Requirements"] = ExprTree('TARGET.OpSys == "LINUX"')
    return job


def cycle_at(clock: FakeClock, entered: float):
    settings = NegotiatorSettings(preemption_requirements=UWCS_PREEMPTION_REQUIREMENTS)
    acct = Accountant(now=START)
    acct.set_real_priority("heavy@x", 50.0)
    slots = [busy_slot(i, entered) for i in range(2)]
    now = clock.time()
    acct.update_priorities(now)
    acct.check_matches(claimed_resources(slots), now)
    reqs = {("s1", "light@x"): [ResourceRequest(autocluster_id=1, job=light_job(), count=1)]}
    subs = [SubmitterAd("light@x", "s1", "<s1>", 1, 0)]
    return negotiate_cycle(slots, subs, reqs, acct, settings, now)


def test_young_claims_are_safe_and_old_ones_preempted_on_the_fake_clock():
    clock = FakeClock(start=START)
    assert cycle_at(clock, entered=START).matches == ()  # claim 0 s old
    clock.advance(2 * 3600)
    result = cycle_at(clock, entered=START)  # the same claim, two fake hours later
    assert [m.preemption for m in result.matches] == [PreemptState.PRIORITY]


def test_the_core_evaluates_with_the_now_of_handle():
    clock = FakeClock(start=START)
    settings = NegotiatorSettings(preemption_requirements=UWCS_PREEMPTION_REQUIREMENTS)
    acct = Accountant(now=START)
    acct.set_real_priority("heavy@x", 50.0)
    core = Negotiator(settings, acct, now=clock.time())
    clock.advance(600)  # the claims are 10 fake minutes old: too young to preempt
    actions = core.handle(Wakeup(), clock.time())
    cycle = actions[0].cycle
    sub = ClassAd({"Name": "light@x", "ScheddName": "s1", "ScheddIpAddr": "<s1>",
                   "IdleJobs": 1, "RunningJobs": 0})
    slots = [busy_slot(i, START) for i in range(2)]
    asks = core.handle(PoolAds(cycle, slots, [sub]), clock.time())
    ask = next(a for a in asks if isinstance(a, AskResourceRequests))
    req = ResourceRequest(autocluster_id=1, job=light_job(), count=1)
    done = core.handle(RequestsReceived(cycle, ask.schedd, ask.submitter, [req]), clock.time())
    assert not [a for a in done if isinstance(a, NotifyMatches)]
