"""The negotiator's service: the :class:`~htc.daemons.negotiator.core.Negotiator` core on real sockets.

Theory of operation
-------------------
The core already speaks the shared vocabulary (``Started``, ``Tick``, ``Received`` with the
wire's ``Reschedule``, ``StopRequested``, ``Reconfigured``). :class:`NegotiatorDaemon`, a thin
sans-IO adapter, turns the core's publishing actions into wire sends and keeps the outcome of
those sends away from the core; :class:`NegotiatorService` teaches
:class:`~htc.daemons.service.DaemonService` the actions that need I/O. Together:

============================  ====================================================================
``FetchPoolAds``              query the collector for every Machine ad and every Submitter ad;
                              feed ``PoolAds`` (or ``PoolAdsFailed``)
``AskResourceRequests``       ``GetResourceRequests`` to the submitter's schedd; feed
                              ``RequestsReceived`` (or ``RequestsFailed``)
``NotifyMatch``               ``MatchNotify`` to the schedd (which claims the slot itself) and,
                              with NEGOTIATOR_INFORM_STARTD, to the startd
``SaveAccountant``            write the accountant's snapshot to ACCOUNTANT_DATABASE_FILE as JSON,
                              atomically (temporary file, fsync, rename)
``PublishAccounting``         one Accounting ad per submitter to the collector (``htc userprio``)
``CycleFinished``             a log line, and the Negotiator ad with the cycle's statistics
============================  ====================================================================

Each I/O action runs as a task of the service's TaskGroup and comes back as one event, so the
core sees the world one event at a time. Answers that arrive after NEGOTIATOR_TIMEOUT belong
to a finished cycle; the core counts and ignores them.

When: every NEGOTIATOR_INTERVAL, and 10 ms after a ``Reschedule`` message (a schedd sends one
after a submit, as condor_reschedule does; a startd when a slot became free); the core
coalesces a burst of them into one cycle (see :mod:`htc.daemons.negotiator.core`, "When cycles
happen").

On start the accountant is restored from ACCOUNTANT_DATABASE_FILE (user priorities survive a
restart); a file that is not a snapshot stops the daemon with advice rather than silently
resetting everybody's priority.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from htc.classad import ClassAd, ClassAdParseError
from htc.daemons import core as c
from htc.daemons.negotiator import core as n
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.service import DaemonPaths, DaemonService, load_daemon_config
from htc.errors import HTCError, UsageError
from htc.wire import messages as m

__all__ = ["NegotiatorServiceSettings", "NegotiatorDaemon", "NegotiatorService", "load_accountant",
           "save_accountant", "make_service", "settings_from_config"]


@dataclass(frozen=True)
class NegotiatorServiceSettings:
    """The core's settings plus what only the service needs."""

    core: NegotiatorSettings
    accountant_file: Path               # ACCOUNTANT_DATABASE_FILE
    inform_startd: bool = False         # NEGOTIATOR_INFORM_STARTD
    collector: str = "collector"
    address: str = "negotiator"
    name: str = "negotiator"            # the Name of its Negotiator ad
    machine: str = "localhost"
    pid: int = 0
    ad_lifetime: int = 900              # CLASSAD_LIFETIME


