"""The collector's sans-IO core: the pool's directory of ads (machines, schedds, submitters, daemons).

Theory of operation
-------------------
Every daemon advertises itself with ``UpdateAd``; the collector keeps the latest ad per
``(type, Name)`` -- per ``(Name, ScheddName)`` for Submitter ads, as one user may submit from
several schedds -- and stamps it with ``LastHeardFrom``.  Each ad lives ``lifetime`` seconds (the
update's own, else the ad's ``ClassAdLifetime``, else CLASSAD_LIFETIME) and vanishes unless it is
refreshed: the collector holds soft state that the pool rebuilds by advertising, so it keeps
nothing on disk and a restarted collector is whole again within one update interval.

Expiry is driven by the clock: a heap orders ads by expiry time, ``next_deadline`` is its top,
and a :class:`~htc.daemons.core.Tick` drops what is due.  Replaced ads leave stale heap entries,
recognised by their expiry time and skipped.

``QueryAds`` evaluates its constraint against each ad of the type asked for (``Any``: every ad)
and keeps those for which it is true, as HTCondor does; a projection cuts each answer down to the
named attributes.  The collector advertises itself too (a Collector ad with pool totals) every
COLLECTOR_UPDATE_INTERVAL.

The collector has no state machine: an ad is either stored or not.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from dataclasses import dataclass

from htc.classad import ClassAd, ClassAdParseError, ExprTree
from htc.config.version import condor_version
from htc.daemons import core as c
from htc.daemons.collector.settings import CollectorSettings
from htc.wire import messages as m
from htc.wire.private import is_private

Key = tuple[m.AdType, str, str]


@dataclass
class StoredAd:
    """One ad as the collector keeps it."""

    ad: ClassAd
    text: str
    expires_at: float
    #: the ad without its private attributes (ClaimId), for queriers without NEGOTIATOR; None
    #: when it has none
    public: "StoredAd | None" = None


def _key(ad_type: m.AdType, name: str, ad: ClassAd) -> Key:
    schedd = ""
    if ad_type is m.AdType.Submitter:
        value = ad.eval("ScheddName") if "ScheddName" in ad else ""
        schedd = value if isinstance(value, str) else ""
    return (ad_type, name, schedd)


def _is_true(value: object) -> bool:
    """HTCondor's EvalBool: true, or a non-zero number."""
    if isinstance(value, bool):
        return value
    return isinstance(value, (int, float)) and value != 0


