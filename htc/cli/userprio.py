"""``htc userprio``: condor_userprio (the report; setting priorities comes later).  Reads the
accountant's Accounting ads with :func:`htc.pool.user_priorities`."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

from htc.cli import formatting as fmt
from htc.cli.options import add_command, add_option, add_pool_options, transport_from
from htc.pool import user_priorities

HEADERS = ("User Name", "Effective Priority", "Priority Factor", "In Use", "Usage (wghted-hrs)", "Last Usage")


def userprio(args: argparse.Namespace) -> int:
    """htc userprio: show users' priorities."""
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


def register(sub) -> None:
    """Add ``htc userprio``."""
    p = add_command(sub, "userprio", "show users' priorities and usage (condor_userprio)", [
        "htc userprio             # users with usage, best priority first",
        "htc userprio -all        # every user the accountant knows",
        "htc userprio -json",
    ])
    add_option(p, "all", action="store_true", help="every submitter, also those without usage")
    add_option(p, "allusers", action="store_true", help="same as -all")
    add_pool_options(p)
    p.set_defaults(func=userprio)
