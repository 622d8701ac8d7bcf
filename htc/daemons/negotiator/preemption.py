"""The negotiator's preemption decision, in one place.

Theory of operation
-------------------
A slot that already runs a job can still be handed to a new request, for one of two reasons
(HTCondor's ``matchmakingAlgorithm``):

* **rank preemption**: the slot's own ``RANK`` prefers the new job to the running one
  (``MY.Rank > MY.CurrentRank``, with TARGET = the new job). The machine owner asked for this,
  so no user-priority rule applies and the submitter's fair-share limit is not checked.
* **priority preemption**: the running job belongs to *another* submitter, the pool policy
  ``PREEMPTION_REQUIREMENTS`` (MY = the slot, TARGET = the new job) is true, and the slot ranks
  the new job at least as well as the running one (``MY.Rank >= MY.CurrentRank``). The usual
  policy is ``RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2``: "the running user's effective
  priority is more than 20 % worse". HTCondor's default is ``PREEMPTION_REQUIREMENTS = False``,
  so by default there is no priority preemption at all.

A slot whose running job still has retirement time left (``MaxJobRetirementTime``) is left
alone unless ``NEGOTIATOR_CONSIDER_EARLY_PREEMPTION`` is set. A submitter that is over its
fair share in the first pie spin may still take slots by rank preemption only.

:func:`decide_preemption` is a pure function over plain values; the cycle code evaluates the
ClassAd expressions (lazily, because ``PREEMPTION_REQUIREMENTS`` is needed only when the
cheaper tests pass) and calls it. Among candidates, no preemption beats rank preemption beats
priority preemption (:class:`PreemptState` orders them that way).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

#: HTCondor's "minus infinity" for ranks that do not evaluate to a number (-FLT_MAX).
WORST_RANK = -3.4028234663852886e38


class PreemptState(enum.IntEnum):
    """Why a slot is a candidate; larger is preferred when candidates tie on the ranks."""

    PRIORITY = 0  # evict another submitter's job because of user priority
    RANK = 1  # evict because the slot's RANK prefers the new job
    NONE = 2  # the slot is idle: nobody is evicted


class Rejection(str, enum.Enum):
    """Why a request found no slot (the reason counted in the cycle statistics)."""

    NO_MATCH = "no match"  # no slot's and job's Requirements hold together
    SUBMITTER_LIMIT = "submitter limit"  # slots matched but the fair share is used up
    PREEMPTION_REQUIREMENTS = "preemption requirements"  # PREEMPTION_REQUIREMENTS is false
    MACHINE_RANK = "machine rank"  # the slot ranks its running job higher
    SAME_SUBMITTER = "same submitter"  # never preempt your own job for priority
    RETIREMENT = "retirement"  # the running job still has retirement time left


@dataclass(frozen=True)
class PreemptionVerdict:
    """The outcome for one claimed slot: a candidate ``state`` or a ``rejection``."""

    state: PreemptState | None
    rejection: Rejection | None = None


_RANK = PreemptionVerdict(PreemptState.RANK)
_PRIORITY = PreemptionVerdict(PreemptState.PRIORITY)
_IDLE = PreemptionVerdict(PreemptState.NONE)


def _greater(a: float | None, b: float | None) -> bool:
    # ClassAd comparison: UNDEFINED on either side is "not true".
    return a is not None and b is not None and a > b


def _at_least(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and a >= b


def decide_preemption(
    *,
    submitter: str,
    remote_user: str | None,
    new_rank: float | None,
    current_rank: float | None,
    preemption_requirements: Callable[[], bool],
    retirement_remaining: float = 0.0,
    consider_early_preemption: bool = False,
    only_rank: bool = False,
) -> PreemptionVerdict:
    """Decide whether a matching slot may be given to a request, and why.

    Args:
        submitter: the submitter the request belongs to.
        remote_user: who the slot is claimed by (``PreemptingAccountingGroup``,
            ``PreemptingUser``, ``AccountingGroup`` or ``RemoteUser``), or ``None`` if idle.
        new_rank: the slot's ``Rank`` evaluated against the new job (None if not a number).
        current_rank: the slot's ``CurrentRank`` (its ``PreemptingRank`` if a preemption is
            already pending), None if not a number.
        preemption_requirements: evaluates ``PREEMPTION_REQUIREMENTS`` (MY = slot, TARGET =
            job); called only when needed.
        retirement_remaining: seconds of retirement time the running job has left.
        consider_early_preemption: ``NEGOTIATOR_CONSIDER_EARLY_PREEMPTION``.
        only_rank: the submitter is over its limit in the first spin: only rank preemption.

    Returns:
        A verdict with a :class:`PreemptState`, or with the :class:`Rejection` reason.
    """
    if remote_user is None:
        return _IDLE if not only_rank else PreemptionVerdict(None, Rejection.SUBMITTER_LIMIT)
    if retirement_remaining > 0 and not consider_early_preemption:
        return PreemptionVerdict(None, Rejection.RETIREMENT)
    if _greater(new_rank, current_rank):
        return _RANK
    if only_rank:
        return PreemptionVerdict(None, Rejection.SUBMITTER_LIMIT)
    if remote_user == submitter:
        return PreemptionVerdict(None, Rejection.SAME_SUBMITTER)
    if not preemption_requirements():
        return PreemptionVerdict(None, Rejection.PREEMPTION_REQUIREMENTS)
    if not _at_least(new_rank, current_rank):
        return PreemptionVerdict(None, Rejection.MACHINE_RANK)
    return _PRIORITY


def submitter_limit_permits(used: float, allowed: float, cost: float) -> bool:
    """Return whether a match of weight ``cost`` fits a submitter's remaining fair share.

    HTCondor's ``SubmitterLimitPermits``: the match fits when ``used + cost <= allowed``; a
    submitter with any share at all may also round up once per spin (``used == 0``), so that
    crumbs of the pie split between many users are not left unused.
    """
    # The slack absorbs float error in sums of shares (3 x 1/3 of 30 slots is 29.999...) and
    # the sliver a nice user's 1e-7 share takes from everyone else's limit.
    return used + cost <= allowed * (1 + 1e-6) + 1e-9 or (used <= 0 and allowed > 0)


def as_rank(value) -> float | None:
    """Convert an evaluated ClassAd value to a rank number (booleans count as 1/0)."""
    if value is True:
        return 1.0
    if value is False:
        return 0.0
    if isinstance(value, (int, float)):
        return float(value)
    return None
