"""Which trigger fires for a slot: the startd's policy evaluation, without side effects on slots.

Theory of operation
-------------------
After every event the core (:mod:`htc.daemons.startd.core`) evaluates each slot: it asks
:func:`verdict` what fires for the slot now, applies it, and asks again until the slot is quiet.
:func:`verdict` looks at the slot's state and activity, its claim, the drain in progress and
the timers (MATCH_TIMEOUT, the claim lease, CLAIM_WORKLIFE, the vacate and retirement times,
KILLING_TIMEOUT), and asks the policy expressions (START, IS_OWNER, WANT_SUSPEND, SUSPEND,
CONTINUE, PREEMPT, KILL) through :class:`Reading`, which the core binds to the slot and the
time. It answers with one :data:`Verdict`:

* a :class:`~htc.daemons.startd.states.Trigger`: the slot takes that step of the table;
* :class:`Evict`: the claim is evicted (the core picks vacate or kill by WANT_VACATE), for the
  reason given;
* a :class:`Chore`: work that is not one step (the job is gone from a preempting slot: the slot
  goes to its owner or to the better claim; KILLING_TIMEOUT passed; a drain is finalized);
* None: nothing fires.

The only thing it writes is the reason a claim retires (``Claim.retire_reason``: ``PREEMPT``
when the policy preempts it, cleared when a preempting claim goes away), which is part of the
verdict the core then applies.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from htc.daemons.startd.settings import StartdSettings
from htc.daemons.startd.slots import Claim, DrainRequest, Slot
from htc.daemons.startd.states import Activity, State, Trigger

__all__ = ["Chore", "Evict", "Reading", "Verdict", "verdict"]

S, A, T = State, Activity, Trigger


@dataclass(frozen=True)
class Evict:
    """Evict the slot's claim; ``reason`` becomes the claim's end reason (if it has none yet)."""

    reason: str


class Chore(enum.Enum):
    """Work on a slot that is not one step of the table."""

    FINISH_PREEMPTION = "the job of a preempting slot is gone: to the owner, or to the better claim"
    KILL_STARTER = "KILLING_TIMEOUT passed and the starter is still there"
    END_DRAIN = "every slot drained and the drain resumes on completion: it is over"


Verdict = Trigger | Evict | Chore | None


@dataclass(frozen=True)
class Reading:
    """The policy and timers of one slot at one time, as the core reads them.

    ``ask(name, job=True, undefined=False)`` evaluates policy expression ``name`` over the slot
    ad (with the claim's job ad as TARGET when ``job``; ``undefined`` is what UNDEFINED counts
    as); ``retirement_over()`` and ``vacate_time()`` are the claim's timers
    (:mod:`htc.daemons.startd.timers`); ``all_drained()`` says whether every slot is Drained.
    """

    ask: Callable[..., bool]
    retirement_over: Callable[[], bool]
    vacate_time: Callable[[], float]
    all_drained: Callable[[], bool]


def verdict(slot: Slot, drain: DrainRequest | None, settings: StartdSettings, read: Reading, now: float) -> Verdict:
    """What fires for ``slot`` at ``now`` (see the module docstring)."""
    st, claim = slot.state, slot.claim
    if claim is not None and now >= claim.last_alive + claim.lease and st is S.CLAIMED:
        return Evict("claim lease expired")
    if st is S.OWNER:
        if drain is not None and slot.kind != "Dynamic":
            return T.DRAIN
        return None if read.ask("IS_OWNER", job=False) else T.NOT_OWNER
    if st is S.UNCLAIMED:
        if drain is not None:
            return T.DRAIN
        return T.OWNER if read.ask("IS_OWNER", job=False) else None
    if st is S.MATCHED:
        if (drain is not None or now >= slot.entered_state + settings.match_timeout
                or not read.ask("START", job=False, undefined=True)):
            return T.MATCH_LOST
        return None
    if st is S.CLAIMED:
        assert claim is not None
        return _claimed(slot, claim, drain, settings, read, now)
    if st is S.PREEMPTING:
        assert claim is not None
        return _preempting(slot, claim, settings, read, now)
    if st is S.DRAINED:
        if drain is None:
            return T.DRAIN_OVER
        if slot.activity is A.RETIRING and read.all_drained():
            return T.ALL_DRAINED
        if slot.activity is A.IDLE and drain.resume_on_completion:
            return Chore.END_DRAIN
    return None


def _claimed(slot: Slot, claim: Claim, drain: DrainRequest | None, settings: StartdSettings, read: Reading,
             now: float) -> Verdict:
    act, ask = slot.activity, read.ask
    if act is A.IDLE:
        if drain is not None:
            return Evict(f"draining: {drain.reason or 'condor_drain'}")
        if claim.preempting is not None:
            return Evict("preempted by a better claim")
        if not ask("START", undefined=True):
            return Evict("START became false")
        if now - claim.created > settings.claim_worklife:
            return Evict("claim worklife over")
        return None
    if act is A.BUSY:
        if claim.retire_reason is not None:
            return T.RETIRE
        if ask("WANT_SUSPEND"):
            return T.SUSPEND if ask("SUSPEND") else None
        if ask("PREEMPT"):
            claim.retire_reason = "PREEMPT"
            return T.RETIRE
        return None
    if act is A.SUSPENDED:
        if claim.retire_reason is not None and read.retirement_over():
            return Evict(f"retired ({claim.retire_reason})")  # 17
        if ask("PREEMPT"):
            claim.retire_reason = claim.retire_reason or "PREEMPT"
            return T.RETIRE
        if ask("CONTINUE"):
            return T.RETIRE if claim.retire_reason else T.CONTINUE
        return None
    if act is A.RETIRING:
        if read.retirement_over():
            return Evict(f"retired ({claim.retire_reason})")  # 18
        if claim.retire_reason == "rank" and claim.preempting is None:
            claim.retire_reason = None
            return T.UNRETIRE
        if ask("WANT_SUSPEND") and ask("SUSPEND"):
            return T.SUSPEND
    return None


def _preempting(slot: Slot, claim: Claim, settings: StartdSettings, read: Reading, now: float) -> Verdict:
    if not claim.starter_running:
        return Chore.FINISH_PREEMPTION
    if slot.activity is A.VACATING and (read.ask("KILL") or now >= slot.entered_activity + read.vacate_time()):
        return T.KILL
    if (slot.activity is A.KILLING and not claim.killed_starter
            and now >= slot.entered_activity + settings.killing_timeout):
        return Chore.KILL_STARTER
    return None
