"""HTCondor's ``negotiate``: one submitter's requests matched, slot by slot, in one spin.

Theory of operation
-------------------
:func:`negotiate_entry` takes a submitter's requests in the schedd's order; for each it asks
:func:`find_best` for the best candidate (an idle slot from the cycle's search,
:class:`~.vsearch.VectorSearch`, or a claimed slot it may preempt,
:class:`~.claimed.ClaimedSearch`) and makes the match, until the request has no job left,
the submitter reaches its limit (it stays for the pie's next spin: ``resume``) or nothing
matches (the next request). What these read and change of the cycle is the cycle's state
(``cycle``: :class:`~.cycle._Cycle`, whose pie spins call :func:`negotiate_entry`): its
searches, its free-slot count, the pie left, its rejections, its matches (through
``cycle.make_match`` and the search's commits).

A vector turn's carve and the run after it are one call (:meth:`~.vsearch.VectorSearch.take`,
see :mod:`.runs`), and so are the request's next slots while each is a vector turn too: the
search takes them from the request's queue without a turn here; the float additions of one match after another (``used``, the pie left) are
made here.
"""

from __future__ import annotations

from htc.daemons.negotiator.preemption import PreemptState, Rejection
from htc.daemons.negotiator.search import RequestState
from htc.daemons.negotiator.slots import SlotPool

#: what :func:`negotiate_entry` returns: the submitter is done for this cycle, or it stays for
#: the pie's next spin
MM_DONE, MM_RESUME = "done", "resume"


def negotiate_entry(cycle, entry, pool: SlotPool, limit: float,
                    limit_unclaimed: float, ignore_limit: bool,
                    max_matches: int | None = None) -> str:
    """HTCondor's ``negotiate``: match one submitter's requests until done or limited
    (or, under UPDOWN's throttle, until ``max_matches`` matches)."""
    used = used_unclaimed = 0.0
    limited = False
    made = 0
    for rs in entry.requests:
        while rs.remaining > 0:
            if cycle.free <= 0:
                return MM_DONE if not limited else MM_RESUME
            if max_matches is not None and made >= max_matches:
                return MM_RESUME
            only_rank = False
            if used >= limit:
                if not ignore_limit:
                    return MM_RESUME
                only_rank = True
            try:
                found = find_best(cycle, rs, pool, used, used_unclaimed, limit, limit_unclaimed,
                                  only_rank)
            except Exception as exc:  # noqa: BLE001 - see _Cycle.skip
                cycle.skip(entry, rs.request, exc, rs)
                break
            if isinstance(found, Rejection):
                cycle.rejections += 1
                cycle.reasons[found.value] += 1
                if found is Rejection.SUBMITTER_LIMIT:
                    limited = True
                    cycle.share_limited.add(entry.ad.name)
                    if not cycle.s.consider_preemption and not cycle.s.use_slot_weights:
                        return MM_RESUME
                break
            slot, state, cost, carve = found
            if carve is not None and state is PreemptState.NONE:
                # a vector turn's carve and its run, at once, and the request's next slots
                # while each is one vector turn too (VectorSearch.take)
                taken = cycle.search.take(cycle, rs, pool, slot, cost, carve, used, limit,
                                          used_unclaimed, limit_unclaimed,
                                          None if max_matches is None else max_matches - made)
                if taken:
                    # the float additions of one match after another (the pie left in a
                    # local meanwhile: nothing else reads it between them)
                    pie_left = cycle.pie_left
                    for n, cost in taken:
                        made += n
                        for _ in range(n):
                            used += cost
                            used_unclaimed += cost
                            pie_left -= cost
                    cycle.pie_left = pie_left
                    continue
            cycle.make_match(rs, pool, slot, state, cost, carve)
            made += 1
            used += cost
            if state is PreemptState.NONE:
                used_unclaimed += cost
            cycle.pie_left -= cost
            if carve is not None and state is PreemptState.NONE:
                # the next jobs of a run from the held p-slot, at once (:mod:`.runs`)
                for _ in range(cycle.search.extend(
                        cycle, rs, pool, slot, cost, carve, used, limit, used_unclaimed,
                        limit_unclaimed, None if max_matches is None else max_matches - made)):
                    made += 1
                    used += cost
                    used_unclaimed += cost
                    cycle.pie_left -= cost
    return MM_RESUME if (used >= limit or limited) else MM_DONE


def find_best(cycle, rs: RequestState, pool: SlotPool, used: float, used_unclaimed: float,
              limit: float, limit_unclaimed: float, only_rank: bool):
    """Return ``(slot, state, cost, carve)`` of the best candidate, or the Rejection."""
    best = None
    best_key = None
    reasons: set[Rejection] = set()
    matched_any = False
    if not only_rank:
        found, matched_any, limited = cycle.search.best(rs, pool, used_unclaimed,
                                                        limit_unclaimed)
        if limited:
            reasons.add(Rejection.SUBMITTER_LIMIT)
        if found is not None:
            best_key, slot, cost, carve = found
            best = (slot, PreemptState.NONE, cost, carve)
    if pool.claimed and not (best is not None and cycle.s.updown_policy):
        # (Up-Down preempts only when no idle machine will do)
        found, key, matched = cycle.claimed.best(rs, pool, used, limit, only_rank, reasons)
        matched_any = matched_any or matched
        if found is not None and (best_key is None or key < best_key):
            best, best_key = found, key
    if best is not None:
        return best
    if only_rank:
        return Rejection.SUBMITTER_LIMIT  # over the limit: only rank preemption was allowed
    if not matched_any:
        return Rejection.NO_MATCH
    for reason in (Rejection.SUBMITTER_LIMIT, Rejection.PREEMPTION_REQUIREMENTS,
                   Rejection.MACHINE_RANK, Rejection.RETIREMENT):
        if reason in reasons:
            return reason
    return Rejection.NO_MATCH


def after_matches(cycle, rs, made, used: float, used_u: float, budget, limit: float):
    """``(used, used_u, budget, more)`` after the matches ``made`` (``[(n, cost), ...]``) of a
    request visit made without a turn here (:meth:`~.vsearch.VectorSearch.take`'s chain, the
    fill's passes): :func:`negotiate_entry`'s float additions, one match after another, and
    ``more``: whether its tests before a turn let the request's next turn come (else it
    decides what follows)."""
    for n, cost in made:
        for _ in range(n):
            used += cost
            used_u += cost
        if budget is not None:
            budget -= n
    more = not (rs.remaining <= 0 or cycle.free <= 0 or (budget is not None and budget <= 0)
                or used >= limit)
    return used, used_u, budget, more
