"""condor_ping: whether the caller has an authorization level (or may send a request) on a daemon.

HTCondor's condor_ping runs a security negotiation with the daemon and asks it (DC_SEC_QUERY)
whether the command would be authorized. htc's daemons are on this host and decide with
:mod:`htc.wire.authz` from the configuration files they share with the tools, so
:func:`check_access` pings the daemon (is it there, which process, as which account), then asks
the same :class:`~htc.wire.authz.Authorizer` the daemon builds -- from the configuration as that
daemon reads it, with the daemon's account as the pool's -- about the caller's identity, as the
daemon would see it through the socket's peer credentials.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from htc.client import request
from htc.errors import UsageError
from htc.wire import authz
from htc.wire import messages as m
from htc.wire.transport import Transport

__all__ = ["DAEMON_TYPES", "AccessCheck", "AccessReport", "check_access", "level_of_token"]

#: ``-type`` -> (the daemon's address on the pool's transport, its configuration subsystem)
DAEMON_TYPES = {"SCHEDD": "schedd", "COLLECTOR": "collector", "NEGOTIATOR": "negotiator", "STARTD": "startd",
                "MASTER": "master"}
#: the levels ``ALL`` stands for, in condor_ping's order (htc has no OWNER level)
ALL_LEVELS = ("ALLOW", "READ", "WRITE", "NEGOTIATOR", "ADMINISTRATOR", "CONFIG", "DAEMON", "ADVERTISE_STARTD",
              "ADVERTISE_SCHEDD", "ADVERTISE_MASTER")
#: condor_ping's default token (no token given): a no-op command, open to anyone
NOP = "DC_NOP"


@dataclass(frozen=True)
class AccessCheck:
    """One token's answer: the level it needs, and the daemon's decision for the caller."""

    token: str
    level: authz.Level
    allowed: bool
    reason: str
    command: str = ""


@dataclass(frozen=True)
class AccessReport:
    """What :func:`check_access` found: who answered, who the caller is to it, and each token's answer."""

    daemon: str
    pong: m.Pong
    identity: authz.Identity
    checks: tuple[AccessCheck, ...]

    @property
    def all_allowed(self) -> bool:
        """True when every token is authorized."""
        return all(c.allowed for c in self.checks)


def level_of_token(daemon: str, token: str) -> tuple[authz.Level, str]:
    """The level a condor_ping token needs on ``daemon``: a level name (``WRITE``), ``DC_NOP``,
    or the name of an htc request (``Submit``, ``QueryJobs``) that daemon answers.

    Returns:
        The level, and the request's name ("" for a level).

    Raises:
        UsageError: the token is none of these.
    """
    upper = token.upper()
    if upper == NOP:
        return authz.Level.ALLOW, NOP
    try:
        return authz.Level(upper), ""
    except ValueError:
        pass  # not a level's name: maybe a command's, looked up next
    table = {**authz.COMMON, **authz.REQUIRED.get(daemon, {})}
    for msg_type, rule in table.items():
        if msg_type.__name__.lower() == token.lower() and isinstance(rule, authz.Level):
            return rule, msg_type.__name__
    raise UsageError(f'Could not understand TOKEN "{token}": give ALL, an authorization level '
                     f"({', '.join(lv.value for lv in authz.Level if lv is not authz.Level.ALLOW)}) or a request "
                     f"the {daemon} answers ({', '.join(sorted(t.__name__ for t in table))})")


def _daemon_uid(pid: int) -> int:
    import psutil

    try:
        return psutil.Process(pid).uids().effective
    except psutil.Error:
        return os.geteuid()  # a daemon we cannot see: a personal pool's own


def check_access(tokens: Sequence[str], *, daemon_type: str = "SCHEDD", name: str | None = None,
                 transport: Transport | None = None) -> AccessReport:
    """condor_ping: whether the caller has each of ``tokens`` on the daemon.

    Args:
        tokens: levels, request names, ``ALL`` (every level) or ``DC_NOP``; empty means ``DC_NOP``.
        daemon_type: ``SCHEDD`` (default), ``COLLECTOR``, ``NEGOTIATOR``, ``STARTD`` or ``MASTER``.
        name: the daemon's address, when not the pool's own (``-name``).
        transport: how to reach it (default: this pool).

    Raises:
        UsageError: an unknown daemon type or token.
        DaemonUnreachable: the daemon is not running.
    """
    daemon = DAEMON_TYPES.get(daemon_type.upper())
    if daemon is None:
        raise UsageError(f"unrecognized daemon type: {daemon_type} (one of {', '.join(DAEMON_TYPES)})")
    expanded: list[str] = []
    for token in tokens or (NOP,):
        expanded += ALL_LEVELS if token.upper() == "ALL" else [token]
    wanted = [(token, *level_of_token(daemon, token)) for token in expanded]
    pong = request.ping(name or daemon, transport=transport)
    from htc.daemons.service import load_daemon_config

    authorizer = authz.authorizer_from_config(daemon, load_daemon_config(daemon.upper()),
                                              pool_uid=_daemon_uid(pong.pid), user_of_uid=authz.user_of_uid)
    identity = authorizer.identify(os.geteuid(), os.getpid())
    checks = []
    for token, level, command in wanted:
        decision = authorizer.policy.check(level, identity)
        checks.append(AccessCheck(token.upper() if not command or command == NOP else command, level,
                                  decision.allowed, decision.reason, command))
    return AccessReport(daemon, pong, identity, tuple(checks))
