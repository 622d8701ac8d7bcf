"""What one host is in its pool, and the pool key it needs, checked before ``htc pool start``.

Theory of operation
-------------------
A host's configuration says what it is with HTCondor's metaknobs: ``use ROLE : CentralManager``,
``Submit`` and ``Execute`` (combinable) add COLLECTOR NEGOTIATOR, SCHEDD and STARTD to
DAEMON_LIST, and ``CONDOR_HOST`` names the central manager; COLLECTOR_HOST follows it
(``$(CONDOR_HOST)``, HTCondor's default), on port 9618 unless it names another. A host is in
*network mode* when COLLECTOR_HOST names a real port; a personal pool's is ``127.0.0.1:0``
(``use ROLE : Personal``), which keeps every daemon on Unix sockets and needs no key.

In network mode every host needs the pool's shared secret at SEC_TOKEN_POOL_SIGNING_KEY_FILE
(:mod:`htc.wire.poolkey`). The central manager -- the host whose DAEMON_LIST runs the collector --
creates it when it is missing (64 random bytes, mode 0600) and ``htc pool start`` says so, with
where to copy it; any other host refuses to start without it, naming the file and the central
manager to copy it from. A host that runs no collector and names none is refused too: its
daemons would have no pool to join.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from htc.errors import UsageError
from htc.wire.address import RemoteAddress, parse_host_port
from htc.wire.errors import BadAddress
from htc.wire.poolkey import PoolKeyError, ensure_pool_key, read_pool_key

__all__ = ["HostRole", "host_role", "prepare_pool_key"]


@dataclass(frozen=True)
class HostRole:
    """What the configuration makes of this host."""

    daemons: tuple[str, ...]           # DAEMON_LIST, upper case, without MASTER
    collector: RemoteAddress | None    # the pool's collector in network mode; None: a personal pool
    key_file: str                      # SEC_TOKEN_POOL_SIGNING_KEY_FILE

    @property
    def network(self) -> bool:
        """Whether this host is part of a multi-host pool (COLLECTOR_HOST names a real port)."""
        return self.collector is not None

    @property
    def central_manager(self) -> bool:
        """Whether this host runs the pool's collector."""
        return "COLLECTOR" in self.daemons


def host_role(config) -> HostRole:
    """Read this host's role from ``config`` (the master's view).

    Raises:
        UsageError: COLLECTOR_HOST is malformed, or no collector runs here and none is named.
    """
    daemons = tuple(d.upper() for d in config.param("DAEMON_LIST") or () if d.upper() != "MASTER")
    text = str(config.param("COLLECTOR_HOST") or "").strip()
    collector = None
    if text:
        try:
            collector = parse_host_port(text)
        except BadAddress as exc:
            if not text.endswith(":0"):  # port 0: a personal pool's own collector
                raise UsageError(f"COLLECTOR_HOST = {text}: {exc}; name the central manager as HOST[:PORT], "
                                 "usually through CONDOR_HOST") from None
    elif "COLLECTOR" not in daemons:
        raise UsageError("this host runs no collector (DAEMON_LIST = "
                         f"{' '.join(('MASTER', *daemons))}) and names none: set CONDOR_HOST = <the central "
                         "manager's host name> in its configuration (docs/multi-machine.md)")
    return HostRole(daemons, collector, str(config.param("SEC_TOKEN_POOL_SIGNING_KEY_FILE") or ""))


def prepare_pool_key(role: HostRole) -> str:
    """Make sure a network-mode host has the pool key: the central manager creates a missing one.

    Returns:
        The key file's path when this call created it, else ``""``.

    Raises:
        PoolKeyError: the key is missing on a host that is not the central manager (the message
            says where to copy it from), or it is unsafe or unreadable.
    """
    if not role.network:
        return ""
    if not role.key_file:
        raise PoolKeyError("SEC_TOKEN_POOL_SIGNING_KEY_FILE is empty; a host of a multi-host pool needs the "
                           "pool key: name its file there")
    if role.central_manager:
        _, created = ensure_pool_key(role.key_file)
        return role.key_file if created else ""
    if not Path(role.key_file).exists():
        cm = role.collector.host if role.collector else "the central manager"
        raise PoolKeyError(f"the pool key {role.key_file} (SEC_TOKEN_POOL_SIGNING_KEY_FILE) is missing; this "
                           f"host is not the central manager, so it cannot make one: copy the file from {cm} "
                           f"(its SEC_TOKEN_POOL_SIGNING_KEY_FILE) to {role.key_file} with mode 0600, "
                           "then run 'htc pool start' again")
    read_pool_key(role.key_file)
    return ""
