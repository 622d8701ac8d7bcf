"""The personal pool: start it, stop it, and see what its daemons are doing.

``start_pool`` / ``stop_pool`` / ``pool_status`` are ``htc pool start|stop|status``:
the master of the pool under ``$HTC_HOME`` (``HTC_HOME`` selects the pool) and the daemons it
runs.  The administrator tools that act on a running pool are in :mod:`htc.client.admin`.

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
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import psutil

from htc.client import request
from htc.errors import HTCError
from htc.wire import messages as m
from htc.wire.errors import DaemonUnreachable
from htc.wire.transport import Transport, UnixTransport

__all__ = ["DaemonInfo", "PoolStatus", "PoolStartError", "start_pool", "stop_pool", "pool_status"]

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
    created_key: str = ""  # the pool key file this start created (a central manager's first start)

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
        UsageError: ``$HTC_HOME`` cannot be created or its configuration is broken; or, on a
            host of a multi-host pool, the pool key is missing (a central manager creates it
            instead: ``created_key`` names it) or unsafe (:mod:`htc.client.pool_role`).
    """
    from htc.client.pool_role import host_role, prepare_pool_key
    from htc.config import ensure_home, load_config

    home = _home()
    ensure_home()
    created_key = prepare_pool_key(host_role(load_config("MASTER")))
    if foreground:
        from htc.daemons.__main__ import main as run_daemon

        os.environ["HTC_HOME"] = str(home)
        return run_daemon(["master", "-home", str(home)])
    transport = _transport(home)
    current = pool_status(transport=transport)
    if current.running and not current.shutting_down:
        return replace(_wait_settled(home, transport, current.master_pid, timeout), created_key=created_key)
    if current.running:
        _wait_gone(current.master_pid, transport, timeout)
    pid = _launch_master(home)
    return replace(_wait_settled(home, transport, pid, timeout), created_key=created_key)


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
