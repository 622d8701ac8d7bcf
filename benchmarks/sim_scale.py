"""Benchmark: the simulator at scale (issue #19, "Scale"), measured at growing sizes.

The goal is a pool of 10,000 machines and 100,000 jobs for a simulated week in minutes. This
script runs the scale scenario of ``benchmarks/paper_1988.py --scale`` (a dedicated pool, 200
users, each submitting its share of the jobs in one batch spread over the first day,
``NEGOTIATOR_INTERVAL = 300``, ``NEGOTIATOR_MIN_INTERVAL = 60``) at each size given, ten jobs
per machine, for a stretch of simulated time, and prints one row per size: wall and CPU seconds
of the run, negotiation cycles, CPU seconds per cycle, CPU microseconds per (cycle x machine),
what share of the CPU time the negotiator core took (the rest is the simulator: events, ads,
the schedd), and the CPU time a simulated week at that size would take at the measured rate
(cycles per simulated hour x hours x CPU seconds per cycle; a week's later cycles see fewer idle
jobs, so this is an estimate, not a promise). CPU time (``time.process_time``), because on a
shared machine the wall time swings with the load; on a quiet machine the two agree. Usage::

    python benchmarks/sim_scale.py                          # 250, 500, 1000 machines, 0.1 day
    python benchmarks/sim_scale.py --sizes 1000,10000 --days 0.05
"""

from __future__ import annotations

import argparse
import time

from htc.daemons.negotiator.core import Negotiator
from htc.sim.engine import Simulation
from htc.sim.owner import DAY, HOUR, OwnerModel
from htc.sim.report import summary
from htc.sim.scenario import Scenario
from htc.sim.workload import UserSpec

USERS = 200


def scenario(machines: int, jobs: int, days: float) -> Scenario:
    """The scale scenario of ``paper_1988.py --scale`` at one size."""
    per_user = max(1, jobs // USERS)
    specs = tuple(UserSpec(f"u{i:03d}", "heavy" if i < 20 else "light", per_user, per_user,
                           period=days * DAY * 2,
                           first_batch=(i % 24) / 24 * min(days, 1.0) * DAY,
                           demand_median=2.0 * HOUR) for i in range(USERS))
    return Scenario("scale", machines, days * DAY, specs, policy="HTCONDOR", seed=1,
                    owner=OwnerModel(enabled=False),
                    negotiator={"NEGOTIATOR_INTERVAL": 300, "NEGOTIATOR_MIN_INTERVAL": 60},
                    drain=0.0, sample_every=6 * HOUR)


def measure(machines: int, jobs: int, days: float) -> dict:
    """Run one size; return its figures (wall and CPU seconds, cycles, negotiator share, ...)."""
    spent = [0.0]
    real_handle = Negotiator.handle

    def timed(self, event, now):
        t0 = time.process_time()
        try:
            return real_handle(self, event, now)
        finally:
            spent[0] += time.process_time() - t0

    sim = Simulation(scenario(machines, jobs, days))
    Negotiator.handle = timed
    cpu = time.process_time()
    try:
        sim.run()
    finally:
        Negotiator.handle = real_handle
    cpu = time.process_time() - cpu
    s = summary(sim)
    cycles = max(1, s["negotiation_cycles"])
    per_cycle = cpu / cycles
    return {"machines": machines, "jobs": s["jobs"], "done": s["completed"], "wall": sim.wall,
            "cpu": cpu, "cycles": cycles, "per_cycle": per_cycle,
            "us_per_slot": per_cycle / machines * 1e6,
            "negotiator": spent[0] / cpu if cpu else 0.0,
            "week_h": cycles / (days * 24) * 24 * 7 * per_cycle / 3600}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="250,500,1000", help="machine counts (comma-separated)")
    ap.add_argument("--jobs-per-machine", type=int, default=10)
    ap.add_argument("--days", type=float, default=0.1, help="simulated days per size")
    args = ap.parse_args()
    print(f"scale scenario, {args.jobs_per_machine} jobs per machine, {args.days:g} simulated "
          "days per size (CPU seconds of this process unless said)")
    print("| machines | jobs | done | cycles | wall s | CPU s | s/cycle | us per cycle x machine "
          "| negotiator share | a week would take |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in [int(x) for x in args.sizes.split(",") if x.strip()]:
        r = measure(n, n * args.jobs_per_machine, args.days)
        print(f"| {n:,} | {r['jobs']:,} | {r['done']:,} | {r['cycles']:,} | {r['wall']:.1f} | "
              f"{r['cpu']:.1f} | "
              f"{r['per_cycle']:.3f} | {r['us_per_slot']:.0f} | {r['negotiator']:.0%} | "
              f"{r['week_h']:.1f} h |", flush=True)


if __name__ == "__main__":
    main()
