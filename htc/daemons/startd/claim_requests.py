"""Claim requests waiting for their answer at the startd's wire adapter.

A RequestClaim is handed to the core at once, and usually answered within the same event: the
core accepts it (the slot is claimed) or refuses it, and the adapter replies on the request's
connection. A request that *preempts* a running claim (a better RANK, or a negotiator priority
preemption) is answered later, when the old claim's job is gone and the core hands the slot
over (transition I); meanwhile the request waits here, with the connection to answer on and the
uid that sent it (only that uid may later watch the claim: :mod:`htc.daemons.startd.watches`).
A claimant that gives up first (ReleaseClaim) takes its waiting request back.
"""

from __future__ import annotations

from dataclasses import dataclass

from htc.wire import messages as m

__all__ = ["ClaimRequests", "Pending"]


@dataclass(frozen=True)
class Pending:
    """A claim request not answered yet: answer on ``conn_id``; ``uid`` sent it (None: unknown)."""

    conn_id: int
    msg: m.RequestClaim
    uid: int | None


class ClaimRequests:
    """The request the core is handling now, and those waiting for a preempted slot."""

    def __init__(self):
        self.current: Pending | None = None
        self.waiting: dict[str, Pending] = {}   # requested claim id -> its request

    def begin(self, conn_id: int, msg: m.RequestClaim, uid: int | None) -> None:
        """The core is about to handle ``msg``, which came on ``conn_id`` from ``uid``."""
        self.current = Pending(conn_id, msg, uid)

    def end(self) -> Pending | None:
        """The core is through with the current request: if nothing answered it, it waits (and is returned)."""
        pending, self.current = self.current, None
        if pending is not None:
            self.waiting[pending.msg.claim_id] = pending
        return pending

    def answered(self, claim_id: str) -> Pending | None:
        """The core answered the request of ``claim_id`` (the current one, or one that waited)."""
        current = self.current
        if current is not None and (claim_id == current.msg.claim_id or claim_id not in self.waiting):
            self.current = None
            return current
        return self.waiting.pop(claim_id, None)

    def withdraw(self, claim_id: str) -> Pending | None:
        """The claimant released ``claim_id``: its waiting request, if one waits."""
        return self.waiting.pop(claim_id, None)