class Collector:
    """The collector's sans-IO core.

    Args:
        settings: the configuration it runs with (replaced on Reconfigured).
    """

    def __init__(self, settings: CollectorSettings):
        self.settings = settings
        self.ads: dict[Key, StoredAd] = {}
        self._expiry: list[tuple[float, Key]] = []
        self.next_self_ad_at: float | None = None
        self.started_at: float | None = None
        self.updates_total = 0

    # --- the core interface --------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The earliest ad expiry or self-advertisement."""
        while self._expiry:
            when, key = self._expiry[0]
            stored = self.ads.get(key)
            if stored is not None and stored.expires_at == when:
                break
            heapq.heappop(self._expiry)  # replaced or removed since: stale
        times = [t for t in (self._expiry[0][0] if self._expiry else None, self.next_self_ad_at) if t is not None]
        return min(times, default=None)

    def handle(self, event: c.Event, now: float) -> list[c.Action]:
        """Apply one event; return what the service must do."""
        out: list[c.Action] = []
        c.dispatch(_ON_EVENT, "collector", self, event, now, out)
        return out

    # --- events -----------------------------------------------------------------------------------

    def _on_started(self, event: c.Started, now: float, out: list[c.Action]) -> None:
        self.started_at = now
        out.append(c.Log(f"collector {self.settings.name!r} (pid {self.settings.pid}) ready"))
        self._advertise_self(now)

    def _on_tick(self, event: c.Tick, now: float, out: list[c.Action]) -> None:
        self._expire(now, out)
        if self.next_self_ad_at is not None and self.next_self_ad_at <= now:
            self._advertise_self(now)

    def _on_received(self, event: c.Received, now: float, out: list[c.Action]) -> None:
        on_request = _ON_REQUEST.get(type(event.msg))
        if on_request is None:
            out.append(c.unknown_request(event, "collector"))
            return
        out.append(on_request(self, event, now, out))

    def _on_stop_requested(self, event: c.StopRequested, now: float, out: list[c.Action]) -> None:
        out.append(c.Log("collector shutting down"))
        out.append(c.Exit(0))

    def _on_reconfigured(self, event: c.Reconfigured, now: float, out: list[c.Action]) -> None:
        if event.settings is not None:
            self.ads.pop(_key(m.AdType.Collector, self.settings.name, ClassAd()), None)
            self.settings = event.settings
            self._advertise_self(now)

    def _on_send_outcome(self, event: c.SendDone | c.SendFailed, now: float, out: list[c.Action]) -> None:
        pass  # the collector sends nothing

    # --- requests ---------------------------------------------------------------------------------

    def store(self, ad_type: m.AdType, name: str, ad: ClassAd, lifetime: float, now: float) -> None:
        """Keep ``ad`` (already checked) until ``now + lifetime``."""
        ad["LastHeardFrom"] = int(now)
        key = _key(ad_type, name, ad)
        stored = StoredAd(ad=ad, text=str(ad), expires_at=now + lifetime)
        hidden = [name for name in ad if is_private(name)]
        if hidden:
            public = ad.copy()
            for name in hidden:
                del public[name]
            stored.public = StoredAd(ad=public, text=str(public), expires_at=stored.expires_at)
        self.ads[key] = stored
        heapq.heappush(self._expiry, (stored.expires_at, key))

    def _update(self, event: c.Received, now: float, out: list[c.Action]) -> c.Action:
        msg: m.UpdateAd = event.msg
        try:
            ad = ClassAd(msg.ad_text)
        except ClassAdParseError as exc:
            return c.bad_request(event, f"the {msg.ad_type.value} ad {msg.name!r} is not a ClassAd: {exc}")
        for attr, wanted in (("MyType", msg.ad_type.value), ("Name", msg.name)):
            if attr in ad:
                have = ad.eval(attr)
                if have != wanted:
                    return c.bad_request(event, f"the ad's {attr} is {have!r} but the update says {wanted!r}; "
                                                "make them agree")
            else:
                ad[attr] = wanted
        lifetime = msg.lifetime
        if lifetime is None and "ClassAdLifetime" in ad:
            value = ad.eval("ClassAdLifetime")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                lifetime = value
        self.store(msg.ad_type, msg.name, ad, lifetime or self.settings.classad_lifetime, now)
        self.updates_total += 1
        return c.Reply(event.conn_id, m.Ack())

    def _query(self, event: c.Received, now: float, out: list[c.Action]) -> c.Action:
        msg: m.QueryAds = event.msg
        try:
            constraint = ExprTree(msg.constraint) if msg.constraint.strip() else None
        except ClassAdParseError as exc:
            return c.bad_request(event, f"the constraint is not a ClassAd expression: {exc}")
        if msg.ad_type in (m.AdType.Collector, m.AdType.Any) and self.started_at is not None:
            self._recount_self(now)
        texts = []
        privileged = msg.private  # the service has checked NEGOTIATOR for it (authz.level_for)
        for key in sorted(self.ads, key=lambda k: (k[0].value, k[1], k[2])):
            stored = self.ads[key]
            if not privileged and stored.public is not None:
                stored = stored.public  # constraint and answer see no ClaimId (htc.wire.private)
            if msg.ad_type is not m.AdType.Any and key[0] is not msg.ad_type:
                continue
            if stored.expires_at <= now:
                continue
            if constraint is not None and not _is_true(constraint.eval(stored.ad)):
                continue
            texts.append(self._project(stored, msg.projection))
            if msg.limit is not None and len(texts) >= msg.limit:
                break
        return c.Reply(event.conn_id, m.AdsReply(ads=tuple(texts)))

    @staticmethod
    def _project(stored: StoredAd, projection: tuple[str, ...]) -> str:
        if not projection:
            return stored.text
        cut = ClassAd()
        for attr in projection:
            if attr in stored.ad:
                cut[attr] = stored.ad.lookup(attr)
        return str(cut)

    def _invalidate(self, event: c.Received, now: float, out: list[c.Action]) -> c.Action:
        msg: m.InvalidateAd = event.msg
        if msg.name:
            doomed = [k for k in self.ads if k[1] == msg.name and msg.ad_type in (m.AdType.Any, k[0])]
        else:
            try:
                constraint = ExprTree(msg.constraint)
            except ClassAdParseError as exc:
                return c.bad_request(event, f"the constraint is not a ClassAd expression: {exc}")
            doomed = [k for k, s in self.ads.items()
                      if msg.ad_type in (m.AdType.Any, k[0]) and _is_true(constraint.eval(s.ad))]
        for key in doomed:
            del self.ads[key]
            out.append(c.Log(f"invalidated {key[0].value} ad {key[1]!r}"))
        return c.Reply(event.conn_id, m.Ack(detail=f"{len(doomed)} ad(s) removed"))

    # --- the clock --------------------------------------------------------------------------------

    def _expire(self, now: float, out: list[c.Action]) -> None:
        while self._expiry and self._expiry[0][0] <= now:
            when, key = heapq.heappop(self._expiry)
            stored = self.ads.get(key)
            if stored is None or stored.expires_at != when:
                continue
            del self.ads[key]
            heard = stored.ad.eval("LastHeardFrom")
            out.append(c.Log(f"{key[0].value} ad {key[1]!r} expired: not refreshed since "
                             f"{now - heard:.0f} s ago" if isinstance(heard, int) else
                             f"{key[0].value} ad {key[1]!r} expired", level=logging.INFO))

    def _advertise_self(self, now: float) -> None:
        self.next_self_ad_at = now + self.settings.update_interval
        self.store(m.AdType.Collector, self.settings.name, self.self_ad(now),
                   3 * self.settings.update_interval, now)

    def _recount_self(self, now: float) -> None:
        """Bring the totals of the collector's own ad up to ``now`` before a query reads it
        (HTCondor's are as of its last COLLECTOR_UPDATE_INTERVAL, up to 15 minutes old: a
        personal pool's ``htc status -collector`` would show none of the slots just started).
        The ad keeps its expiry; only its text changes."""
        stored = self.ads.get(_key(m.AdType.Collector, self.settings.name, ClassAd()))
        if stored is None:
            return
        ad = self.self_ad(now)
        ad["LastHeardFrom"] = stored.ad.eval("LastHeardFrom")
        stored.ad, stored.text = ad, str(ad)

    def self_ad(self, now: float) -> ClassAd:
        """The collector's own ad, with pool totals as HTCondor's collector ad names them
        (CollectorDaemon::sendCollectorAd): ``HostsTotal`` counts the slot ads that have a
        ``State`` and ``HostsClaimed``/``HostsUnclaimed``/``HostsOwner`` those in each state;
        ``RunningJobs``/``IdleJobs`` add up the Submitter ads that carry both numbers;
        ``MachineAds`` and ``SubmitterAds`` count the ads of each kind.  Only live ads count."""
        totals = {"HostsTotal": 0, "HostsClaimed": 0, "HostsUnclaimed": 0, "HostsOwner": 0,
                  "RunningJobs": 0, "IdleJobs": 0, "MachineAds": 0, "SubmitterAds": 0}
        for (ad_type, _, _), stored in self.ads.items():
            if stored.expires_at <= now:
                continue
            if ad_type is m.AdType.Startd:
                totals["MachineAds"] += 1
                state = stored.ad.eval("State") if "State" in stored.ad else None
                if isinstance(state, str):
                    totals["HostsTotal"] += 1
                    if state in ("Claimed", "Unclaimed", "Owner"):
                        totals[f"Hosts{state}"] += 1
            elif ad_type is m.AdType.Submitter:
                totals["SubmitterAds"] += 1
                counts = [stored.ad.eval(attr) if attr in stored.ad else None for attr in ("RunningJobs", "IdleJobs")]
                if all(isinstance(v, int) and not isinstance(v, bool) for v in counts):
                    totals["RunningJobs"] += counts[0]
                    totals["IdleJobs"] += counts[1]
        return ClassAd({
            "MyType": m.AdType.Collector.value,
            "Name": self.settings.name,
            "Machine": self.settings.machine,
            "MyAddress": self.settings.address,
            "CollectorPid": self.settings.pid,
            "DaemonStartTime": int(self.started_at if self.started_at is not None else now),
            "UpdateInterval": int(self.settings.update_interval),
            "UpdatesTotal": self.updates_total,
            "CondorVersion": condor_version(),
            **totals,
        })


_Handler = Callable[[Collector, c.Event, float, list[c.Action]], None]

#: event type -> what the collector does with it
_ON_EVENT: dict[type, _Handler] = {
    c.Started: Collector._on_started,
    c.Tick: Collector._on_tick,
    c.Received: Collector._on_received,
    c.StopRequested: Collector._on_stop_requested,
    c.Reconfigured: Collector._on_reconfigured,
    c.SendDone: Collector._on_send_outcome,
    c.SendFailed: Collector._on_send_outcome,
}

#: request message type -> the collector's answer to it (any other: ``unknown_request``); a
#: handler may put log lines in ``out`` before its reply
_ON_REQUEST: dict[type, Callable[[Collector, c.Received, float, list[c.Action]], c.Action]] = {
    m.UpdateAd: Collector._update,
    m.QueryAds: Collector._query,
    m.InvalidateAd: Collector._invalidate,
}
