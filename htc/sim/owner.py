"""Owner activity: when a workstation's owner is at it (busy) and when it is free (available).

Theory of operation
-------------------
Each station alternates busy and available intervals (a renewal process), as in the model of
docs/fair-share.md ("The owner model"), built to match what the 1988 paper and Mutka & Livny's
trace study report (stations available about 75 % of the time, local load from ~20 % at night
to ~50 % in weekday afternoons, long and heterogeneous available intervals, many short busy
ones):

* the target local utilisation ``u(t)`` follows the hour of the week (:data:`WEEKDAY_LOAD`,
  :data:`WEEKEND_LOAD`), times a per-station multiplier ``U(0.6, 1.4)``, capped at 0.9;
* a busy interval is two-phase hyperexponential with mean ``45 min x s`` (70 % in a short phase
  of mean ``0.27 x mean``, the rest in a long one);
* an available interval is two-phase hyperexponential with mean ``45 min x s x (1 - u)/u``
  (``u`` taken when the interval starts; 50 % in a short phase of mean ``0.2 x mean``);
* ``s`` is a per-station scale, log-uniform in [1/3, 3]: some stations have short intervals,
  others long ones, which gives the positive correlation of consecutive intervals;
* 20 % of the stations start busy.

:class:`OwnerModel` holds the parameters (a scenario file can change them);
:meth:`OwnerModel.station` draws one station's traits and :meth:`Station.next_interval` its
intervals, all from one ``random.Random`` so that a seed fixes the whole pool.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

__all__ = ["OwnerModel", "Station", "WEEKDAY_LOAD", "WEEKEND_LOAD", "local_load"]

#: (first hour, target local utilisation) on weekdays, from the paper's Figure 6 summary
WEEKDAY_LOAD: tuple[tuple[int, float], ...] = (
    (0, 0.20), (8, 0.30), (10, 0.40), (12, 0.50), (17, 0.35), (19, 0.20))
#: target local utilisation all day on Saturdays and Sundays
WEEKEND_LOAD = 0.17

HOUR = 3600.0
DAY = 24 * HOUR


def local_load(t: float, weekday: tuple[tuple[int, float], ...] = WEEKDAY_LOAD,
               weekend: float = WEEKEND_LOAD) -> float:
    """Return the pool-wide target owner load at ``t`` seconds after Monday 00:00."""
    day = int(t // DAY) % 7
    if day >= 5:
        return weekend
    hour = (t % DAY) / HOUR
    load = weekday[0][1]
    for start, value in weekday:
        if hour >= start:
            load = value
    return load


def _hyperexp(rng: random.Random, mean: float, p_short: float, short_fraction: float) -> float:
    """A two-phase hyperexponential draw with overall ``mean``: with probability ``p_short`` an
    exponential of mean ``short_fraction x mean``, else the long phase that keeps the mean."""
    short = short_fraction * mean
    long_ = (1.0 - p_short * short_fraction) / (1.0 - p_short) * mean
    return rng.expovariate(1.0 / (short if rng.random() < p_short else long_))


@dataclass(frozen=True)
class OwnerModel:
    """The parameters of owner activity (defaults: docs/fair-share.md's condor88 model).

    ``enabled = False`` gives dedicated machines (never busy), for scale runs and variants.
    """

    enabled: bool = True
    busy_mean: float = 45 * 60.0  # seconds, before the station's scale
    busy_short_p: float = 0.7
    busy_short_fraction: float = 0.27
    available_short_p: float = 0.5
    available_short_fraction: float = 0.2
    multiplier_range: tuple[float, float] = (0.6, 1.4)
    load_cap: float = 0.9
    scale_range: tuple[float, float] = (1 / 3, 3.0)
    start_busy: float = 0.2
    weekday_load: tuple[tuple[int, float], ...] = field(default=WEEKDAY_LOAD)
    weekend_load: float = WEEKEND_LOAD

    def station(self, rng: random.Random) -> Station:
        """Draw one station's traits (multiplier, scale, whether it starts busy)."""
        lo, hi = self.scale_range
        scale = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        return Station(self, rng.uniform(*self.multiplier_range), scale,
                       self.enabled and rng.random() < self.start_busy)


@dataclass
class Station:
    """One workstation's owner: its traits and the draw of its next interval."""

    model: OwnerModel
    multiplier: float
    scale: float
    starts_busy: bool

    def load(self, t: float) -> float:
        """This station's target local utilisation at ``t`` (seconds after Monday 00:00)."""
        m = self.model
        return min(m.load_cap, self.multiplier * local_load(t, m.weekday_load, m.weekend_load))

    def next_interval(self, rng: random.Random, busy: bool, t: float) -> float:
        """Draw the length (seconds) of a busy (``busy``) or available interval starting at ``t``."""
        m = self.model
        mean = m.busy_mean * self.scale
        if busy:
            return _hyperexp(rng, mean, m.busy_short_p, m.busy_short_fraction)
        u = self.load(t)
        return _hyperexp(rng, mean * (1.0 - u) / u, m.available_short_p, m.available_short_fraction)
