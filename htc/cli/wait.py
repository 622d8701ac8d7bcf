"""``htc wait``: condor_wait.  Follows a job event log with :func:`htc.client.wait_for_jobs`
and exits 0 only when the jobs are known to be done (1 on timeout), as condor_wait does."""

from __future__ import annotations

import argparse
import json

from htc.cli.options import add_command, add_option
from htc.client import wait_for_jobs


def wait(args: argparse.Namespace) -> int:
    """htc wait: block until the jobs of an event log have finished."""
    result = wait_for_jobs(args.log, args.job, timeout=args.wait, num=args.num, echo=args.echo,
                           status=args.status, report=print)
    if args.json:
        print(json.dumps({"done": result.done, "message": result.message, "submitted": result.submitted,
                          "completed": result.completed, "aborted": result.aborted,
                          "pending": list(result.pending)}))
    else:
        print(result.message)
    return result.exit_status


def register(sub) -> None:
    """Add ``htc wait``."""
    p = add_command(sub, "wait", "wait until the jobs of a job event log have finished (condor_wait)", [
        "htc wait job.log               # every job the log mentions",
        "htc wait job.log 12            # all of cluster 12",
        "htc wait -wait 60 job.log 12.3 # give up after a minute (exit 1)",
        "htc wait -num 2 -status job.log",
    ])
    p.add_argument("log", help="the job event log (the submit description's 'log' file)")
    p.add_argument("job", nargs="?", help="CLUSTER, CLUSTER.PROC or CLUSTER.PROC.SUBPROC (default: all jobs)")
    add_option(p, "wait", type=float, metavar="SECONDS", help="give up after this many seconds (exit 1)")
    add_option(p, "num", type=int, metavar="N", help="finish once N jobs have ended")
    add_option(p, "status", action="store_true", help="report each job's submit, execute and end")
    add_option(p, "echo", action="store_true", help="print each event of the watched jobs")
    add_option(p, "json", action="store_true", help="print the outcome as JSON")
    p.set_defaults(func=wait)
