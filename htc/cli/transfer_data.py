"""``htc transfer_data``: condor_transfer_data -- fetch the spooled output of completed jobs
submitted with ``htc submit -spool`` into the directories their descriptions named
(:mod:`htc.client.spool`). Prints ``Fetching data files...`` as condor_transfer_data does, an
``ERROR`` line per job whose output could not be fetched, and exits 1 if any failed or none of
the selected jobs had spooled output."""

from __future__ import annotations

import argparse
import sys

from htc import client
from htc.cli.options import add_command, add_option, add_pool_options, transport_from


def transfer_data(args: argparse.Namespace) -> int:
    """htc transfer_data: fetch spooled output."""
    from htc.client.spool import transfer_data as fetch

    selection = client.parse_selection(args.ids, args.constraint, args.all)
    print("Fetching data files...")
    fetched = fetch(selection, transport=transport_from(args, "schedd"))
    if not fetched:
        print("No completed jobs with spooled output matched; wait for the jobs to complete (htc q), or check "
              "that they were submitted with -spool", file=sys.stderr)
        return 1
    failed = [f for f in fetched if f.error is not None]
    for f in failed:
        print(f"ERROR: job {f.job_id}: {f.error}", file=sys.stderr)
    return 1 if failed else 0


def register(sub) -> None:
    """Add ``htc transfer_data``."""
    p = add_command(sub, "transfer_data", "fetch the spooled output of completed jobs (condor_transfer_data)", [
        "htc transfer_data 12          # every job of cluster 12",
        "htc transfer_data 12.3        # one job",
        "htc transfer_data alice       # alice's jobs",
        "htc transfer_data -all",
    ])
    p.add_argument("ids", nargs="*", metavar="CLUSTER[.PROC]|OWNER", help="jobs, clusters or owners")
    add_option(p, "constraint", metavar="EXPR", help="jobs whose ad satisfies this ClassAd expression")
    add_option(p, "all", action="store_true", help="every job with spooled output you may fetch")
    add_pool_options(p, daemon="schedd", json=False)
    p.set_defaults(func=transfer_data)
