"""``htc status``: condor_status.  Asks the collector for ads
(:func:`htc.client.query_collector`) and prints one of condor_status's views with its totals
(:mod:`htc.cli.status_views`), or ``-af`` / ``-format`` / ``-long`` / ``-json``.

The view follows condor_status's options: slots by default; ``-avail``, ``-claimed``/``-run``,
``-server``, ``-state`` and ``-compact`` for other views of the slots; ``-schedd``,
``-submitters``, ``-negotiator``, ``-master``, ``-collector``, ``-accounting`` and ``-any`` for
other daemons' ads (``-schedd -run``: the schedds running jobs).  ``-total`` prints only the
totals table, ``-wide`` never cuts a line or a column to the terminal's width. ``-sort EXPR``,
``-direct NAME``, ``-xml`` and ``-print-format FILE`` are in :mod:`htc.cli.status_options`.
"""

from __future__ import annotations

import argparse
import re
import sys

from htc.classad import ClassAd, quote
from htc.cli import formatting as fmt
from htc.cli import status_options as so
from htc.cli import status_views as sv
from htc.cli.options import add_command, add_option, add_pool_options, transport_from
from htc.client import query_collector
from htc.errors import UsageError
from htc.wire.messages import AdType

#: -schedd, -submitters, ...: the ad type each asks for
TYPES = {
    "schedd": AdType.Schedd, "submitters": AdType.Submitter, "negotiator": AdType.Negotiator,
    "master": AdType.Master, "collector": AdType.Collector, "accounting": AdType.Accounting, "any": AdType.Any,
}

#: constraint of the -compact views (prettyPrint.h PMODE_*_COMPACT_CONSTRAINT)
COMPACT = "PartitionableSlot =?= true || DynamicSlot =!= true"
COMPACT_CLAIMED = ('(State == "Claimed" && DynamicSlot =!= true) || '
                   "(NumDynamicSlots isnt undefined && NumDynamicSlots > 0)")


def _natural(text: object) -> list:
    """condor_status's natural sort: ``slot2`` before ``slot10``."""
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", str(text or ""))]


def _sort(ads: list[ClassAd]) -> list[ClassAd]:
    return sorted(ads, key=lambda ad: (_natural(sv.get(ad, "Machine")), _natural(sv.get(ad, "Name"))))


def _kind(args: argparse.Namespace) -> str | None:
    kinds = [k for k in TYPES if getattr(args, k, False)]
    if len(kinds) > 1:
        raise UsageError(f"-{kinds[1]} contradicts -{kinds[0]}: ask for one kind of ad at a time")
    kind = kinds[0] if kinds else None
    if kind and (args.compact or args.avail or args.claimed or args.server or args.state):
        flag = next(f for f in ("compact", "avail", "claimed", "server", "state") if getattr(args, f))
        raise UsageError(f"-{flag} contradicts -{kind}: it is a view of the slots")
    if args.server and args.state:
        raise UsageError("-state contradicts -server: choose one view of the slots")
    return kind


def _constraint(args: argparse.Namespace, kind: str | None) -> str:
    parts = []
    if args.names:
        if kind is None and (args.claimed or args.run) and not args.compact:
            parts.append(" || ".join(f"RemoteUser == {quote(n)}" for n in args.names))
        else:
            parts.append(" || ".join(f"Name == {quote(n)} || Machine == {quote(n)}" for n in args.names))
    if args.constraint:
        parts.append(args.constraint)
    parts += so.sort_constraints(args.sort)
    if kind is None and not args.compact:
        if args.avail:
            parts.append(sv.AVAIL)
        elif args.claimed or args.run:
            parts.append(sv.CLAIMED)
    if kind == "schedd" and args.run:
        parts.append(sv.SCHEDD_RUN)
    return " && ".join(f"({p})" for p in parts)


def _machine_filter(ads: list[ClassAd], args: argparse.Namespace) -> list[ClassAd]:
    """-compact: the slots of the machines whose top-level slots the view selects."""
    from htc.classad import ExprTree

    test = ExprTree(sv.AVAIL if args.avail else COMPACT_CLAIMED if (args.claimed or args.run) else COMPACT)
    chosen = {sv.get(ad, "Machine") for ad in ads if sv.get(ad, "DynamicSlot") is not True and test.eval(ad) is True}
    return [ad for ad in ads if sv.get(ad, "Machine") in chosen]


def _compact_totalled(ads: list[ClassAd]) -> list[ClassAd]:
    """The slots -compact's totals count: dynamic and static slots, and a partitionable slot
    only while it has resources left (condor_status's ROLLUP_PARTITIONABLE)."""
    def exhausted(ad: ClassAd) -> bool:
        return (sv.get(ad, "PartitionableSlot") is True
                and not ((sv.get(ad, "Cpus") or 0) > 0 and (sv.get(ad, "Memory") or 0) > 0))
    return [ad for ad in ads if not exhausted(ad)]


def _print_custom(ads: list[ClassAd], args: argparse.Namespace) -> bool:
    if args.long:
        sys.stdout.write(fmt.long_form(ads))
    elif args.xml:
        sys.stdout.write(fmt.xml_form(ads))
    elif args.json:
        sys.stdout.write(fmt.json_form(ads))
    elif args.af:
        sys.stdout.write(fmt.autoformat(ads, args.af))
    elif args.format:
        sys.stdout.write("".join("".join(sv.printf_format(f, e, ad) for f, e in args.format) for ad in ads))
    else:
        return False
    return True


