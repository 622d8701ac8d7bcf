"""Benchmark: one negotiation cycle of 1,000 autoclusters against 10,000 slots.

The pool is 1,250 machines of 8 static slots (or, with ``--partitionable``, one partitionable
slot per machine holding its 8 cores). Machines differ the way real ones do: architecture,
memory, free disk, benchmark numbers, load, keyboard idle time; a quarter run the desktop
policy (START reads KeyboardIdle and LoadAvg). 50 submitters offer 20 autoclusters each
(1,000 requests, about 10,000 idle jobs) with HTCondor-style Requirements and a mix of Rank
expressions. The whole core path is timed: PoolAds (accountant update, claim reconciliation,
significant attributes) and then the matchmaking once every schedd has answered.

Usage::

    python benchmarks/negotiator_bench.py [--slots N] [--autoclusters N] [--partitionable]
"""

from __future__ import annotations

import argparse
import random
import time

from htc.classad import ClassAd, ExprTree
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.core import Negotiator
from htc.daemons.negotiator.events import NotifyMatch, PoolAds, RequestsReceived, Wakeup
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.submitters import SubmitterAd

DESKTOP_START = "(KeyboardIdle > 15 * 60) && (LoadAvg < 0.3 || TARGET.Owner == \"alice0\")"
JOB_REQUIREMENTS = (
    '(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk)'
    " && (TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus)"
    " && ((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))"
)
RANKS = ["0.0", "0.0", "TARGET.KFlops / 1000", "TARGET.Memory", "TARGET.Mips"]


def make_pool(n_slots: int, partitionable: bool, rng: random.Random) -> list[ClassAd]:
    per_machine = 8
    ads = []
    for m in range(max(1, n_slots // per_machine)):
        host = f"node{m:05d}.example.org"
        arch = rng.choice(["X86_64"] * 7 + ["aarch64"])
        memory = rng.choice([16384, 32768, 65536])
        disk = rng.randrange(50, 500) * 1_000_000  # free disk differs per machine
        kflops = rng.choice([1_200_000, 1_500_000, 2_100_000])
        desktop = rng.random() < 0.25
        base = {
            "Machine": host, "MyAddress": f"<10.0.{m // 250}.{m % 250}:9618>",
            "OpSys": "LINUX", "Arch": arch, "KFlops": kflops, "Mips": kflops // 100,
            "LoadAvg": round(rng.random(), 2), "KeyboardIdle": rng.randrange(0, 7200),
            "FileSystemDomain": host, "HasFileTransfer": True, "State": "Unclaimed",
            "Activity": "Idle", "Rank": 0.0, "CurrentRank": 0.0, "TotalCpus": per_machine,
            "TotalMemory": memory, "DaemonStartTime": 1_700_000_000 + m,
        }
        slots = [(1, per_machine, memory, disk)] if partitionable else [
            (i + 1, 1, memory // per_machine, disk // per_machine) for i in range(per_machine)]
        for slot_id, cpus, mem, dsk in slots:
            ad = ClassAd(dict(base, Name=f"slot{slot_id}@{host}", SlotID=slot_id, Cpus=cpus,
                              Memory=mem, Disk=dsk, ClaimId=f"<claim-{m}-{slot_id}>"))
            if partitionable:
                ad["PartitionableSlot"] = True
                ad["SlotType"] = "Partitionable"
            ad["Start"] = ExprTree(DESKTOP_START if desktop else "True")
            ad["Requirements"] = ExprTree("START")
            ads.append(ad)
    return ads


def make_requests(n_autoclusters: int, rng: random.Random):
    submitters = max(1, n_autoclusters // 20)
    by_key = {}
    subs = []
    ac = 0
    for s in range(submitters):
        name, schedd = f"alice{s}@example.org", f"schedd{s % 5}"
        reqs = []
        for _ in range(n_autoclusters // submitters):
            ac += 1
            job = ClassAd({
                "Owner": f"alice{s}", "RequestCpus": 1, "RequestMemory": 128 * rng.randrange(4, 24),
                "RequestDisk": rng.randrange(1, 2000) * 1000, "JobUniverse": 5,
                "FileSystemDomain": "submit.example.org", "ClusterId": ac, "ProcId": 0,
            })
            job["Requirements"] = ExprTree(JOB_REQUIREMENTS)
            job["Rank"] = ExprTree(rng.choice(RANKS))
            reqs.append(ResourceRequest(ac, job, rng.randrange(1, 20)))
        by_key[(schedd, name)] = reqs
        subs.append(SubmitterAd(name, schedd, f"<{schedd}>", sum(r.count for r in reqs), 0))
    return subs, by_key


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=10_000)
    parser.add_argument("--autoclusters", type=int, default=1_000)
    parser.add_argument("--partitionable", action="store_true")
    parser.add_argument("--seed", type=int, default=1988)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    t0 = time.perf_counter()
    slots = make_pool(args.slots, args.partitionable, rng)
    subs, requests = make_requests(args.autoclusters, rng)
    setup = time.perf_counter() - t0

    neg = Negotiator(NegotiatorSettings(), now=0.0)
    neg.handle(Wakeup(), 0.0)
    t0 = time.perf_counter()
    asks = neg.handle(PoolAds(1, tuple(slots), tuple(subs)), 0.0)
    t_pool = time.perf_counter() - t0
    t0 = time.perf_counter()
    actions = []
    for ask in asks:
        actions = neg.handle(RequestsReceived(1, ask.schedd, ask.submitter,
                                              tuple(requests[(ask.schedd, ask.submitter)])), 1.0)
    t_match = time.perf_counter() - t0
    stats = neg.statistics().last_cycle
    matches = sum(isinstance(a, NotifyMatch) for a in actions)
    idle = sum(s.idle_jobs for s in subs)
    total = t_pool + t_match
    kind = "partitionable" if args.partitionable else "static"
    print(f"pool: {len(slots)} {kind} slots, {stats.slot_classes} slot classes; "
          f"{stats.requests} autoclusters, {idle} idle jobs, {len(subs)} submitters "
          f"(built in {setup:.2f} s)")
    print(f"phase PoolAds (accounting, significant attributes): {t_pool:.2f} s")
    print(f"phase matchmaking: {t_match:.2f} s, {stats.pie_spins} pie spins, "
          f"{stats.rejections} rejections {dict(stats.rejections_by_reason)}")
    print(f"cycle: {matches} matches in {total:.2f} s = {matches / total:,.0f} matches/s")


if __name__ == "__main__":
    main()
