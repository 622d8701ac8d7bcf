"""``htc status``: condor_status.  Asks the collector for ads
(:func:`htc.client.query_collector`) and prints the slot table and its totals, or the
ads of another daemon type, or ``-af`` / ``-long`` / ``-json``."""

from __future__ import annotations

import argparse
import sys
import time

from htc.classad import ClassAd, quote
from htc.cli import formatting as fmt
from htc.cli.options import add_command, add_option, add_pool_options, transport_from
from htc.client import query_collector
from htc.wire.messages import AdType

SLOT_HEADERS = ("Name", "OpSys", "Arch", "State", "Activity", "LoadAv", "Mem", "ActvtyTime")
RUN_HEADERS = ("Name", "OpSys", "Arch", "LoadAv", "RemoteUser", "ClientMachine")
TOTAL_STATES = ("Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Drained", "Backfill")
TOTAL_HEADERS = ("", "Total", "Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Drain", "Backfill", "BkIdle")

#: -schedd, -submitters, ...: which ad type, and the columns condor_status shows for it
TYPES = {
    "schedd": (AdType.Schedd, ("Name", "Machine", "TotalRunningJobs", "TotalIdleJobs", "TotalHeldJobs")),
    "submitters": (AdType.Submitter, ("Name", "Machine", "RunningJobs", "IdleJobs", "HeldJobs")),
    "negotiator": (AdType.Negotiator, ("Name", "Machine")),
    "master": (AdType.Master, ("Name", "Machine", "MasterPid")),
    "collector": (AdType.Collector, ("Name", "Machine", "HostsTotal", "RunningJobs", "IdleJobs")),
    "accounting": (AdType.Accounting, ("Name", "Priority", "PriorityFactor", "ResourcesUsed")),
    "any": (AdType.Any, ("MyType", "TargetType", "Name")),
}


def _get(ad: ClassAd, name: str, default=""):
    value = fmt.ad_value(ad, name)
    return default if value.__class__.__name__ == "Value" else value


def slot_rows(ads, now: float) -> list[tuple]:
    """The default table's rows: one per slot."""
    rows = []
    for ad in ads:
        load = _get(ad, "LoadAvg", 0.0)
        entered = _get(ad, "EnteredCurrentActivity", 0)
        rows.append((_get(ad, "Name", "?"), _get(ad, "OpSys"), _get(ad, "Arch"), _get(ad, "State"),
                     _get(ad, "Activity"), f"{float(load):.3f}" if isinstance(load, (int, float)) else "",
                     _get(ad, "Memory"), fmt.duration(now - entered) if isinstance(entered, (int, float)) and entered
                     else fmt.duration(0)))
    return rows


def total_rows(ads) -> list[tuple]:
    """The totals table: one row per Arch/OpSys, then the overall total."""
    groups: dict[str, dict[str, int]] = {}
    overall: dict[str, int] = {}

    def add(counts: dict[str, int], state: str, activity: str) -> None:
        counts["Total"] = counts.get("Total", 0) + 1
        counts[state] = counts.get(state, 0) + 1
        if state == "Backfill" and activity == "Idle":
            counts["BkIdle"] = counts.get("BkIdle", 0) + 1

    for ad in ads:
        key = f"{_get(ad, 'Arch', '?')}/{_get(ad, 'OpSys', '?')}"
        state, activity = str(_get(ad, "State", "?")), str(_get(ad, "Activity", "?"))
        add(groups.setdefault(key, {}), state, activity)
        add(overall, state, activity)
    rows = []
    for key, counts in sorted(groups.items()) + [("Total", overall)]:
        rows.append((key, counts.get("Total", 0), *(counts.get(s, 0) for s in TOTAL_STATES), counts.get("BkIdle", 0)))
    return rows


def _constraint(args: argparse.Namespace) -> str:
    parts = []
    if args.names:
        parts.append(" || ".join(f"Name == {quote(n)} || Machine == {quote(n)}" for n in args.names))
    if args.constraint:
        parts.append(args.constraint)
    if args.avail:
        parts.append('State == "Unclaimed" && Activity == "Idle"')
    if args.run or args.claimed:
        parts.append('State == "Claimed"')
    return " && ".join(f"({p})" for p in parts)


def status(args: argparse.Namespace) -> int:
    """htc status: show the machines (slots) of the pool."""
    kind = next((k for k in TYPES if getattr(args, k, False)), None)
    ad_type, columns = TYPES[kind] if kind else (AdType.Startd, SLOT_HEADERS)
    ads = query_collector(ad_type, _constraint(args), transport=transport_from(args))
    if args.long:
        sys.stdout.write(fmt.long_form(ads))
        return 0
    if args.json:
        sys.stdout.write(fmt.json_form(ads))
        return 0
    if args.af:
        sys.stdout.write(fmt.autoformat(ads, args.af))
        return 0
    out = fmt.console()
    if kind:
        fmt.print_table(columns, [tuple(_get(ad, c) for c in columns) for ad in ads], out=out)
        return 0
    if not args.total:
        if args.run or args.claimed:
            rows = [(_get(ad, "Name", "?"), _get(ad, "OpSys"), _get(ad, "Arch"),
                     f"{float(_get(ad, 'LoadAvg', 0.0)):.3f}", _get(ad, "RemoteUser"), _get(ad, "ClientMachine"))
                    for ad in ads]
            fmt.print_table(RUN_HEADERS, rows, right=[3], out=out)
        else:
            fmt.print_table(SLOT_HEADERS, slot_rows(ads, time.time()), right=[5, 6], out=out)
        print()
    if ads:
        fmt.print_table(TOTAL_HEADERS, total_rows(ads), right=range(0, len(TOTAL_HEADERS)), out=out)
    else:
        print("No slots in the collector yet (is a startd running? 'htc pool status' shows the daemons).")
    return 0


def register(sub) -> None:
    """Add ``htc status``."""
    p = add_command(sub, "status", "show the machines (slots) of the pool (condor_status)", [
        "htc status                      # one line per slot, then totals",
        "htc status -avail               # slots willing to run a job now",
        "htc status -run                 # slots running jobs, and for whom",
        "htc status -total",
        "htc status -af Name Cpus Memory State",
        "htc status -constraint 'Memory > 4096' -long",
        "htc status -schedd              # other daemons' ads",
    ])
    p.add_argument("names", nargs="*", metavar="MACHINE|SLOT", help="only these machines or slots")
    for flag, text in [("avail", "slots willing to run jobs now"), ("run", "slots running jobs"),
                       ("claimed", "claimed slots"), ("total", "only the totals table"),
                       ("long", "whole ads, one attribute per line")]:
        aliases = ("l",) if flag == "long" else ()
        add_option(p, flag, *aliases, action="store_true", help=text)
    for kind in TYPES:
        add_option(p, kind, action="store_true", help=f"{TYPES[kind][0].value} ads instead of slots")
    add_option(p, "af", "autoformat", nargs="+", metavar="ATTR",
               help="print these attributes (or expressions), one ad per line")
    add_option(p, "constraint", metavar="EXPR", help="ads satisfying this ClassAd expression")
    add_pool_options(p)
    p.set_defaults(func=status)
