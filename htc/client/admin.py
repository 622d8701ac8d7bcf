"""The administrator tools that act on a running pool.

``daemons_off`` / ``daemons_on`` / ``daemons_restart`` / ``reconfig`` are condor_off /
condor_on / condor_restart / condor_reconfig (through the master); ``vacate_slots`` is
condor_vacate and ``drain_machines`` condor_drain (through the startd); ``reschedule`` is
condor_reschedule (the schedd); ``user_priorities`` and ``set_user_priority`` are
condor_userprio (the collector's Accounting ads, the negotiator).  Without a ``transport``
each reaches the pool under ``$HTC_HOME``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from htc.classad import ClassAd, quote
from htc.client import request
from htc.client.request import SCHEDD, AdType
from htc.errors import UsageError
from htc.wire import messages as m
from htc.wire.transport import DEFAULT_TIMEOUT, Transport

__all__ = [
    "daemons_off", "daemons_on", "daemons_restart", "reconfig", "vacate_slots", "drain_machines", "reschedule",
    "UserPriority", "user_priorities", "set_user_priority",
]


# --- condor_off / on / restart / reconfig -----------------------------------------------------------


def _names(daemons: Iterable[str]) -> tuple[str, ...]:
    out = []
    for d in daemons:
        name = d.strip().upper()
        if not name:
            continue
        if not name.replace("_", "").isalnum():
            raise UsageError(f"{d!r} is not a daemon name; use names from DAEMON_LIST (schedd, startd, ...)")
        out.append(name)
    return tuple(out)


def daemons_off(daemons: Sequence[str] = (), *, fast: bool = False, include_master: bool = False,
                transport: Transport | None = None) -> str:
    """condor_off: stop daemons of the pool (all but the master when none are named).

    Args:
        daemons: daemon names (``schedd``, ``startd``); empty: all of them.
        fast: stop at once instead of gracefully.
        include_master: stop the master too (``-master``).
        transport: how to reach the master (default: this pool).

    Returns:
        The master's acknowledgement.

    Raises:
        UsageError: a name is not a daemon name.
        DaemonUnreachable: the pool is not running.
        RemoteError: the master does not run such a daemon.
    """
    names = _names(daemons)
    if "MASTER" in names:
        names, include_master = tuple(n for n in names if n != "MASTER"), True
    msg = m.DaemonsOff(daemons=names, how="fast" if fast else "graceful", include_master=include_master)
    reply = request.send_command("master", msg, transport=transport)
    return reply.detail


def daemons_on(daemons: Sequence[str] = (), *, transport: Transport | None = None) -> str:
    """condor_on: start daemons (all of DAEMON_LIST when none are named), also ones the master
    gave up on.  Errors as for :func:`daemons_off`; returns the master's acknowledgement."""
    reply = request.send_command("master", m.DaemonsOn(daemons=_names(daemons)), transport=transport)
    return reply.detail


def daemons_restart(daemons: Sequence[str] = (), *, fast: bool = False, transport: Transport | None = None) -> str:
    """condor_restart: stop then start daemons (all when none are named).  Errors as for
    :func:`daemons_off`; returns the master's acknowledgement."""
    msg = m.DaemonsRestart(daemons=_names(daemons), how="fast" if fast else "graceful")
    reply = request.send_command("master", msg, transport=transport)
    return reply.detail


def reconfig(daemons: Sequence[str] = (), *, transport: Transport | None = None) -> list[str]:
    """condor_reconfig: make daemons re-read the configuration.

    Args:
        daemons: daemons to tell directly; empty: the master, which passes it on to all.
        transport: how to reach them (default: this pool).

    Returns:
        Each acknowledgement, in order.

    Raises:
        DaemonUnreachable: a daemon (or the pool) is not running.
    """
    transport = transport or request.default_transport()
    targets = [n.lower() for n in _names(daemons)] or ["master"]
    return [request.send_command(name, m.Reconfig(), transport=transport).detail for name in targets]


# --- condor_vacate -------------------------------------------------------------------------------------


