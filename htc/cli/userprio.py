"""``htc userprio``: condor_userprio. The report reads the accountant's Accounting ads with
:func:`htc.client.user_priorities` and prints condor_userprio's columns; ``-setprio``,
``-setfactor``, ``-setaccum`` and ``-resetusage`` change one submitter through the negotiator
(:func:`htc.client.set_user_priority`; administrator only).

Which columns: condor_userprio's table of columns (``src/condor_tools/user_prio.cpp``), those the
accountant has data for. By default (``-most``) effective priority, factor, weighted resources in
use, total usage and time since last usage; ``-priority`` adds the real priority, ``-usage`` the
usage start and last usage times, ``-all`` shows every column. Submitters not active in the last
day are left out unless ``-allusers`` is given or they are named.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from dataclasses import asdict

from htc.cli import formatting as fmt
from htc.cli.options import add_command, add_option, add_pool_options, transport_from
from htc.client import set_user_priority, user_priorities
from htc.errors import UsageError

#: condor_userprio's columns we have data for: (flag, width, heading line 1, heading line 2)
PRIORITY, REAL, FACTOR, IN_USE, TOTAL, START, LAST, SINCE = (1 << i for i in range(8))
COLUMNS = (
    (PRIORITY, 12, "Effective", "Priority"),
    (REAL, 8, "Real", "Priority"),
    (FACTOR, 9, "Priority", "Factor"),
    (IN_USE, 6, "Wghted", "In Use"),
    (TOTAL, 12, "Total Usage", "(wghted-hrs)"),
    (START, 16, "Usage", "Start Time"),
    (LAST, 16, "Last", "Usage Time"),
    (SINCE, 10, "Time Since", "Last Usage"),
)
MOST = PRIORITY | FACTOR | IN_USE | TOTAL | SINCE
SHOW_ALL = PRIORITY | REAL | FACTOR | IN_USE | TOTAL | START | LAST | SINCE


def _date(timestamp: float | None) -> str:
    if not timestamp:
        return ""
    return datetime.datetime.fromtimestamp(timestamp).strftime("%m/%d/%Y %H:%M")


def _number(value: float, decimals: int, width: int) -> str:
    text = f"{value:.{decimals}f}"
    return text if len(text) <= width else f"{value:.{max(1, width - 6)}g}"


def _cell(flag: int, r, now: float) -> str:
    if flag == PRIORITY:
        return _number(r.effective_priority, 2, 12)
    if flag == REAL:
        return _number(r.real_priority, 2, 8)
    if flag == FACTOR:
        return _number(r.priority_factor, 2, 9)
    if flag == IN_USE:
        return _number(r.resources_used, 0, 6)
    if flag == TOTAL:
        return _number(r.weighted_accumulated_usage / 3600, 2, 12)
    if flag == START:
        return _date(r.begin_usage_time)
    if flag == LAST:
        return _date(r.last_usage_time)
    if r.resources_used:
        return "<now>"
    return fmt.duration(now - r.last_usage_time) if r.last_usage_time else "<never>"


def _line(name: str, name_width: int, cells, columns, *, center: bool = False) -> str:
    parts = [name.ljust(name_width)]
    for (flag, width, _, _), text in zip(columns, cells):
        parts.append(text.center(width) if center else text.rjust(width))
    return " ".join(parts).rstrip()


def print_report(records, flags: int, min_last_usage: float | None, now: float) -> None:
    """Print condor_userprio's table of ``records`` with the columns in ``flags``.

    Args:
        records: :class:`htc.client.UserPriority` records, already filtered.
        flags: the columns (``PRIORITY | FACTOR | ...``).
        min_last_usage: the activity cut-off shown in the footer (None: every user shown).
        now: the time "time since" counts to.
    """
    columns = [c for c in COLUMNS if c[0] & flags]
    if flags & PRIORITY:
        records = sorted(records, key=lambda r: (r.effective_priority, r.name))
    elif flags & (IN_USE | TOTAL):
        records = sorted(records, key=lambda r: (r.weighted_accumulated_usage, r.name))
    else:
        records = sorted(records, key=lambda r: r.name)
    count = f"Number of users: {len(records)}"
    width = max([10, len(count)] + [len(r.name) for r in records])
    updated = max((r.last_update or 0 for r in records), default=0)
    print(f"Last Priority Update: {fmt.short_date(updated or None).strip()}")
    print(_line("", width, [c[2] for c in columns], columns, center=True))
    print(_line("User Name", width, [c[3] for c in columns], columns, center=True))
    rule = _line("-" * width, width, ["-" * c[1] for c in columns], columns)
    print(rule)
    for r in records:
        print(_line(r.name, width, [_cell(c[0], r, now) for c in columns], columns))
    print(rule)
    totals = {
        IN_USE: _number(sum(r.resources_used for r in records), 0, 6),
        TOTAL: _number(sum(r.weighted_accumulated_usage for r in records) / 3600, 2, 12),
        START: _date(min((r.begin_usage_time for r in records if r.begin_usage_time), default=None)),
        LAST: _date(min_last_usage),
        SINCE: fmt.duration(now - min_last_usage) if min_last_usage else "",
    }
    print(_line(count, width, [totals.get(c[0], "") for c in columns], columns))


def userprio(args: argparse.Namespace) -> int:
    """htc userprio: show users' priorities, or change one submitter's."""
    if args.setprio or args.setfactor or args.resetusage or args.setaccum:
        return _change(args)
    records = user_priorities(all_users=True, transport=transport_from(args))
    now = time.time()
    named = set(args.users or ())
    min_last: float | None = None
    if named:
        records = [r for r in records if r.name in named or r.name.split("@", 1)[0] in named]
    elif not args.allusers:
        # condor_userprio shows the submitters active in the last day (since the last update)
        updated = max((r.last_update or 0 for r in records), default=0) or now
        min_last = updated - 86400
        records = [r for r in records
                   if r.resources_used > 0 or (r.last_usage_time or 0) >= min_last]
    if args.json:
        print(json.dumps([asdict(r) | {"real_priority": r.real_priority} for r in records], indent=2))
        return 0
    flags = ((SHOW_ALL if args.all else 0) | (MOST if args.most else 0)
             | (PRIORITY | REAL | FACTOR if args.priority else 0)
             | (IN_USE | TOTAL | START | LAST if args.usage else 0)) or MOST
    print_report(records, flags, min_last, now)
    return 0


def _number_arg(text: str, option: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"-{option} needs a number after the user name, got {text!r}") from None


def _change(args: argparse.Namespace) -> int:
    pairs = {"setprio": args.setprio, "setfactor": args.setfactor, "setaccum": args.setaccum}
    targets = {pair[0] for pair in pairs.values() if pair} | ({args.resetusage} if args.resetusage else set())
    if len(targets) != 1:
        raise UsageError("-setprio, -setfactor, -setaccum and -resetusage in one call must name the same user")
    value = {name: _number_arg(pair[1], name) if pair else None for name, pair in pairs.items()}
    if value["setaccum"] is not None and value["setaccum"] < 0:
        raise UsageError("-setaccum needs zero or more seconds of usage")
    detail = set_user_priority(targets.pop(), priority=value["setprio"], factor=value["setfactor"],
                               accumulated_usage=value["setaccum"], reset_usage=bool(args.resetusage),
                               transport=transport_from(args))
    if args.json:
        print(json.dumps({"changed": detail}))
    else:
        print(f"The priority of {detail}")
    return 0


def register(sub) -> None:
    """Add ``htc userprio``."""
    p = add_command(sub, "userprio", "show users' priorities and usage (condor_userprio)", [
        "htc userprio             # submitters active in the last day, best priority first",
        "htc userprio -allusers   # every submitter the accountant knows",
        "htc userprio -all        # every column: real priority, usage start and last usage times",
        "htc userprio -usage      # usage columns, least used first",
        "htc userprio -json",
        "htc userprio -setfactor alice@example.org 10   # alice's usage counts ten times (administrator)",
        "htc userprio -setprio alice 0.5                # real priority, by a unique user name",
        "htc userprio -setaccum alice@example.org 3600  # accumulated usage, weighted slot-seconds",
        "htc userprio -resetusage bob@example.org       # forget bob's accumulated usage",
    ])
    p.add_argument("users", nargs="*", metavar="USER", help="show only these submitters")
    add_option(p, "all", action="store_true", help="every column")
    add_option(p, "most", action="store_true", help="the default columns")
    add_option(p, "priority", action="store_true", help="effective and real priority, factor")
    add_option(p, "usage", action="store_true", help="usage: in use, total, start and last usage time")
    add_option(p, "allusers", action="store_true", help="every submitter, also those inactive for a day")
    add_option(p, "setprio", nargs=2, metavar=("USER", "VALUE"), help="set USER's real priority (>= 0.5)")
    add_option(p, "setfactor", nargs=2, metavar=("USER", "VALUE"), help="set USER's priority factor (>= 1)")
    add_option(p, "setaccum", nargs=2, metavar=("USER", "SECONDS"),
               help="set USER's accumulated usage (weighted slot-seconds)")
    add_option(p, "resetusage", "resetUsage", metavar="USER", help="forget USER's accumulated usage")
    add_pool_options(p)
    p.set_defaults(func=userprio)
