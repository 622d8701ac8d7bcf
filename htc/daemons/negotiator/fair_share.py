"""Fair share: each submitter's slice of the pool, and the order in which submitters negotiate.

The accountant (:mod:`htc.daemons.negotiator.accountant`) says how much each submitter has used (its
effective priority, EUP); this module turns the EUPs of one negotiation spin into pie slices
(share of the pool proportional to 1/EUP, minus what the submitter holds) and into the order
of the cycle -- the one place that decides who goes first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from htc.errors import UsageError

__all__ = ["PieSlice", "order_submitters", "pie_slices", "starvation_ratio"]

@dataclass(frozen=True)
class PieSlice:
    """A submitter's fair share in one spin of the pie."""

    share: float  # fraction of the pool, proportional to 1/EUP
    limit: float  # slot weight it may still gain this spin (share x pool - usage, >= 0)
    usage: float  # slot weight it holds now


def pie_slices(
    eups: Mapping[str, float], usage: Mapping[str, float], pool_weight: float
) -> dict[str, PieSlice]:
    """Divide the pool among submitters in inverse proportion to their EUP.

    This is HTCondor's ``calculateNormalizationFactor`` + ``calculateSubmitterLimit``::

        share_i = (1/EUP_i) / sum_j (1/EUP_j)
        limit_i = max(0, share_i * pool_weight - usage_i)

    Args:
        eups: effective priority of each submitter negotiating in this spin (each once).
        usage: slot weight each submitter holds now (missing means 0).
        pool_weight: total slot weight of the pool (claimed slots included).

    Returns:
        ``{submitter: PieSlice}``.

    Raises:
        UsageError: an EUP is not a positive number.
    """
    for name, eup in eups.items():
        if not (eup > 0 and math.isfinite(eup)):
            raise UsageError(f"effective priority of {name} must be a positive number, got {eup!r}")
    if not eups:
        return {}
    # Normalise by the largest EUP as HTCondor does, so huge factors (1e10) stay exact. The sum
    # is exactly rounded (fsum), so it does not depend on the order of ``eups``: the cycle
    # passes its submitters from a set, whose order changes with the process's hash seed.
    worst = max(eups.values())
    normal = math.fsum(worst / e for e in eups.values())
    out = {}
    for name, eup in eups.items():
        share = (worst / eup) / normal
        used = usage.get(name, 0.0)
        out[name] = PieSlice(share=share, limit=max(0.0, share * pool_weight - used), usage=used)
    return out


def starvation_ratio(usage: float, limit: float) -> float:
    """Return ``usage / (usage + limit)``: how much of its allocation a submitter holds."""
    allocated = usage + limit
    return usage / allocated if allocated > 0 else math.inf


def order_submitters(
    entries: Iterable[tuple[str, str]],
    eups: Mapping[str, float],
    slices: Mapping[str, PieSlice],
) -> list[tuple[str, str]]:
    """Return the order in which submitters negotiate: THE one place that decides it.

    HTCondor's ``submitterLessThan``: best (lowest) EUP first; among equal EUPs the one holding
    the smaller part of its allocation (starvation ratio) first; then by name and schedd so
    that the order is deterministic.

    Args:
        entries: ``(submitter, schedd)`` pairs, one per submitter ad.
        eups: effective priority by submitter.
        slices: this spin's pie slices by submitter.

    Returns:
        The entries, sorted.
    """

    def key(entry: tuple[str, str]):
        name, schedd = entry
        pie = slices.get(name)
        starving = starvation_ratio(pie.usage, pie.limit) if pie else math.inf
        return (eups[name], starving, name, schedd)

    return sorted(entries, key=key)
