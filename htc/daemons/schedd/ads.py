"""What the collector hears from the schedd: one Submitter ad per user and the Scheduler ad.

The ads go out every SCHEDD_INTERVAL and, after a change, no sooner than SCHEDD_MIN_INTERVAL
after the last update (followed by a Reschedule to the negotiator when there are new idle
jobs). New work is the exception to SCHEDD_MIN_INTERVAL: a submit, a release or a tool's
Reschedule makes the ads go out ``prompt_delay`` later (5 ms: a burst of submits coalesces into
one update) and the Reschedule with them, so that an idle pool starts a job in milliseconds
rather than seconds -- negotiation is driven by events, not by timers. :class:`Adverts` keeps
that timing; :func:`submitter_of` says whom a job is charged to (the Submitter ad's name).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from htc.daemons import core as c
from htc.daemons.schedd import userlog as ul
from htc.jobqueue import JobStatus
from htc.jobqueue.ads import quote
from htc.wire import messages as m

__all__ = ["Adverts", "submitter_counts", "submitter_of"]

#: the attributes that say whom a job is charged to (lower case)
_SUBMITTER_ATTRS = frozenset({"accountinggroup", "user", "owner"})


def submitter_of(job: Mapping[str, str], uid_domain: str) -> str:
    """Whom a stored job ad is charged to: ``AccountingGroup@domain``, ``User``, or ``Owner@domain``
    (worked out once per cluster when no job of it sets those attributes itself)."""
    cluster = getattr(job, "cluster", None)
    if cluster is None or _SUBMITTER_ATTRS & cluster.proc_attrs:
        return _charged_to(job, uid_domain)
    key = ("submitter", uid_domain)
    who = cluster.cache.get(key)
    if who is None:
        who = cluster.cache[key] = _charged_to(job, uid_domain)
    return who


def _charged_to(job: Mapping[str, str], uid_domain: str) -> str:
    group = ul.literal(job, "AccountingGroup")
    if isinstance(group, str) and group:
        return f"{group}@{uid_domain}"
    user = ul.literal(job, "User")
    if isinstance(user, str) and "@" in user:
        return user
    return f"{ul.literal(job, 'Owner', 'nobody')}@{uid_domain}"


#: the universes the schedd runs itself (scheduler, local): never idle work for the negotiator
_LOCAL_UNIVERSES = frozenset({"7", "12"})


def submitter_counts(queue, uid_domain: str) -> dict[str, list[int]]:
    """``{submitter: [idle, running, held]}`` over ``queue``; idle scheduler- and local-universe
    jobs are not counted (the schedd runs them itself: :mod:`~htc.daemons.schedd.local_jobs`)."""
    counts: dict[str, list[int]] = {}
    for values, status, n in queue.status_counts(["Owner", "User", "AccountingGroup", "JobUniverse"]):
        entry = counts.setdefault(submitter_of(values, uid_domain), [0, 0, 0])
        if status == JobStatus.IDLE and values.get("JobUniverse", "").strip() in _LOCAL_UNIVERSES:
            continue
        if status == JobStatus.IDLE:
            entry[0] += n
        elif status in (JobStatus.RUNNING, JobStatus.SUSPENDED, JobStatus.TRANSFERRING_OUTPUT):
            entry[1] += n
        elif status == JobStatus.HELD:
            entry[2] += n
    return counts


class Adverts:
    """When the schedd's ads go out, and whether a Reschedule goes with them.

    Args:
        schedd: the core it belongs to (its settings, queue and claims).
    """

    def __init__(self, schedd):
        self.schedd = schedd
        self.dirty = True
        self.last_ad = -math.inf
        self.prompt_at: float | None = None   # new work: ads and a Reschedule are due then
        self.force_reschedule = False         # a tool asked for negotiation (condor_reschedule)
        self.reschedule_due = False           # jobs became idle (submit, release, requeue) since the last one
        self._advertised: set[str] = set()

    def changed(self) -> None:
        """The queue changed: the collector (and maybe the negotiator) should hear soon."""
        self.dirty = True

    def new_work(self, now: float) -> None:
        """Jobs may have become idle, or a tool asked for a cycle: ads and a Reschedule within
        ``prompt_delay``, whatever SCHEDD_MIN_INTERVAL says."""
        self.dirty = True
        self.reschedule_due = True
        if self.prompt_at is None:
            self.prompt_at = now + self.schedd.settings.prompt_delay

    def _gap(self) -> float:
        settings = self.schedd.settings
        return max(settings.min_interval, 0.05) if self.dirty else settings.interval

    def deadline(self) -> float | None:
        """When the next ads are due."""
        times = [self.last_ad + self._gap(), self.prompt_at]
        return min(t for t in times if t is not None)

    def due(self, now: float) -> bool:
        """Whether the ads are due at ``now``."""
        return now >= self.last_ad + self._gap() or (self.prompt_at is not None and now >= self.prompt_at)

    def advertise(self, now: float, out: list) -> None:
        """Send the Submitter ads (an emptied one once more, with zero jobs), the Scheduler ad
        and, for new idle work, a Reschedule."""
        st = self.schedd.settings
        counts = submitter_counts(self.schedd.queue, st.uid_domain)
        lifetime = int(max(3 * st.interval, 60))
        for name in sorted(set(counts) | self._advertised):
            idle, running, held = counts.get(name, (0, 0, 0))
            ad = (f'[ MyType = "Submitter"; Name = {quote(name)}; ScheddName = {quote(st.name)}; '
                  f'MyAddress = {quote(st.address)}; ScheddIpAddr = {quote(st.address)}; IdleJobs = {idle}; '
                  f'RunningJobs = {running}; HeldJobs = {held} ]')
            out.append(c.Send(st.collector, m.UpdateAd(ad_type=m.AdType.Submitter, name=name, ad_text=ad,
                                                        lifetime=lifetime)))
        self._advertised = set(counts)
        totals = [sum(v[i] for v in counts.values()) for i in range(3)]
        ad = (f'[ MyType = "Scheduler"; Name = {quote(st.name)}; Machine = {quote(st.machine)}; '
              f'MyAddress = {quote(st.address)}; ScheddIpAddr = {quote(st.address)}; '
              f'TotalIdleJobs = {totals[0]}; TotalRunningJobs = {totals[1]}; TotalHeldJobs = {totals[2]}; '
              f'NumUsers = {len(counts)}; ClaimsHeld = {len(self.schedd.claims)}; '
              + "".join(f"{name} = {n}; " for name, n in self.schedd.local.counts().items()) +
              f'UpdateInterval = {int(st.interval)} ]')
        out.append(c.Send(st.collector, m.UpdateAd(ad_type=m.AdType.Schedd, name=st.name, ad_text=ad,
                                                    lifetime=lifetime)))
        # Only new idle work is worth a cycle: a job that merely started or ended changes the
        # ads, and asking for a cycle each time would have the negotiator re-read every idle job
        # of the queue after every job (O(jobs) per job in a busy pool).
        reschedule = (self.reschedule_due or self.force_reschedule) and totals[0] > 0
        if reschedule and st.send_reschedule:
            out.append(c.Send(st.negotiator, m.Reschedule()))
        self.schedd.flocking.advertise(counts, lifetime, reschedule, out)
        self.dirty = self.force_reschedule = self.reschedule_due = False
        self.prompt_at = None
        self.last_ad = now
