"""The personal pool and its daemons, as the administrator tools see them.

``start_pool`` / ``stop_pool`` / ``pool_status`` are ``htc pool start|stop|status``:
the master of the pool under ``$HTC_HOME`` (``HTC_HOME`` selects the pool) and the daemons it
runs.  ``daemons_off`` / ``daemons_on`` / ``daemons_restart`` / ``reconfig`` are condor_off /
condor_on / condor_restart / condor_reconfig; ``vacate_slots`` is condor_vacate;
``drain_machines`` is condor_drain; ``reschedule`` is condor_reschedule; ``user_priorities`` and
``set_user_priority`` are condor_userprio.

Starting
--------
``start_pool()`` launches ``python -m htc.daemons master`` in a new session through a short
launcher process that exits at once, so the master is nobody's child (the shell that typed
``htc pool start`` can go away) and nothing is left for the tool to reap.  It then waits
until the pool *answers*: the master replies to QueryMaster and every daemon it runs either
answers Ping or has stopped for good (a daemon not in this build exits asking not to be
restarted, and the master leaves it Off).  A master that dies while starting is reported
with the end of its log.  ``start_pool(foreground=True)`` runs the master in this process
instead, until it stops.

Stopping
--------
``stop_pool()`` asks the master to stop itself and its daemons (DaemonsOff with
``include_master``) and waits until the master process has gone -- the master exits only
after its daemons have.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from htc.classad import ClassAd, quote
from htc.client import request
from htc.client.request import SCHEDD, AdType
from htc.errors import HTCError, UsageError
from htc.wire import messages as m
from htc.wire.errors import DaemonUnreachable
from htc.wire.transport import DEFAULT_TIMEOUT, Transport, UnixTransport

__all__ = [
    "DaemonInfo", "PoolStatus", "PoolStartError", "start_pool", "stop_pool", "pool_status",
    "daemons_off", "daemons_on", "daemons_restart", "reconfig", "vacate_slots", "drain_machines", "reschedule",
    "UserPriority", "user_priorities", "set_user_priority",
]

#: states in which a daemon will not come back without being asked
_SETTLED_DOWN = {"Off", "GaveUp"}
_POLL = 0.05


class PoolStartError(HTCError):
    """The master did not come up, or its daemons did not answer in time."""


@dataclass(frozen=True)
class DaemonInfo:
    """One daemon of the pool: the master's view of it, and whether it answers."""

    name: str
    state: str
    pid: int | None
    restarts: int
    answering: bool


@dataclass(frozen=True)
class PoolStatus:
    """The pool under ``home``: is its master running, and what its daemons are doing."""

    home: str
    running: bool
    master_pid: int | None = None
    shutting_down: bool = False
    daemons: tuple[DaemonInfo, ...] = ()

    def to_dict(self) -> dict:
        """Plain data for ``-json``."""
        return asdict(self)


def _home() -> Path:
    from htc.config import htc_home

    return Path(htc_home())


def _transport(home: Path) -> UnixTransport:
    return UnixTransport(home / "sockets")


def pool_status(*, transport: Transport | None = None, timeout: float = 5.0) -> PoolStatus:
    """``htc pool status``: the master's view of the pool, and which daemons answer Ping.

    Args:
        transport: how to reach the daemons (default: the pool under ``$HTC_HOME``).
        timeout: seconds each daemon may take to answer.

    Returns:
        A :class:`PoolStatus`; ``running`` is False when no master answers.
    """
    home = _home()
    transport = transport or _transport(home)
    try:
        status = request.query_master(transport=transport, timeout=timeout)
    except (DaemonUnreachable, HTCError):
        return PoolStatus(home=str(home), running=False)
    daemons = []
    for d in status.daemons:
        answering = False
        if d.state == "Running":
            try:
                answering = request.ping(d.name.lower(), transport=transport, timeout=timeout).pid == d.pid
            except HTCError:
                answering = False
        daemons.append(DaemonInfo(d.name, d.state, d.pid, d.restarts, answering))
    return PoolStatus(str(home), True, status.master_pid, status.shutting_down, tuple(daemons))


