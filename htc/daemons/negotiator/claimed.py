"""The claimed slots of one cycle: which a request may take by preemption, and the best of them.

Theory of operation
-------------------
Idle slots are many and interchangeable, so they are searched class by class
(:mod:`htc.daemons.negotiator.search`). Claimed slots are few and each is a candidate of its
own: it runs somebody's job, and whether a request may preempt it depends on that job's owner,
the slot's ranks of the two jobs and the pool's policy
(:func:`~htc.daemons.negotiator.preemption.decide_preemption`).

:class:`ClaimedSearch` does the work for one cycle:

* :meth:`~ClaimedSearch.may_preempt` drops, before the cycle starts, the claimed slots no
  request could ever preempt (preemption off; the claim is idle and its schedd is about to
  reuse it; only rank preemption is possible and the slot's ``RANK`` is a constant no better
  than its ``CurrentRank``);
* :meth:`~ClaimedSearch.prepare` gives each remaining slot a private copy of its ad with the
  per-cycle attributes policy expressions read (``RemoteUserPrio``,
  ``RemoteUserResourcesInUse``, ``RemoteGroup``);
* :meth:`~ClaimedSearch.best` finds, for a request, the best claimed slot it may take, with
  the key the cycle compares against the best idle slot's (smaller is better). The slots
  that match a request and their ranks are computed once per request and kept on it.
"""

from __future__ import annotations

from htc.classad import ClassAd
from htc.classad.match import rank, symmetric_match
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.preemption import (PreemptState, Rejection, as_rank, decide_preemption,
                                               submitter_limit_permits)
from htc.daemons.negotiator.search import RequestState
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.slotreads import eval_rank, fast_read, number
from htc.daemons.negotiator.slots import Slot, SlotPool
from htc.daemons.negotiator.submitters import accounting_group_of
from htc.daemons.negotiator.updown import entity_of, updown_may_preempt

__all__ = ["ClaimedSearch"]