def status(args: argparse.Namespace) -> int:
    """htc status: show the machines (slots) of the pool, or other daemons' ads."""
    kind = _kind(args)
    if args.xml and args.json:
        raise UsageError("Cannot print as both XML and JSON")
    layout = so.load_layout(args.print_format) if args.print_format else None
    if layout is not None and layout.from_type:
        if kind and TYPES[kind] is not so.SELECT_FROM[layout.from_type]:
            raise UsageError(f"-{kind} contradicts the print-format file's SELECT FROM {layout.from_type}")
        kind = next((k for k, t in TYPES.items() if t is so.SELECT_FROM[layout.from_type]), None)
    ad_type = TYPES[kind] if kind else AdType.Startd
    transport = transport_from(args)
    constraint = _constraint(args, kind)
    if args.direct:
        constraint = " && ".join(f"({p})" for p in (constraint, so.direct_constraint(args.direct, ad_type, transport))
                                 if p)
    if layout is not None and layout.where:
        constraint = " && ".join(f"({p})" for p in (constraint, layout.where) if p)
    ads = query_collector(ad_type, constraint, transport=transport)
    ads = so.sort_ads(ads, args.sort) if args.sort else _sort(ads)
    if args.compact and kind is None:
        ads = _machine_filter(ads, args)
    if _print_custom(ads, args):
        return 0
    if layout is not None:
        sys.stdout.write(so.render_layout(layout, ads))
        return 0
    out = fmt.console()
    if args.wide:
        out.width = 100_000  # -wide: lines are never cut to the terminal
    if kind is None:
        mode = "server" if args.server else "state" if args.state else "run" if (args.claimed or args.run) else ""
        if args.compact:
            heads, rows, right = sv.compact_rows(ads, mode)
        else:
            columns = {"server": sv.slots_server, "state": sv.slots_state, "run": sv.slots_run}.get(mode)
            heads, rows, right = sv.render(columns() if columns else sv.slots_normal(args.wide), ads)
        totals = mode or "normal"
        if not ads:
            print("No slots in the collector yet (is a startd running? 'htc pool status' shows the daemons).",
                  file=sys.stderr)
            return 0
    else:
        view = "schedd-run" if kind == "schedd" and args.run else kind
        if kind == "accounting":
            columns = [sv.attr(a, alt="") for a in ("Name", "Priority", "PriorityFactor", "ResourcesUsed")]
        else:
            columns = sv.DAEMON_VIEWS[view]
        heads, rows, right = sv.render(columns, ads)
        totals = view if view in ("schedd", "submitters") else None
        if not ads:
            return 0
    if not args.total:
        fmt.print_table(heads, [("",) * len(heads)] + rows, right=right, out=out)
    if totals and ads:
        key = sv.platform if args.compact else None
        counted = _compact_totalled(ads) if args.compact else ads
        lines = sv.totals_lines(totals, counted, auto_key=args.wide or totals == "submitters", key=key)
        out.file.write("\n" + "".join(line + "\n" for line in lines))
    return 0


def register(sub) -> None:
    """Add ``htc status``."""
    p = add_command(sub, "status", "show the machines (slots) of the pool (condor_status)", [
        "htc status                      # one line per slot, then totals",
        "htc status -compact             # one line per machine",
        "htc status -avail               # slots willing to run a job now",
        "htc status -run                 # slots running jobs, and for whom",
        "htc status -state -wide",
        "htc status -total",
        "htc status -af Name Cpus Memory State",
        "htc status -format '%s ' Name -format '%d\\n' Memory",
        "htc status -constraint 'Memory > 4096' -long",
        "htc status -schedd              # other daemons' ads",
        "htc status -sort Memory -sort Name",
        "htc status -direct $(hostname)  # the ads of this machine's startd, once it answers",
        "htc status -print-format slots.pf",
    ])
    p.add_argument("names", nargs="*", metavar="MACHINE|SLOT",
                   help="only these machines or slots (with -claimed/-run: these RemoteUsers)")
    for flag, text in [("avail", "slots willing to run a job now (Unclaimed, with Cpus and Memory left)"),
                       ("claimed", "claimed slots: who runs on them and from where"),
                       ("run", "same as -claimed; with -schedd, the schedds running jobs"),
                       ("server", "slots' resources: Memory, Disk, Mips, KFlops"),
                       ("state", "slots' state and activity, and how long they have been in them"),
                       ("compact", "one line per machine, its dynamic slots rolled into the partitionable one"),
                       ("wide", "never cut a line or a column to the terminal's width"),
                       ("long", "whole ads, one attribute per line")]:
        add_option(p, flag, *(("l",) if flag == "long" else ()), action="store_true", help=text)
    add_option(p, "total", "totals", dest="total", action="store_true", help="only the totals table")
    for kind, ad_type in TYPES.items():
        add_option(p, kind, action="store_true", help="every ad: its MyType, TargetType and Name" if kind == "any"
                   else f"{ad_type.value} ads instead of slots")
    add_option(p, "af", "autoformat", nargs="+", metavar="ATTR",
               help="print these attributes (or expressions), one ad per line")
    add_option(p, "format", nargs=2, action="append", metavar=("FMT", "ATTR"),
               help="print ATTR with the printf format FMT (%%s %%d %%f %%v %%V %%r); repeat for more")
    add_option(p, "constraint", metavar="EXPR", help="ads satisfying this ClassAd expression")
    so.add_options(p)
    add_pool_options(p)
    if "-help" not in p._option_string_actions:  # HTCondor's spelling of --help
        p.add_argument("-help", action="help", help="show this help message and exit")
    p.set_defaults(func=status)
