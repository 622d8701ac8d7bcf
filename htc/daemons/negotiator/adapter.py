"""The negotiator's wire adapter: the core's publishing actions become wire sends.

Theory of operation
-------------------
:class:`NegotiatorDaemon` is the object :class:`~htc.daemons.negotiator.service.NegotiatorService`
drives. It wraps the sans-IO :class:`~htc.daemons.negotiator.core.Negotiator` and, sans-IO
itself, does what the core has no business with:

============================  ====================================================================
``NotifyMatches``             per match of its run, ``MatchNotify`` to the schedd (which claims the
                              slot itself) and, with NEGOTIATOR_INFORM_STARTD, to the startd; one
                              log line per run of matches of one request on one slot, with their
                              count
``PublishAccounting``         one Accounting ad per submitter to the collector (``htc userprio``)
``CycleFinished``             a log line, and the Negotiator ad with the cycle's statistics
``Exit``                      also withdraws the Negotiator ad
============================  ====================================================================

The outcome of a send is logged here instead of being fed to the core, except a schedd's
answer that a match lapsed (the core gives back what the match held). ``SetUserPriority``
(``htc userprio -setprio/-setfactor/-setaccum/-resetusage``) is checked here -- who may, which submitter,
which values -- and handed to the core as its administration events. Everything else passes
through to the core, and the core's other actions through to the service.

Dispatch is by tables of the methods themselves (:data:`_ON_EVENT`, :data:`_ON_MESSAGE`,
:data:`_TRANSLATE`), looked up by type; a cycle's NotifyMatches actions (one per run of matches:
:mod:`.match_runs`), which come in a row (14,391 runs of 81,642 matches in case 1 of
``benchmarks/negotiator_bench.py``), are translated together
(``_notify_matches``): their messages built from the core's own values without msgspec's
conversion of each, one log line per run. ``benchmarks/negotiator_service_cpu.py`` measures the
CPU this costs per match.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.negotiator.accountant import Accountant
from htc.daemons.negotiator.core import Negotiator
from htc.daemons.negotiator.cycle import CycleStatistics
from htc.daemons.negotiator.cycle_ad import CYCLES_KEPT, cycle_attributes
from htc.daemons.negotiator.events import (CycleFinished, NotifyMatches, PublishAccounting, ResetUsage,
                                           SetAccumulatedUsage, SetPriorityFactor, SetRealPriority)
from htc.daemons.negotiator.matched_ad import texts
from htc.daemons.negotiator.gc_pause import collector_paused
from htc.daemons.negotiator.settings import NegotiatorServiceSettings
from htc.errors import UsageError
from htc.wire import messages as m
from htc.wire.messages.schema import built_here, validate

__all__ = ["NegotiatorDaemon"]


class NegotiatorDaemon:
    """The core as its service drives it (see the module docstring).

    Args:
        settings: the service's settings.
        accountant: the accountant to start with.
        now: when the negotiator starts.
    """

    def __init__(self, settings: NegotiatorServiceSettings, accountant: Accountant | None, now: float):
        self.settings = settings
        self.negotiator = Negotiator(settings.core, accountant, now=now)
        self.started_at = now
        self.cycles: list[CycleStatistics] = []  # the latest first, for the Negotiator ad

    def next_deadline(self) -> float | None:
        """The core's: the next cycle or the running cycle's timeout."""
        return self.negotiator.next_deadline()

    def handle(self, event: c.Event, now: float) -> list[c.Action]:
        """Apply one event; return what the service must do."""
        handler = _ON_EVENT.get(type(event))
        if handler is None:
            return self._to_core(event, now)
        return handler(self, event, now)

    def _to_core(self, event: c.Event, now: float) -> list[c.Action]:
        """Hand ``event`` to the core and turn what it answers into what the service does."""
        return self._translate(self.negotiator.handle(event, now))

    # --- events -------------------------------------------------------------------------------

    def _on_send_done(self, event: c.SendDone, now: float) -> list[c.Action]:
        msg, reply = event.msg, event.reply
        if isinstance(msg, m.MatchNotify) and isinstance(reply, m.Ack) and reply.detail.startswith(m.MATCH_LAPSED):
            if self.negotiator.match_lapsed(msg.slot_name, msg.claim_id, msg.autocluster_id):
                why = reply.detail[len(m.MATCH_LAPSED):]
                return [c.Log(f"match of {msg.slot_name} for {msg.submitter} lapsed at the schedd ({why}); "
                              "what it held is free for the next cycle")]
        return []

    def _on_send_failed(self, event: c.SendFailed, now: float) -> list[c.Action]:
        return [c.Log(f"cannot send {type(event.msg).__name__} to {event.to}: {event.error}", logging.WARNING)]

    def _on_received(self, event: c.Received, now: float) -> list[c.Action]:
        handler = _ON_MESSAGE.get(type(event.msg))
        if handler is None:
            return self._to_core(event, now)
        return handler(self, event, now)

    def _on_reconfigured(self, event: c.Reconfigured, now: float) -> list[c.Action]:
        if isinstance(event.settings, NegotiatorServiceSettings):
            self.settings = event.settings
            event = c.Reconfigured(event.settings.core)
        return self._to_core(event, now)

    def _set_user_priority(self, event: c.Received, now: float) -> list[c.Action]:
        """``htc userprio -setprio/-setfactor/-setaccum/-resetusage``: the administrator changes one
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
                hint = f"one of {', '.join(known)}" if known else "the full name 'htc userprio -allusers' shows (user@domain)"
                return [c.bad_request(event, f"submitter {name!r} is ambiguous or unknown; give {hint}")]
            name = known[0]
        steps: list[tuple[c.Event, str]] = []
        if msg.reset_usage:
            steps.append((ResetUsage(name), "usage reset"))
        if msg.priority is not None:
            steps.append((SetRealPriority(name, msg.priority), f"priority {msg.priority:g}"))
        if msg.factor is not None:
            steps.append((SetPriorityFactor(name, msg.factor), f"priority factor {msg.factor:g}"))
        if msg.accumulated_usage is not None:
            steps.append((SetAccumulatedUsage(name, msg.accumulated_usage),
                          f"accumulated usage {msg.accumulated_usage:g} s"))
        actions: list[c.Action] = []
        try:  # check every value before changing anything
            least = core.accountant.settings.min_priority
            if msg.priority is not None and msg.priority < least:
                raise UsageError(f"real priority for {name} must be >= {least:g}, got {msg.priority:g}")
            if msg.factor is not None and msg.factor < 1:
                raise UsageError(f"priority factor for {name} must be >= 1, got {msg.factor:g}; larger "
                                 "factors mean a worse effective priority")
            for step, _ in steps:
                actions = core.handle(step, now)  # each answers with the whole saved/advertised state
        except UsageError as exc:
            return [c.bad_request(event, str(exc))]
        done = ", ".join(what for _, what in steps)
        return [c.Reply(event.conn_id, m.Ack(detail=f"{name}: {done}")),
                c.Log(f"user priority of {name} changed by uid {uid}: {done}"),
                *self._translate(actions)]

    # --- the core's actions -------------------------------------------------------------------

    def _translate(self, actions: list[c.Action]) -> list[c.Action]:
        out: list[c.Action] = []
        runs: list = []  # the MatchRun of each NotifyMatches in a row (a cycle's come together)
        for action in actions:
            if action.__class__ is NotifyMatches:
                runs.append(action.run)
                continue
            if runs:
                self._notify_matches(runs, out)
                runs = []
            translate = _TRANSLATE.get(type(action))
            if translate is None:
                out.append(action)
            else:
                out.extend(translate(self, action))
        if runs:
            self._notify_matches(runs, out)
        return out

    def _notify_matches(self, runs: list, out: list[c.Action]) -> None:
        """Append to ``out`` what the matches of the cycle's ``runs`` (:class:`~.match_runs.MatchRun`)
        become: a ``MatchNotify`` each, sent to the schedd (and to the startd with
        NEGOTIATOR_INFORM_STARTD), and a log line for each run of matches of one request on one
        slot (its count when more than one; two runs in a row of one request on one slot are
        one line). A run's messages are made from the run itself: what its matches share read
        once, their claim ids and slot ad texts (:func:`~.matched_ad.texts`) made in a row,
        no :class:`~.match_runs.Match` or slot ad view per job.

        Their messages are made from values the core holds: the ids and names it checked when
        the ads arrived, the slot ad's text printed here. So they are built trusted
        (:func:`~htc.wire.messages.schema.built_here`: msgspec's conversion of the whole message,
        slot ad text included, is skipped), each with a test of what that conversion would
        refuse; a message that fails it is converted after all, which raises as before.
        The schedd and the startd validate every frame they receive, as always.

        Python's cyclic garbage collector is held off meanwhile, as for the cycle itself
        (:mod:`~htc.daemons.negotiator.gc_pause`): the messages and sends made here live until
        sent and form no garbage cycles, and the collections their allocation would start walk
        the pool's million live objects (case 1: 0.88-1.03 -> 0.49-0.51 s, same-process A/B).
        """
        s = self.settings
        timeout, pool, inform_startd = s.core.timeout, s.collector, s.inform_startd
        notify, send = m.MatchNotify, c.Send
        sends: list = []  # the current log line's sends
        key = None  # what the current line's matches share: (submitter, autocluster, schedd, slot, preempted)
        with built_here(), collector_paused():  # (objects that live on: see the docstring)
            for run in runs:
                submitter, acid, slot_name = run.submitter, run.autocluster_id, run.slot_name
                startd = run.startd_address or "startd"
                to = run.schedd_address or run.schedd
                this = (submitter, acid, run.schedd, slot_name, run.preempted_user)
                if this != key:
                    if sends:
                        _log_run(key, sends, out, inform_startd)
                    key, sends = this, []
                ads = [str(run.slot_ad)] * run.count if run.sizes is None else texts(run.slot_ad, run.sizes)
                shared = _trusted("-", submitter, slot_name, startd, "[]", acid, pool)
                append = sends.append
                for claim_id, ad in zip(run.claim_ids(), ads):
                    msg = notify(claim_id=claim_id, submitter=submitter, slot_name=slot_name,
                                 startd_address=startd, slot_ad=ad, autocluster_id=acid, pool=pool)
                    if not (shared and claim_id.__class__ is str and claim_id != ""
                            and ad.__class__ is str and len(ad) >= 2):
                        validate(msg)  # as built outside built_here: raises MessageInvalid, as before
                    append(send(to, msg, timeout=timeout))
                    if inform_startd:
                        append(send(startd, msg, timeout=timeout))
        if sends:
            _log_run(key, sends, out, inform_startd)

    def _publish_accounting(self, action: PublishAccounting) -> list[c.Action]:
        out: list[c.Action] = []
        for ad in action.ads:
            name = ad.get("Name")
            if isinstance(name, str) and name:
                out.append(self._advertise(m.AdType.Accounting, name, ad))
        return out

    def _cycle_finished(self, action: CycleFinished) -> list[c.Action]:
        st = action.statistics
        if st.aborted:
            log = c.Log(f"cycle {st.cycle} abandoned: {st.aborted}", logging.WARNING)
        else:
            failed = f"; no answer from {', '.join(st.failed_schedds)}" if st.failed_schedds else ""
            log = c.Log(f"cycle {st.cycle}: {st.matches} match(es) for {st.submitters} submitter(s), "
                        f"{st.slots} slot(s), {st.requests} request(s) in {st.duration:.3f} s{failed}")
        self.cycles = [st, *self.cycles][:CYCLES_KEPT]
        return [log, self._advertise(m.AdType.Negotiator, self.settings.name, self.negotiator_ad(st))]

    def _exit(self, action: c.Exit) -> list[c.Action]:
        s = self.settings
        return [c.Send(s.collector, m.InvalidateAd(ad_type=m.AdType.Negotiator, name=s.name), timeout=2.0), action]

    def negotiator_ad(self, st: CycleStatistics) -> dict:
        """The Negotiator ad after cycle ``st``: HTCondor's LastNegotiationCycle<Name><X> attributes
        of the last cycles (htc.daemons.negotiator.cycle_ad), ``st`` being cycle 0."""
        s = self.settings
        cycles = self.cycles if self.cycles and self.cycles[0] is st else [st, *self.cycles]
        return {
            "Name": s.name, "Machine": s.machine, "MyAddress": s.address, "NegotiatorPid": s.pid,
            "DaemonStartTime": int(self.started_at), "NegotiatorInterval": int(s.core.interval),
            **cycle_attributes(cycles),
            "NumNegotiationCycles": self.negotiator.statistics().cycles_completed,
        }

    def _advertise(self, ad_type: m.AdType, name: str, ad: dict) -> c.Send:
        msg = m.UpdateAd(ad_type=ad_type, name=name, ad_text=str(ClassAd(dict(ad))), lifetime=self.settings.ad_lifetime)
        return c.Send(self.settings.collector, msg, timeout=10.0)


