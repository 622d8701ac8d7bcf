"""The startd's ads: ClassAd text in and out, and publishing each slot's ad to the collector.

Theory of operation
-------------------
Ad text crosses the wire as new-syntax ClassAds: :func:`ad_text` writes a core ad,
:func:`parse_ad` and :func:`parse_job` read one (the latter evaluates the ``Request*``
resources in the job's own scope), :func:`evaluated` gives a starter plain values.

Each slot ad goes to the collector on change and every UPDATE_INTERVAL. Updates of one
slot are sent one at a time, newest last, so that a slow send cannot overtake a newer one;
a failed send is retried after ``retry_interval``. A claimed slot whose activity alone
changed (Busy, Idle, Busy again as a schedd runs job after job on its claim) sends only its
newest ad, ``claimed_update_delay`` (1 s) later: every state change still goes out at once.
Once the collector has taken an ad in which an unclaimed slot offers more than before, the
negotiator is sent a Reschedule. Each ad carries ``UpdateSequenceNumber`` and
``DaemonStartTime`` (which report this is) and ``ClaimId``, the id the
negotiator hands to the schedd in MatchNotify: a private attribute, which the collector gives
only to the negotiator's private query (:mod:`htc.wire.private`).

The publishing is :class:`SlotAds`, an object the wire adapter
(:class:`~htc.daemons.startd.adapter.StartdDaemon`) holds: the adapter hands it the core's
``AdvertiseSlot``/``InvalidateSlot``, the ``("ad", slot)`` deliveries, the time and its
shutdown.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from htc.classad import ClassAd, ExprTree
from htc.daemons import core as c
from htc.daemons.startd import events as ev
from htc.daemons.startd.settings import StartdServiceSettings
from htc.wire import messages as m

__all__ = ["REQUEST_ATTRS", "SlotAds", "ad_text", "evaluated", "job_id_of", "parse_ad", "parse_job"]


def ad_text(ad: dict[str, Any]) -> str:
    """A core ad (name -> value or ExprTree) as new-syntax ClassAd text."""
    return str(ClassAd({k: v for k, v in ad.items() if v is not None}))


#: job attributes the core reads as numbers; submit writes some as expressions over the job
#: (``RequestDisk = MAX({1024, (TransferInputSizeMB + 1) * 1.25}) * 1024``)
REQUEST_ATTRS = ("RequestCpus", "RequestMemory", "RequestDisk", "AllowedExecuteDuration")


def parse_ad(text: str) -> dict[str, Any]:
    """Wire ClassAd text as the core's plain dict (expressions stay expressions).

    Raises:
        ClassAdParseError: the text is not a ClassAd.
    """
    ad = ClassAd(text)
    return {key: ad[key] for key in ad}


def parse_job(text: str) -> dict[str, Any]:
    """A job ad for the core: as :func:`parse_ad`, with the ``Request*`` resources evaluated
    in the job's own scope (the core evaluates expressions without one).

    Raises:
        ClassAdParseError: the text is not a ClassAd.
    """
    ad = ClassAd(text)
    job = {key: ad[key] for key in ad}
    for name in REQUEST_ATTRS:
        if isinstance(job.get(name), ExprTree):
            value = ad.eval(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                job[name] = value
    return job


def evaluated(ad: dict[str, Any]) -> dict[str, Any]:
    """The ad with every expression evaluated in its own scope (what a starter reads)."""
    whole = ClassAd(ad)
    out = {}
    for key, value in ad.items():
        if isinstance(value, ExprTree):
            value = whole.eval(key)
        if isinstance(value, (str, int, float, bool, list)):
            out[key] = value
    return out


def job_id_of(job: dict[str, Any]) -> str:
    """``cluster.proc`` of a job ad (``0.0`` when it names none)."""
    cluster, proc = job.get("ClusterId"), job.get("ProcId", 0)
    if isinstance(cluster, int) and isinstance(proc, int) and cluster >= 0 and proc >= 0:
        return f"{cluster}.{proc}"
    return "0.0"


class SlotAds:
    """The startd's slot ads on their way to the collector (see the module docstring).

    Args:
        settings: the service settings (the adapter replaces them on reconfig).
        now: when the startd starts (``DaemonStartTime``).
    """

    def __init__(self, settings: StartdServiceSettings, now: float):
        self.settings = settings
        #: every ad is being withdrawn: the startd is on its way out
        self.withdrawing = False
        self._in_flight: set[str] = set()
        self._queued: dict[str, m.Message] = {}
        self._failed: dict[str, m.Message] = {}
        self._retry_at: float | None = None
        self._started_at = int(now)
        self._sequence = 0
        self._offers: dict[str, tuple[float, float]] = {}  # slot -> (Cpus, Memory) it offers unclaimed
        self._announce: set[str] = set()  # slots whose next delivered ad is news for the negotiator
        self._weight: tuple[str, ExprTree] | None = None  # SLOT_WEIGHT, parsed once
        self._told_state: dict[str, Any] = {}        # slot -> State of the last ad sent (or queued)
        # claimed slots' activity updates, newest only: their ads, made into text when they are sent
        # (most are superseded first: rendering a slot ad costs milliseconds per job start and end)
        self._deferred: dict[str, dict[str, Any]] = {}
        self._defer_until: float | None = None

    @property
    def in_flight(self) -> bool:
        """Some ad is on its way to the collector."""
        return bool(self._in_flight)

    @property
    def withdrawn(self) -> bool:
        """Every ad was withdrawn and the collector has taken (or refused) each withdrawal."""
        return self.withdrawing and not self._in_flight

    def deadline(self) -> float | None:
        """When a held-back ad or a retry is due."""
        return min((t for t in (self._retry_at, self._defer_until) if t is not None), default=None)

    def advertise(self, a: ev.AdvertiseSlot, now: float, out: list[c.Action]) -> None:
        """Publish a slot's ad the core produced (or hold it back, if only its activity changed)."""
        ad = dict(a.ad)
        if a.claim_id:
            ad["ClaimId"] = a.claim_id
        # An expression, as HTCondor publishes it: a partitionable slot the negotiator carves
        # weighs what is left of it, not what it had.
        ad["SlotWeight"] = self._slot_weight()
        ad.setdefault("MyAddress", self.settings.address)
        # Which report this is: the negotiator holds back a slot it just matched until a
        # newer report comes (a p-slot may look the same again after a claim came and went).
        self._sequence += 1
        ad["UpdateSequenceNumber"] = self._sequence
        ad["DaemonStartTime"] = self._started_at
        self._note_offer(a.slot, ad)
        state = ad.get("State")
        if state == "Claimed" and self._told_state.get(a.slot) == "Claimed":
            # Only the activity changed (Busy <-> Idle as jobs come and go on a claim): the
            # newest such ad goes out claimed_update_delay later, not one per job start and end.
            self._deferred[a.slot] = ad
            if self._defer_until is None:
                self._defer_until = now + self.settings.claimed_update_delay
        else:
            self._deferred.pop(a.slot, None)
            self._told_state[a.slot] = state
            self._queue(a.slot, self._update(a.slot, ad), out)

    def _update(self, slot: str, ad: dict[str, Any]) -> m.UpdateAd:
        return m.UpdateAd(ad_type=m.AdType.Startd, name=slot, ad_text=ad_text(ad), lifetime=self.settings.ad_lifetime)

    def invalidate(self, a: ev.InvalidateSlot, out: list[c.Action]) -> None:
        """Withdraw the ad of a slot that is gone."""
        self._offers.pop(a.slot, None)
        self._deferred.pop(a.slot, None)
        self._told_state.pop(a.slot, None)
        self._queue(a.slot, m.InvalidateAd(ad_type=m.AdType.Startd, name=a.slot), out)

    def _slot_weight(self) -> ExprTree:
        text = self.settings.slot_weight
        if self._weight is None or self._weight[0] != text:
            self._weight = (text, ExprTree(text))
        return self._weight[1]

    def _note_offer(self, slot: str, ad: dict[str, Any]) -> None:
        """Remember what an unclaimed slot offers; more than before is news for the negotiator.

        A slot that appears, or gets resources back (a dynamic slot returned to its p-slot, a
        claim ended), may run idle jobs the last cycle could not place: once the collector has
        its ad, the negotiator is asked for a cycle (Reschedule), rather than leaving the jobs
        to the next NEGOTIATOR_INTERVAL.
        """
        cpus, memory = ad.get("Cpus"), ad.get("Memory")
        if ad.get("State") != "Unclaimed" or not isinstance(cpus, (int, float)) or not isinstance(memory, (int, float)):
            self._offers.pop(slot, None)
            return
        before = self._offers.get(slot)
        if cpus > 0 and (before is None or cpus > before[0] or memory > before[1]):
            self._announce.add(slot)
        self._offers[slot] = (cpus, memory)

    def _queue(self, slot: str, msg: m.Message, out: list[c.Action]) -> None:
        self._failed.pop(slot, None)
        if slot in self._in_flight:
            self._queued[slot] = msg  # sent when the one in flight is done: order kept
        else:
            self._send(slot, msg, out)

    def _send(self, slot: str, msg: m.Message, out: list[c.Action]) -> None:
        self._in_flight.add(slot)
        out.append(c.Send(self.settings.collector, msg, cookie=("ad", slot), timeout=10.0))

    def delivered(self, e: Any, slot: str, ok: bool, now: float, out: list[c.Action], *, stopping: bool) -> None:
        """The collector took (``ok``) or did not take the ad of ``slot``; ``stopping``: the startd
        is shutting down (no Reschedule then)."""
        self._in_flight.discard(slot)
        if ok and slot in self._announce and isinstance(e.msg, m.UpdateAd) and not stopping:
            self._announce.discard(slot)
            out.append(c.Send(self.settings.negotiator, m.Reschedule(), cookie=("reschedule", slot),
                              timeout=10.0))
        if not ok and slot not in self._queued and not self.withdrawing:
            self._failed[slot] = e.msg
            self._retry_at = now + self.settings.retry_interval
            out.append(c.Log(f"cannot update the collector about {slot}: {e.error}; retrying", logging.WARNING))
        queued = self._queued.pop(slot, None)
        if queued is not None:
            self._send(slot, queued, out)

    def flush(self, now: float, slots: Collection[str], out: list[c.Action]) -> None:
        """Send the held-back claimed-slot ads and retry failed sends whose time has come
        (``slots``: the slots that still exist)."""
        if self._defer_until is not None and now >= self._defer_until:
            self._defer_until = None
            deferred, self._deferred = self._deferred, {}
            for slot, ad in deferred.items():
                self._queue(slot, self._update(slot, ad), out)
        if self._retry_at is not None and now >= self._retry_at:
            self._retry_at = None
            for slot, msg in list(self._failed.items()):
                del self._failed[slot]
                if slot in slots or isinstance(msg, m.InvalidateAd):
                    self._queue(slot, msg, out)

    def withdraw(self, slots: Collection[str], out: list[c.Action]) -> None:
        """Queue an invalidation of every slot ad (after any update still on its way)."""
        self.withdrawing = True
        names = set(slots) | self._in_flight | set(self._queued) | set(self._failed)
        self._failed.clear()
        self._deferred.clear()
        self._defer_until = None
        for name in sorted(names):
            self._queue(name, m.InvalidateAd(ad_type=m.AdType.Startd, name=name), out)