class ClaimedSearch:
    """The claimed slots' side of one cycle (see the module docstring).

    Args:
        settings: the negotiator's settings (policy expressions, preemption knobs).
        accountant: the pool's accountant, for the running users' priorities.
        now: the cycle's time (a running job's retirement is counted from it).
    """

    def __init__(self, settings: NegotiatorSettings, accountant: Accountant, now: float):
        self.s = settings
        self.acct = accountant
        self.now = now
        self.prank = settings.compiled("preemption_rank")
        self.preq = settings.compiled("preemption_requirements")
        self.updown = settings.updown_policy
        self._never_priority = settings.never_priority_preempts  # read once, not per slot

    # ------------------------------------------------------------------ set-up

    def may_preempt(self, slot: Slot) -> bool:
        """Can this claimed slot ever be a candidate this cycle? (cheap pre-filter)"""
        if not self.s.consider_preemption:
            return False
        if slot.activity.lower() == "idle":
            return False  # claimed but idle: its schedd is about to reuse the claim
        if not self._never_priority:
            return True
        # Only rank preemption is possible: impossible when RANK is a constant <= CurrentRank.
        ad = slot.ad
        exprs = getattr(ad, "_exprs", None)
        rank = fast_read(exprs, ad, "rank", "Rank", 0.0)
        current = fast_read(exprs, ad, "preemptingrank", "PreemptingRank")
        if current is None:
            current = fast_read(exprs, ad, "currentrank", "CurrentRank", 0.0)
        if isinstance(rank, (int, float)) and isinstance(current, (int, float)):
            return rank > current
        return True

    def prepare(self, slot: Slot) -> None:
        """Give ``slot`` a private ad with the per-cycle attributes of its running user."""
        ad = slot.ad.copy()
        user = slot.remote_user
        ad["RemoteUserPrio"] = self.acct.effective_priority(user)
        ad["RemoteUserResourcesInUse"] = self.acct.weighted_resources_used(user)
        group = accounting_group_of(user, self.s.accountant.group_names)
        ad["RemoteGroup"] = group if group is not None else "<none>"
        if "PreemptingRank" in ad:
            ad["CurrentRank"] = ad["PreemptingRank"]  # a new preemptor must beat the pending one
        if self.updown:
            schedd = ad.get("ClientMachine")
            entity = entity_of(user, schedd if isinstance(schedd, str) else user, self.s.updown)
            ad["RemoteUpDownIndex"] = self.acct.updown.index(entity)
        slot.ad = ad

    def _victim_order(self, slot: Slot, job: ClassAd) -> float | tuple[float, float]:
        """PREEMPTION_RANK's part of the key, or under UPDOWN (largest index, least runtime)."""
        if not self.updown:
            return eval_rank(self.prank, slot.ad, job) if self.prank is not None else 0.0
        start = number(slot.ad, "JobStart")
        runtime = (self.now - start) if start is not None else number(slot.ad, "TotalJobRuntime", 0.0)
        return (number(slot.ad, "RemoteUpDownIndex", 0.0), -(runtime or 0.0))

    def _updown_allows(self, slot_ad: ClassAd, rs: RequestState) -> bool:
        me = entity_of(rs.entry.ad.name, rs.entry.ad.schedd, self.s.updown)
        return updown_may_preempt(self.acct.updown.index(me),
                                  number(slot_ad, "RemoteUpDownIndex", 0.0))

    # ------------------------------------------------------------------ the search

    def candidates(self, rs: RequestState, pool: SlotPool) -> list:
        """Claimed slots that match ``rs`` with their rank key parts (computed once)."""
        out = []
        job = rs.job
        for slot in pool.claimed:
            ad = slot.ad
            if not symmetric_match(job, ad):
                continue
            parts = (eval_rank(self.s.compiled("pre_job_rank"), ad, job), rank(job, ad),
                     eval_rank(self.s.compiled("post_job_rank"), ad, job),
                     self._victim_order(slot, job))
            new_rank = as_rank(ad.eval("Rank", job)) if "Rank" in ad else 0.0
            out.append((slot, parts, new_rank))
        return out

    def best(self, rs: RequestState, pool: SlotPool, used: float, limit: float, only_rank: bool,
             reasons: set[Rejection]):
        """Find the best claimed slot ``rs`` may take within the submitter's ``limit``.

        Args:
            rs: the request.
            pool: the cycle's slots.
            used, limit: the slot weight the submitter took this spin, and its limit (priority
                preemption must fit in it; rank preemption need not).
            only_rank: the submitter is over its limit: only rank preemption is allowed.
            reasons: collects why candidates were refused.

        Returns:
            ``(candidate, key, matched_any)``: candidate is ``(slot, PreemptState, cost, None)``
            or None, key its sort key (smaller is better), and ``matched_any`` whether any
            untaken claimed slot matched the request at all.
        """
        if rs.claimed is None:
            rs.claimed = self.candidates(rs, pool)
        best = best_key = None
        matched_any = False
        for slot, (pre, jr, post, prank), new_rank in rs.claimed:
            if slot.taken:
                continue
            matched_any = True
            verdict = decide_preemption(
                submitter=rs.entry.ad.name, remote_user=slot.remote_user,
                new_rank=new_rank,
                current_rank=number(slot.ad, "CurrentRank", 0.0),
                preemption_requirements=(
                    (lambda ad=slot.ad: self._updown_allows(ad, rs)) if self.updown
                    else (lambda ad=slot.ad: self._preq_true(ad, rs.job))),
                retirement_remaining=self._retirement(slot),
                consider_early_preemption=self.s.consider_early_preemption,
                only_rank=only_rank)
            if verdict.state is None:
                reasons.add(verdict.rejection)
                continue
            cost = slot.weight
            if (verdict.state is PreemptState.PRIORITY
                    and not submitter_limit_permits(used, limit, cost)):
                reasons.add(Rejection.SUBMITTER_LIMIT)
                continue
            victim = tuple(-x for x in prank) if self.updown else -prank
            key = (-pre, -jr, -post, -verdict.state, victim, slot.name)
            if best_key is None or key < best_key:
                best, best_key = (slot, verdict.state, cost, None), key
        return best, best_key, matched_any

    def _preq_true(self, slot_ad: ClassAd, job: ClassAd) -> bool:
        if self.preq is None:
            return True  # unset PREEMPTION_REQUIREMENTS places no restriction
        return self.preq.eval(slot_ad, job) is True

    def _retirement(self, slot: Slot) -> float:
        remaining = number(slot.ad, "RetirementTimeRemaining")
        if remaining is not None:
            return remaining
        limit = number(slot.ad, "MaxJobRetirementTime")
        start = number(slot.ad, "JobStart")
        if limit is None or start is None:
            return 0.0
        return max(0.0, limit - (self.now - start))
