"""``htc sim``: run the fair-share simulator (htc.sim) on the condor88 scenario or a file.

``htc sim condor88 -policy UPDOWN -seed 3 -json`` prints one JSON object (available_hours,
remote_hours, jobs, completed, classes: {light: {...}, heavy: {...}}, ...);
``htc sim my.toml`` runs a scenario file (docs/fair-share.md, "Scenario files");
``-plot DIR`` writes PNG figures (matplotlib, the ``sim-plot`` extra).
"""

from __future__ import annotations

import argparse
import json

from htc.cli.options import add_command, add_option

#: the policies (htc.sim.scenario.POLICIES; the simulator is imported only when it runs)
POLICY_NAMES = ("UPDOWN", "FIFO", "HTCONDOR", "HTCONDOR_PREEMPT")


def sim(args: argparse.Namespace) -> int:
    """htc sim: build the scenario, run it, print the figures (and draw them)."""
    from htc.sim import report
    from htc.sim.engine import run
    from htc.sim.scenario import condor88, load

    policy = args.policy.upper() if args.policy else None
    if args.scenario == "condor88":
        scenario = condor88(policy or "HTCONDOR", args.seed if args.seed is not None else 1,
                            days=args.days or 30)
    else:
        scenario = load(args.scenario, policy=policy, seed=args.seed)
    result = run(scenario)
    figures = report.summary(result)
    if args.plot:
        from htc.sim.plot import plot

        figures["plots"] = [str(p) for p in plot(result, args.plot)]
    if args.json:
        print(json.dumps(figures, indent=1, sort_keys=True))
    else:
        print(report.format_summary(figures))
        for path in figures.get("plots", ()):
            print(f"  wrote {path}")
    return 0


def register(sub) -> None:
    """Add ``htc sim``."""
    p = add_command(sub, "sim", "simulate a pool under a fair-share policy (the 1988 paper's test)", [
        "htc sim condor88 -policy UPDOWN -seed 3 -json",
        "htc sim condor88 -policy HTCONDOR_PREEMPT -plot figures/",
        "htc sim examples/sim_small.toml -policy FIFO",
    ])
    p.add_argument("scenario", help="condor88, or a scenario file (TOML)")
    add_option(p, "policy", type=str.upper, choices=POLICY_NAMES, metavar="POLICY",
               help=f"the negotiator policy: {', '.join(POLICY_NAMES)} (default: the scenario's)")
    add_option(p, "seed", type=int, help="random seed: owners and workload (default 1)")
    add_option(p, "days", type=float, help="condor88 only: days of submissions (default 30)")
    add_option(p, "json", action="store_true", help="print one JSON object")
    add_option(p, "plot", metavar="DIR", help="write PNG figures into DIR (needs matplotlib)")
    p.set_defaults(func=sim)
