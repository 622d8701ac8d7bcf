"""The master: starts the daemons of DAEMON_LIST, restarts them when they die, stops them.

Theory of operation
-------------------
Each daemon the master runs is a small state machine, :data:`DAEMON_MACHINE`, keyed by
``(state, event)`` and valued ``(new state, effect)``.  The effect names a method of
:class:`Master` that produces the actions (spawn, signal, log, notify).  Events come from three
places: administrators (``DaemonsOn``/``Off``/``Restart`` messages, SIGTERM), the service
(``ChildStarted``, ``SpawnFailed``, ``ChildExited``) and the clock (a backoff or a kill grace
ending, found on :class:`~htc.daemons.core.Tick`).

An exit the master did not ask for is sorted before the table is consulted:

* exit status 4 (HTCondor's DAEMON_NO_RESTART): the daemon asked not to be restarted -> Off;
* otherwise it crashed.  If it ran at least MASTER_RECOVER_FACTOR seconds it had *recovered*
  and its restart count goes back to 0 (HTCondor does this with a timer; checking at exit time
  is equivalent).  After MASTER_MAX_RESTARTS restarts in a row the master gives up: it logs,
  runs the administrator's mail command, and leaves the daemon alone until ``htc on``.
  Otherwise it waits, as HTCondor's ``daemon::NextStart`` does,
  ``MASTER_BACKOFF_CONSTANT + ceil(MASTER_BACKOFF_FACTOR ** restarts)`` seconds, at most
  MASTER_BACKOFF_CEILING: 10, 11, 13, 17, 25, ... s with the defaults.

A restart asked for by command starts the daemon again as soon as it has stopped, with a clean
restart count.  Stopping sends SIGTERM (graceful) or SIGQUIT (fast), then SIGKILL once
SHUTDOWN_GRACEFUL_TIMEOUT / SHUTDOWN_FAST_TIMEOUT has passed.  When the master itself stops it
turns every daemon Off and exits once none is left running.
"""

from __future__ import annotations

import enum
import logging
import math
import os
import re
import signal
import socket
import sys
from dataclasses import dataclass, field, replace

from htc.daemons import core as c
from htc.daemons.service import PARENT_PID_ENV, DaemonPaths, DaemonService, load_daemon_config
from htc.wire import messages as m

#: exit status with which a daemon tells its master not to restart it (HTCondor's value)
DAEMON_NO_RESTART = 4

#: seconds before re-sending a Master ad the collector did not take
AD_RETRY = 5.0

#: daemons ``python -m htc.daemons`` can start; DAEMON_LIST may name others, which are ignored
RUNNABLE = ("COLLECTOR", "NEGOTIATOR", "SCHEDD", "STARTD")


class DState(enum.Enum):
    """Where one daemon of the master stands."""

    OFF = "Off"
    STARTING = "Starting"
    RUNNING = "Running"
    STOPPING = "Stopping"
    RESTARTING = "Restarting"
    BACKOFF = "Backoff"
    GAVE_UP = "GaveUp"


class Ev(enum.Enum):
    """What can happen to one daemon of the master."""

    ON = "on"
    OFF = "off"
    RESTART = "restart"
    SPAWNED = "spawned"
    SPAWN_FAILED = "spawn failed"
    SPAWN_FAILED_TOO_OFTEN = "spawn failed too often"
    CRASHED = "crashed"
    CRASHED_TOO_OFTEN = "crashed too often"
    EXITED_NO_RESTART = "exited asking not to be restarted"
    EXITED = "exited"
    BACKOFF_DONE = "backoff done"
    KILL_TIMEOUT = "kill timeout"