def vacate_slots(machines: Sequence[str] = (), *, constraint: str = "", fast: bool = False,
                 transport: Transport | None = None) -> list[str]:
    """condor_vacate: evict the jobs running on slots (they go back to idle, checkpointed
    where they can be).

    Args:
        machines: machine or slot names (``host``, ``slot1@host``); empty: every claimed slot
            (with ``constraint``: every slot it selects).
        constraint: a ClassAd expression selecting slots.
        fast: kill at once instead of a graceful (soft-kill, then hard-kill) eviction.
        transport: how to reach the collector and the startd (default: this pool).

    Returns:
        The names of the slots asked to vacate (empty when nothing was running).

    Raises:
        UsageError: a named machine has no slot in the collector.
        DaemonUnreachable, RemoteError: the collector or the startd is not answering.
    """
    transport = transport or request.default_transport()
    parts = []
    if machines:
        parts.append(" || ".join(f"Name == {quote(n)} || Machine == {quote(n)}" for n in machines))
    if constraint:
        parts.append(constraint)
    if not machines and not constraint:
        parts.append('State == "Claimed"')
    where = " && ".join(f"({p})" for p in parts)
    slots = request.query_collector(AdType.Startd, where, ("Name", "Machine", "State"), transport=transport)
    if machines:
        seen = {s.get("Name") for s in slots} | {s.get("Machine") for s in slots}
        missing = [n for n in machines if n not in seen]
        if missing:
            raise UsageError(f"no slot of {', '.join(missing)} is in the collector; 'htc status' lists them")
    names = tuple(str(s["Name"]) for s in slots if isinstance(s.get("Name"), str))
    if not names:
        return []
    request.send_command("startd", m.Vacate(slot_names=names, fast=fast, reason="via htc vacate"),
                         transport=transport)
    return list(names)


def drain_machines(machines: Sequence[str], *, how: str = "graceful", resume_on_completion: bool = False,
                   reason: str = "", cancel: bool = False, transport: Transport | None = None) -> list[str]:
    """condor_drain: the named machines stop taking new jobs and empty (or, with ``cancel``,
    take jobs again).

    Args:
        machines: machine names (``Machine`` of their slots, as ``htc status`` shows them).
        how: ``graceful`` (running jobs finish within their retirement time), ``quick``
            (vacate them now, gracefully) or ``fast`` (kill them now).
        resume_on_completion: take jobs again once drained.
        reason: recorded with the drain (``DrainReason``).
        cancel: stop draining instead.
        transport: how to reach the collector and the startd (default: this pool).

    Returns:
        What the startd answered, one line per machine.

    Raises:
        UsageError: no machine named, an unknown ``how``, or a machine not in the collector.
        DaemonUnreachable, RemoteError: the collector or the startd is not answering.
    """
    if not machines:
        raise UsageError("name the machine(s) to drain; 'htc status' lists them")
    if how not in ("graceful", "quick", "fast"):
        raise UsageError(f"drain how={how!r}: use graceful, quick or fast")
    transport = transport or request.default_transport()
    where = " || ".join(f"Machine == {quote(n)} || Name == {quote(n)}" for n in machines)
    slots = request.query_collector(AdType.Startd, where, ("Name", "Machine"), transport=transport)
    seen = {s.get("Machine") for s in slots} | {s.get("Name") for s in slots}
    missing = [n for n in machines if n not in seen]
    if missing:
        raise UsageError(f"no slot of {', '.join(missing)} is in the collector; 'htc status' lists the machines")
    msg = m.CancelDrainJobs() if cancel else m.DrainJobs(how=how, resume_on_completion=resume_on_completion,
                                                         reason=reason or "via htc drain")
    return [f"{name}: {request.send_command('startd', msg, transport=transport).detail}" for name in machines]


def reschedule(*, transport: Transport | None = None, timeout: float = DEFAULT_TIMEOUT) -> str:
    """condor_reschedule: ask the schedd to advertise and request a negotiation cycle now.

    Args:
        transport, timeout: how to reach the schedd (default: this pool) and how long to wait.

    Returns:
        The schedd's acknowledgement (``htc reschedule -json`` shows it).

    Raises:
        DaemonUnreachable: the schedd is not running.
        RemoteError: the schedd refused the request.
    """
    return request.send_command(SCHEDD, m.Reschedule(), transport=transport, timeout=timeout).detail


