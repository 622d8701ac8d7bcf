"""``htc checkpoint JOB...``: checkpoint running standard-universe jobs now, without stopping them.

HTCondor's ``condor_checkpoint`` named *machines* and checkpointed every standard-universe job
on them; htc's names *jobs*, as the other job tools do (docs/cli.md). It prints one line per job,
``Sent checkpoint command for job 12.0`` on standard output, or why not on standard error, and
exits 1 when any job was refused.
"""

from __future__ import annotations

import argparse
import sys

from htc.cli import formatting as fmt
from htc.cli.options import add_command, add_pool_options, transport_from
from htc.client.checkpoint import checkpoint as request_checkpoint


def checkpoint(args: argparse.Namespace) -> int:
    """htc checkpoint: ask the schedd to checkpoint the named jobs."""
    reply = request_checkpoint(args.ids, transport=transport_from(args, "schedd"))
    if args.json:
        sys.stdout.write(fmt.records_json([{"job": job, "ok": True} for job in reply.requested]
                                          + [{"job": job, "ok": False, "reason": why}
                                             for job, why in reply.refused.items()]))
        return 1 if reply.refused else 0
    for job in reply.requested:
        print(f"Sent checkpoint command for job {job}")
    for job, why in reply.refused.items():
        print(f"Couldn't checkpoint job {job}: {why}", file=sys.stderr)
    return 1 if reply.refused else 0


def register(sub) -> None:
    """Add ``htc checkpoint``."""
    p = add_command(sub, "checkpoint", "checkpoint running standard-universe jobs now (condor_checkpoint)",
                    ["htc checkpoint 12.0", "htc checkpoint 12     # every job of cluster 12"],
                    description="Checkpoint running standard-universe jobs now, without stopping them: the image "
                                "goes to the schedd's spool like a periodic one (NumCkpts grows, the user log "
                                "gets a 003 Checkpointed event). Unlike condor_checkpoint, it takes job ids, "
                                "not machines.")
    p.add_argument("ids", nargs="+", metavar="CLUSTER[.PROC]", help="the jobs to checkpoint")
    add_pool_options(p, daemon="schedd")
    p.set_defaults(func=checkpoint)