S, E = DState, Ev
#: (state, event) -> (new state, effect); effect None means no action
DAEMON_MACHINE: dict[tuple[DState, Ev], tuple[DState, str | None]] = {
    (S.OFF, E.ON): (S.STARTING, "spawn"),
    (S.OFF, E.RESTART): (S.STARTING, "spawn"),
    (S.OFF, E.OFF): (S.OFF, None),
    (S.STARTING, E.SPAWNED): (S.RUNNING, "running"),
    (S.STARTING, E.SPAWN_FAILED): (S.BACKOFF, "schedule_restart"),
    (S.STARTING, E.SPAWN_FAILED_TOO_OFTEN): (S.GAVE_UP, "give_up"),
    (S.RUNNING, E.ON): (S.RUNNING, None),
    (S.RUNNING, E.OFF): (S.STOPPING, "terminate"),
    (S.RUNNING, E.RESTART): (S.RESTARTING, "terminate"),
    (S.RUNNING, E.CRASHED): (S.BACKOFF, "schedule_restart"),
    (S.RUNNING, E.CRASHED_TOO_OFTEN): (S.GAVE_UP, "give_up"),
    (S.RUNNING, E.EXITED_NO_RESTART): (S.OFF, "stopped"),
    (S.STOPPING, E.ON): (S.RESTARTING, None),
    (S.STOPPING, E.RESTART): (S.RESTARTING, None),
    (S.STOPPING, E.OFF): (S.STOPPING, "terminate"),  # a fast off hurries a graceful one
    (S.STOPPING, E.EXITED): (S.OFF, "stopped"),
    (S.STOPPING, E.KILL_TIMEOUT): (S.STOPPING, "kill"),
    (S.RESTARTING, E.ON): (S.RESTARTING, None),
    (S.RESTARTING, E.RESTART): (S.RESTARTING, None),
    (S.RESTARTING, E.OFF): (S.STOPPING, "terminate"),
    (S.RESTARTING, E.EXITED): (S.STARTING, "spawn"),
    (S.RESTARTING, E.KILL_TIMEOUT): (S.RESTARTING, "kill"),
    (S.BACKOFF, E.BACKOFF_DONE): (S.STARTING, "spawn"),
    (S.BACKOFF, E.ON): (S.STARTING, "spawn"),
    (S.BACKOFF, E.RESTART): (S.STARTING, "spawn"),
    (S.BACKOFF, E.OFF): (S.OFF, "cancel_restart"),
    (S.GAVE_UP, E.ON): (S.STARTING, "spawn"),
    (S.GAVE_UP, E.RESTART): (S.STARTING, "spawn"),
    (S.GAVE_UP, E.OFF): (S.OFF, None),
}
del S, E


def machine_table() -> str:
    """:data:`DAEMON_MACHINE` as a Markdown table (docs/daemons.md embeds it; a test keeps it current)."""
    lines = ["| state | event | new state | effect |", "|---|---|---|---|"]
    for (state, ev), (new, effect) in DAEMON_MACHINE.items():
        lines.append(f"| {state.value} | {ev.value} | {new.value} | {effect or '-'} |")
    return "\n".join(lines)

#: events by which an administrator (not a crash) starts a daemon: they clear its restart count
_BY_COMMAND = {Ev.ON, Ev.RESTART, Ev.EXITED}


@dataclass(frozen=True)
class MasterSettings:
    """What the master core needs from the configuration (names are HTCondor's knobs)."""

    daemon_list: tuple[str, ...] = ("COLLECTOR",)      # DAEMON_LIST (MASTER itself left out)
    name: str = "master"                                 # MASTER_NAME / the host name
    address: str = "master"                              # where tools reach this master
    collector: str | None = "collector"                  # where the Master ad goes (None: nowhere)
    backoff_constant: float = 9.0                        # MASTER_BACKOFF_CONSTANT
    backoff_factor: float = 2.0                          # MASTER_BACKOFF_FACTOR
    backoff_ceiling: float = 3600.0                      # MASTER_BACKOFF_CEILING
    recover_factor: float = 300.0                        # MASTER_RECOVER_FACTOR
    max_restarts: int = 10                               # MASTER_MAX_RESTARTS (0: never give up)
    graceful_timeout: float = 1800.0                     # SHUTDOWN_GRACEFUL_TIMEOUT
    fast_timeout: float = 300.0                          # SHUTDOWN_FAST_TIMEOUT
    update_interval: float = 300.0                       # MASTER_UPDATE_INTERVAL
    admin: str = ""                                      # CONDOR_ADMIN (empty: no mail)
    mail: str = "mail"                                   # MAIL
    pid: int = 0                                         # the master's own pid, for its ad

    def backoff(self, restarts: int) -> float:
        """Seconds to wait before automatic restart number ``restarts + 1`` (HTCondor's NextStart)."""
        try:
            seconds = self.backoff_constant + math.ceil(self.backoff_factor ** restarts)
        except OverflowError:
            return self.backoff_ceiling
        return self.backoff_ceiling if seconds > self.backoff_ceiling or seconds < 0 else seconds


