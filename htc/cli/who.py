"""``htc who``: condor_who. The jobs this machine's startd runs: who owns each, which schedd
(client) it came from, its slot, job id, run time, and -- where the caller may look into the
sandbox (root, or the account jobs run as) -- its process id and program."""

from __future__ import annotations

import argparse
import json
import time

import psutil

from htc.cli import formatting as fmt
from htc.cli.options import add_command, add_option, add_pool_options, transport_from
from htc.client.sandbox import running_on_this_machine, startd_slots

HEADERS = ("OWNER", "CLIENT", "SLOT", "JOB", "RUNTIME", "PID", "PROGRAM")


def _slot_id(ad) -> str:
    slot = ad.get("SlotID")
    if ad.get("DSlotId") is not None:
        return f"{slot}_{ad.get('DSlotId')}"
    return str(slot if slot is not None else str(ad.get("Name", "?")).split("@")[0].removeprefix("slot"))


def _client(ad) -> str:
    client = str(ad.get("ClientMachine", "") or "")
    return client.split("@", 1)[1] if "@" in client else client or "?"


def _program(job) -> str:
    if job is None:
        return "?"
    if job.pid is not None:
        try:
            cmdline = psutil.Process(job.pid).cmdline()
            if cmdline:
                first = cmdline[0]
                return first if first.startswith("/") else str(job.sandbox / first.removeprefix("./"))
        except psutil.Error:
            pass  # the process ended or is not ours to read: fall back to the job's Cmd
    cmd = (job.sandbox_ad or {}).get("Cmd") if job.sandbox_ad else None
    return str(cmd) if cmd else "?"


def who(args: argparse.Namespace) -> int:
    """htc who: the jobs running on this machine's startd."""
    slots = startd_slots(name=args.name or "startd", transport=transport_from(args))
    local = running_on_this_machine(home=args.pool)
    now = time.time()
    rows = []
    for ad in sorted(slots, key=lambda a: (a.get("SlotID") or 0, a.get("DSlotId") or 0)):
        job_id = str(ad.get("JobId", ""))
        job = local.get(job_id)
        start = ad.get("JobStart")
        rows.append({"owner": str(ad.get("RemoteUser", ad.get("RemoteOwner", "?"))), "client": _client(ad),
                     "slot": _slot_id(ad), "job": job_id,
                     "runtime": now - start if isinstance(start, (int, float)) else None,
                     "pid": job.pid if job else None, "program": _program(job)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("No jobs are running on this machine's startd.")
        return 0
    fmt.print_table(HEADERS, [(r["owner"], r["client"], r["slot"], r["job"], fmt.duration(r["runtime"]),
                               r["pid"] if r["pid"] is not None else "?", r["program"]) for r in rows],
                    right=[4, 5])
    return 0


def register(sub) -> None:
    """Add ``htc who``."""
    p = add_command(sub, "who", "the jobs running on this machine's startd (condor_who)", [
        "htc who          # owner, client, slot, job, run time, pid and program of each running job",
        "htc who -json",
    ])
    add_option(p, "name", metavar="NAME", help="the startd listening as NAME (default: this pool's startd)")
    add_pool_options(p)
    p.set_defaults(func=who)
