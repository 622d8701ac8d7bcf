"""The ``LastNegotiationCycle<Name><X>`` attributes of the Negotiator ad, as HTCondor's negotiator
publishes them (``Matchmaker::publishNegotiationCycleStats``): one set per cycle kept, ``X`` = 0
for the latest, 1 for the one before, ... (HTCondor keeps ``NEGOTIATION_CYCLE_STATS_LENGTH``
cycles, 3 by default; htc keeps :data:`CYCLES_KEPT`).

Types as HTCondor's: times and durations are whole seconds (``time_t``), rates and CPU times
reals, the submitter lists strings joined by ``", "`` (sorted, as its ``std::set``). What htc
does not measure as HTCondor does: it does not time the four phases apart (``Phase1Duration`` ..
``Phase4Duration`` and their CPU times are 0; ``CpuTime`` is the matchmaking's CPU-side time),
nothing is prefetched (``PrefetchDuration`` and ``PrefetchCpuTime`` are 0), it has no
per-submitter time limit (``SubmittersOutOfTime`` and ``ScheddsOutOfTime`` are empty), and
no trimming of claimed slots (``TrimmedSlots`` is ``CandidateSlots``). htc adds
``LastNegotiationCycleNumSchedulersFailed<X>`` (schedds that did not answer) and
``LastNegotiationCycleAborted<X>`` (why the cycle was abandoned, or "").
"""

from __future__ import annotations

from collections.abc import Sequence

from htc.daemons.negotiator.cycle import CycleStatistics

#: cycles whose statistics the ad carries (HTCondor's NEGOTIATION_CYCLE_STATS_LENGTH default)
CYCLES_KEPT = 3

_P = "LastNegotiationCycle"


def cycle_attributes(cycles: Sequence[CycleStatistics]) -> dict:
    """The attributes of ``cycles``, newest first (at most :data:`CYCLES_KEPT` are used)."""
    out: dict = {}
    cycles = list(cycles)[:CYCLES_KEPT]
    for i, st in enumerate(cycles):
        start = int(st.started)
        end = int(st.started + st.duration)
        duration = end - start
        period = 0
        if i + 1 < len(cycles):
            before = cycles[i + 1]
            period = end - int(before.started + before.duration)
        values = {
            "Time": start, "End": end, "Period": period, "Duration": duration,
            "Phase1Duration": 0, "Phase2Duration": 0, "Phase3Duration": 0, "Phase4Duration": 0,
            "TotalSlots": st.slots, "TrimmedSlots": st.candidate_slots, "CandidateSlots": st.candidate_slots,
            "SlotShareIter": 1, "NumSchedulers": st.schedds, "NumIdleJobs": st.idle_jobs,
            "NumJobsConsidered": st.requests, "Matches": st.matches, "Rejections": st.rejections,
            "MatchRate": st.matches / duration if duration > 0 else 0.0,
            "MatchRateSustained": st.matches / period if period > 0 else 0.0,
            "ActiveSubmitterCount": st.submitters, "Pies": 1, "PieSpins": st.pie_spins,
            "PrefetchDuration": 0, "PrefetchCpuTime": 0.0, "CpuTime": float(st.match_seconds),
            "Phase1CpuTime": 0.0, "Phase2CpuTime": 0.0, "Phase3CpuTime": 0.0, "Phase4CpuTime": 0.0,
            "ScheddsOutOfTime": "", "SubmittersFailed": "", "SubmittersOutOfTime": "",
            "SubmittersShareLimit": ", ".join(sorted(st.submitters_share_limited)),
            "NumSchedulersFailed": len(st.failed_schedds), "Aborted": st.aborted,
        }
        out.update({f"{_P}{name}{i}": value for name, value in values.items()})
    return out