# --- master-specific events and actions ---------------------------------------------------------


@dataclass(frozen=True)
class ChildStarted(c.Event):
    """The service started ``daemon`` as process ``pid``."""

    daemon: str
    pid: int


@dataclass(frozen=True)
class SpawnFailed(c.Event):
    """The service could not start ``daemon``."""

    daemon: str
    error: str


@dataclass(frozen=True)
class ChildExited(c.Event):
    """Process ``pid`` of ``daemon`` ended; ``returncode`` < 0 means killed by that signal."""

    daemon: str
    pid: int
    returncode: int


@dataclass(frozen=True)
class Spawn(c.Action):
    """Start ``daemon`` (``python -m htc.daemons <daemon>``); answer ChildStarted or SpawnFailed."""

    daemon: str


@dataclass(frozen=True)
class SignalChild(c.Action):
    """Send ``signum`` to process ``pid`` of ``daemon``."""

    daemon: str
    pid: int
    signum: int


@dataclass(frozen=True)
class Notify(c.Action):
    """Tell the administrator: run ``argv`` with ``body`` on its standard input."""

    argv: tuple[str, ...]
    body: str


@dataclass
class Child:
    """The master's record of one daemon."""

    name: str
    state: DState = DState.OFF
    since: float = 0.0
    pid: int | None = None
    started_at: float | None = None
    restarts: int = 0
    restart_at: float | None = None
    kill_at: float | None = None
    listed: bool = True
    how: str = "graceful"
    last_exit: str = field(default="")


