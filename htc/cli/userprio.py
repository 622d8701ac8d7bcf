"""``htc userprio``: condor_userprio. The report reads the accountant's Accounting ads with
:func:`htc.client.user_priorities`; ``-setprio``, ``-setfactor`` and ``-resetusage`` change one
submitter through the negotiator (:func:`htc.client.set_user_priority`; administrator only)."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

from htc.cli import formatting as fmt
from htc.cli.options import add_command, add_option, add_pool_options, transport_from
from htc.errors import UsageError
from htc.client import set_user_priority, user_priorities

HEADERS = ("User Name", "Effective Priority", "Priority Factor", "In Use", "Usage (wghted-hrs)", "Last Usage")


def userprio(args: argparse.Namespace) -> int:
    """htc userprio: show users' priorities, or change one submitter's."""
    if args.setprio or args.setfactor or args.resetusage:
        return _change(args)
    records = user_priorities(all_users=args.all or args.allusers, transport=transport_from(args))
    if args.json:
        print(json.dumps([asdict(r) | {"real_priority": r.real_priority} for r in records], indent=2))
        return 0
    now = time.time()
    rows = []
    for r in records:
        last = "<now>" if r.resources_used else (fmt.duration(now - r.last_usage_time) if r.last_usage_time else "<never>")
        rows.append((r.name, f"{r.effective_priority:.2f}", f"{r.priority_factor:.2f}", f"{r.resources_used:g}",
                     f"{r.weighted_accumulated_usage / 3600:.2f}", last))
    total_use = sum(r.resources_used for r in records)
    total_hours = sum(r.weighted_accumulated_usage for r in records) / 3600
    rows.append((f"Number of users: {len(records)}", "", "", f"{total_use:g}", f"{total_hours:.2f}", ""))
    fmt.print_table(HEADERS, rows, right=[1, 2, 3, 4, 5])
    return 0


def _number(text: str, option: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"-{option} needs a number after the user name, got {text!r}") from None


def _change(args: argparse.Namespace) -> int:
    targets = {name for name in (args.setprio[0] if args.setprio else None,
                                 args.setfactor[0] if args.setfactor else None, args.resetusage) if name}
    if len(targets) != 1:
        raise UsageError("-setprio, -setfactor and -resetusage in one call must name the same user")
    detail = set_user_priority(targets.pop(), priority=_number(args.setprio[1], "setprio") if args.setprio else None,
                               factor=_number(args.setfactor[1], "setfactor") if args.setfactor else None,
                               reset_usage=bool(args.resetusage), transport=transport_from(args))
    if args.json:
        print(json.dumps({"changed": detail}))
    else:
        print(f"The priority of {detail}")
    return 0


def register(sub) -> None:
    """Add ``htc userprio``."""
    p = add_command(sub, "userprio", "show users' priorities and usage (condor_userprio)", [
        "htc userprio             # users with usage, best priority first",
        "htc userprio -all        # every user the accountant knows",
        "htc userprio -json",
        "htc userprio -setfactor alice@example.org 10   # alice's usage counts ten times (administrator)",
        "htc userprio -setprio alice 0.5                # real priority, by a unique user name",
        "htc userprio -resetusage bob@example.org       # forget bob's accumulated usage",
    ])
    add_option(p, "all", action="store_true", help="every submitter, also those without usage")
    add_option(p, "allusers", action="store_true", help="same as -all")
    add_option(p, "setprio", nargs=2, metavar=("USER", "VALUE"), help="set USER's real priority (>= 0.5)")
    add_option(p, "setfactor", nargs=2, metavar=("USER", "VALUE"), help="set USER's priority factor (>= 1)")
    add_option(p, "resetusage", "resetUsage", metavar="USER", help="forget USER's accumulated usage")
    add_pool_options(p)
    p.set_defaults(func=userprio)
