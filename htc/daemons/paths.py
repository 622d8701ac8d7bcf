"""Where a host's daemons live: the pool's home, its sockets and logs, and their configuration.

Theory of operation
-------------------
Every daemon of a host works under one home (``$HTC_HOME``, else ``~/.htc``): ``sockets/``
holds one Unix socket per daemon (the names other daemons and the tools reach it by on this
host), ``log/`` one log per daemon named as HTCondor names them (``SchedLog``, ``StartLog``).
:class:`DaemonPaths` names these places and refuses a home other users could change;
:func:`load_daemon_config` reads the configuration as a daemon's subsystem sees it. Nothing
here runs a daemon (:mod:`htc.daemons.service` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from htc.errors import UsageError
from htc.wire.transport import UnixTransport

__all__ = ["LOG_FILE_NAMES", "DaemonPaths", "home_dir", "load_daemon_config"]

#: log file names, as HTCondor names them (SchedLog, StartLog, ...)
LOG_FILE_NAMES = {
    "master": "MasterLog",
    "collector": "CollectorLog",
    "negotiator": "NegotiatorLog",
    "schedd": "SchedLog",
    "startd": "StartLog",
    "shared_port": "SharedPortLog",
}


@dataclass(frozen=True)
class DaemonPaths:
    """Where a daemon finds its sockets and writes its log under ``home`` ($HTC_HOME)."""

    home: Path

    @property
    def sockets(self) -> Path:
        """``$HTC_HOME/sockets``: one socket file per daemon."""
        return self.home / "sockets"

    @property
    def log(self) -> Path:
        """``$HTC_HOME/log``: daemon logs."""
        return self.home / "log"

    def log_file(self, daemon: str) -> Path:
        """The log of ``daemon`` (``collector`` -> ``log/CollectorLog``)."""
        return self.log / LOG_FILE_NAMES.get(daemon, daemon.capitalize() + "Log")

    def transport(self) -> UnixTransport:
        """The local transport reaching every daemon of this home."""
        return UnixTransport(self.sockets)

    def prepare(self) -> None:
        """Create the home, ``log`` and ``sockets`` with mode 0755 whatever the umask, and refuse to
        run from a home that other users can change.

        Raises:
            UsageError: the home, or one of its directories (``config.d``, ``log``, ``sockets``,
                ``spool``, ``execute``), or a directory above it, is writable by others or owned
                by another user; the text names it and says how to fix it.
        """
        from htc.config.safety import make_dir, unsafe_reason

        self.home.parent.mkdir(parents=True, exist_ok=True)
        for path in (self.home, self.log, self.sockets):
            make_dir(str(path))
        for path in (self.home, self.home / "config.d", self.log, self.sockets, self.home / "spool",
                     self.home / "execute"):
            if path.exists():
                reason = unsafe_reason(str(path))
                if reason is not None:
                    raise UsageError(f"refusing to run from {self.home}: {reason}")


def home_dir() -> Path:
    """The pool's home: ``$HTC_HOME``, else ``~/.htc`` (as :func:`htc.config.htc_home` says)."""
    from htc.config import htc_home

    return Path(htc_home())


def load_daemon_config(subsystem: str):
    """Read the configuration as daemon ``subsystem`` (``COLLECTOR``) sees it.

    Raises:
        UsageError: the configuration files are broken; the text says where.
    """
    from htc.config import load_config

    return load_config(subsystem)
