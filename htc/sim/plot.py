"""PNG figures of a run, like the 1988 paper's (matplotlib: ``pip install 'htc[sim-plot]'``).

* ``queue.png`` -- jobs in the system per user class over time, with the machines the owners
  hold and the machines running jobs (the paper's Figures 3 and 7, and 6);
* ``wait_ratio.png`` -- each job's wait ratio against its demand, per class (Figure 4);
* ``moves.png`` -- vacates and preemptions per CPU hour against demand (Figure 8).
"""

from __future__ import annotations

from pathlib import Path

from htc.errors import UsageError
from htc.sim.engine import Simulation
from htc.sim.owner import DAY, HOUR

__all__ = ["plot"]


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise UsageError("-plot needs matplotlib: pip install 'htc[sim-plot]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(sim: Simulation, directory: str | Path) -> list[Path]:
    """Write the run's figures into ``directory`` (created); return their paths."""
    plt = _pyplot()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    title = f"{sim.sc.name}, {sim.sc.policy}, seed {sim.sc.seed}"
    classes = sorted({u.cls for u in sim.sc.users})
    written = []

    fig, ax = plt.subplots(figsize=(10, 4))
    days = [s[0] / DAY for s in sim.samples]
    for cls in classes:
        ax.plot(days, [s[4].get(cls, 0) for s in sim.samples], label=f"{cls} jobs in system")
    ax.plot(days, [s[1] for s in sim.samples], label="machines owners hold", alpha=0.6)
    ax.plot(days, [s[2] for s in sim.samples], label="machines running jobs", alpha=0.6)
    ax.set_xlabel("day")
    ax.set_ylabel("count")
    ax.set_title(title)
    ax.legend(fontsize="small")
    written.append(_save(fig, out / "queue.png"))

    jobs = [j for j in sim.schedd.jobs.values() if j.finished is not None]
    fig, ax = plt.subplots(figsize=(6, 4))
    for cls in classes:
        mine = [j for j in jobs if j.spec.cls == cls]
        ax.scatter([j.spec.demand / HOUR for j in mine],
                   [(j.finished - j.spec.submit - j.spec.demand) / j.spec.demand for j in mine],
                   s=6, label=cls, alpha=0.6)
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=0.01)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("service demand (h)")
    ax.set_ylabel("wait ratio")
    ax.set_title(title)
    ax.legend()
    written.append(_save(fig, out / "wait_ratio.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    edges = [0.25, 0.5, 1, 2, 4, 8, 16, 48]
    centers, rates = [], []
    for lo, hi in zip(edges, edges[1:]):
        mine = [j for j in jobs if lo <= j.spec.demand / HOUR < hi]
        cpu = sum(j.delivered for j in mine) / HOUR
        if cpu:
            centers.append((lo * hi) ** 0.5)
            rates.append(sum(j.vacates + j.preemptions for j in mine) / cpu)
    ax.plot(centers, rates, marker="o")
    ax.set_xscale("log")
    ax.set_xlabel("service demand (h)")
    ax.set_ylabel("moves per CPU hour")
    ax.set_title(title)
    written.append(_save(fig, out / "moves.png"))
    return written


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    fig.clf()
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
