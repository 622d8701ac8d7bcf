"""A restarted schedd and its predecessor's call lanes.

A schedd that restarts does not reconnect to lanes (:mod:`htc.daemons.schedd.lanes`): the calls
that were on them go back to idle (a shadow exception event says so) and run again, and the
lanes' claims are given back so that the startds end the orphaned workers. That waits
:data:`ORPHAN_GRACE`: meanwhile a startd sends again, every half second, the results the dead
schedd did not take, and a call whose result so arrives while it is still idle, on the record
of that claim, ends with it instead of running a second time (:meth:`LaneOrphans.late_results`).
"""

from __future__ import annotations

from htc.daemons import core as c
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.owed import owe
from htc.daemons.schedd.shadow import Shadow, parse_job_id
from htc.daemons.schedd.states import ShadowState
from htc.jobqueue import JobStatus
from htc.wire import messages as m

__all__ = ["ORPHAN_GRACE", "LaneOrphans"]

#: seconds a restarted schedd waits before it gives back its predecessor's lane claims (the
#: startd sends the results it holds again every 0.5 s: htc.daemons.startd.lanes.RETRY)
ORPHAN_GRACE = 2.0


class LaneOrphans:
    """The lane claims of the schedd's predecessor, until they are given back.

    Args:
        schedd: the core it belongs to (its queue, reserved jobs and lanes).
    """

    def __init__(self, schedd):
        self.schedd = schedd
        self.claims: dict[str, str] = {}          # a predecessor's lane claims -> startd, given back...
        self.release_at: float | None = None      # ... then

    def after_restart(self, jobs, now: float, out: list) -> list:
        """Start-up: calls that were on lanes run again, and their lanes' claims are given
        back (the startd ends the orphaned worker at once instead of when the lease runs
        out). Returns the running jobs that are not lane calls."""
        queue = self.schedd.queue
        others, claims = [], {}
        for job in jobs:
            if ul.literal(job, "HTCLaneRun") is not True or JobStatus(job.status) not in (
                    JobStatus.RUNNING, JobStatus.SUSPENDED, JobStatus.REMOVED):
                others.append(job)
                continue
            claim_id, startd = ul.literal(job, "ClaimId"), ul.literal(job, "StartdIpAddr")
            if isinstance(claim_id, str) and isinstance(startd, str):
                claims[claim_id] = startd
            if job.status == JobStatus.REMOVED:
                queue.retire(job.job_id, now=now)
                continue
            with queue.transaction():  # the event is kept with the change (htc.daemons.schedd.owed)
                queue.set_status(job.job_id, JobStatus.IDLE, now=now, attrs={"HTCLaneRun": "false"})
                out += owe(queue, ul.write(job, ul.shadow_exception_event(
                    job, "the schedd restarted while the call ran on a call lane; it runs again", now)))
        # The claims go back a moment later (ORPHAN_GRACE): meanwhile the startds send again the
        # results they could not deliver to the dead schedd, and late_results keeps those calls
        # from running a second time.
        self.claims.update(claims)
        if claims:
            self.release_at = now + ORPHAN_GRACE
        return others

    def late_results(self, msg: m.CallsDone, now: float, out: list) -> None:
        """Results of a lane the schedd no longer follows -- its predecessor's, sent again by the
        startd after a restart, or one whose claim it gave up: a call that is idle again, waiting
        to run a second time, and whose record names that lane's claim ends with this run's
        result instead (its files and end as for a lane's own results). Others are dropped: the
        call runs, or ran, again."""
        sd = self.schedd
        queue = sd.queue
        writes, events = [], {}
        with queue.transaction(durable=False):
            for result in msg.results:
                job_id = parse_job_id(result.job_id)
                job = None if job_id in sd.reserved else sd.job(job_id)
                if job is None or job.status != JobStatus.IDLE or ul.literal(job, "ClaimId") != msg.claim_id:
                    continue
                queue.set_status(job_id, JobStatus.RUNNING, now=now)
                job = sd.job(job_id)
                took = max(result.finished - result.started, 0.0)
                shadow = Shadow(job_id, msg.claim_id, ShadowState.RUNNING, started=now - took, executed=True)
                sd.lanes.end_call(shadow, None, job, result, now, writes, events)
            if writes:
                out += owe(queue, [*writes, *(ul.WriteUserLog(path, tuple(evs), who)
                                              for (path, who), evs in events.items())])
        if writes:
            out.append(c.Log(f"took {len(writes)} result(s) of the call lane on claim "
                             f"{msg.claim_id.split('#')[0]} that the schedd no longer follows; those calls do "
                             "not run again"))
            sd.changed()

    def deadline(self) -> float | None:
        """When the claims go back."""
        return self.release_at

    def timers(self, now: float, out: list) -> None:
        """Give the claims back once :data:`ORPHAN_GRACE` has passed."""
        if self.release_at is None or now < self.release_at:
            return
        claims, self.claims = self.claims, {}
        self.release_at = None
        for claim_id, startd in claims.items():
            out.append(c.Send(startd, m.ReleaseClaim(claim_id=claim_id, reason="the schedd restarted; its call "
                                                                               "lane ends")))
        if claims:
            out.append(c.Log(f"gave back {len(claims)} call lane claim(s) after the restart"))
