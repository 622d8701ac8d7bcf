"""``htc history``: condor_history.  Reads finished jobs from the job queue file
(:func:`htc.client.history`, no daemon needed) and prints condor_history's table
(``ID OWNER SUBMITTED RUN_TIME ST COMPLETED CMD``) or ``-af`` / ``-format`` / ``-long`` / ``-json``.

Newest first (``-backwards``, the default) or oldest first (``-forwards``); ``-limit``/``-match N``
shows at most N jobs; ``-completedsince T`` stops at the first job, newest first, that completed
at or before ``T`` (any expression giving a Unix time: ``'time() - 3600'``); ``-file`` reads
another queue file; ``-wide`` never cuts a line to the terminal's width.
"""

from __future__ import annotations

import argparse
import sys
import time

from htc import client
from htc.cli import formatting as fmt
from htc.cli import job_views as views
from htc.cli.options import add_command, add_option
from htc.cli.status_views import printf_format
from htc.errors import UsageError


def history(args: argparse.Namespace) -> int:
    """htc history: finished jobs."""
    parts = []
    owner = None
    if args.ids:
        selection = client.parse_selection(args.ids)
        if selection.users and not (selection.jobs or selection.clusters) and len(selection.users) == 1:
            owner = selection.users[0]
        else:
            parts.append(selection.constraint_for_all())
    if args.constraint:
        parts.append(args.constraint)
    if args.limit is not None and args.limit < 0:
        raise UsageError(f"-limit {args.limit}: give a number of jobs, 0 or more")
    since = None
    if args.completedsince:
        # condor_history's -since 'CompletionDate <= T'; a removed job completed when it left the queue
        since = (f"ifThenElse(CompletionDate isnt undefined && CompletionDate > 0, CompletionDate, "
                 f"EnteredCurrentStatus) <= ({args.completedsince})")
    constraint = " && ".join(f"({p})" for p in parts)
    ads = client.history(constraint, limit=args.limit, owner=owner, path=args.file,
                         forwards=args.order == "forwards", since=since)
    attrs = [a.strip() for a in (args.attributes or "").split(",") if a.strip()]
    if args.long:
        sys.stdout.write(fmt.long_form(ads, attrs))
    elif args.json:
        sys.stdout.write(fmt.json_form(ads, attrs))
    elif args.af:
        sys.stdout.write(fmt.autoformat(ads, args.af))
    elif args.format:
        sys.stdout.write("".join("".join(printf_format(f, e, ad) for f, e in args.format) for ad in ads))
    else:
        out = fmt.console()
        if args.wide:
            out.width = 100_000  # -wide: lines are never cut to the terminal
        fmt.print_table(views.HISTORY_HEADERS, views.history_rows(ads, time.time()), right=[0, 3], out=out)
    return 0


def register(sub) -> None:
    """Add ``htc history``."""
    p = add_command(sub, "history", "show finished jobs (condor_history)", [
        "htc history",
        "htc history -forwards -limit 10              # the 10 oldest",
        "htc history -completedsince 'time() - 3600'  # finished in the last hour",
        "htc history -limit 10 -af ClusterId ProcId ExitCode",
        "htc history -constraint 'ExitCode != 0' -long",
        "htc history alice",
    ])
    p.add_argument("ids", nargs="*", metavar="CLUSTER[.PROC]|OWNER", help="jobs, clusters or an owner")
    add_option(p, "constraint", metavar="EXPR", help="jobs whose ad satisfies this ClassAd expression")
    add_option(p, "limit", "match", type=int, metavar="N", help="at most N jobs")
    add_option(p, "forwards", dest="order", action="store_const", const="forwards",
               help="oldest first")
    add_option(p, "backwards", dest="order", action="store_const", const="backwards",
               help="newest first (the default)")
    add_option(p, "completedsince", metavar="TIME",
               help="only jobs completed after TIME (a Unix time, or an expression giving one)")
    add_option(p, "file", metavar="PATH", help="read this job queue file instead of the pool's JOB_QUEUE_DB")
    add_option(p, "wide", action="store_true", help="never cut a line to the terminal's width")
    add_option(p, "long", "l", action="store_true", help="whole job ads, one attribute per line")
    add_option(p, "af", "autoformat", nargs="+", metavar="ATTR",
               help="print these attributes (or expressions), one job per line")
    add_option(p, "format", nargs=2, action="append", metavar=("FMT", "ATTR"),
               help="print ATTR with the printf format FMT; repeat for more")
    add_option(p, "attributes", metavar="A,B", help="with -long/-json: only these attributes")
    add_option(p, "json", action="store_true", help="print machine-readable JSON")
    if "-help" not in p._option_string_actions:  # HTCondor's spelling of --help
        p.add_argument("-help", action="help", help="show this help message and exit")
    p.set_defaults(func=history, order="backwards")
