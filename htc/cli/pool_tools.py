"""The pool tools (submit, q, status, rm, ...) with HTCondor's options.

Their parsers are complete so that ``htc q -constraint ...`` parses as HTCondor users type it;
the daemons they talk to are not in this build yet, so each says so (exit status 3) instead
of pretending to work.
"""

from __future__ import annotations

import argparse

from htc.cli.options import add_option, add_pool_options
from htc.errors import NotBuiltYet

_NEEDS_POOL = "the personal pool daemons (schedd, collector, negotiator, startd)"


def _not_built(args: argparse.Namespace) -> int:
    raise NotBuiltYet(f"'htc {args.command}'", _NEEDS_POOL)


def _add(sub, name: str, help: str, epilog: str) -> argparse.ArgumentParser:
    p = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.set_defaults(func=_not_built)
    return p


def _job_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("ids", nargs="*", metavar="CLUSTER[.PROC]|USER", help="jobs to act on")
    add_option(p, "constraint", metavar="EXPR", help="jobs whose ad satisfies this ClassAd expression")
    add_option(p, "all", action="store_true", help="every job you may act on")


def register(sub) -> None:
    p = _add(sub, "submit", "submit jobs from a submit description file",
             "examples:\n  htc submit job.sub\n  htc submit -queue 10 job.sub\n  echo 'executable=/bin/true\\nqueue' | htc submit")
    p.add_argument("file", nargs="?", help="submit description (default: standard input)")
    add_option(p, "append", "a", action="append", metavar="CMD", help="a submit command added before queue")
    add_option(p, "queue", metavar="ARGS", help="replace the file's queue statement")
    add_option(p, "terse", action="store_true", help="print only the job ids, as first - last")
    add_pool_options(p)

    p = _add(sub, "q", "show jobs in the queue",
             "examples:\n  htc q\n  htc q -nobatch\n  htc q -af ClusterId JobStatus\n  htc q -constraint 'JobStatus == 5'\n  htc q -better-analyze 12.0")
    p.add_argument("ids", nargs="*", metavar="CLUSTER[.PROC]|USER")
    for flag, text in [("nobatch", "one line per job"), ("run", "running jobs only"),
                       ("hold", "held jobs and their reasons"), ("long", "whole job ads"),
                       ("totals", "only the totals line"), ("better-analyze", "explain why jobs do not run"),
                       ("allusers", "jobs of every user")]:
        add_option(p, flag, action="store_true", help=text)
    add_option(p, "af", "autoformat", nargs="+", metavar="ATTR", help="print these attributes, one job per line")
    add_option(p, "constraint", metavar="EXPR", help="jobs whose ad satisfies this ClassAd expression")
    add_pool_options(p)

    p = _add(sub, "status", "show the machines (slots) of the pool",
             "examples:\n  htc status\n  htc status -avail\n  htc status -af Name State Activity")
    p.add_argument("machines", nargs="*")
    for flag, text in [("avail", "slots willing to run jobs now"), ("run", "slots running jobs"),
                       ("total", "only the totals table"), ("long", "whole slot ads")]:
        add_option(p, flag, action="store_true", help=text)
    add_option(p, "af", "autoformat", nargs="+", metavar="ATTR")
    add_option(p, "constraint", metavar="EXPR")
    add_pool_options(p)

    for name, text in [("rm", "remove jobs"), ("hold", "put jobs on hold"), ("release", "release held jobs")]:
        p = _add(sub, name, text, f"examples:\n  htc {name} 12\n  htc {name} 12.3\n  htc {name} -constraint 'Owner == \"alice\"'")
        _job_selection(p)
        if name != "rm":
            add_option(p, "reason", metavar="TEXT")
        add_pool_options(p)

    p = _add(sub, "pool", "start, stop or inspect the personal pool under $HTC_HOME",
             "examples:\n  htc pool start\n  htc pool status\n  htc pool stop")
    p.add_argument("action", choices=["start", "stop", "status"])
    add_option(p, "foreground", action="store_true", help="run the master in the foreground")
