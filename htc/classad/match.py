"""Matchmaking helpers for the negotiator: symmetric match and Rank of one job against many slots.

Theory of operation
-------------------
A job and a machine match when each ad's ``Requirements`` is true evaluated with MY = that
ad and TARGET = the other (HTCondor's ``symmetricMatch``); a number counts as true when it
is non-zero, anything else (UNDEFINED, ERROR, strings) is no match.  ``Rank`` is evaluated
the same way; HTCondor treats a Rank that is not a number as 0.0.

The helpers take the compiled closures of the two Requirements and the job's Rank once
and reuse one evaluation context for every machine, so matching one job against thousands
of slots costs one closure call per expression per slot and no per-slot setup beyond
re-pointing the context.
"""

from __future__ import annotations

from collections.abc import Iterable

from htc.classad.ad import ClassAd
from htc.classad.ast import Literal
from htc.classad.compiler import compile_node
from htc.classad.context import Ctx, EvalFailed
from htc.classad.operators import is_true_for_match



def _fn(ad: ClassAd, lname: str):
    node = ad._exprs.get(lname)
    if node is None:
        return None
    return node.fn or compile_node(node)


def _run(fn, ctx: Ctx, my: ClassAd, target: ClassAd, lname: str):
    """Evaluate ``fn`` (the closure of ``my``'s attribute ``lname``) with TARGET = ``target``."""
    ctx.ad = my
    ctx.my = my
    ctx.target = target
    ctx.set_scopes(my, target)
    busy = ctx.busy
    key = (id(my), lname)
    busy.add(key)
    try:
        return fn(ctx)
    except (RecursionError, EvalFailed):
        from htc.classad.values import Error
        return Error
    finally:
        busy.discard(key)


def requirements_hold(ad: ClassAd, other: ClassAd) -> bool:
    """True when ``ad``'s Requirements is true with TARGET = ``other`` (missing: False)."""
    fn = _fn(ad, "requirements")
    if fn is None:
        return False
    return is_true_for_match(_run(fn, Ctx(ad, ad, other), ad, other, "requirements"))


def symmetric_match(job: ClassAd, machine: ClassAd) -> bool:
    """True when the job's and the machine's Requirements both hold against each other."""
    return requirements_hold(job, machine) and requirements_hold(machine, job)


def rank(ad: ClassAd, other: ClassAd) -> float:
    """``ad``'s Rank against ``other`` as a float (missing or non-numeric Rank: 0.0)."""
    fn = _fn(ad, "rank")
    if fn is None:
        return 0.0
    v = _run(fn, Ctx(ad, ad, other), ad, other, "rank")
    return _as_rank(v)


def _as_rank(v) -> float:
    t = v.__class__
    if t is int or t is float or t is bool:
        return float(v)
    return 0.0


def match_many(job: ClassAd, machines: Iterable[ClassAd]) -> list[tuple[ClassAd, float]]:
    """Machines that symmetrically match ``job``, each with the job's Rank of it.

    Args:
        job: the job ad.
        machines: candidate machine (slot) ads.
    Returns:
        ``(machine, rank)`` for every matching machine, in input order; sort by rank
        (descending) to pick the best, as the negotiator does.
    """
    job_req = _fn(job, "requirements")
    if job_req is None:
        return []
    job_rank = _fn(job, "rank")
    ctx = Ctx(job, job, None)
    busy = ctx.busy
    jkey = (id(job), "requirements")
    rkey = (id(job), "rank")
    out = []
    append = out.append
    try:
        for m in machines:
            ctx.set_scopes(job, m)  # the pair HTCondor's MatchClassAd would hold
            # the job's Requirements against this machine
            ctx.ad = ctx.my = job
            ctx.target = m
            busy.add(jkey)
            v = job_req(ctx)
            busy.discard(jkey)
            if v is not True and not is_true_for_match(v):
                continue
            mreq = m._exprs.get("requirements")
            if mreq is None:
                continue
            if mreq.__class__ is Literal:
                v = mreq.value
            else:
                mkey = (id(m), "requirements")
                ctx.ad = ctx.my = m
                ctx.target = job
                busy.add(mkey)
                v = (mreq.fn or compile_node(mreq))(ctx)
                busy.discard(mkey)
            if v is not True and not is_true_for_match(v):
                continue
            if job_rank is None:
                append((m, 0.0))
                continue
            ctx.ad = ctx.my = job
            ctx.target = m
            busy.add(rkey)
            r = job_rank(ctx)
            busy.discard(rkey)
            append((m, _as_rank(r)))
    except RecursionError:
        busy.clear()
        raise
    return out


def best_match(job: ClassAd, machines: Iterable[ClassAd]) -> tuple[ClassAd, float] | None:
    """The matching machine with the highest job Rank (first one on ties), or None."""
    best = None
    for m, r in match_many(job, machines):
        if best is None or r > best[1]:
            best = (m, r)
    return best
