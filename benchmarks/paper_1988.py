"""Benchmark: the 1988 Condor paper's fair-share result, reproduced by htc's simulator.

Runs the condor88 scenario (docs/fair-share.md: 23 workstations, 30 days, one heavy user in
batches of 50-80 jobs, six light users in batches of 1-5, lognormal demands) under the four
policies on the same seeds, prints a table next to the paper's figures, and checks the margins
of the reference's §5.3. ``--scale`` instead runs a large pool (10,000 dedicated machines and
100,000 jobs for a simulated week by default) and prints how long it took. Usage::

    python benchmarks/paper_1988.py [--seeds 1 2 3] [--jobs 2] [--plot DIR]
    python benchmarks/paper_1988.py --scale [--machines 10000] [--scale-jobs 100000] [--days 7]

Exit status 1 when a margin fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import sys
import time

from htc.sim.engine import Simulation
from htc.sim.owner import DAY, HOUR, OwnerModel
from htc.sim.report import summary
from htc.sim.scenario import Scenario, condor88
from htc.sim.workload import UserSpec

POLICIES = ("FIFO", "UPDOWN", "HTCONDOR", "HTCONDOR_PREEMPT")

#: what the 1988 paper reports for its month (reference §2.1, §3)
PAPER = {"available_hours": 12438, "remote_hours": 4771, "jobs": "nearly 1000",
         "mean_demand_hours": "~5", "median_demand_hours": "< 3"}


def _one(args: tuple) -> dict:
    policy, seed, days, plot_dir = args
    sim = Simulation(condor88(policy, seed, days=days)).run()
    if plot_dir:
        from htc.sim.plot import plot

        plot(sim, f"{plot_dir}/seed{seed}-{policy.lower()}")
    return summary(sim)


def _row(s: dict) -> str:
    light, heavy = s["classes"]["light"], s["classes"]["heavy"]
    ratio = heavy["mean_wait_ratio"] / light["mean_wait_ratio"] if light["mean_wait_ratio"] else 0
    return (f"{s['policy']:<17}{light['mean_wait_ratio']:>9.3f}{light['allocation_wait']:>9.3f}"
            f"{heavy['mean_wait_ratio']:>9.3f}{ratio:>8.1f}{s['vacates_per_job_hour']:>8.3f}"
            f"{s['preemptions_per_job_hour']:>8.3f}{s['available_hours']:>8.0f}"
            f"{s['remote_hours']:>8.0f}{s['jobs']:>6}{s['completed']:>6}{s['wall_seconds']:>7.0f}")


def check(results: dict[str, dict]) -> list[tuple[str, bool]]:
    """The §5.3 margins for one seed: ``[(what, held)]``."""
    light = {p: s["classes"]["light"] for p, s in results.items()}
    heavy = {p: s["classes"]["heavy"] for p, s in results.items()}
    out = []
    for p in ("UPDOWN", "HTCONDOR_PREEMPT"):
        if p in results:
            out.append((f"{p}: light allocation wait {light[p]['allocation_wait']:.4f} < 0.05",
                        light[p]["allocation_wait"] < 0.05))
    for p in ("UPDOWN", "HTCONDOR", "HTCONDOR_PREEMPT"):
        if p in results:
            out.append((f"{p}: heavy mean WR {heavy[p]['mean_wait_ratio']:.3f} >= 5 x light "
                        f"{light[p]['mean_wait_ratio']:.3f}",
                        heavy[p]["mean_wait_ratio"] >= 5 * light[p]["mean_wait_ratio"]))
    if "FIFO" in results and "UPDOWN" in results:
        out.append((f"FIFO light mean WR {light['FIFO']['mean_wait_ratio']:.3f} >= 3 x UPDOWN's "
                    f"{light['UPDOWN']['mean_wait_ratio']:.3f}",
                    light["FIFO"]["mean_wait_ratio"] >= 3 * light["UPDOWN"]["mean_wait_ratio"]))
    for p, s in results.items():
        out.append((f"{p}: {s['completed']}/{s['jobs']} jobs complete, CPU delivered once: "
                    f"{s['cpu_exact']}", s["completed"] == s["jobs"] and s["cpu_exact"]))
    return out


def paper(args: argparse.Namespace) -> int:
    tasks = [(p, seed, args.days, args.plot) for seed in args.seeds for p in args.policies]
    done = []
    with multiprocessing.Pool(args.jobs) as pool:
        for s in pool.imap_unordered(_one, tasks, chunksize=1):
            done.append(s)
            print(f"  (seed {s['seed']}) {_row(s)}", flush=True)  # as each run ends
    ok = True
    for seed in args.seeds:
        results = {s["policy"]: s for s in done if s["seed"] == seed}
        any_ = next(iter(results.values()))
        print(f"\ncondor88, seed {seed}: {any_['machines']} workstations, {any_['days']:g} days; "
              f"demand mean {any_['mean_demand_hours']:.1f} h, median "
              f"{any_['median_demand_hours']:.1f} h (paper: ~5 h, < 3 h)")
        print(f"{'policy':<17}{'light WR':>9}{'l alloc':>9}{'heavy WR':>9}{'h/l':>8}"
              f"{'vac/h':>8}{'pre/h':>8}{'avail h':>8}{'used h':>8}{'jobs':>6}{'done':>6}"
              f"{'wall s':>7}")
        for p in args.policies:
            print(_row(results[p]))
        print(f"{'paper (1988)':<17}{'~0':>9}{'~0':>9}{'>>':>9}{'':>8}{'':>8}{'':>8}"
              f"{PAPER['available_hours']:>8}{PAPER['remote_hours']:>8}{'~1000':>6}")
        for what, held in check(results):
            ok &= held
            print(f"  {'ok  ' if held else 'FAIL'} {what}")
    return 0 if ok else 1


def scale(args: argparse.Namespace) -> int:
    """A large dedicated pool: how long a simulated week takes."""
    users = 200
    per_user = max(1, args.scale_jobs // users)
    specs = tuple(UserSpec(f"u{i:03d}", "heavy" if i < 20 else "light", per_user, per_user,
                           period=args.days * DAY * 2,
                           first_batch=(i % 24) / 24 * min(args.days, 1.0) * DAY,
                           demand_median=2.0 * HOUR) for i in range(users))
    sc = Scenario("scale", args.machines, args.days * DAY, specs, policy=args.scale_policy,
                  seed=1, owner=OwnerModel(enabled=False),
                  negotiator={"NEGOTIATOR_INTERVAL": 300, "NEGOTIATOR_MIN_INTERVAL": 60},
                  drain=0.0, sample_every=6 * HOUR)
    started = time.perf_counter()
    sim = Simulation(sc)
    built = time.perf_counter() - started
    cpu = time.process_time()
    sim.run()
    cpu = time.process_time() - cpu
    s = summary(sim)
    print(f"scale: {sc.machines} machines, {s['jobs']} jobs, {args.days:g} simulated days, "
          f"policy {sc.policy}: {s['negotiation_cycles']} cycles, {s['completed']} jobs done, "
          f"{s['remote_hours']:.0f} CPU h delivered ({s['remote_hours'] / (sc.machines * args.days * 24):.1%}"
          f" of the pool); set-up {built:.1f} s, run {sim.wall:.1f} s wall, {cpu:.1f} s CPU "
          f"({cpu / max(1, s['negotiation_cycles']):.3f} CPU s per cycle)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    ap.add_argument("--days", type=float, default=None, help="days of submissions (30; scale: 7)")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel")
    ap.add_argument("--plot", metavar="DIR", help="write each run's figures under DIR")
    ap.add_argument("--scale", action="store_true", help="the large-pool run instead")
    ap.add_argument("--machines", type=int, default=10_000)
    ap.add_argument("--scale-jobs", type=int, default=100_000)
    ap.add_argument("--scale-policy", default="HTCONDOR", choices=POLICIES)
    args = ap.parse_args(argv)
    if args.scale:
        args.days = args.days or 7
        return scale(args)
    args.days = args.days or 30
    return paper(args)


if __name__ == "__main__":
    sys.exit(main())
