"""The job workload: users, their batches of jobs, and each job's service demand.

A user belongs to a *class* (``light`` or ``heavy`` in condor88; any name in a scenario file),
submits batches of ``U{batch_min..batch_max}`` jobs, and draws each job's CPU demand from a
lognormal with the given median and sigma, clipped to ``[demand_min, demand_max]``. Batches
arrive either on a fixed period (``period``: the low-variance schedule for CI) or as a Poisson
process of mean gap ``mean_gap``; with ``window`` set only arrivals on weekdays between its two
hours are kept (the light users of condor88 submit during office hours).

:func:`generate` turns the users into a time-ordered list of :class:`JobSpec`, all from one
``random.Random`` (so the seed fixes the workload whatever the policy).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from htc.errors import UsageError
from htc.sim.owner import DAY, HOUR

__all__ = ["JobSpec", "UserSpec", "generate"]


@dataclass(frozen=True)
class UserSpec:
    """One user of the workload (times in seconds)."""

    name: str
    cls: str = "light"
    batch_min: int = 1
    batch_max: int = 5
    mean_gap: float = 0.6 * DAY  # Poisson batches; ignored when period is set
    period: float | None = None  # fixed schedule: a batch every period, from first_batch
    first_batch: float = 0.0
    window: tuple[float, float] | None = None  # weekday hours (9, 18) that keep an arrival
    demand_median: float = 2.0 * HOUR
    demand_sigma: float = 1.1
    demand_min: float = 15 * 60.0
    demand_max: float = 48 * HOUR

    def __post_init__(self) -> None:
        if not 1 <= self.batch_min <= self.batch_max:
            raise UsageError(f"user {self.name}: batch sizes need 1 <= batch_min <= batch_max, "
                             f"got {self.batch_min}..{self.batch_max}")
        if (self.period if self.period is not None else self.mean_gap) <= 0:
            raise UsageError(f"user {self.name}: the gap between batches must be positive")
        if not 0 < self.demand_min <= self.demand_median <= self.demand_max:
            raise UsageError(f"user {self.name}: demands need 0 < demand_min <= demand_median "
                             "<= demand_max")


@dataclass(frozen=True)
class JobSpec:
    """One job as the workload submits it."""

    user: str
    cls: str
    submit: float
    demand: float  # CPU seconds it needs


def _in_window(t: float, window: tuple[float, float] | None) -> bool:
    if window is None:
        return True
    if int(t // DAY) % 7 >= 5:
        return False
    hour = (t % DAY) / HOUR
    return window[0] <= hour < window[1]


def _batch_times(rng: random.Random, user: UserSpec, horizon: float) -> list[float]:
    times = []
    if user.period is not None:
        t = user.first_batch
        while t < horizon:
            times.append(t)
            t += user.period
        return times
    t = user.first_batch
    while True:
        t += rng.expovariate(1.0 / user.mean_gap)
        if t >= horizon:
            return times
        if _in_window(t, user.window):
            times.append(t)


def generate(users: list[UserSpec], horizon: float, rng: random.Random) -> list[JobSpec]:
    """Draw every job the users submit before ``horizon`` (seconds), in submit order."""
    jobs = []
    for user in users:
        mu = math.log(user.demand_median)
        for t in _batch_times(rng, user, horizon):
            for _ in range(rng.randint(user.batch_min, user.batch_max)):
                demand = min(user.demand_max,
                             max(user.demand_min, rng.lognormvariate(mu, user.demand_sigma)))
                jobs.append(JobSpec(user.name, user.cls, t, demand))
    jobs.sort(key=lambda j: (j.submit, j.user))
    return jobs