def _settled(status: PoolStatus) -> bool:
    return status.running and all(d.answering or d.state in _SETTLED_DOWN for d in status.daemons)


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _launch_master(home: Path) -> int:
    """Start the master detached (new session, not our child); return its pid."""
    log_dir = home / "log"
    log_dir.mkdir(mode=0o755, parents=True, exist_ok=True)  # ensure_home made it 0755 already
    stderr_path = log_dir / "MasterLog.stderr"
    argv = [sys.executable, "-m", "htc.daemons", "master", "-home", str(home)]
    launcher = (
        "import os, subprocess, sys\n"
        "os.umask(0o022)\n"  # the stderr file and the master get safe modes whatever our umask
        "err = open(sys.argv[1], 'ab')\n"
        "p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,"
        " stderr=err, start_new_session=True, close_fds=True)\n"
        "print(p.pid)\n"
    )
    env = dict(os.environ, HTC_HOME=str(home))
    done = subprocess.run([sys.executable, "-c", launcher, str(stderr_path), *argv], env=env,
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        raise PoolStartError(f"could not launch the master: {done.stderr.strip() or 'no pid reported'}")
    return int(done.stdout.strip())


def start_pool(*, foreground: bool = False, timeout: float = 30.0) -> PoolStatus | int:
    """``htc pool start``: run the personal pool under ``$HTC_HOME`` and wait until it answers.

    Args:
        foreground: run the master in this process until it stops (Ctrl-C stops the pool).
        timeout: seconds to wait for the pool to answer.

    Returns:
        The :class:`PoolStatus` once every daemon answers or has stopped for good; with
        ``foreground``, the master's exit status instead.

    Raises:
        PoolStartError: the master exited while starting (the message quotes its log) or the
            pool did not answer within ``timeout``.
        UsageError: ``$HTC_HOME`` cannot be created or its configuration is broken.
    """
    from htc.config import ensure_home

    home = _home()
    ensure_home()
    if foreground:
        from htc.daemons.__main__ import main as run_daemon

        os.environ["HTC_HOME"] = str(home)
        return run_daemon(["master", "-home", str(home)])
    transport = _transport(home)
    current = pool_status(transport=transport)
    if current.running and not current.shutting_down:
        return _wait_settled(home, transport, current.master_pid, timeout)
    if current.running:
        _wait_gone(current.master_pid, transport, timeout)
    pid = _launch_master(home)
    return _wait_settled(home, transport, pid, timeout)


def _wait_settled(home: Path, transport: Transport, pid: int | None, timeout: float) -> PoolStatus:
    deadline = time.monotonic() + timeout
    status = PoolStatus(str(home), False)
    while time.monotonic() < deadline:
        status = pool_status(transport=transport, timeout=2.0)
        if _settled(status):
            return status
        if not status.running and not _alive(pid):
            log = _tail(home / "log" / "MasterLog.stderr") or _tail(home / "log" / "MasterLog")
            raise PoolStartError(f"the master (pid {pid}) exited while starting; the end of its log:\n{log}\n"
                                 f"see {home / 'log'} for more")
        time.sleep(_POLL)
    waiting = [d.name for d in status.daemons if not (d.answering or d.state in _SETTLED_DOWN)]
    what = f"{', '.join(waiting)} did not answer" if waiting else "the master did not answer"
    raise PoolStartError(f"{what} within {timeout:g} s; see the logs under {home / 'log'} "
                         "('htc pool status' shows each daemon)")


def _wait_gone(pid: int | None, transport: Transport, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid and not _alive(pid):
            return True
        if not pid:
            try:
                request.query_master(transport=transport, timeout=1.0)
            except (DaemonUnreachable, HTCError):
                return True
        time.sleep(_POLL)
    return False


def stop_pool(*, fast: bool = False, timeout: float = 60.0) -> PoolStatus:
    """``htc pool stop``: stop every daemon of the pool under ``$HTC_HOME``, then the master.

    Args:
        fast: stop at once (jobs are killed, not given their retirement time).
        timeout: seconds to wait for the master to exit.

    Returns:
        The pool's status before it was stopped (``running`` False: it was not running).

    Raises:
        PoolStartError: the master is still running after ``timeout`` (see its log).
    """
    home = _home()
    transport = _transport(home)
    before = pool_status(transport=transport)
    if not before.running:
        return before
    try:
        request.send_command("master", m.DaemonsOff(include_master=True, how="fast" if fast else "graceful"),
                             transport=transport, timeout=10)
    except DaemonUnreachable:
        return before
    if not _wait_gone(before.master_pid, transport, timeout):
        raise PoolStartError(f"the master (pid {before.master_pid}) is still stopping after {timeout:g} s; "
                             f"its daemons may be waiting for jobs to finish: use 'htc pool stop -fast', "
                             f"or see {home / 'log' / 'MasterLog'}")
    return before


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
                      reset_usage: bool = False, transport: Transport | None = None) -> str:
    """condor_userprio -setprio / -setfactor / -resetusage: change one submitter's standing.

    Args:
        submitter: ``user@domain`` as ``htc userprio`` shows it (a bare ``user`` works when
            exactly one submitter has that name).
        priority: the new real user priority (>= 0.5; it decays toward 0.5 as usage ages).
        factor: the new priority factor (>= 1; larger means a worse effective priority).
        reset_usage: forget the submitter's accumulated usage.
        transport: how to reach the negotiator (default: this pool).

    Returns:
        What the negotiator did, in words.

    Raises:
        RemoteError: not the administrator (``denied``), or a bad value or name (``bad_request``).
        DaemonUnreachable: the negotiator is not running.
    """
    msg = m.SetUserPriority(submitter=submitter, priority=priority, factor=factor, reset_usage=reset_usage)
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
        )
        if all_users or rec.resources_used > 0 or rec.weighted_accumulated_usage > 0:
            out.append(rec)
    out.sort(key=lambda r: (r.effective_priority, r.name))
    return out
