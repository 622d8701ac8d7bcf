"""What a run measured, as one JSON-ready dict (``htc sim ... -json``) and as text.

Per user class (``light``, ``heavy``, or a scenario's own class names):

* ``mean_wait_ratio`` / ``median_wait_ratio`` -- per job (finish - submit - demand) / demand:
  every moment not running counts (queued, suspended, queued again after a vacate);
* ``allocation_wait`` -- sum of (first placement - submit) over sum of demands: the wait for
  the first machine only, the 1988 paper's "did not wait at all";
* ``vacates`` (the owner came back and stayed) and ``preemptions`` (the negotiator gave the
  machine to another user), and both per CPU hour delivered.

The same figures per user under ``users``; ``time_with_30_in_system``: per class, the share of
hourly samples with 30 or more of its jobs in the system.

Pool-wide: ``available_hours`` (machine hours without the owner, inside the horizon),
``remote_hours`` (CPU hours delivered to jobs inside the horizon: the capacity delivered),
``utilization`` (remote / available), ``jobs``, ``completed``, ``cpu_exact`` (every finished job
got exactly its demand: checkpointing lost and doubled nothing).
"""

from __future__ import annotations

import statistics

from htc.sim.engine import Simulation
from htc.sim.owner import HOUR

__all__ = ["summary", "format_summary"]


def _class_summary(jobs: list) -> dict:
    done = [j for j in jobs if j.finished is not None]
    ratios = [(j.finished - j.spec.submit - j.spec.demand) / j.spec.demand for j in done]
    placed = [j for j in jobs if j.first_start is not None]
    demand = sum(j.spec.demand for j in placed)
    cpu = sum(j.delivered for j in jobs)
    vacates = sum(j.vacates for j in jobs)
    preempted = sum(j.preemptions for j in jobs)
    return {
        "jobs": len(jobs),
        "completed": len(done),
        "mean_wait_ratio": statistics.fmean(ratios) if ratios else None,
        "median_wait_ratio": statistics.median(ratios) if ratios else None,
        "allocation_wait": (sum(j.first_start - j.spec.submit for j in placed) / demand
                            if demand else None),
        "demand_hours": sum(j.spec.demand for j in jobs) / HOUR,
        "mean_demand_hours": statistics.fmean(j.spec.demand for j in jobs) / HOUR if jobs else None,
        "cpu_hours": cpu / HOUR,
        "vacates": vacates,
        "preemptions": preempted,
        "vacates_per_cpu_hour": vacates / (cpu / HOUR) if cpu else 0.0,
        "preemptions_per_cpu_hour": preempted / (cpu / HOUR) if cpu else 0.0,
    }


def summary(sim: Simulation) -> dict:
    """The run's figures (see the module docstring)."""
    sc = sim.sc
    jobs = list(sim.schedd.jobs.values())
    by_class: dict[str, list] = {}
    for user in sc.users:
        by_class.setdefault(user.cls, [])
    by_user: dict[str, list] = {user.name: [] for user in sc.users}
    for job in jobs:
        by_class.setdefault(job.spec.cls, []).append(job)
        by_user.setdefault(job.spec.user, []).append(job)
    available = sum(m.available_seconds for m in sim.machines) / HOUR
    remote = sim.remote_seconds / HOUR
    done = [j for j in jobs if j.finished is not None]
    cpu = sum(j.delivered for j in jobs) / HOUR
    demands = [j.spec.demand for j in jobs]
    return {
        "scenario": sc.name,
        "policy": sc.policy,
        "seed": sc.seed,
        "machines": sc.machines,
        "days": sc.horizon / (24 * HOUR),
        "available_hours": available,
        "machine_hours": sc.machines * sc.horizon / HOUR,
        "availability": available / (sc.machines * sc.horizon / HOUR),
        "remote_hours": remote,
        "utilization": remote / available if available else 0.0,
        "jobs": len(jobs),
        "completed": len(done),
        "cpu_exact": all(abs(j.delivered - j.spec.demand) < 1e-6 for j in done)
                     and all(j.delivered <= j.spec.demand + 1e-6 for j in jobs),
        "mean_demand_hours": statistics.fmean(demands) / HOUR if demands else None,
        "median_demand_hours": statistics.median(demands) / HOUR if demands else None,
        "priority_preemptions": sim.priority_preemptions,
        "owner_vacates": sim.owner_vacates,
        "preemptions_per_job_hour": sim.priority_preemptions / cpu if cpu else 0.0,
        "vacates_per_job_hour": sim.owner_vacates / cpu if cpu else 0.0,
        "negotiation_cycles": sim.cycles,
        "finished_at_days": max((j.finished for j in done), default=0.0) / (24 * HOUR),
        "wall_seconds": sim.wall,
        "classes": {cls: _class_summary(members) for cls, members in by_class.items()},
        "users": {user: _class_summary(members) for user, members in by_user.items()},
        # the paper: the heavy user "kept more than 30 jobs in the system for long periods"
        "time_with_30_in_system": {
            cls: sum(s[4].get(cls, 0) >= 30 for s in sim.samples) / len(sim.samples)
            for cls in by_class} if sim.samples else {},
    }


def _f(value, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def format_summary(s: dict) -> str:
    """The summary as a few lines of text."""
    lines = [
        f"{s['scenario']} policy={s['policy']} seed={s['seed']}: {s['machines']} machines, "
        f"{s['days']:g} days, {s['negotiation_cycles']} negotiation cycles, "
        f"{s['wall_seconds']:.1f} s",
        f"  available {s['available_hours']:.0f} h ({s['availability']:.1%}), remote "
        f"{s['remote_hours']:.0f} h (utilization {s['utilization']:.1%}); jobs {s['jobs']}, "
        f"completed {s['completed']}, CPU delivered exactly once: {s['cpu_exact']}",
        f"  vacates {s['owner_vacates']} ({s['vacates_per_job_hour']:.3f}/job-h), priority "
        f"preemptions {s['priority_preemptions']} ({s['preemptions_per_job_hour']:.3f}/job-h)",
        f"  {'class':<8}{'jobs':>6}{'mean WR':>10}{'median WR':>11}{'alloc wait':>12}"
        f"{'CPU h':>9}",
    ]
    for cls, c in s["classes"].items():
        lines.append(f"  {cls:<8}{c['jobs']:>6}{_f(c['mean_wait_ratio']):>10}"
                     f"{_f(c['median_wait_ratio']):>11}{_f(c['allocation_wait']):>12}"
                     f"{c['cpu_hours']:>9.0f}")
    return "\n".join(lines)