def describe_exit(returncode: int) -> str:
    """``-9`` -> ``died due to signal 9 (SIGKILL)``; ``3`` -> ``exited with status 3``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"died due to signal {-returncode} ({name})"
    return f"exited with status {returncode}"


class Master:
    """The master's sans-IO core.

    Args:
        settings: the configuration it runs with (replaced on Reconfigured).
    """

    def __init__(self, settings: MasterSettings):
        self.settings = settings
        self.children: dict[str, Child] = {}
        self.shutting_down = False
        self.exited = False
        self.next_ad_at: float | None = None
        self._ad_sequence = 0

    # --- the core interface -------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The earliest backoff end, kill grace end or Master ad update."""
        times = [t for ch in self.children.values() for t in (ch.restart_at, ch.kill_at) if t is not None]
        if self.next_ad_at is not None and not self.exited:
            times.append(self.next_ad_at)
        return min(times, default=None)

    def handle(self, event: c.Event, now: float) -> list[c.Action]:
        """Apply one event; return what the service must do."""
        out: list[c.Action] = []
        if isinstance(event, c.Started):
            out.append(c.Log(f"master (pid {self.settings.pid}) starting; DAEMON_LIST: "
                             f"{', '.join(self.settings.daemon_list) or '(empty)'}"))
            self._adopt_list(now, out)
            self.next_ad_at = now if self.settings.collector else None
        elif isinstance(event, c.Tick):
            self._tick(now, out)
        elif isinstance(event, ChildStarted):
            child = self.children[event.daemon]
            child.pid = event.pid
            self._step(child, Ev.SPAWNED, now, out)
        elif isinstance(event, SpawnFailed):
            child = self.children[event.daemon]
            child.last_exit = f"could not be started: {event.error}"
            self._step(child, self._failure_event(child, now, spawn=True), now, out)
        elif isinstance(event, ChildExited):
            self._exited(event, now, out)
        elif isinstance(event, c.Received):
            self._request(event, now, out)
        elif isinstance(event, c.StopRequested):
            self._shutdown("fast" if event.fast else "graceful", now, out)
        elif isinstance(event, c.Reconfigured):
            self._reconfigure(event.settings, now, out)
        elif isinstance(event, c.SendFailed):
            out.append(c.Log(f"could not send {type(event.msg).__name__} to {event.to}: {event.error}"))
            if isinstance(event.msg, m.UpdateAd) and self.next_ad_at is not None:
                # The collector is often still starting (we may have just spawned it): try again
                # soon rather than leaving the pool without a Master ad for a whole interval.
                self.next_ad_at = min(self.next_ad_at, now + min(self.settings.update_interval, AD_RETRY))
        elif isinstance(event, c.SendDone):
            pass
        else:
            raise TypeError(f"master: unexpected event {event!r}")
        self._maybe_exit(now, out)
        return out

    # --- one daemon's machine ---------------------------------------------------------------------

    def _step(self, child: Child, ev: Ev, now: float, out: list[c.Action]) -> None:
        new_state, effect = c.transition(DAEMON_MACHINE, f"master: {child.name}", child.state, ev)
        old_state = child.state
        child.state = new_state
        if new_state is not old_state:
            child.since = now
        if effect is not None:
            getattr(self, f"_{effect}")(child, ev, now, out)
        if child.state is DState.OFF and not child.listed:
            del self.children[child.name]

    def _spawn(self, child: Child, ev: Ev, now: float, out: list[c.Action]) -> None:
        if ev in _BY_COMMAND:
            child.restarts = 0
        child.restart_at = None
        child.kill_at = None
        out.append(Spawn(child.name))

    def _running(self, child: Child, ev: Ev, now: float, out: list[c.Action]) -> None:
        child.started_at = now
        out.append(c.Log(f"started {child.name} (pid {child.pid})"))

    def _schedule_restart(self, child: Child, ev: Ev, now: float, out: list[c.Action]) -> None:
        delay = self.settings.backoff(child.restarts)
        child.restarts += 1
        child.restart_at = now + delay
        child.pid = None
        out.append(c.Log(f"the {child.name} {child.last_exit}; restarting it in {delay:g} seconds "
                         f"(restart {child.restarts} of {self.settings.max_restarts or 'unlimited'})"))

    def _give_up(self, child: Child, ev: Ev, now: float, out: list[c.Action]) -> None:
        child.pid = None
        child.restart_at = None
        subject = f"htc master on {self.settings.name}: giving up on {child.name}"
        body = (f"The {child.name} {child.last_exit}.\n"
                f"It was restarted {child.restarts} times in a row without staying up for "
                f"{self.settings.recover_factor:g} seconds (MASTER_MAX_RESTARTS = {self.settings.max_restarts}).\n"
                f"The master will not start it again until an administrator runs 'htc on -daemon "
                f"{child.name.lower()}'.\nSee its log for the cause.\n")
        out.append(c.Log(f"giving up on {child.name}: the {child.name} {child.last_exit} after {child.restarts} "
                         f"restarts in a row; start it again with 'htc on -daemon {child.name.lower()}'",
                         level=logging.ERROR))
        if self.settings.admin:
            out.append(Notify((self.settings.mail, "-s", subject, self.settings.admin), body))

    def _terminate(self, child: Child, ev: Ev, now: float, out: list[c.Action]) -> None:
        fast = child.how == "fast"
        grace = self.settings.fast_timeout if fast else self.settings.graceful_timeout
        deadline = now + grace
        child.kill_at = deadline if child.kill_at is None else min(child.kill_at, deadline)
        signum = signal.SIGQUIT if fast else signal.SIGTERM
        out.append(c.Log(f"stopping {child.name} (pid {child.pid}) with {signum.name}"))
        out.append(SignalChild(child.name, child.pid, int(signum)))

    def _kill(self, child: Child, ev: Ev, now: float, out: list[c.Action]) -> None:
        child.kill_at = None
        out.append(c.Log(f"{child.name} (pid {child.pid}) did not stop in time; sending SIGKILL",
                         level=logging.WARNING))
        out.append(SignalChild(child.name, child.pid, int(signal.SIGKILL)))

    def _stopped(self, child: Child, ev: Ev, now: float, out: list[c.Action]) -> None:
        child.pid = None
        child.kill_at = None
        extra = " (it asked not to be restarted)" if ev is Ev.EXITED_NO_RESTART else ""
        out.append(c.Log(f"the {child.name} {child.last_exit}{extra}"))

    def _cancel_restart(self, child: Child, ev: Ev, now: float, out: list[c.Action]) -> None:
        child.restart_at = None
        out.append(c.Log(f"{child.name} will not be restarted: turned off"))

    def _failure_event(self, child: Child, now: float, spawn: bool = False) -> Ev:
        if child.started_at is not None and now - child.started_at >= self.settings.recover_factor:
            child.restarts = 0  # it had recovered: a crash after a long run starts a fresh count
        limit = self.settings.max_restarts
        if limit and child.restarts >= limit:
            return Ev.SPAWN_FAILED_TOO_OFTEN if spawn else Ev.CRASHED_TOO_OFTEN
        return Ev.SPAWN_FAILED if spawn else Ev.CRASHED

    def _exited(self, event: ChildExited, now: float, out: list[c.Action]) -> None:
        child = self.children.get(event.daemon)
        if child is None or child.pid != event.pid:
            out.append(c.Log(f"reaped unknown process {event.pid} ({event.daemon})", level=logging.WARNING))
            return
        child.last_exit = f"(pid {event.pid}) {describe_exit(event.returncode)}"
        if child.state is DState.RUNNING:
            if event.returncode == DAEMON_NO_RESTART:
                ev = Ev.EXITED_NO_RESTART
            else:
                ev = self._failure_event(child, now)
        else:
            ev = Ev.EXITED
        child.pid = None
        child.started_at = None  # so that a later failure to spawn is not mistaken for a recovery
        self._step(child, ev, now, out)

    def _tick(self, now: float, out: list[c.Action]) -> None:
        for child in list(self.children.values()):
            if child.restart_at is not None and child.restart_at <= now:
                child.restart_at = None
                self._step(child, Ev.BACKOFF_DONE, now, out)
            if child.kill_at is not None and child.kill_at <= now:
                self._step(child, Ev.KILL_TIMEOUT, now, out)
        if self.next_ad_at is not None and self.next_ad_at <= now:
            self._advertise(now, out)

    # --- the master as a whole ------------------------------------------------------------------

    def _adopt_list(self, now: float, out: list[c.Action]) -> None:
        """Start what DAEMON_LIST names and is not running; stop what it no longer names."""
        wanted = []
        for name in self.settings.daemon_list:
            name = name.upper()
            if name == "MASTER":
                continue
            if name not in RUNNABLE:
                out.append(c.Log(f"DAEMON_LIST names {name}, which htc does not have; ignoring it",
                                  level=logging.WARNING))
                continue
            wanted.append(name)
        for name in wanted:
            child = self.children.get(name)
            if child is None:
                child = self.children[name] = Child(name, since=now)
            child.listed = True
            if child.state is DState.OFF and not self.shutting_down:
                self._step(child, Ev.ON, now, out)
        for child in list(self.children.values()):
            if child.name not in wanted:
                child.listed = False
                self._step(child, Ev.OFF, now, out)

    def _shutdown(self, how: str, now: float, out: list[c.Action]) -> None:
        if not self.shutting_down:
            out.append(c.Log(f"master shutting down ({how})"))
        self.shutting_down = True
        for child in list(self.children.values()):
            child.how = how
            self._step(child, Ev.OFF, now, out)

    def _maybe_exit(self, now: float, out: list[c.Action]) -> None:
        if self.shutting_down and not self.exited and all(ch.pid is None for ch in self.children.values()):
            self.exited = True
            # Withdraw our ad, unless the collector was ours: it is gone, and our ad with it.
            if self.settings.collector and "COLLECTOR" not in self.children:
                out.append(c.Send(self.settings.collector, m.InvalidateAd(
                    ad_type=m.AdType.Master, name=self.settings.name), timeout=2.0))
            out.append(c.Log("all daemons stopped; master exiting"))
            out.append(c.Exit(0))

    def _reconfigure(self, settings: MasterSettings | None, now: float, out: list[c.Action]) -> None:
        if settings is not None:
            self.settings = replace(settings, pid=settings.pid or self.settings.pid)
            self.next_ad_at = now if self.settings.collector else None
        for child in self.children.values():
            if child.state is DState.RUNNING and child.pid is not None:
                out.append(SignalChild(child.name, child.pid, int(signal.SIGHUP)))
        if not self.shutting_down:
            self._adopt_list(now, out)

    def _advertise(self, now: float, out: list[c.Action]) -> None:
        if not self.settings.collector:
            self.next_ad_at = None
            return
        self.next_ad_at = now + self.settings.update_interval
        self._ad_sequence += 1
        out.append(c.Send(self.settings.collector, m.UpdateAd(
            ad_type=m.AdType.Master, name=self.settings.name, ad_text=self.ad_text(now),
            lifetime=int(3 * self.settings.update_interval)), timeout=10.0))

    def ad_text(self, now: float) -> str:
        """The Master ad (new ClassAd syntax) describing this master and its daemons."""
        from htc.classad import ClassAd

        ad = ClassAd({
            "MyType": m.AdType.Master.value,
            "Name": self.settings.name,
            "Machine": self.settings.name.rpartition("@")[2],
            "MyAddress": self.settings.address,
            "MasterPid": self.settings.pid,
            "DaemonList": ", ".join(["MASTER", *self.children]),
            "UpdateSequenceNumber": self._ad_sequence,
            "UpdateInterval": int(self.settings.update_interval),
            "CondorVersion": f"$CondorVersion: htc {_version()} $",
        })
        for child in self.children.values():
            ad[f"{child.name.capitalize()}_State"] = child.state.value
        return str(ad)

    # --- requests ---------------------------------------------------------------------------------

    def _request(self, event: c.Received, now: float, out: list[c.Action]) -> None:
        msg = event.msg
        if isinstance(msg, m.QueryMaster):
            out.append(c.Reply(event.conn_id, self.status()))
            return
        if not isinstance(msg, (m.DaemonsOn, m.DaemonsOff, m.DaemonsRestart)):
            out.append(c.unknown_request(event, "master"))
            return
        if isinstance(msg, m.DaemonsOff) and msg.include_master:
            self._shutdown(msg.how, now, out)
            out.append(c.Reply(event.conn_id, m.Ack(detail="master and its daemons are stopping")))
            return
        if self.shutting_down:
            out.append(c.Reply(event.conn_id, m.ErrorReply(
                code="unavailable", message="the master is shutting down; start it again with 'htc pool start'")))
            return
        names = [n.upper() for n in msg.daemons] or list(self.children)
        unknown = [n for n in names if n not in self.children]
        if unknown:
            out.append(c.bad_request(event, f"this master runs {', '.join(self.children) or 'no daemons'}; "
                                            f"it has no {', '.join(unknown)} (see DAEMON_LIST)"))
            return
        ev = {m.DaemonsOn: Ev.ON, m.DaemonsOff: Ev.OFF, m.DaemonsRestart: Ev.RESTART}[type(msg)]
        for name in names:
            child = self.children[name]
            child.how = getattr(msg, "how", "graceful")
            self._step(child, ev, now, out)
        verb = {Ev.ON: "on", Ev.OFF: "off", Ev.RESTART: "restarting"}[ev]
        out.append(c.Log(f"{', '.join(names)}: {verb} by request of {event.peer.description or 'a tool'}"))
        out.append(c.Reply(event.conn_id, m.Ack(detail=f"{', '.join(names)}: {verb}")))

    def status(self) -> m.MasterStatus:
        """The MasterStatus reply: every daemon's state, pid and restart count."""
        return m.MasterStatus(master_pid=self.settings.pid, shutting_down=self.shutting_down, daemons=tuple(
            m.DaemonStatus(name=ch.name, state=ch.state.value, pid=ch.pid, restarts=ch.restarts,
                           since=ch.since, next_start=ch.restart_at)
            for ch in self.children.values()))


