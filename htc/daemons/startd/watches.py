"""Claim watches at the startd: the schedd's held keep-alive, whose connection closing means it is gone.

Theory of operation
-------------------
HTCondor's shadow keeps a connection open to its starter: when either process dies, the
kernel closes its end and the other side knows at once, instead of when the next keep-alive
goes unanswered (ALIVE_INTERVAL, five minutes by default). htc's starters live inside the
startd, so the schedd watches each of its claims the same way: it sends
``ClaimKeepAlive(claim_id, watch=W)`` and the startd *holds the answer* up to ``W`` seconds
(at most :data:`MAX_WATCH`). The held request is an ordinary keep-alive (it renews the claim's
lease when it arrives and again when it is answered), so a watched claim needs no other
keep-alives; the schedd sends the next watch as soon as one is answered.

* **The startd dies** (kill -9): its jobs die with it (``PR_SET_PDEATHSIG``), and the schedd's
  held request fails with ``closed`` at once; the schedd then asks once more and, finding
  nobody listening or a startd that no longer knows the claim, puts the job back to Idle
  (:mod:`htc.daemons.schedd.claims`).
* **The schedd dies**: the service sees the held request's connection close and feeds
  :class:`~htc.daemons.startd.events.WatchClosed`. A claim with no job, or a call
  lane's, ends at once (:class:`~htc.daemons.startd.events.ClaimantGone`): a restarted schedd
  runs a lane's calls again itself, and nobody else would ever use the claim. A claim running a
  job keeps it running within the claim lease (the job's ``JobLeaseDuration`` since the last
  keep-alive), so that the restarted schedd can reconnect to it, as HTCondor promises.

A claim granted to a schedd that dies before its first watch arrives (a claim request in
flight at the kill) would be watched by nobody: a claim with no job, or a call lane, that is
still unwatched :data:`UNWATCHED_GRACE` seconds after it was granted ends the same way (a
schedd sends its first watch right after the grant).

Only the uid that claimed the slot (the peer credentials of its RequestClaim, when the
transport knows them) may watch the claim: closing a watch can end a claim, and claim ids were
public in the slot ads before they were claimed.

A watch answered because its time is up gets ``Ack`` if the claim is still held and
``not_found`` if it ended meanwhile (the schedd has usually heard already, from the
ReleaseClaim or the job's exit report). A claim ending does not answer its watch early: the
exit report, not a keep-alive, tells the schedd how a job ended.

:class:`ClaimWatches` keeps the watches; the wire adapter
(:class:`~htc.daemons.startd.adapter.StartdDaemon`) holds one and decides what a closed or
missing watch means for the claim (it knows which claims run a job, and which a lane).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from htc.daemons import core as c
from htc.daemons.startd import events as ev
from htc.daemons.startd.reports import short_claim_id
from htc.wire import messages as m

__all__ = ["MAX_WATCH", "UNWATCHED_GRACE", "ClaimWatches", "Watch"]

#: the longest a startd holds a watch's answer (s): the connection then carries a message at
#: least this often, well within the 300 s after which a server closes a silent connection
MAX_WATCH = 60.0

#: a granted claim with no job (or a lane) that no watch has reached this long (s) after the
#: grant is released: the schedd that asked for it died before it could watch it
UNWATCHED_GRACE = 30.0


@dataclass
class Watch:
    """A held ClaimKeepAlive: answer on ``conn_id`` by ``until``."""

    claim_id: str
    conn_id: int
    until: float


class ClaimWatches:
    """The claim watches a startd holds, and the claims granted but not yet watched (see the
    module header). The wire adapter decides what a closed or missing watch means for a claim."""

    def __init__(self):
        self.watches: dict[str, Watch] = {}      # claim id -> its watch
        self._conns: dict[int, str] = {}         # connection -> the claim it watches
        self._unwatched: dict[str, float] = {}   # granted, not yet watched -> when granted
        self._claimant_uids: dict[str, int] = {}  # claim id -> the uid that claimed it (when known)

    def granted(self, claim_id: str, now: float, uid: int | None, live: Collection[str]) -> None:
        """``claim_id`` was granted to ``uid`` at ``now``; ``live``: the claims the startd holds."""
        self._unwatched[claim_id] = now
        for gone in [cid for cid in self._claimant_uids if cid not in live]:
            del self._claimant_uids[gone]
        if uid is not None:
            self._claimant_uids[claim_id] = uid

    def hold(self, e: c.Received, msg: m.ClaimKeepAlive, now: float, out: list[c.Action]) -> None:
        """Hold the answer to a keep-alive with ``watch`` (the claim is live: the core renewed it).

        Only the uid that claimed the slot may watch the claim: a watch that closes can end it.
        """
        owner, uid = self._claimant_uids.get(msg.claim_id), e.peer.uid if e.peer is not None else None
        if owner is not None and uid is not None and uid != owner:
            out.append(c.Reply(e.conn_id, m.ErrorReply(code="denied", message=(
                f"claim {short_claim_id(msg.claim_id)} was claimed by uid {owner}, not {uid}: only its "
                "claimant may watch it"))))
            return
        self._unwatched.pop(msg.claim_id, None)
        old = self.watches.pop(msg.claim_id, None)
        if old is not None:
            self._conns.pop(old.conn_id, None)
            out.append(c.Reply(old.conn_id, m.Ack(detail="a newer watch took over")))
        watch = Watch(msg.claim_id, e.conn_id, now + min(msg.watch, MAX_WATCH))
        self.watches[msg.claim_id] = watch
        self._conns[e.conn_id] = msg.claim_id
        out.append(ev.HoldWatch(e.conn_id))

    def deadline(self) -> float | None:
        """When a held watch is to be answered, or a granted claim's grace for its first watch ends."""
        times = [w.until for w in self.watches.values()]
        times += [granted + UNWATCHED_GRACE for granted in self._unwatched.values()]
        return min(times, default=None)

    def unwatched(self, now: float) -> list[str]:
        """The claims no watch reached within UNWATCHED_GRACE of their grant (forgotten here)."""
        due = [cid for cid, granted in self._unwatched.items() if granted + UNWATCHED_GRACE <= now]
        for claim_id in due:
            del self._unwatched[claim_id]
        return due

    def answer_due(self, now: float, live: Collection[str], renew: Callable[[str], None],
                   out: list[c.Action]) -> None:
        """Answer the watches whose time is up: ``Ack`` for a claim still ``live`` (renewed by
        ``renew`` first, like a keep-alive), ``not_found`` for one that ended."""
        for watch in [w for w in self.watches.values() if w.until <= now]:
            del self.watches[watch.claim_id]
            self._conns.pop(watch.conn_id, None)
            if watch.claim_id in live:
                renew(watch.claim_id)
                out.append(c.Reply(watch.conn_id, m.Ack(detail="still claimed")))
            else:
                out.append(c.Reply(watch.conn_id, m.ErrorReply(code="not_found", message=(
                    f"claim {short_claim_id(watch.claim_id)} ended; drop it"))))

    def closed(self, conn_id: int) -> str | None:
        """The connection of a held watch closed: the claim it watched, if that was its current
        watch (None: answered already, or superseded)."""
        claim_id = self._conns.pop(conn_id, None)
        watch = self.watches.get(claim_id) if claim_id is not None else None
        if watch is None or watch.conn_id != conn_id:
            return None
        del self.watches[claim_id]
        return claim_id
