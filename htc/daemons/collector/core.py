"""The collector: the pool's directory of ads (machines, schedds, submitters, daemons).

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
"""

from __future__ import annotations

import heapq
import logging
import os
import socket
from dataclasses import dataclass

from htc.classad import ClassAd, ClassAdParseError, ExprTree
from htc.daemons import core as c
from htc.daemons.service import DaemonPaths, DaemonService, load_daemon_config
from htc.wire import messages as m

Key = tuple[m.AdType, str, str]


@dataclass(frozen=True)
class CollectorSettings:
    """What the collector core needs from the configuration (names are HTCondor's knobs)."""

    name: str = "collector"             # COLLECTOR_NAME (the Name of its own ad)
    address: str = "collector"          # where daemons and tools reach it
    machine: str = "localhost"          # the host it runs on
    classad_lifetime: float = 900.0     # CLASSAD_LIFETIME
    update_interval: float = 900.0      # COLLECTOR_UPDATE_INTERVAL
    pid: int = 0


@dataclass
class StoredAd:
    """One ad as the collector keeps it."""

    ad: ClassAd
    text: str
    expires_at: float


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
        if isinstance(event, c.Started):
            self.started_at = now
            out.append(c.Log(f"collector {self.settings.name!r} (pid {self.settings.pid}) ready"))
            self._advertise_self(now)
        elif isinstance(event, c.Tick):
            self._expire(now, out)
            if self.next_self_ad_at is not None and self.next_self_ad_at <= now:
                self._advertise_self(now)
        elif isinstance(event, c.Received):
            self._request(event, now, out)
        elif isinstance(event, c.StopRequested):
            out.append(c.Log("collector shutting down"))
            out.append(c.Exit(0))
        elif isinstance(event, c.Reconfigured):
            if event.settings is not None:
                self.ads.pop(_key(m.AdType.Collector, self.settings.name, ClassAd()), None)
                self.settings = event.settings
                self._advertise_self(now)
        elif isinstance(event, (c.SendDone, c.SendFailed)):
            pass
        else:
            raise TypeError(f"collector: unexpected event {event!r}")
        return out

    # --- requests ---------------------------------------------------------------------------------

    def _request(self, event: c.Received, now: float, out: list[c.Action]) -> None:
        msg = event.msg
        if isinstance(msg, m.UpdateAd):
            out.append(self._update(event, msg, now))
        elif isinstance(msg, m.QueryAds):
            out.append(self._query(event, msg, now))
        elif isinstance(msg, m.InvalidateAd):
            out.append(self._invalidate(event, msg, out))
        else:
            out.append(c.unknown_request(event, "collector"))

    def store(self, ad_type: m.AdType, name: str, ad: ClassAd, lifetime: float, now: float) -> None:
        """Keep ``ad`` (already checked) until ``now + lifetime``."""
        ad["LastHeardFrom"] = int(now)
        key = _key(ad_type, name, ad)
        stored = StoredAd(ad=ad, text=str(ad), expires_at=now + lifetime)
        self.ads[key] = stored
        heapq.heappush(self._expiry, (stored.expires_at, key))

    def _update(self, event: c.Received, msg: m.UpdateAd, now: float) -> c.Action:
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

    def _query(self, event: c.Received, msg: m.QueryAds, now: float) -> c.Action:
        try:
            constraint = ExprTree(msg.constraint) if msg.constraint.strip() else None
        except ClassAdParseError as exc:
            return c.bad_request(event, f"the constraint is not a ClassAd expression: {exc}")
        texts = []
        for key in sorted(self.ads, key=lambda k: (k[0].value, k[1], k[2])):
            stored = self.ads[key]
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

    def _invalidate(self, event: c.Received, msg: m.InvalidateAd, out: list[c.Action]) -> c.Action:
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

    def self_ad(self, now: float) -> ClassAd:
        """The collector's own ad, with pool totals as HTCondor's collector ad names them."""
        totals = {"HostsTotal": 0, "HostsClaimed": 0, "HostsUnclaimed": 0, "HostsOwner": 0,
                  "RunningJobs": 0, "IdleJobs": 0, "SubmitterAds": 0}
        for (ad_type, _, _), stored in self.ads.items():
            if ad_type is m.AdType.Startd:
                totals["HostsTotal"] += 1
                state = stored.ad.eval("State") if "State" in stored.ad else None
                if state in ("Claimed", "Unclaimed", "Owner"):
                    totals[f"Hosts{state}"] += 1
            elif ad_type is m.AdType.Submitter:
                totals["SubmitterAds"] += 1
                for attr in ("RunningJobs", "IdleJobs"):
                    value = stored.ad.eval(attr) if attr in stored.ad else 0
                    if isinstance(value, int) and not isinstance(value, bool):
                        totals[attr] += value
        from htc import __version__

        return ClassAd({
            "MyType": m.AdType.Collector.value,
            "Name": self.settings.name,
            "Machine": self.settings.machine,
            "MyAddress": self.settings.address,
            "CollectorPid": self.settings.pid,
            "DaemonStartTime": int(self.started_at if self.started_at is not None else now),
            "UpdateInterval": int(self.settings.update_interval),
            "UpdatesTotal": self.updates_total,
            "CondorVersion": f"$CondorVersion: htc {__version__} $",
            **totals,
        })


# --- the service ----------------------------------------------------------------------------------


def settings_from_config(config, address: str = "collector") -> CollectorSettings:
    """Build the collector's settings from the configuration (COLLECTOR subsystem)."""
    host = socket.getfqdn()
    name = config.param("COLLECTOR_NAME") or f"collector@{host}"
    return CollectorSettings(
        name=str(name),
        address=address,
        machine=host,
        classad_lifetime=float(config.param("CLASSAD_LIFETIME")),
        update_interval=float(config.param("COLLECTOR_UPDATE_INTERVAL")),
        pid=os.getpid(),
    )


def make_service(paths: DaemonPaths) -> DaemonService:
    """The collector's service for the pool at ``paths`` (used by ``python -m htc.daemons``).

    Raises:
        UsageError: the configuration is broken.
    """
    def settings() -> CollectorSettings:
        return settings_from_config(load_daemon_config("COLLECTOR"))

    return DaemonService("collector", Collector(settings()), paths.transport(),
                         log_file=paths.log_file("collector"), reload_settings=settings)
