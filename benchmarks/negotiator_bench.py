"""Benchmark: one negotiation cycle of the real negotiator core at pool scale.

Three measurements, in one run (issue #19, "Fast"):

1. **50 autoclusters**: 10,000 machines, each one partitionable slot of 8-32 cores; 100,000 idle
   jobs from 200 users whose jobs fall into 50 autoclusters (50 distinct job shapes: memory,
   disk, architecture, Rank). Cycle time and matches per second.
2. **5,000 autoclusters**: the same pool and jobs, every user with 25 shapes of its own.
3. **Scaling**: case 1's workload against 1,000 ... 50,000 machines (a table).

Beside each case it measures, in the same run, what one HTCondor ClassAd symmetric match costs
(``classad2``, the oracle of the test extra: ``job.symmetricMatch(slot)`` over the same ads) and
prints ``cycle / (autoclusters x slots x cost)``: how the cycle compares with matching every
autocluster against every slot once with HTCondor's own engine. Goal: at most 0.02 for case 1,
and case 2 under 10 s.

Machines differ the way real ones do (architecture, memory, disk, benchmark numbers, load,
keyboard idle time); a quarter run the desktop policy (START reads KeyboardIdle and LoadAvg).
The whole core path is timed: PoolAds (accountant update, claim reconciliation, significant
attributes), then the matchmaking once every schedd has answered. Times are CPU seconds of this
process (``time.process_time``), for the cycle and the classad2 matches alike, so that a shared,
busy machine does not distort the ratio; on an idle machine they equal wall-clock time.

Usage::

    python benchmarks/negotiator_bench.py                 # the three measurements
    python benchmarks/negotiator_bench.py --case 1        # one case
    python benchmarks/negotiator_bench.py --case 0        # only the scaling table
    python benchmarks/negotiator_bench.py --scaling 1000,5000,10000
    python benchmarks/negotiator_bench.py --policy UPDOWN # the Up-Down policy instead
    python benchmarks/negotiator_bench.py --case 1 --profile 10  # where the time goes
    python benchmarks/negotiator_bench.py --case 2 --scalar      # without the slot columns

Each case also prints a digest of its matches (submitter, autocluster, job, slot, carve, in
order): the same digest with and without ``--scalar`` (or before and after a change) means
the same matches.

The core hands its matches over as runs, one record per request and slot
(:mod:`htc.daemons.negotiator.match_runs`: 14,391 ``NotifyMatches`` actions for case 1's
81,642 matches), so the cycle timed here makes no Match, slot-ad view or claim id per job;
the digest expands the runs after the timer stopped. What the daemon then pays per job (a
MatchNotify message, its Send, its frame, its log line's share) is measured by
``benchmarks/negotiator_service_cpu.py``: case 1, 7.3-9.4 us of CPU per match after the core
(translate 4.0-5.7, encode 1.6-1.9, log 1.8); it was 10.3-10.7 us (translate 6.4-7.0) when
the core handed over a NotifyMatch per match.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import time

from htc.classad import ClassAd, ExprTree
from htc.daemons.autocluster import ResourceRequest
from htc.daemons.negotiator.core import Negotiator
from htc.daemons.negotiator.events import NotifyMatches, PoolAds, RequestsReceived, Wakeup
from htc.daemons.negotiator.settings import NegotiatorSettings
from htc.daemons.negotiator.submitters import SubmitterAd
from htc.daemons.negotiator.vsearch import VectorSearch

DESKTOP_START = "(KeyboardIdle > 15 * 60) && (LoadAvg < 0.3)"
JOB_REQUIREMENTS = (
    '(TARGET.Arch == "{arch}") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk)'
    " && (TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus)"
    " && ((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))"
)
RANKS = ["0.0", "0.0", "TARGET.KFlops / 1000", "TARGET.Memory", "TARGET.Mips"]
USERS = 200
JOBS = 100_000


def make_pool(machines: int, rng: random.Random) -> list[ClassAd]:
    """One partitionable slot per machine, machines as varied as a real pool's."""
    ads = []
    for m in range(machines):
        host = f"node{m:05d}.example.org"
        cores = rng.choice([8, 8, 16, 32])
        kflops = rng.choice([1_200_000, 1_500_000, 2_100_000])
        ad = ClassAd({
            "Name": f"slot1@{host}", "Machine": host, "SlotID": 1,
            "MyAddress": f"<10.{m // 62500}.{m // 250 % 250}.{m % 250}:9618>",
            "OpSys": "LINUX", "Arch": rng.choice(["X86_64"] * 7 + ["aarch64"]),
            "KFlops": kflops, "Mips": kflops // 100, "LoadAvg": round(rng.random(), 2),
            "KeyboardIdle": rng.randrange(0, 7200), "FileSystemDomain": host,
            "HasFileTransfer": True, "State": "Unclaimed", "Activity": "Idle", "Rank": 0.0,
            "CurrentRank": 0.0, "Cpus": cores, "TotalCpus": cores,
            "Memory": cores * rng.choice([2048, 4096]), "TotalMemory": cores * 4096,
            "Disk": rng.randrange(50, 500) * 1_000_000, "PartitionableSlot": True,
            "SlotType": "Partitionable", "DaemonStartTime": 1_700_000_000 + m,
            "ClaimId": f"<claim-{m}>",
        })
        ad["Start"] = ExprTree(DESKTOP_START if rng.random() < 0.25 else "True")
        ad["Requirements"] = ExprTree("START")
        ads.append(ad)
    return ads


