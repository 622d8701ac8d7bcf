"""The collector's service: the :class:`~htc.daemons.collector.core.Collector` core on real sockets.

The collector needs no I/O of its own beyond what every daemon does (listen, answer, log), so
its service is a plain :class:`~htc.daemons.service.DaemonService`; this module builds it from
the configuration.
"""

from __future__ import annotations

import os

from htc.config.hostname import full_hostname
from htc.daemons.clock import REAL, Clock
from htc.daemons.collector.core import Collector
from htc.daemons.collector.settings import CollectorSettings
from htc.daemons.service import DaemonPaths, DaemonService, load_daemon_config
from htc.daemons.settings import from_config


def settings_from_config(config, address: str = "collector") -> CollectorSettings:
    """Build the collector's settings from the configuration (COLLECTOR subsystem)."""
    return from_config(CollectorSettings, config, address=address, machine=full_hostname(config), pid=os.getpid())


def make_service(paths: DaemonPaths, clock: Clock = REAL) -> DaemonService:
    """The collector's service for the pool at ``paths`` (used by ``python -m htc.daemons``).

    Args:
        paths: the pool's home.
        clock: where the service takes the time from (a test passes a FakeClock).

    Raises:
        UsageError: the configuration is broken.
    """
    def settings() -> CollectorSettings:
        return settings_from_config(load_daemon_config("COLLECTOR"))

    return DaemonService("collector", Collector(settings()), paths.transport(),
                         log_file=paths.log_file("collector"), reload_settings=settings, clock=clock)
