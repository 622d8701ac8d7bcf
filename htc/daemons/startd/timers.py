"""The time limits of a claim's job, as the startd core reads them.

Pure functions of a slot, its claim and ``now`` (the policy's own numbers -- MachineMaxVacateTime,
MaxJobRetirementTime -- are evaluated by the core and passed in):

* how long a job may take to vacate (:func:`vacate_time`): the machine's MachineMaxVacateTime,
  which the job's JobMaxVacateTime may only shorten;
* whether a retiring job's retirement is over (:func:`retirement_over`): its run time, less
  the time it spent suspended, against MaxJobRetirementTime (the job's own may only lower it;
  a quick drain caps it at 0);
* when a slot's timers fire (:func:`slot_deadlines`: MATCH_TIMEOUT, the claim lease, the execute
  limit, KILLING_TIMEOUT);
* the job's own execute limit (:func:`execute_limit`, :func:`execute_deadline`,
  :func:`execute_limit_broken`): a job with ``AllowedExecuteDuration`` still running that long
  after its activation -- wall-clock time, suspension included, as HTCondor counts it from
  JobCurrentStartExecutingDate -- is to be held (HoldReasonCode 47 JobExecuteExceeded).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from htc.daemons.startd import events as ev
from htc.daemons.startd.settings import StartdSettings
from htc.daemons.timefmt import format_time_short
from htc.daemons.startd.slots import Claim, Slot, number_attr
from htc.daemons.startd.states import Activity, State
from htc.jobqueue.states import HoldReasonCode

__all__ = ["BUSY", "execute_deadline", "execute_limit", "execute_limit_broken", "retirement_over", "slot_deadlines",
           "vacate_time"]

#: the activities of a claim whose job runs (or is stopped)
BUSY = (Activity.BUSY, Activity.SUSPENDED, Activity.RETIRING)


def _job_number(job_ad: Mapping[str, Any] | None, name: str) -> float | None:
    value = (job_ad or {}).get(name)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def vacate_time(machine_limit: float, job_ad: Mapping[str, Any] | None) -> float:
    """Seconds a vacating job has before it is hard-killed: ``machine_limit``
    (MachineMaxVacateTime), shortened by the job's JobMaxVacateTime, never negative."""
    limit = machine_limit
    job_limit = _job_number(job_ad, "JobMaxVacateTime")
    if job_limit is not None:
        limit = min(limit, job_limit)  # the job may only shorten it
    return max(0.0, limit)


def retirement_over(claim: Claim, machine_limit: float, now: float) -> bool:
    """Whether the running job of ``claim`` has used up its retirement at ``now``.

    Args:
        claim: a claim whose job runs (``job_start`` set).
        machine_limit: MaxJobRetirementTime as the machine's policy says.
        now: the time.
    """
    assert claim.job_start is not None
    limit = machine_limit
    job_limit = _job_number(claim.job_ad, "MaxJobRetirementTime")
    if job_limit is not None:
        limit = min(limit, job_limit)  # the job may only lower it
    if claim.retirement_cap is not None:
        limit = min(limit, claim.retirement_cap)
    suspended = claim.suspended_total + (now - claim.suspended_since if claim.suspended_since else 0.0)
    return (now - claim.job_start - suspended) >= limit


def execute_limit(job_ad: Mapping[str, Any]) -> float | None:
    """The job's ``AllowedExecuteDuration`` in seconds; None (no limit) unless a positive number.

    An expression is evaluated without a scope here; the wire adapter hands the core the value
    it evaluated in the job's own scope (:func:`htc.daemons.startd.ads.parse_job`).
    """
    value = number_attr(job_ad, "AllowedExecuteDuration", 0.0)
    return value if value > 0 and math.isfinite(value) else None


def execute_deadline(slot: Slot, claim: Claim) -> float | None:
    """When the running job of ``claim`` breaks its AllowedExecuteDuration (None: it cannot).

    A job already held, not running, or on a slot that is not Claimed and busy (a slot already
    Preempting leaves the job to the eviction under way) has none.
    """
    if (claim.execute_limit is None or claim.held or claim.job_start is None or not claim.starter_running
            or slot.state is not State.CLAIMED or slot.activity not in BUSY):
        return None
    return claim.job_start + claim.execute_limit


def slot_deadlines(slot: Slot, settings: StartdSettings) -> list[float]:
    """When a timer of ``slot`` fires: MATCH_TIMEOUT of a Matched slot; the claim lease, the
    job's execute limit and KILLING_TIMEOUT of a claimed one."""
    times = []
    if slot.state is State.MATCHED:
        times.append(slot.entered_state + settings.match_timeout)
    claim = slot.claim
    if claim is None:
        return times
    times.append(claim.last_alive + claim.lease)
    deadline = execute_deadline(slot, claim)
    if deadline is not None:
        times.append(deadline)
    if slot.activity is Activity.KILLING and not claim.killed_starter:
        times.append(slot.entered_activity + settings.killing_timeout)
    return times


def execute_limit_broken(slot: Slot, claim: Claim, now: float) -> ev.HoldJob | None:
    """The :class:`~htc.daemons.startd.events.HoldJob` for the job of ``claim`` if it broke its
    AllowedExecuteDuration by ``now`` (HoldReasonCode 47, subcode 0), else None."""
    deadline = execute_deadline(slot, claim)
    if deadline is None or now < deadline:
        return None
    assert claim.execute_limit is not None
    reason = f"The job exceeded allowed execute duration of {format_time_short(claim.execute_limit)}"
    return ev.HoldJob(slot.name, claim.id, int(HoldReasonCode.JobExecuteExceeded), 0, reason)
