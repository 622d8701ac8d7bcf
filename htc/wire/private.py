"""Private attributes: secrets an ad carries that only the daemons that need them may see.

Theory of operation
-------------------
A claim id is a capability: whoever presents it may activate the claim, run a job on the slot or
release it. HTCondor therefore keeps ``ClaimId`` (and ``Capability``, ``ClaimIdList``,
``ChildClaimIds``, ``PairedClaimId``, ``TransferKey``, ``TransferSocket`` and every
``_condor_priv...`` attribute) *private*: the collector hands them only to a NEGOTIATOR-level
query, and ``condor_q``/``condor_history`` never show them. htc does the same:

* the collector strips private attributes from every ad it answers with (and evaluates the
  query's constraint on the stripped ad), unless the query asks for them (``QueryAds.private``,
  HTCondor's QUERY_STARTD_PVT_ADS), which needs NEGOTIATOR: only the negotiator asks, so not even
  root's ``htc status -long`` shows a ClaimId;
* the schedd answers ``QueryJobs`` with stripped ads and, for a constraint that could read a
  private attribute (:func:`may_read_private`), evaluates it on stripped ads too, so a
  constraint cannot be used as an oracle (``regexp("^a", ClaimId)``);
* the job queue drops private attributes when a job moves to the history, and when reading it;
* daemon logs show a claim id only without its secret part (``short_claim_id``).

Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

__all__ = ["PRIVATE_ATTRIBUTES", "is_private", "may_read_private", "public"]

#: attribute names (lower case) HTCondor keeps private (ClassAdPrivateAttrs), plus htc's own none
PRIVATE_ATTRIBUTES = frozenset({"claimid", "capability", "claimidlist", "childclaimids", "pairedclaimid",
                                "transferkey", "transfersocket"})
_PRIV_PREFIX = "_condor_priv"

# a constraint may reach an attribute without naming it: eval() of a built name, a record
# subscript, or a whole-record reference (MY, TARGET) handed to a function
_DYNAMIC = re.compile(r"\beval\s*\(|\[|\b(?:my|target)\b(?!\s*\.)", re.IGNORECASE)

V = TypeVar("V")


def is_private(name: str) -> bool:
    """Whether attribute ``name`` is private (case-insensitive, as ClassAd names are)."""
    low = name.lower()
    return low in PRIVATE_ATTRIBUTES or low.startswith(_PRIV_PREFIX)


def public(ad: Mapping[str, V]) -> dict[str, V]:
    """``ad`` without its private attributes (:func:`is_private`, inlined: a job's whole ad
    goes through here as it moves to the history)."""
    private, prefix = PRIVATE_ATTRIBUTES, _PRIV_PREFIX
    return {k: v for k, v in ad.items() if (low := k.lower()) not in private and not low.startswith(prefix)}


def may_read_private(constraint: str) -> bool:
    """Whether ``constraint`` could depend on a private attribute: it names one, or reaches
    attributes dynamically (``eval``, subscripts, whole-record references). False means its value
    is the same with or without the private attributes."""
    low = constraint.lower()
    if any(name in low for name in PRIVATE_ATTRIBUTES) or _PRIV_PREFIX in low:
        return True
    return _DYNAMIC.search(constraint) is not None