def _version() -> str:
    from htc import __version__

    return __version__


# --- the service ------------------------------------------------------------------------------------


def settings_from_config(config, pid: int) -> MasterSettings:
    """Build the master's settings from the configuration (MASTER subsystem)."""
    daemons = config.param("DAEMON_LIST") or ""
    if isinstance(daemons, str):
        daemons = [d for d in re.split(r"[\s,]+", daemons) if d]
    name = config.param("MASTER_NAME") or socket.getfqdn()
    if "@" not in name:
        name = f"master@{name}"
    return MasterSettings(
        daemon_list=tuple(d.upper() for d in daemons if d.upper() != "MASTER"),
        name=name,
        backoff_constant=float(config.param("MASTER_BACKOFF_CONSTANT")),
        backoff_factor=float(config.param("MASTER_BACKOFF_FACTOR")),
        backoff_ceiling=float(config.param("MASTER_BACKOFF_CEILING")),
        recover_factor=float(config.param("MASTER_RECOVER_FACTOR")),
        max_restarts=int(config.param("MASTER_MAX_RESTARTS")),
        graceful_timeout=float(config.param("SHUTDOWN_GRACEFUL_TIMEOUT")),
        fast_timeout=float(config.param("SHUTDOWN_FAST_TIMEOUT")),
        update_interval=float(config.param("MASTER_UPDATE_INTERVAL")),
        admin=str(config.param("CONDOR_ADMIN") or ""),
        mail=str(config.param("MAIL") or "mail"),
        pid=pid,
    )


