"""The master's settings: each field names the HTCondor knob it comes from."""

from __future__ import annotations

import math
import os
import pwd
import re
from dataclasses import dataclass

from htc.config.hostname import daemon_name, full_hostname
from htc.daemons.settings import knob


def daemon_list(value: object) -> tuple[str, ...]:
    """DAEMON_LIST as upper-case names, without MASTER itself."""
    if not value:
        value = []
    if isinstance(value, str):
        value = [d for d in re.split(r"[\s,]+", value) if d]
    return tuple(d.upper() for d in value if d.upper() != "MASTER")


def master_name(value: object, host: str | None = None) -> str:
    """The master's Name as HTCondor gives it (``MASTER_NAME`` in its manual, ``default_daemon_name``
    and ``build_valid_daemon_name`` in its source), on host ``host`` (default: this host's full name).

    Unset: the host's full name for a master run by root (or by the ``condor`` user), else
    ``user@host`` (a personal pool). Set without an ``@``: ``NAME@host``; with one: as it is.
    """
    host = host or full_hostname()
    if str(value or "").strip():
        return daemon_name(value, host)
    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a user id without a name (a container's): nothing to put before the @
        return host
    return host if os.geteuid() == 0 or user == "condor" else f"{user}@{host}"


@dataclass(frozen=True)
class MasterSettings:
    """What the master core needs from the configuration (names are HTCondor's knobs)."""

    daemon_list: tuple[str, ...] = knob("DAEMON_LIST", ("COLLECTOR",), convert=daemon_list)
    name: str = knob("MASTER_NAME", "", convert=master_name)
    address: str = "master"                              # where tools reach this master
    collector: str | None = "collector"                  # where the Master ad goes (None: nowhere)
    backoff_constant: float = knob("MASTER_BACKOFF_CONSTANT", 9.0)
    backoff_factor: float = knob("MASTER_BACKOFF_FACTOR", 2.0)
    backoff_ceiling: float = knob("MASTER_BACKOFF_CEILING", 3600.0)
    recover_factor: float = knob("MASTER_RECOVER_FACTOR", 300.0)
    max_restarts: int = knob("MASTER_MAX_RESTARTS", 10)  # 0: never give up
    graceful_timeout: float = knob("SHUTDOWN_GRACEFUL_TIMEOUT", 1800.0)
    fast_timeout: float = knob("SHUTDOWN_FAST_TIMEOUT", 300.0)
    update_interval: float = knob("MASTER_UPDATE_INTERVAL", 300.0)
    admin: str = knob("CONDOR_ADMIN", "")                # empty: no mail
    mail: str = knob("MAIL", "mail", convert=lambda value: str(value or "mail"))
    pid: int = 0                                         # the master's own pid, for its ad
    detected_cpus: int = knob("DETECTED_CPUS", 0, convert=lambda value: int(value or 0))       # for its ad
    detected_memory: int = knob("DETECTED_MEMORY", 0, convert=lambda value: int(value or 0))   # MiB, for its ad

    def backoff(self, restarts: int) -> float:
        """Seconds to wait before automatic restart number ``restarts + 1`` (HTCondor's NextStart)."""
        try:
            seconds = self.backoff_constant + math.ceil(self.backoff_factor ** restarts)
        except OverflowError:
            return self.backoff_ceiling
        return self.backoff_ceiling if seconds > self.backoff_ceiling or seconds < 0 else seconds
