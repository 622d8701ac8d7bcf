"""Benchmark: symmetric match plus Rank of one job ad against 10,000 machine ads.

Runs the same work with htc.classad and with HTCondor's own engine (the ``classad2`` module
of the ``htcondor`` wheel, used here only as a yardstick) and prints microseconds per pair
and the ratio.  Usage::

    python benchmarks/classad_bench.py [--machines N] [--repeat R]
"""

from __future__ import annotations

import argparse
import random
import time

JOB = """[
    MyType = "Job"; Owner = "alice"; Cmd = "/bin/sim"; RequestCpus = 2; RequestMemory = 2048;
    RequestDisk = 1000000; ImageSize = 150000; NumJobStarts = 0; JobUniverse = 5;
    Requirements = (TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX")
        && (TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory)
        && (TARGET.Cpus >= RequestCpus) && (TARGET.HasFileTransfer);
    Rank = TARGET.KFlops / 1000 + TARGET.Memory / 1024 - TARGET.LoadAvg * 10
]"""

MACHINE = """[
    MyType = "Machine"; Name = "slot{i}@node{i}.example.org"; Arch = "{arch}"; OpSys = "{opsys}";
    Memory = {memory}; Cpus = {cpus}; Disk = {disk}; KFlops = {kflops}; LoadAvg = {load};
    KeyboardIdle = {idle}; ConsoleIdle = {idle}; HasFileTransfer = true; State = "Unclaimed";
    Activity = "Idle"; TotalCpus = 16; Mips = 3000;
    START = (KeyboardIdle > 15 * 60) && (LoadAvg < 0.3 || TARGET.Owner == "alice")
        && TARGET.RequestMemory <= Memory;
    Requirements = START;
    Rank = TARGET.Owner == "bob" ? 10 : 0
]"""


def machine_texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        out.append(MACHINE.format(
            i=i, arch=rng.choice(["X86_64", "X86_64", "X86_64", "ARM64"]),
            opsys=rng.choice(["LINUX", "LINUX", "LINUX", "WINDOWS"]),
            memory=rng.choice([1024, 2048, 4096, 8192, 16384]), cpus=rng.choice([1, 2, 4, 8]),
            disk=rng.randrange(100000, 50000000), kflops=rng.randrange(500000, 3000000),
            load=round(rng.random() * 1.5, 3), idle=rng.randrange(0, 7200)))
    return out


def bench_htc(job_text, texts, repeat):
    from htc.classad import ClassAd
    from htc.classad.match import match_many, rank, symmetric_match

    job = ClassAd(job_text)
    machines = [ClassAd(t) for t in texts]
    best = float("inf")
    matched = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        matched = 0
        for m in machines:
            if symmetric_match(job, m):
                rank(job, m)
                matched += 1
        best = min(best, time.perf_counter() - t0)
    best_many = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        got = match_many(job, machines)
        best_many = min(best_many, time.perf_counter() - t0)
    assert len(got) == matched
    return best, best_many, matched


def bench_classad2(job_text, texts, repeat):
    import classad2
    classad2.parseOne("[a = 1]")  # force HTCondor's compat mode, as the daemons run
    job = classad2.ClassAd(job_text)
    machines = [classad2.ClassAd(t) for t in texts]
    rank_expr = classad2.ExprTree("MY.Rank")
    best = float("inf")
    matched = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        matched = 0
        for m in machines:
            if job.symmetricMatch(m):
                rank_expr.eval(job, m)
                matched += 1
        best = min(best, time.perf_counter() - t0)
    return best, matched


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machines", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    texts = machine_texts(args.machines)
    ours, ours_many, n_ours = bench_htc(JOB, texts, args.repeat)
    theirs, n_theirs = bench_classad2(JOB, texts, args.repeat)
    if n_ours != n_theirs:
        print(f"MISMATCH: htc matched {n_ours} machines, classad2 matched {n_theirs}")
        return 1
    per = 1e6 / args.machines
    print(f"{args.machines} machine ads, {n_ours} match; best of {args.repeat} runs")
    print(f"htc.classad  symmetric_match + rank : {ours * per:7.2f} us/pair")
    print(f"htc.classad  match_many              : {ours_many * per:7.2f} us/pair")
    print(f"classad2     symmetricMatch + Rank   : {theirs * per:7.2f} us/pair")
    print(f"ratio htc/classad2: {ours / theirs:.2f} (match_many: {ours_many / theirs:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