def make_service(paths: DaemonPaths) -> MasterService:
    """The master's service for the pool at ``paths`` (used by ``python -m htc.daemons``).

    Raises:
        UsageError: the configuration is broken.
    """
    def settings() -> MasterSettings:
        return settings_from_config(load_daemon_config("MASTER"), os.getpid())

    return MasterService(Master(settings()), paths, settings)


class MasterService(DaemonService):
    """Spawns, signals and reaps the master's daemons; tells the administrator."""

    def __init__(self, core: Master, paths: DaemonPaths, reload_settings):
        super().__init__("master", core, paths.transport(), log_file=paths.log_file("master"),
                         reload_settings=reload_settings)
        self.paths = paths
        self.register_action(Spawn, self._do_spawn)
        self.register_action(SignalChild, self._do_signal)
        self.register_action(Notify, self._do_notify)

    def _do_spawn(self, action: Spawn) -> None:
        daemon = action.daemon.lower()
        argv = [sys.executable, "-m", "htc.daemons", daemon, "-home", str(self.paths.home)]
        env = dict(os.environ, HTC_HOME=str(self.paths.home), **{PARENT_PID_ENV: str(os.getpid())})
        self.paths.log.mkdir(mode=0o755, parents=True, exist_ok=True)
        stderr_path = self.paths.log_file(daemon).with_suffix(".stderr")
        try:
            pid = self.spawn(argv, env=env, stderr_path=stderr_path,
                             exited=lambda pid, rc: ChildExited(action.daemon, pid, rc))
        except OSError as exc:
            self.feed(SpawnFailed(action.daemon, str(exc)))
        else:
            self.feed(ChildStarted(action.daemon, pid))

    def _do_signal(self, action: SignalChild) -> None:
        try:
            os.kill(action.pid, action.signum)
        except ProcessLookupError:
            self.log.info("%s (pid %d) was already gone", action.daemon, action.pid)

    def _do_notify(self, action: Notify) -> None:
        self.start_task(self.run_command(action.argv, action.body), "notify the administrator")