# --- condor_userprio ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class UserPriority:
    """One submitter's standing with the accountant (HTCondor's Accounting ad)."""

    name: str
    effective_priority: float
    priority_factor: float
    resources_used: float
    weighted_accumulated_usage: float
    last_usage_time: float | None
    is_group: bool = False
    begin_usage_time: float | None = None
    #: when the accountant last aged priorities (condor_userprio's "Last Priority Update")
    last_update: float | None = None

    @property
    def real_priority(self) -> float:
        """Effective priority divided by the factor."""
        return self.effective_priority / self.priority_factor if self.priority_factor else 0.0


def _number(ad: ClassAd, *names: str, default: float = 0.0) -> float:
    for name in names:
        value = ad.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return default


def set_user_priority(submitter: str, *, priority: float | None = None, factor: float | None = None,
                      reset_usage: bool = False, accumulated_usage: float | None = None,
                      transport: Transport | None = None) -> str:
    """condor_userprio -setprio / -setfactor / -setaccum / -resetusage: change one submitter's standing.

    Args:
        submitter: ``user@domain`` as ``htc userprio`` shows it (a bare ``user`` works when
            exactly one submitter has that name).
        priority: the new real user priority (>= 0.5; it decays toward 0.5 as usage ages).
        factor: the new priority factor (>= 1; larger means a worse effective priority).
        reset_usage: forget the submitter's accumulated usage.
        accumulated_usage: the new accumulated usage, in weighted slot-seconds (``-setaccum``).
        transport: how to reach the negotiator (default: this pool).

    Returns:
        What the negotiator did, in words.

    Raises:
        RemoteError: not the administrator (``denied``), or a bad value or name (``bad_request``).
        DaemonUnreachable: the negotiator is not running.
    """
    msg = m.SetUserPriority(submitter=submitter, priority=priority, factor=factor, reset_usage=reset_usage,
                            accumulated_usage=accumulated_usage)
    return request.send_command("negotiator", msg, transport=transport).detail


def user_priorities(*, all_users: bool = False, transport: Transport | None = None) -> list[UserPriority]:
    """condor_userprio: every submitter's priority, best (lowest effective priority) first.

    The negotiator advertises one Accounting ad per submitter to the collector, as
    HTCondor's does (``Name``, ``Priority`` -- the effective priority -- ``PriorityFactor``,
    ``WeightedResourcesUsed``/``ResourcesUsed``, ``WeightedAccumulatedUsage`` in
    slot-seconds, ``LastUsageTime``).

    Args:
        all_users: include submitters with no usage now or recently (``-all``); otherwise only
            those using resources or with accumulated usage.
        transport: how to reach the collector (default: this pool).

    Returns:
        The priorities.

    Raises:
        DaemonUnreachable: the collector is not running.
    """
    ads = request.query_collector(AdType.Accounting, transport=transport)
    out = []
    for ad in ads:
        name = ad.get("Name")
        if not isinstance(name, str):
            continue
        last = _number(ad, "LastUsageTime", default=0.0) or None
        rec = UserPriority(
            name=name,
            effective_priority=_number(ad, "Priority", "EffectivePriority"),
            priority_factor=_number(ad, "PriorityFactor", default=1.0),
            resources_used=_number(ad, "WeightedResourcesUsed", "ResourcesUsed"),
            weighted_accumulated_usage=_number(ad, "WeightedAccumulatedUsage", "AccumulatedUsage"),
            last_usage_time=last,
            is_group=ad.get("IsAccountingGroup") is True,
            begin_usage_time=_number(ad, "BeginUsageTime", default=0.0) or None,
            last_update=_number(ad, "LastUpdate", default=0.0) or None,
        )
        if all_users or rec.resources_used > 0 or rec.weighted_accumulated_usage > 0:
            out.append(rec)
    out.sort(key=lambda r: (r.effective_priority, r.name))
    return out
