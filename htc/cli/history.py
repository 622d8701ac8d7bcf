"""``htc history``: condor_history.  Reads finished jobs from the job queue file
(:func:`htc.client.history`, no daemon needed) and prints condor_history's table
(``ID OWNER SUBMITTED RUN_TIME ST COMPLETED CMD``) or ``-af`` / ``-format`` / ``-long`` / ``-json``.

Newest first (``-backwards``, the default) or oldest first (``-forwards``); ``-limit``/``-match N``
shows at most N jobs; ``-completedsince T`` stops at the first job, newest first, that completed
at or before ``T`` (any expression giving a Unix time: ``'time() - 3600'``); ``-since JOB|EXPR``
stops at that job, or at the first job for which EXPR is true; ``-scanlimit N`` stops after
reading N jobs, matching or not; ``-file`` reads another queue file, ``-userlog`` the jobs of a job
event log; ``-wide`` never cuts a line to the terminal's width.
"""

from __future__ import annotations

import argparse
import sys
import time

from htc import client
from htc.client import jobs as client_jobs
from htc.cli import formatting as fmt
from htc.cli import job_views as views
from htc.cli import userlog_jobs
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
    if args.since is not None and args.order == "forwards":
        raise UsageError("Argument -forwards cannot be combined with -since.")
    if args.since is not None and args.completedsince:
        raise UsageError("give -since or -completedsince, not both")
    if args.scanlimit is not None and args.scanlimit < 0:
        raise UsageError(f"-scanlimit {args.scanlimit}: give a number of jobs, 0 or more")
    if args.userlog and args.file:
        raise UsageError("give -file or -userlog, not both")
    since = client_jobs.since_expression(args.since) if args.since is not None else None
    if args.completedsince:
        # condor_history's -since 'CompletionDate <= T'; a removed job completed when it left the queue
        since = (f"ifThenElse(CompletionDate isnt undefined && CompletionDate > 0, CompletionDate, "
                 f"EnteredCurrentStatus) <= ({args.completedsince})")
    constraint = " && ".join(f"({p})" for p in parts)
    if args.userlog:
        ads = _from_userlog(args, constraint, owner)
    else:
        ads = client.history(constraint, limit=args.limit, owner=owner, path=args.file,
                             forwards=args.order == "forwards", since=since, scan_limit=args.scanlimit)
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


def _from_userlog(args: argparse.Namespace, constraint: str, owner: str | None) -> list:
    """condor_history -userlog: the jobs of the event log (condor_q's userlog_to_classads), every
    one whatever its state, in job id order; the constraint, -since, -scanlimit and -limit apply."""
    from htc.classad import ExprTree

    test = ExprTree(constraint) if constraint else None
    stop = ExprTree(client_jobs.since_expression(args.since)) if args.since is not None else None
    if args.completedsince:
        stop = ExprTree(f"CompletionDate <= ({args.completedsince})")
    ads = []
    for ix, ad in enumerate(userlog_jobs.jobs_from_userlog(args.userlog, time.time())):
        if (args.scanlimit is not None and ix >= args.scanlimit) or (stop is not None and stop.eval(ad) is True):
            break
        if (owner is None or ad.get("Owner") == owner) and (test is None or test.eval(ad) is True):
            ads.append(ad)
    return ads[:args.limit] if args.limit is not None else ads


def register(sub) -> None:
    """Add ``htc history``."""
    p = add_command(sub, "history", "show finished jobs (condor_history)", [
        "htc history",
        "htc history -forwards -limit 10              # the 10 oldest",
        "htc history -completedsince 'time() - 3600'  # finished in the last hour",
        "htc history -limit 10 -af ClusterId ProcId ExitCode",
        "htc history -constraint 'ExitCode != 0' -long",
        "htc history alice",
        "htc history -since 12.3                      # newer than job 12.3",
        "htc history -scanlimit 100 -constraint 'ExitCode != 0'",
        "htc history -userlog job.log                 # the jobs of an event log",
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
    add_option(p, "since", metavar="JOB|EXPR",
               help="stop at this job (CLUSTER or CLUSTER.PROC) or at the first job for which EXPR is true")
    add_option(p, "scanlimit", type=int, metavar="N", help="stop after reading N jobs, matching or not")
    add_option(p, "file", metavar="PATH", help="read this job queue file instead of the pool's JOB_QUEUE_DB")
    add_option(p, "userlog", metavar="FILE", help="the jobs of this job event log instead of the history")
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
