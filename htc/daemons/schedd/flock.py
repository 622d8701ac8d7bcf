"""Flocking: a schedd's idle jobs that its own pool does not serve go to the FLOCK_TO pools too.

Theory of operation
-------------------
As in HTCondor, each submitter of the schedd has a *flock level*: 0 means only the schedd's own
pool hears of its idle jobs; level ``n`` means the first ``n`` pools of FLOCK_TO hear of them as
well (their collectors get the submitter's Submitter ad, which names this schedd's address, so
their negotiators negotiate with it and claim their slots for its jobs; the shadows run the jobs
there as on any slot).

The level rises when the pool at the current level did not serve the submitter: a negotiator
says which pool it negotiates for (``GetResourceRequests.pool``, its collector's address), and
when the pool at the submitter's current level asks again while a job it was offered the time
before is still idle and not being claimed, a whole cycle of that pool left it waiting, so the
level rises by FLOCK_INCREMENT (at most to the number of FLOCK_TO pools), and the ads and a
Reschedule go to the newly added pools at once. The level falls back to 0 once the submitter has
no idle job (its ads go once more, with the counts, to the pools it leaves).

A match names its pool too (``MatchNotify.pool``): the claim remembers it, and a job running on
a slot of a FLOCK_TO pool gets ``RemotePool`` (HTCondor's attribute: the name of that pool's
collector, as FLOCK_TO writes it) and keeps it as ``LastRemotePool`` when the run ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from htc.daemons import core as c
from htc.jobqueue import JobStatus
from htc.jobqueue.ads import quote
from htc.jobqueue.records import JobId
from htc.wire import messages as m
from htc.wire.flock_access import flock_names

__all__ = ["FlockPool", "Flocking"]


@dataclass(frozen=True)
class FlockPool:
    """One pool of FLOCK_TO: its name as written there, its collector's and negotiator's addresses."""

    name: str
    collector: str
    negotiator: str


class Flocking:
    """The flock levels of a schedd's submitters and the ads they send to other pools.

    Args:
        schedd: the core it belongs to (its settings, queue and reserved jobs).
    """

    def __init__(self, schedd):
        self.schedd = schedd
        self.levels: dict[str, int] = {}                        # submitter -> pools of FLOCK_TO in use
        self.offered: dict[tuple[str, int], set[JobId]] = {}    # (submitter, pool index) -> jobs offered last
        self.advertised: dict[int, set[str]] = {}               # pool index -> submitters advertised there

    @property
    def pools(self) -> tuple[FlockPool, ...]:
        """The FLOCK_TO pools, in order of preference."""
        return self.schedd.settings.flock_pools

    def pool_index(self, pool: str) -> int | None:
        """0 for this schedd's own pool ("" or its collector), ``i`` for the i-th FLOCK_TO pool,
        None for a pool it does not know."""
        key = pool.strip().lower()
        if not key or key == self.schedd.settings.collector.lower():
            return 0
        for i, flock in enumerate(self.pools, 1):
            if key in (flock.collector.lower(), flock.name.lower()):
                return i
        return None

    def pool_name(self, pool: str) -> str:
        """The FLOCK_TO name of the pool a negotiator named ("" for the own pool or an unknown one)."""
        index = self.pool_index(pool)
        return self.pools[index - 1].name if index else ""

    def level(self, submitter: str) -> int:
        """How many FLOCK_TO pools hear of ``submitter``'s idle jobs."""
        return self.levels.get(submitter, 0)

    def asked(self, submitter: str, pool: str, offered: Iterable[JobId], now: float, out: list) -> None:
        """A negotiator of ``pool`` asked for ``submitter``'s idle work and was offered ``offered``:
        raise the submitter's level when its current pool left the jobs of its last ask waiting."""
        index = self.pool_index(pool)
        if index is None or not self.pools:
            return
        level = self.level(submitter)
        before = self.offered.get((submitter, index))
        self.offered[(submitter, index)] = set(offered)
        if index != level or level >= len(self.pools) or not before or not self._still_waiting(before):
            return
        new = min(level + max(1, self.schedd.settings.flock_increment), len(self.pools))
        self.levels[submitter] = new
        where = "this pool" if index == 0 else f"pool {self.pools[index - 1].name}"
        names = ", ".join(p.name for p in self.pools[level:new])
        out.append(c.Log(f"flocking: {submitter} has idle jobs that {where} did not match in a whole cycle; "
                         f"advertising them to {names} too (flock level {new})"))
        self.schedd.adverts.new_work(now)

    def _still_waiting(self, jobs: set[JobId]) -> bool:
        sd = self.schedd
        for job_id in jobs:
            job = sd.job(job_id)
            if job is not None and job.status == JobStatus.IDLE and job_id not in sd.reserved:
                return True
        return False

    def advertise(self, counts: dict[str, list[int]], lifetime: int, reschedule: bool, out: list) -> None:
        """Send the Submitter ads of the flocking submitters to their pools' collectors (and a
        Reschedule to a pool's negotiator when ``reschedule`` and it has idle work to offer);
        a submitter without idle jobs drops back to its own pool."""
        st = self.schedd.settings
        for name in [n for n in self.levels if counts.get(n, (0, 0, 0))[0] == 0]:
            del self.levels[name]
            for index in range(len(self.pools) + 1):
                self.offered.pop((name, index), None)
        for index, pool in enumerate(self.pools, 1):
            names = {n for n, level in self.levels.items() if level >= index}
            for name in sorted(names | self.advertised.get(index, set())):
                idle, running, held = counts.get(name, (0, 0, 0))
                if name not in names:
                    idle = 0  # no longer flocking: this pool should not negotiate for it
                ad = (f'[ MyType = "Submitter"; Name = {quote(name)}; ScheddName = {quote(st.name)}; '
                      f'MyAddress = {quote(st.address)}; ScheddIpAddr = {quote(st.address)}; IdleJobs = {idle}; '
                      f'RunningJobs = {running}; HeldJobs = {held}; CollectorHost = {quote(st.collector)} ]')
                out.append(c.Send(pool.collector, m.UpdateAd(ad_type=m.AdType.Submitter, name=name, ad_text=ad,
                                                             lifetime=lifetime)))
            self.advertised[index] = names
            if reschedule and names and st.send_reschedule:
                out.append(c.Send(pool.negotiator, m.Reschedule()))

    def run_attributes(self, pool: str) -> dict[str, str | None]:
        """The job attributes of a run on a slot of ``pool`` (its claim's): ``RemotePool``."""
        return {"RemotePool": quote(pool) if pool else None}



