"""The master's service: the :class:`~htc.daemons.master.core.Master` core with real processes.

:class:`MasterService` teaches :class:`~htc.daemons.service.DaemonService` the master's own
actions: :class:`~htc.daemons.master.events.Spawn` starts ``python -m htc.daemons <name>`` (its
standard error appended to ``log/<Daemon>Log.stderr``) and feeds back ``ChildStarted`` or
``SpawnFailed``, then ``ChildExited`` when the process ends (reaped through a pidfd);
``SignalChild`` sends a signal; ``Notify`` runs the administrator's mail command.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

from htc.config.hostname import full_hostname
from htc.daemons.clock import REAL, Clock
from htc.daemons.master.core import Master
from htc.daemons.master.events import ChildExited, ChildStarted, Notify, SignalChild, Spawn, SpawnFailed
from htc.daemons.master.settings import MasterSettings, master_name
from htc.daemons.network import network_mode, pool_addresses, service_transport
from htc.daemons.service import PARENT_PID_ENV, DaemonPaths, DaemonService, load_daemon_config
from htc.daemons.settings import from_config


def settings_from_config(config, pid: int) -> MasterSettings:
    """Build the master's settings from the configuration (MASTER subsystem).

    In network mode (COLLECTOR_HOST with a real port, :func:`htc.daemons.network.network_mode`)
    with USE_SHARED_PORT, SHARED_PORT is put first in DAEMON_LIST if it is not there, as
    HTCondor's master starts condor_shared_port before the daemons behind it.
    """
    net = pool_addresses(config, "master")  # network mode: <ip:9618?sock=master> and <cm:9618>
    settings = from_config(MasterSettings, config, pid=pid, address=net.own, collector=net.collector,
                           name=master_name(config.param("MASTER_NAME"), full_hostname(config)))
    if (network_mode(config) and config.param("USE_SHARED_PORT")
            and "SHARED_PORT" not in settings.daemon_list):
        settings = replace(settings, daemon_list=("SHARED_PORT", *settings.daemon_list))
    return settings


def make_service(paths: DaemonPaths, clock: Clock = REAL) -> MasterService:
    """The master's service for the pool at ``paths`` (used by ``python -m htc.daemons``).

    Raises:
        UsageError: the configuration is broken.
    """
    def settings() -> MasterSettings:
        return settings_from_config(load_daemon_config("MASTER"), os.getpid())

    transport = service_transport(paths.sockets, load_daemon_config("MASTER"))
    return MasterService(Master(settings()), paths, settings, clock=clock, transport=transport)


class MasterService(DaemonService):
    """Spawns, signals and reaps the master's daemons; tells the administrator."""

    def __init__(self, core: Master, paths: DaemonPaths, reload_settings, clock: Clock = REAL, transport=None):
        super().__init__("master", core, transport or paths.transport(), log_file=paths.log_file("master"),
                         reload_settings=reload_settings, clock=clock)
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
