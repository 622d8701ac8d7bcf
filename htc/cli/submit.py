"""``htc submit``: condor_submit.  Parses, calls :func:`htc.client.submit`, prints
what condor_submit prints (``Submitting job(s)...`` / ``3 job(s) submitted to cluster 12.``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid

from htc import client
from htc.cli.formatting import long_form
from htc.cli.options import add_command, add_option, add_pool_options, transport_from
from htc.errors import HTCError, UsageError


def _read(args: argparse.Namespace) -> tuple[str, str | None]:
    """The description text and its file name (None for standard input)."""
    files = [a for a in args.args if "=" not in a or os.path.exists(a)]
    if len(files) > 1:
        raise UsageError(f"give one submit description file, not {len(files)} ({', '.join(files)})")
    name = files[0] if files else None
    if name in (None, "-"):
        if sys.stdin.isatty():
            print("Reading the submit description from standard input (end with Ctrl-D)...", file=sys.stderr)
        raw = getattr(sys.stdin, "buffer", None)  # a text stream without bytes (a test's StringIO) is read as text
        return (_text(raw.read(), "standard input") if raw is not None else sys.stdin.read()), None
    try:
        with open(name, "rb") as fh:
            return _text(fh.read(), name), name
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise UsageError(f"Failed to open command file {name!r}: {getattr(exc, 'strerror', None) or exc}") from None


def _text(data: bytes, where: str) -> str:
    """The description as text; bytes that are not UTF-8 are an error naming their line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UsageError(f"ERROR: on Line {line} of submit file {where}: byte 0x{data[exc.start]:02x} is not "
                         "UTF-8 text; save the description as UTF-8. No jobs were queued.") from None


def submit(args: argparse.Namespace) -> int:
    """htc submit: queue the jobs of a submit description."""
    text, filename = _read(args)
    # var=value arguments define macros before the description (condor_submit's behaviour)
    assignments = [a for a in args.args if "=" in a and not os.path.exists(a)]
    if assignments:
        text = "".join(a.replace("=", " = ", 1) + "\n" for a in assignments) + text
    append = list(args.append or [])
    if args.remote:
        args.spool, args.name = True, args.remote  # -remote NAME: spool to that schedd
    if args.spool:
        from htc.client.spool import SPOOL_COMMANDS

        append += SPOOL_COMMANDS
    if args.batch_name:
        append.append(f"batch_name = {args.batch_name}")
    if args.dry_run:
        cluster = client.build_cluster(text, cwd=os.getcwd(), filename=filename, append=append, queue=args.queue)
        from htc.classad import ClassAd

        ads = [ClassAd("[ " + "; ".join(f"{k} = {v}" for k, v in ad.items()) + " ]") for ad in cluster.job_ads()]
        output = long_form(ads)
        if args.dry_run == "-":
            sys.stdout.write(output)
        else:
            with open(args.dry_run, "w", encoding="utf-8") as fh:
                fh.write(output)
        return 0
    result = _submit_once(text, filename, append, args)
    for warning in result.warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps({"ClusterId": result.cluster_id, "FirstProc": result.first_proc,
                          "NumProcs": result.num_procs,
                          "JobIds": [f"{result.cluster_id}.{p}" for p in range(result.first_proc, result.last_proc + 1)]}))
    elif args.terse:
        print(result.terse())
    else:
        if filename is not None:
            print("Submitting job(s)" + "." * result.num_procs)
        print(result.summary())
    if args.spool:
        return _spool(result, args)
    return 0


def _spool(result, args: argparse.Namespace) -> int:
    """Send the input of the jobs just queued on hold to the schedd's spool (condor_submit -spool)."""
    from htc.client.spool import spool_input

    if not (args.json or args.terse):
        print(f"Spooling data files for {result.num_procs} jobs...")
    try:
        spool_input(result.cluster_id, transport=transport_from(args, "schedd"))
    except HTCError as exc:
        print(f"\n{exc}\nERROR: Failed to spool job files.", file=sys.stderr)
        return 1
    return 0


#: seconds ``htc submit`` keeps trying to get an answer after one was lost (a restarting schedd)
RETRY_FOR = 120.0


def _submit_once(text: str, filename: str | None, append: list[str], args: argparse.Namespace):
    """Submit with a submission id of its own: when the answer is lost (the schedd died after
    queueing the jobs, or is restarting), the same submission is sent again for
    :data:`RETRY_FOR` seconds, and a schedd that had queued it answers with that cluster; the
    jobs are never queued twice."""
    return client.submit(text, cwd=os.getcwd(), filename=filename, append=append, queue=args.queue,
                         transport=transport_from(args, "schedd"),
                         submission_id=f"htc-submit-{uuid.uuid4().hex}", resend_for=RETRY_FOR)


def register(sub) -> None:
    """Add ``htc submit``."""
    p = add_command(sub, "submit", "submit jobs from a submit description file (condor_submit)", [
        "htc submit job.sub",
        "htc submit -queue 10 job.sub                    # replace the file's queue statement",
        "htc submit -append 'request_memory = 2G' job.sub",
        "htc submit job.sub input=data.txt               # define a macro",
        "printf 'executable = /bin/true\\nqueue\\n' | htc submit",
        "htc submit -terse job.sub                       # prints 12.0 - 12.9",
        "htc submit -dry-run - job.sub                   # show the job ads, submit nothing",
        "htc submit -spool job.sub                       # send the input to the schedd; htc transfer_data later",
    ])
    p.add_argument("args", nargs="*", metavar="FILE | NAME=VALUE",
                   help="the submit description (default or '-': standard input) and macro definitions")
    add_option(p, "append", "a", action="append", metavar="CMD",
               help="a submit command, as if written just before the queue statement (repeatable)")
    add_option(p, "queue", metavar="ARGS", help="replace the file's queue statement by 'queue ARGS'")
    add_option(p, "terse", action="store_true", help="print only the job ids, as CLUSTER.FIRST - CLUSTER.LAST")
    add_option(p, "batch-name", metavar="NAME", help="the batch name htc q shows (JobBatchName)")
    add_option(p, "dry-run", metavar="FILE", help="write the job ads to FILE ('-': standard output) instead of submitting")
    add_option(p, "spool", action="store_true",
               help="send the input files to the schedd's spool over the connection; fetch the output with "
                    "htc transfer_data")
    add_option(p, "remote", metavar="NAME", help="submit to the schedd NAME, spooling the input (implies -spool)")
    add_pool_options(p, daemon="schedd")
    p.set_defaults(func=submit)
