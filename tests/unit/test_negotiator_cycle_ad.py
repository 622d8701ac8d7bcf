"""The Negotiator ad's LastNegotiationCycle<Name><X> attributes, as HTCondor's negotiator publishes
them (Matchmaker::publishNegotiationCycleStats): names, types, and cycles 0, 1, 2."""

from __future__ import annotations

from pathlib import Path

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.negotiator.adapter import NegotiatorDaemon
from htc.daemons.negotiator.cycle import CycleStatistics
from htc.daemons.negotiator.cycle_ad import CYCLES_KEPT, cycle_attributes
from htc.daemons.negotiator.events import CycleFinished
from htc.daemons.negotiator.settings import NegotiatorServiceSettings, NegotiatorSettings
from htc.wire import messages as m

#: every LastNegotiationCycle attribute HTCondor 25's negotiator publishes (condor_attributes.h)
HTCONDOR_NAMES = [
    "Time", "End", "Period", "Duration", "Phase1Duration", "Phase2Duration", "Phase3Duration",
    "Phase4Duration", "TotalSlots", "TrimmedSlots", "CandidateSlots", "SlotShareIter", "NumSchedulers",
    "NumIdleJobs", "NumJobsConsidered", "Matches", "Rejections", "Pies", "PieSpins", "PrefetchDuration",
    "PrefetchCpuTime", "CpuTime", "Phase1CpuTime", "Phase2CpuTime", "Phase3CpuTime", "Phase4CpuTime",
    "ScheddsOutOfTime", "SubmittersFailed", "SubmittersOutOfTime", "SubmittersShareLimit",
    "ActiveSubmitterCount", "MatchRate", "MatchRateSustained",
]


def stats(cycle, started, duration, matches=0, **kw):
    return CycleStatistics(cycle=cycle, started=started, duration=duration, matches=matches, **kw)


def test_every_htcondor_attribute_of_the_latest_cycle_with_its_type():
    st = stats(1, 1000.4, 2.7, matches=6, slots=8, candidate_slots=5, submitters=2, schedds=1, idle_jobs=9,
               requests=3, rejections=1, pie_spins=2, submitters_share_limited=("bob@x", "alice@x"))
    ad = cycle_attributes([st])
    for name in HTCONDOR_NAMES:
        assert f"LastNegotiationCycle{name}0" in ad, name
    assert not any(key.endswith("1") for key in ad)
    get = lambda name: ad[f"LastNegotiationCycle{name}0"]  # noqa: E731
    assert (get("Time"), get("End"), get("Duration"), get("Period")) == (1000, 1003, 3, 0)  # whole seconds
    assert all(type(get(n)) is int for n in ("Time", "End", "Duration", "Period", "Phase1Duration", "Matches"))
    assert (get("TotalSlots"), get("CandidateSlots"), get("NumSchedulers"), get("NumIdleJobs")) == (8, 5, 1, 9)
    assert (get("ActiveSubmitterCount"), get("NumJobsConsidered"), get("Rejections")) == (2, 3, 1)
    assert get("MatchRate") == 2.0 and type(get("MatchRate")) is float and get("MatchRateSustained") == 0.0
    assert get("SubmittersShareLimit") == "alice@x, bob@x" and get("SubmittersFailed") == ""
    assert type(get("CpuTime")) is float


def test_older_cycles_are_numbered_and_the_period_spans_two_ends():
    cycles = [stats(4, 400.0, 10.0, matches=5), stats(3, 300.0, 5.0), stats(2, 200.0, 1.0), stats(1, 100.0, 1.0)]
    ad = cycle_attributes(cycles)
    assert CYCLES_KEPT == 3 and "LastNegotiationCycleTime3" not in ad
    assert [ad[f"LastNegotiationCycleTime{i}"] for i in range(3)] == [400, 300, 200]
    assert ad["LastNegotiationCyclePeriod0"] == 410 - 305
    assert ad["LastNegotiationCycleMatchRateSustained0"] == 5 / 105
    assert ad["LastNegotiationCyclePeriod2"] == 0  # the oldest kept has nothing before it


def test_the_advertised_negotiator_ad_keeps_the_last_cycles():
    settings = NegotiatorServiceSettings(core=NegotiatorSettings(), accountant_file=Path("/nonexistent"),
                                         name="negotiator@test")
    daemon = NegotiatorDaemon(settings, None, now=0.0)
    ads = []
    for i in range(4):
        out = daemon._cycle_finished(CycleFinished(stats(i, 100.0 * i, 1.0, matches=i)))
        (send,) = [a for a in out if isinstance(a, c.Send)]
        assert send.msg.ad_type is m.AdType.Negotiator
        ads.append(ClassAd(send.msg.ad_text))
    last = ads[-1]
    assert [last[f"LastNegotiationCycleMatches{i}"] for i in range(3)] == [3, 2, 1]
    assert "LastNegotiationCycleMatches3" not in last
    assert last["LastNegotiationCyclePeriod0"] == 100