def make_shapes(n: int, rng: random.Random) -> list[dict]:
    """``n`` distinct job shapes (what an autocluster is: the significant attributes)."""
    shapes, seen = [], set()
    while len(shapes) < n:
        shape = (rng.choice(["X86_64"] * 9 + ["aarch64"]), 1 if rng.random() < 0.8 else 2,
                 128 * rng.randrange(4, 48), rng.randrange(1, 20000) * 1000, rng.choice(RANKS))
        if shape not in seen:
            seen.add(shape)
            shapes.append(dict(zip(("arch", "cpus", "memory", "disk", "rank"), shape)))
    return shapes


def make_requests(autoclusters: int, rng: random.Random, users: int = USERS, jobs: int = JOBS):
    """``users`` submitters at 10 schedds; their ``jobs`` idle jobs in ``autoclusters`` shapes.

    With fewer shapes than users, user i's jobs are all of shape ``i % autoclusters``; with more,
    each user has ``autoclusters / users`` shapes of its own.
    """
    shapes = make_shapes(autoclusters, rng)
    per_user = max(1, autoclusters // users)
    subs, by_key = [], {}
    ac = 0
    for u in range(users):
        name, schedd = f"user{u:03d}@example.org", f"schedd{u % 10}"
        mine = ([shapes[u % autoclusters]] if autoclusters <= users
                else shapes[u * per_user:(u + 1) * per_user])
        reqs = []
        for k, shape in enumerate(mine):
            ac += 1
            job = ClassAd({
                "Owner": f"user{u:03d}", "RequestCpus": shape["cpus"],
                "RequestMemory": shape["memory"], "RequestDisk": shape["disk"],
                "JobUniverse": 5, "FileSystemDomain": "submit.example.org", "ClusterId": ac,
                "ProcId": 0,
            })
            job["Requirements"] = ExprTree(JOB_REQUIREMENTS.format(arch=shape["arch"]))
            job["Rank"] = ExprTree(shape["rank"])
            count = jobs // users // len(mine) + (1 if k < (jobs // users) % len(mine) else 0)
            reqs.append(ResourceRequest(ac, job, count))
        by_key[(schedd, name)] = reqs
        subs.append(SubmitterAd(name, schedd, f"<{schedd}>", sum(r.count for r in reqs), 0))
    return subs, by_key, shapes


def one_cycle(slots, subs, requests, policy: str) -> tuple[float, float, int, object, str]:
    """Run one cycle through the core; return (PoolAds s, matchmaking s, matches, stats, digest)."""
    neg = Negotiator(NegotiatorSettings(policy=policy), now=0.0)
    neg.handle(Wakeup(), 0.0)
    t0 = time.process_time()
    asks = neg.handle(PoolAds(1, tuple(slots), tuple(subs)), 0.0)
    t_pool = time.process_time() - t0
    t0 = time.process_time()
    actions = []
    for ask in asks:
        actions = neg.handle(RequestsReceived(1, ask.schedd, ask.submitter,
                                              tuple(requests[(ask.schedd, ask.submitter)])), 1.0)
    t_match = time.process_time() - t0
    # (the core hands over runs; expanded here, outside the timed region, in the same format)
    found = [m for a in actions if isinstance(a, NotifyMatches) for m in a.matches]
    digest = hashlib.sha256("\n".join(
        f"{m.submitter} {m.autocluster_id} {m.job_id} {m.slot_name} {m.carved}"
        for m in found).encode()).hexdigest()[:16]
    return t_pool, t_match, len(found), neg.statistics().last_cycle, digest


def classad2_match_cost(slots, requests, rng: random.Random, pairs: int = 20_000) -> float:
    """Seconds per ``classad2`` symmetric match, over random (job, slot) pairs of these ads."""
    import classad2

    jobs = [r.job for reqs in requests.values() for r in reqs]
    theirs_jobs = [classad2.ClassAd(repr(j)) for j in rng.sample(jobs, min(200, len(jobs)))]
    theirs_slots = [classad2.ClassAd(repr(s)) for s in rng.sample(slots, min(500, len(slots)))]
    pick = [(rng.choice(theirs_jobs), rng.choice(theirs_slots)) for _ in range(pairs)]
    hits = 0
    t0 = time.process_time()
    for job, slot in pick:
        hits += job.symmetricMatch(slot)
    return (time.process_time() - t0) / pairs


def report(title: str, slots, subs, requests, n_ac: int, cost: float, policy: str) -> float:
    """Print one case; return its cycle time."""
    t_pool, t_match, matches, stats, digest = one_cycle(slots, subs, requests, policy)
    total = t_pool + t_match
    idle = sum(s.idle_jobs for s in subs)
    oracle = n_ac * len(slots) * cost
    print(f"{title}: {len(slots):,} partitionable slots ({stats.slot_classes:,} slot classes), "
          f"{idle:,} idle jobs of {len(subs)} users in {n_ac:,} autoclusters "
          f"({stats.requests:,} requests), policy {policy}")
    print(f"  PoolAds {t_pool:.2f} s + matchmaking {t_match:.2f} s = cycle {total:.2f} s; "
          f"{matches:,} matches = {matches / total:,.0f} matches/s; "
          f"{stats.pie_spins} pie spins, rejections {dict(stats.rejections_by_reason)}")
    print(f"  matches digest {digest}; slot columns {'on' if VectorSearch.enabled else 'off'}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"  classad2 symmetric match: {cost * 1e6:.2f} us/pair; autoclusters x slots x cost = "
          f"{oracle:.1f} s; cycle / that = {total / oracle:.4f}")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", type=int, choices=(0, 1, 2),
                        help="run only this case (0: none, only the scaling table)")
    parser.add_argument("--scaling", default="1000,2000,5000,10000,20000,50000",
                        help="machine counts for the scaling table ('' to skip)")
    parser.add_argument("--policy", default="HTCONDOR", choices=("HTCONDOR", "UPDOWN"))
    parser.add_argument("--seed", type=int, default=1988)
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="run the cases under cProfile and print its top N by own time "
                             "(where the cycle's time goes; the times printed are inflated)")
    parser.add_argument("--scalar", action="store_true",
                        help="search slot by class as before the slot columns (the comparison)")
    args = parser.parse_args()
    VectorSearch.enabled = not args.scalar
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        try:
            _run(args)
        finally:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)
        return
    _run(args)