def load_accountant(path: Path, settings: NegotiatorSettings, now: float) -> Accountant:
    """The accountant saved at ``path``, or a fresh one when there is no file.

    Raises:
        UsageError: the file is not an accountant snapshot (it says to move it aside).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Accountant(settings.accountant, now=now)
    except OSError as exc:
        raise UsageError(f"cannot read the accountant's file {path}: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"the accountant's file {path} is not JSON ({exc}); move it aside to start with "
                         "fresh user priorities") from None
    try:
        return Accountant.restore(data, settings.accountant)
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from None


def save_accountant(path: Path, snapshot: dict) -> None:
    """Write ``snapshot`` to ``path`` so that a crash leaves the old file or the new one, never half.

    Raises:
        OSError: the directory is not writable or the disk is full.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(snapshot, fh, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class NegotiatorDaemon:
    """The core as its service drives it: the core's publishing actions become wire sends.

    Sans-IO like the core. ``NotifyMatch``, ``PublishAccounting`` and ``CycleFinished`` turn into
    :class:`~htc.daemons.core.Send` actions (MatchNotify, Accounting ads, the Negotiator ad),
    ``Exit`` also withdraws the Negotiator ad, and the outcome of a send is logged here instead of
    being fed to the core, which has no business with it. Everything else passes through.

    Args:
        settings: the service's settings.
        accountant: the accountant to start with.
        now: when the negotiator starts.
    """

    def __init__(self, settings: NegotiatorServiceSettings, accountant: Accountant | None, now: float):
        self.settings = settings
        self.negotiator = n.Negotiator(settings.core, accountant, now=now)
        self.started_at = now

    def next_deadline(self) -> float | None:
        """The core's: the next cycle or the running cycle's timeout."""
        return self.negotiator.next_deadline()

    def handle(self, event: c.Event, now: float) -> list[c.Action]:
        """Apply one event; return what the service must do."""
        if isinstance(event, c.SendDone):
            msg, reply = event.msg, event.reply
            if isinstance(msg, m.MatchNotify) and isinstance(reply, m.Ack) and reply.detail.startswith(m.MATCH_LAPSED):
                if self.negotiator.match_lapsed(msg.slot_name, msg.claim_id, msg.autocluster_id):
                    why = reply.detail[len(m.MATCH_LAPSED):]
                    return [c.Log(f"match of {msg.slot_name} for {msg.submitter} lapsed at the schedd ({why}); "
                                  "what it held is free for the next cycle")]
            return []
        if isinstance(event, c.SendFailed):
            return [c.Log(f"cannot send {type(event.msg).__name__} to {event.to}: {event.error}", logging.WARNING)]
        if isinstance(event, c.Received) and isinstance(event.msg, m.SetUserPriority):
            return self._set_user_priority(event, now)
        if isinstance(event, c.Reconfigured) and isinstance(event.settings, NegotiatorServiceSettings):
            self.settings = event.settings
            event = c.Reconfigured(event.settings.core)
        out: list[c.Action] = []
        for action in self.negotiator.handle(event, now):
            self._translate(action, now, out)
        return out

    def _set_user_priority(self, event: c.Received, now: float) -> list[c.Action]:
        """``htc userprio -setprio/-setfactor/-resetusage``: the administrator changes one
        submitter's standing; it is saved and advertised at once."""
        msg: m.SetUserPriority = event.msg
        uid = event.peer.uid if event.peer is not None else None
        # the service decided ADMINISTRATOR by the pool's policy; a core fed directly falls back to uids
        admin = event.peer.administrator if event.peer.administrator is not None else uid in (0, os.getuid())
        if not admin:
            return [c.Reply(event.conn_id, m.ErrorReply(
                code="denied", message="only the pool's administrator (root, or the user the negotiator runs as) "
                                       "may change user priorities"))]
        core = self.negotiator
        name = msg.submitter
        if "@" not in name:  # "alice" names alice@<domain> when exactly one submitter is called that
            known = [s for s in core.accountant.submitters() if s.split("@", 1)[0] == name]
            if len(known) != 1:
                hint = f"one of {', '.join(known)}" if known else "the full name 'htc userprio -all' shows (user@domain)"
                return [c.bad_request(event, f"submitter {name!r} is ambiguous or unknown; give {hint}")]
            name = known[0]
        steps: list[tuple[c.Event, str]] = []
        if msg.reset_usage:
            steps.append((n.ResetUsage(name), "usage reset"))
        if msg.priority is not None:
            steps.append((n.SetRealPriority(name, msg.priority), f"priority {msg.priority:g}"))
        if msg.factor is not None:
            steps.append((n.SetPriorityFactor(name, msg.factor), f"priority factor {msg.factor:g}"))
        actions: list[c.Action] = []
        try:  # check every value before changing anything
            for step, _ in steps:
                if isinstance(step, n.SetRealPriority) and step.priority < core.accountant.settings.min_priority:
                    raise UsageError(f"real priority for {name} must be >= {core.accountant.settings.min_priority:g}, "
                                     f"got {step.priority:g}")
                if isinstance(step, n.SetPriorityFactor) and step.factor < 1:
                    raise UsageError(f"priority factor for {name} must be >= 1, got {step.factor:g}; larger "
                                     "factors mean a worse effective priority")
            for step, _ in steps:
                actions = core.handle(step, now)  # each answers with the whole saved/advertised state
        except UsageError as exc:
            return [c.bad_request(event, str(exc))]
        done = ", ".join(what for _, what in steps)
        out: list[c.Action] = [c.Reply(event.conn_id, m.Ack(detail=f"{name}: {done}")),
                               c.Log(f"user priority of {name} changed by uid {uid}: {done}")]
        for action in actions:
            self._translate(action, now, out)
        return out

    def _translate(self, action: c.Action, now: float, out: list[c.Action]) -> None:
        s = self.settings
        if isinstance(action, n.NotifyMatch):
            match = action.match
            msg = m.MatchNotify(claim_id=match.claim_id, submitter=match.submitter, slot_name=match.slot_name,
                                startd_address=match.startd_address or "startd", slot_ad=str(match.slot_ad),
                                autocluster_id=match.autocluster_id)
            preempting = f", preempting {match.preempted_user}" if match.preempted_user else ""
            out.append(c.Log(f"match: {match.submitter} (autocluster {match.autocluster_id} at {match.schedd}) "
                             f"-> {match.slot_name}{preempting}"))
            out.append(c.Send(match.schedd_address or match.schedd, msg, timeout=s.core.timeout))
            if s.inform_startd:
                out.append(c.Send(msg.startd_address, msg, timeout=s.core.timeout))
        elif isinstance(action, n.PublishAccounting):
            for ad in action.ads:
                name = ad.get("Name")
                if isinstance(name, str) and name:
                    out.append(self._advertise(m.AdType.Accounting, name, ad))
        elif isinstance(action, n.CycleFinished):
            st = action.statistics
            if st.aborted:
                out.append(c.Log(f"cycle {st.cycle} abandoned: {st.aborted}", logging.WARNING))
            else:
                failed = f"; no answer from {', '.join(st.failed_schedds)}" if st.failed_schedds else ""
                out.append(c.Log(f"cycle {st.cycle}: {st.matches} match(es) for {st.submitters} submitter(s), "
                                 f"{st.slots} slot(s), {st.requests} request(s) in {st.duration:.3f} s{failed}"))
            out.append(self._advertise(m.AdType.Negotiator, s.name, self.negotiator_ad(st)))
        elif isinstance(action, c.Exit):
            out.append(c.Send(s.collector, m.InvalidateAd(ad_type=m.AdType.Negotiator, name=s.name), timeout=2.0))
            out.append(action)
        else:
            out.append(action)

    def negotiator_ad(self, st: n.CycleStatistics) -> dict:
        """The Negotiator ad after a cycle (HTCondor's LastNegotiationCycle*0 attributes)."""
        s = self.settings
        return {
            "Name": s.name, "Machine": s.machine, "MyAddress": s.address, "NegotiatorPid": s.pid,
            "DaemonStartTime": int(self.started_at), "NegotiatorInterval": int(s.core.interval),
            "LastNegotiationCycleTime0": int(st.started), "LastNegotiationCycleEnd0": int(st.started + st.duration),
            "LastNegotiationCycleDuration0": round(st.duration, 3), "LastNegotiationCycleMatches0": st.matches,
            "LastNegotiationCycleActiveSubmitterCount0": st.submitters,
            "LastNegotiationCycleRejections0": st.rejections,
            "LastNegotiationCycleCandidateSlots0": st.candidate_slots,
            "LastNegotiationCycleNumSchedulersFailed0": len(st.failed_schedds),
            "LastNegotiationCycleAborted0": st.aborted,
            "NumNegotiationCycles": self.negotiator.statistics().cycles_completed,
        }

    def _advertise(self, ad_type: m.AdType, name: str, ad: dict) -> c.Send:
        msg = m.UpdateAd(ad_type=ad_type, name=name, ad_text=str(ClassAd(dict(ad))), lifetime=self.settings.ad_lifetime)
        return c.Send(self.settings.collector, msg, timeout=10.0)


class NegotiatorService(DaemonService):
    """The negotiator's asyncio shell (see the module docstring).

    Args:
        settings: the service's settings.
        transport: how to listen and reach the collector, schedds and startds.
        log_file: the NegotiatorLog.
        reload_settings: fresh :class:`NegotiatorServiceSettings` after SIGHUP / Reconfig.
        accountant: the accountant to start with (default: restored from ``settings.accountant_file``).

    Raises:
        UsageError: the accountant's file is damaged.
    """

    def __init__(self, settings: NegotiatorServiceSettings, transport, *, log_file: Path | None = None,
                 reload_settings=None, accountant: Accountant | None = None):
        now = time.time()
        if accountant is None:
            accountant = load_accountant(settings.accountant_file, settings.core, now)
        self.daemon_core = NegotiatorDaemon(settings, accountant, now)
        super().__init__("negotiator", self.daemon_core, transport, address=settings.address, log_file=log_file,
                         reload_settings=reload_settings)
        self.register_action(n.FetchPoolAds, self._do_fetch)
        self.register_action(n.AskResourceRequests, self._do_ask)
        self.register_action(n.SaveAccountant, self._do_save)

    @property
    def negotiator(self) -> n.Negotiator:
        """The core (for statistics)."""
        return self.daemon_core.negotiator

    @property
    def settings(self) -> NegotiatorServiceSettings:
        """The settings in force (replaced on reconfig)."""
        return self.daemon_core.settings

    # --- collector --------------------------------------------------------------------------

    def _do_fetch(self, action: n.FetchPoolAds) -> None:
        self.start_task(self._fetch(action.cycle), f"cycle {action.cycle}: query the collector")

    async def _fetch(self, cycle: int) -> None:
        try:
            machines = await self._query(m.AdType.Startd)
            submitters = await self._query(m.AdType.Submitter)
        except (HTCError, ClassAdParseError) as exc:
            self.feed(n.PoolAdsFailed(cycle, f"{self.settings.collector}: {exc}"))
            return
        self.feed(n.PoolAds(cycle, tuple(machines), tuple(submitters)))

    async def _query(self, ad_type: m.AdType) -> list[ClassAd]:
        reply = await self.peers.request(self.settings.collector, m.QueryAds(ad_type=ad_type),
                                         timeout=self.settings.core.timeout)
        return [ClassAd(text) for text in reply.ads]

    # --- schedds ------------------------------------------------------------------------------

    def _do_ask(self, action: n.AskResourceRequests) -> None:
        self.start_task(self._ask(action), f"cycle {action.cycle}: requests of {action.submitter}")

    async def _ask(self, a: n.AskResourceRequests) -> None:
        address = a.schedd_address or a.schedd
        try:
            reply = await self.peers.request(
                address, m.GetResourceRequests(submitter=a.submitter, significant_attributes=a.significant_attributes),
                timeout=self.settings.core.timeout)
            if reply.submitter != a.submitter:
                raise UsageError(f"asked for {a.submitter!r} but the answer is about {reply.submitter!r}")
            requests = []
            for r in reply.requests:
                try:
                    job = ClassAd(r.job_ad)
                except ClassAdParseError as exc:  # one bad job ad costs its request, not the schedd's
                    self.log.warning("cycle %d: schedd %s: skipped autocluster %d of %s, whose job ad "
                                     "does not parse: %s", a.cycle, a.schedd, r.autocluster_id, a.submitter, exc)
                    continue
                requests.append(ResourceRequest(autocluster_id=r.autocluster_id, job=job, count=r.count))
        except HTCError as exc:
            self.log.warning("cycle %d: schedd %s (%s) gave no requests for %s: %s", a.cycle, a.schedd, address,
                             a.submitter, exc)
            self.feed(n.RequestsFailed(a.cycle, a.schedd, a.submitter, str(exc)))
            return
        self.feed(n.RequestsReceived(a.cycle, a.schedd, a.submitter, tuple(requests)))

    # --- the accountant's file ------------------------------------------------------------------

    def _do_save(self, action: n.SaveAccountant) -> None:
        path = self.settings.accountant_file
        try:
            save_accountant(path, action.snapshot)
        except OSError as exc:
            # Priorities stay in memory; the next cycle tries again.
            self.log.error("cannot save the accountant to %s: %s", path, exc)


# --- configuration --------------------------------------------------------------------------------


def settings_from_config(config, home: Path) -> NegotiatorServiceSettings:
    """Build the negotiator's settings from the configuration (NEGOTIATOR subsystem).

    Raises:
        UsageError: a knob has a value the negotiator cannot use (the message names it).
    """
    core = NegotiatorSettings.from_config(config)
    host = socket.getfqdn()
    path = config.param("ACCOUNTANT_DATABASE_FILE") or str(home / "spool" / "Accountantnew.log")
    return NegotiatorServiceSettings(
        core=core, accountant_file=Path(path), inform_startd=bool(config.param("NEGOTIATOR_INFORM_STARTD")),
        name=f"negotiator@{host}", machine=host, pid=os.getpid(),
        ad_lifetime=int(max(config.param("CLASSAD_LIFETIME"), 3 * core.interval)))


def make_service(paths: DaemonPaths) -> NegotiatorService:
    """The negotiator's service for the pool at ``paths`` (used by ``python -m htc.daemons``).

    Raises:
        UsageError: the configuration or the accountant's file is broken.
    """
    def settings() -> NegotiatorServiceSettings:
        return settings_from_config(load_daemon_config("NEGOTIATOR"), paths.home)

    return NegotiatorService(settings(), paths.transport(), log_file=paths.log_file("negotiator"),
                             reload_settings=settings)
