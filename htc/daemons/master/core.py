"""The master's sans-IO core: starts the daemons of DAEMON_LIST, restarts them when they die, stops them.

Theory of operation
-------------------
Each daemon the master runs is a :class:`Child` that moves through the table of
:mod:`htc.daemons.master.states`; the effect of each step is one method of :class:`Master`
(:data:`_EFFECTS`), which produces the actions (spawn, signal, log, notify). Events come from
three places: administrators (``DaemonsOn``/``Off``/``Restart`` messages, SIGTERM), the service
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

The master also advertises itself (a ``DaemonMaster`` ad) every MASTER_UPDATE_INTERVAL and
answers ``QueryMaster`` with every daemon's state.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from htc.config.version import condor_version
from htc.daemons import core as c
from htc.daemons.master.events import (
    DAEMON_NO_RESTART,
    ChildExited,
    ChildStarted,
    Notify,
    SignalChild,
    Spawn,
    SpawnFailed,
)
from htc.daemons.master.settings import MasterSettings
from htc.daemons.master.states import BY_COMMAND, DAEMON_MACHINE, DState, Effect, Ev
from htc.transitions import transition
from htc.wire import messages as m

#: seconds before re-sending a Master ad the collector did not take
AD_RETRY = 5.0

#: daemons ``python -m htc.daemons`` can start; DAEMON_LIST may name others, which are ignored
RUNNABLE = ("COLLECTOR", "NEGOTIATOR", "SCHEDD", "STARTD", "SHARED_PORT")


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
        self.started_at: float | None = None  # when Started came (the ad's DaemonStartTime)
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
        c.dispatch(_ON_EVENT, "master", self, event, now, out)
        self._maybe_exit(now, out)
        return out

    # --- events -----------------------------------------------------------------------------------

    def _on_started(self, event: c.Started, now: float, out: list[c.Action]) -> None:
        self.started_at = now
        out.append(c.Log(f"master (pid {self.settings.pid}) starting; DAEMON_LIST: "
                         f"{', '.join(self.settings.daemon_list) or '(empty)'}"))
        self._adopt_list(now, out)
        self.next_ad_at = now if self.settings.collector else None

    def _on_tick(self, event: c.Tick, now: float, out: list[c.Action]) -> None:
        for child in list(self.children.values()):
            if child.restart_at is not None and child.restart_at <= now:
                child.restart_at = None
                self._step(child, Ev.BACKOFF_DONE, now, out)
            if child.kill_at is not None and child.kill_at <= now:
                self._step(child, Ev.KILL_TIMEOUT, now, out)
        if self.next_ad_at is not None and self.next_ad_at <= now:
            self._advertise(now, out)

    def _on_child_started(self, event: ChildStarted, now: float, out: list[c.Action]) -> None:
        child = self.children[event.daemon]
        child.pid = event.pid
        self._step(child, Ev.SPAWNED, now, out)

    def _on_spawn_failed(self, event: SpawnFailed, now: float, out: list[c.Action]) -> None:
        child = self.children[event.daemon]
        child.last_exit = f"could not be started: {event.error}"
        self._step(child, self._failure_event(child, now, spawn=True), now, out)

    def _on_child_exited(self, event: ChildExited, now: float, out: list[c.Action]) -> None:
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

    def _on_stop_requested(self, event: c.StopRequested, now: float, out: list[c.Action]) -> None:
        self._shutdown("fast" if event.fast else "graceful", now, out)

    def _on_reconfigured(self, event: c.Reconfigured, now: float, out: list[c.Action]) -> None:
        if event.settings is not None:
            self.settings = replace(event.settings, pid=event.settings.pid or self.settings.pid)
            self.next_ad_at = now if self.settings.collector else None
        for child in self.children.values():
            if child.state is DState.RUNNING and child.pid is not None:
                out.append(SignalChild(child.name, child.pid, int(signal.SIGHUP)))
        if not self.shutting_down:
            self._adopt_list(now, out)

    def _on_send_failed(self, event: c.SendFailed, now: float, out: list[c.Action]) -> None:
        out.append(c.Log(f"could not send {type(event.msg).__name__} to {event.to}: {event.error}"))
        if isinstance(event.msg, m.UpdateAd) and self.next_ad_at is not None:
            # The collector is often still starting (we may have just spawned it): try again
            # soon rather than leaving the pool without a Master ad for a whole interval.
            self.next_ad_at = min(self.next_ad_at, now + min(self.settings.update_interval, AD_RETRY))

    def _on_send_done(self, event: c.SendDone, now: float, out: list[c.Action]) -> None:
        """The collector took the Master ad: nothing more to do until the next update."""

    # --- one daemon's machine ---------------------------------------------------------------------

    def _step(self, child: Child, ev: Ev, now: float, out: list[c.Action]) -> None:
        new_state, effect = transition(DAEMON_MACHINE, f"master: {child.name}", child.state, ev)
        old_state = child.state
        child.state = new_state
        if new_state is not old_state:
            child.since = now
        if effect is not None:
            _EFFECTS[effect](self, child, ev, now, out)
        if child.state is DState.OFF and not child.listed:
            del self.children[child.name]

    def _spawn(self, child: Child, ev: Ev, now: float, out: list[c.Action]) -> None:
        if ev in BY_COMMAND:
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
            "CondorVersion": condor_version(),
            # what condor_status -master shows: the machine's size and the master's uptime
            "DetectedCpus": self.settings.detected_cpus,
            "DetectedMemory": self.settings.detected_memory,
            "DaemonStartTime": int(self.started_at if self.started_at is not None else now),
        })
        for child in self.children.values():
            ad[f"{child.name.capitalize()}_State"] = child.state.value
        return str(ad)

    # --- requests ---------------------------------------------------------------------------------

    def _on_received(self, event: c.Received, now: float, out: list[c.Action]) -> None:
        on_request = _ON_REQUEST.get(type(event.msg))
        if on_request is None:
            out.append(c.unknown_request(event, "master"))
            return
        on_request(self, event, now, out)

    def _query(self, event: c.Received, now: float, out: list[c.Action]) -> None:
        out.append(c.Reply(event.conn_id, self.status()))

    def _command(self, event: c.Received, now: float, out: list[c.Action]) -> None:
        """DaemonsOn, DaemonsOff or DaemonsRestart: step the daemons named (none named: all)."""
        msg = event.msg
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
        ev = _COMMAND_EVENTS[type(msg)]
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


_Handler = Callable[[Master, c.Event, float, list[c.Action]], None]

#: event type -> what the master does with it
_ON_EVENT: dict[type, _Handler] = {
    c.Started: Master._on_started,
    c.Tick: Master._on_tick,
    ChildStarted: Master._on_child_started,
    SpawnFailed: Master._on_spawn_failed,
    ChildExited: Master._on_child_exited,
    c.Received: Master._on_received,
    c.StopRequested: Master._on_stop_requested,
    c.Reconfigured: Master._on_reconfigured,
    c.SendFailed: Master._on_send_failed,
    c.SendDone: Master._on_send_done,
}

#: request message type -> how the master answers it (any other: ``unknown_request``)
_ON_REQUEST: dict[type, Callable[[Master, c.Received, float, list[c.Action]], None]] = {
    m.QueryMaster: Master._query,
    m.DaemonsOn: Master._command,
    m.DaemonsOff: Master._command,
    m.DaemonsRestart: Master._command,
}

#: the step a command makes every daemon it names take
_COMMAND_EVENTS = {m.DaemonsOn: Ev.ON, m.DaemonsOff: Ev.OFF, m.DaemonsRestart: Ev.RESTART}

#: effect of a step of :data:`~htc.daemons.master.states.DAEMON_MACHINE` -> the method that does it
_EFFECTS: dict[Effect, Callable[[Master, Child, Ev, float, list[c.Action]], None]] = {
    Effect.SPAWN: Master._spawn,
    Effect.RUNNING: Master._running,
    Effect.SCHEDULE_RESTART: Master._schedule_restart,
    Effect.GIVE_UP: Master._give_up,
    Effect.TERMINATE: Master._terminate,
    Effect.KILL: Master._kill,
    Effect.STOPPED: Master._stopped,
    Effect.CANCEL_RESTART: Master._cancel_restart,
}