def _trusted(claim_id, submitter, slot_name, startd, ad, acid, pool) -> bool:
    """Whether a MatchNotify of these values passes msgspec's checks (NonEmpty strings, AdText,
    a Count or None, a str): the test :func:`~htc.wire.messages.schema.validate` would make."""
    return (claim_id.__class__ is str and claim_id != "" and submitter.__class__ is str and submitter != ""
            and slot_name.__class__ is str and slot_name != "" and startd.__class__ is str and startd != ""
            and ad.__class__ is str and len(ad) >= 2 and pool.__class__ is str
            and (acid is None or (acid.__class__ is int and 0 <= acid <= m.INT64_MAX)))


def _log_run(key: tuple, sends: list[c.Send], out: list[c.Action], inform_startd: bool) -> None:
    """Append the log line of one run of matches (one request's jobs on one slot), then its sends:
    the line each match had, once, with the count when the run has more than one match."""
    submitter, acid, schedd, slot_name, preempted = key
    preempting = f", preempting {preempted}" if preempted else ""
    n = len(sends) // 2 if inform_startd else len(sends)
    times = f" ({n} matches)" if n > 1 else ""
    out.append(c.Log(f"match: {submitter} (autocluster {acid} at {schedd}) -> {slot_name}{preempting}{times}"))
    out.extend(sends)


#: shared event type -> what the adapter does with it (anything else goes to the core)
_ON_EVENT: Mapping[type, Callable[[NegotiatorDaemon, c.Event, float], list[c.Action]]] = {
    c.SendDone: NegotiatorDaemon._on_send_done,
    c.SendFailed: NegotiatorDaemon._on_send_failed,
    c.Received: NegotiatorDaemon._on_received,
    c.Reconfigured: NegotiatorDaemon._on_reconfigured,
}
#: wire message type -> the adapter's handler (anything else goes to the core)
_ON_MESSAGE: Mapping[type, Callable[[NegotiatorDaemon, c.Received, float], list[c.Action]]] = {
    m.SetUserPriority: NegotiatorDaemon._set_user_priority,
}
#: core action type -> the actions it becomes (anything else passes through to the service)
_TRANSLATE: Mapping[type, Callable[[NegotiatorDaemon, c.Action], list[c.Action]]] = {
    PublishAccounting: NegotiatorDaemon._publish_accounting,
    CycleFinished: NegotiatorDaemon._cycle_finished,
    c.Exit: NegotiatorDaemon._exit,
}
