"""``htc ping``: condor_ping. Whether you have each named authorization level (or may send a
named request) on a daemon of the pool (:func:`htc.client.access.check_access`), printed in
condor_ping's three forms (one line each, ``-table``, ``-verbose``) or not at all (``-quiet``);
the exit status is 1 when any is refused."""

from __future__ import annotations

import argparse
import sys

from htc.cli.options import add_command, add_option, add_pool_options, transport_from
from htc.client.access import NOP, AccessReport, check_access
from htc.errors import UsageError

#: how a request reaches the daemon: a Unix socket whose peer the kernel names (like HTCondor's FS)
AUTH_METHOD = "FS"


def _verbose(report: AccessReport) -> str:
    from htc.daemons.startd.sensors import condor_version

    out = []
    for check in report.checks:
        out += [f"Remote Version:              {report.pong.version or '?'}",
                f"Local  Version:              {condor_version()}",
                f"Session ID:                  {report.daemon}:{report.pong.pid}:{report.identity.pid}",
                f"Instruction:                 {check.token}",
                f"Command:                     {check.command or check.level.value}",
                "Encryption:                  none",
                "Integrity:                   none",
                f"Authenticated using:         {AUTH_METHOD}",
                f"All authentication methods:  {AUTH_METHOD}",
                f"Remote Mapping:              {report.identity.name}",
                f"Authorized:                  {'TRUE' if check.allowed else 'FALSE'}",
                f"Reason:                      {check.reason}",
                ""]
    return "\n".join(out) + "\n"


def ping(args: argparse.Namespace) -> int:
    """htc ping: whether each authorization level is allowed for you on a daemon."""
    modes = [flag for flag in ("quiet", "table", "verbose") if getattr(args, flag)]
    if len(modes) > 1:
        raise UsageError("only one output mode may be specified (-quiet, -table or -verbose)")
    if not args.tokens and not args.quiet:
        print(f"WARNING: Missing <authz-level | command-name> argument, defaulting to {NOP}", file=sys.stderr)
    report = check_access(args.tokens, daemon_type=args.type, name=args.name,
                          transport=transport_from(args))
    if args.table:
        print("         Instruction Authentication Encryption Integrity Decision Identity")
        for c in report.checks:
            print(f"{c.token:>20}{AUTH_METHOD:>15}{'none':>11}{'none':>10}"
                  f"{'    ALLOW ' if c.allowed else '     DENY '}{report.identity.name}")
    elif args.verbose:
        sys.stdout.write(_verbose(report))
    elif not args.quiet:
        for c in report.checks:
            print(f"{c.token} using (no encryption, no integrity, and {AUTH_METHOD}) "
                  f"{'succeeded' if c.allowed else 'failed'} as {report.identity.name}")
    return 0 if report.all_allowed else 1


def register(sub) -> None:
    """Add ``htc ping``."""
    p = add_command(sub, "ping", "whether you have an authorization level on a daemon (condor_ping)", [
        "htc ping WRITE                      # may I submit to the schedd?",
        "htc ping -type collector -table ALL # every level on the collector, one per line",
        "htc ping -type master -verbose ADMINISTRATOR",
        "htc ping Submit QueryJobs           # requests by name: the level each needs",
    ], description="Whether each TOKEN would be authorized for you on a daemon (default: the schedd). "
       "A TOKEN is ALL (every level), an authorization level (READ, WRITE, ADMINISTRATOR, DAEMON, NEGOTIATOR, "
       "CONFIG, ADVERTISE_STARTD, ADVERTISE_SCHEDD, ADVERTISE_MASTER, ALLOW) or the name of a request the "
       "daemon answers (Submit, QueryJobs, DaemonsOff, ...). Exit status 1 if any is refused.")
    p.add_argument("tokens", nargs="*", metavar="TOKEN", help="ALL, a level or a request name (default: DC_NOP)")
    add_option(p, "type", default="SCHEDD", metavar="SUBSYSTEM",
               help="the daemon: SCHEDD (default), COLLECTOR, NEGOTIATOR, STARTD or MASTER")
    add_option(p, "name", metavar="NAME", help="the daemon listening as NAME (default: the pool's daemon of -type)")
    add_option(p, "quiet", action="store_true", help="no output, only the exit status")
    add_option(p, "table", action="store_true", help="one result per line, as a table")
    add_option(p, "verbose", action="store_true", help="everything known about each result, and why")
    add_pool_options(p, json=False)
    p.set_defaults(func=ping)