def flock_pools(config) -> tuple[FlockPool, ...]:
    """FLOCK_TO's pools, with their collectors (FLOCK_COLLECTOR_HOSTS, default FLOCK_TO) and
    negotiators (FLOCK_NEGOTIATOR_HOSTS, default FLOCK_TO), each ``HOST[:PORT]``.

    Raises:
        UsageError: FLOCK_TO is set on a host that is not in network mode, the three lists differ
            in length, or an entry is not ``HOST[:PORT]``.
    """
    from htc.daemons.network import network_mode
    from htc.errors import UsageError
    from htc.wire.address import parse_host_port
    from htc.wire.errors import BadAddress

    names = flock_names(config.param("FLOCK_TO"))
    if not names:
        return ()
    if not network_mode(config):
        raise UsageError(f"FLOCK_TO names other pools ({', '.join(names)}), but this host is not in network "
                         "mode: set CONDOR_HOST to this pool's central manager (docs/multi-machine.md)")
    collectors = flock_names(config.param("FLOCK_COLLECTOR_HOSTS")) or names
    negotiators = flock_names(config.param("FLOCK_NEGOTIATOR_HOSTS")) or names
    if not len(names) == len(collectors) == len(negotiators):
        raise UsageError(f"FLOCK_TO has {len(names)} pools, FLOCK_COLLECTOR_HOSTS {len(collectors)} and "
                         f"FLOCK_NEGOTIATOR_HOSTS {len(negotiators)}: give one entry per pool, in the same order")
    pools = []
    for name, collector, negotiator in zip(names, collectors, negotiators):
        try:
            pools.append(FlockPool(name, str(parse_host_port(collector)),
                                   str(parse_host_port(negotiator, name="negotiator"))))
        except BadAddress as exc:
            raise UsageError(f"FLOCK_TO entry {name!r}: {exc}; write HOST[:PORT] of that pool's "
                             "central manager") from None
    return tuple(pools)