def _run(args) -> None:
    """The cases and the scaling table ``args`` asks for."""
    rng = random.Random(args.seed)
    cases = [1, 2] if args.case is None else [args.case] if args.case else []
    slots = make_pool(10_000, rng) if cases else []
    for case in cases:
        n_ac = 50 if case == 1 else 5_000
        subs, requests, _ = make_requests(n_ac, random.Random(args.seed + case))
        cost = classad2_match_cost(slots, requests, random.Random(args.seed))
        report(f"case {case}", slots, subs, requests, n_ac, cost, args.policy)
    sizes = [int(n) for n in args.scaling.split(",") if n.strip()] if args.case in (None, 0) else []
    if sizes:
        subs, requests, _ = make_requests(50, random.Random(args.seed + 1))
        print("\nscaling (50 autoclusters, 100,000 idle jobs, 200 users):")
        print("| machines | cores | matches | cycle s | matches/s | cycle / (ACs x slots x cost) |")
        print("|---:|---:|---:|---:|---:|---:|")
        for n in sizes:
            pool = make_pool(n, random.Random(args.seed + n))
            cost = classad2_match_cost(pool, requests, random.Random(args.seed), pairs=5_000)
            t_pool, t_match, matches, _, _ = one_cycle(pool, subs, requests, args.policy)
            total = t_pool + t_match
            cores = sum(ad["Cpus"] for ad in pool)
            print(f"| {n:,} | {cores:,} | {matches:,} | {total:.2f} | {matches / total:,.0f} | "
                  f"{total / (50 * n * cost):.4f} |")


if __name__ == "__main__":
    main()
