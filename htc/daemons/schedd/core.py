"""The schedd core: the job queue, its shadows and its claims, without sockets or clocks.

Theory of operation
-------------------
``Schedd.handle(event, now)`` takes one event -- a tool's or daemon's message
(:class:`~htc.daemons.core.Received`), the answer to one of its own requests
(:class:`~htc.daemons.calls.CallDone` / ``CallFailed``, ``SendDone``/``SendFailed``),
a :class:`~htc.daemons.core.Tick` -- and returns actions: replies, requests to other daemons
(:class:`~htc.daemons.calls.Call` when the answer matters, ``Send`` when it does not),
user-log writes (:class:`~htc.daemons.schedd.userlog.WriteUserLog`) and log lines.

Its durable state is the job queue (:class:`htc.jobqueue.JobQueue`, ``$SPOOL/job_queue.db``),
which the core reads and changes directly: every change is one sqlite transaction that is
committed before the core answers anybody, which is the whole point of a queue (tests give the
core an in-memory queue). Everything else -- claims, shadows, reserved jobs, autoclusters -- is
soft state rebuilt after a restart from the Running jobs in the queue (see
:mod:`htc.daemons.schedd.shadow`).

The work is split by subject into mixins over one object:

* :class:`~htc.daemons.schedd.requests.ToolRequests` -- submit, query, act, edit;
* :class:`~htc.daemons.schedd.claims.ClaimHandling` -- resource requests, matches, claims,
  reuse, keep-alives and leases;
* :class:`~htc.daemons.schedd.shadow.ShadowHandling` -- running jobs: activation, starter reports,
  stops, the end of a run and its policy, reconnection.

This module adds the clock-driven work: the Submitter ads (one per user, with IdleJobs,
RunningJobs, HeldJobs) and the Scheduler ad every SCHEDD_INTERVAL and, after a change, no
sooner than SCHEDD_MIN_INTERVAL after the last update (followed by a Reschedule to the
negotiator when there are idle jobs); periodic job policy every PERIODIC_EXPR_INTERVAL.

New work is the exception to SCHEDD_MIN_INTERVAL: a submit, a release or a tool's Reschedule
makes the ads go out ``prompt_delay`` later (5 ms: a burst of submits coalesces into one
update) and the Reschedule with them, so that an idle pool starts a job in milliseconds
rather than seconds -- negotiation is driven by events, not by timers.
"""

from __future__ import annotations

import math
import os
import pwd
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.schedd import userlog as ul
from htc.daemons.autocluster import AutoclusterTable
from htc.daemons.calls import CallDone, CallFailed
from htc.daemons.schedd.claims import Claim, ClaimHandling, ClaimState
from htc.daemons.schedd.callfiles import read_input
from htc.daemons.schedd.lanes import Lane, LaneHandling
from htc.daemons.schedd.owed import Owed, owe, owed_writes
from htc.daemons.schedd.requests import Denied, ToolRequests
from htc.daemons.schedd.shadow import Shadow, ShadowEvent, ShadowHandling, ShadowState, job_duration_limit
from htc.errors import UsageError
from htc.jobqueue import Action as PolicyAction
from htc.jobqueue import JobNotFound, JobQueue, JobStatus, QueueStorageError, SystemPolicy
from htc.jobqueue.ads import quote
from htc.jobqueue.states import ACTIVE_STATES
from htc.wire import messages as m

__all__ = ["Schedd", "ScheddSettings", "ScheddStatistics", "make_service"]


@dataclass(frozen=True)
class ScheddSettings:
    """What the schedd core needs to know (times in seconds; names are HTCondor's knobs)."""

    name: str = "schedd@localhost"        # SCHEDD_NAME (the Name of its Scheduler ad)
    address: str = "schedd"               # where tools, negotiator and starters reach it
    machine: str = "localhost"            # the host it runs on (SubmitHost in the user log)
    collector: str = "collector"          # the collector's address
    negotiator: str = "negotiator"        # the negotiator's address
    uid_domain: str = "localhost"         # UID_DOMAIN: submitters are user@uid_domain
    interval: float = 300.0               # SCHEDD_INTERVAL: ad refresh and housekeeping
    min_interval: float = 5.0             # SCHEDD_MIN_INTERVAL: least time between ad updates
    alive_interval: float = 300.0         # ALIVE_INTERVAL: claim keep-alives
    default_lease: float = 2400.0         # JOB_DEFAULT_LEASE_DURATION
    periodic_interval: float = 60.0       # PERIODIC_EXPR_INTERVAL
    request_claim_timeout: float = 30.0   # how long a startd may take to answer RequestClaim
    prompt_delay: float = 0.005           # new work (submit, release, reschedule): ads + Reschedule this soon
    reconnect_retry: float = 2.0          # between attempts to reach a running job's startd
    send_reschedule: bool = True          # SCHEDD_SEND_RESCHEDULE
    max_jobs_running: int = 10000         # MAX_JOBS_RUNNING
    max_jobs_submitted: int = 2147483647  # MAX_JOBS_SUBMITTED: jobs the whole queue may hold
    max_jobs_per_owner: int = 100000      # MAX_JOBS_PER_OWNER: jobs one owner may have queued
    max_jobs_per_submission: int = 20000  # MAX_JOBS_PER_SUBMISSION: jobs one submit may add
    claim_linger: float = 0.0             # SCHEDD_CLAIM_LINGER (htc): keep an idle claim this long
    call_lanes: bool = True               # SCHEDD_CALL_LANES (htc): function calls run on call lanes
    system_policy: SystemPolicy = SystemPolicy()

    def __post_init__(self) -> None:
        for knob, value in (("SCHEDD_INTERVAL", self.interval), ("ALIVE_INTERVAL", self.alive_interval),
                            ("JOB_DEFAULT_LEASE_DURATION", self.default_lease),
                            ("PERIODIC_EXPR_INTERVAL", self.periodic_interval)):
            if not value > 0:
                raise UsageError(f"{knob} must be a positive number of seconds, got {value!r}")
        if self.min_interval < 0:
            raise UsageError(f"SCHEDD_MIN_INTERVAL must be zero or more seconds, got {self.min_interval!r}")
        if self.claim_linger < 0:
            raise UsageError(f"SCHEDD_CLAIM_LINGER must be zero or more seconds, got {self.claim_linger!r}")
        if self.prompt_delay < 0:
            raise UsageError(f"prompt_delay must be zero or more seconds, got {self.prompt_delay!r}")

    def alive_every(self, lease: float) -> float:
        """Seconds between keep-alives of a claim with ``lease``: ALIVE_INTERVAL, at most lease/3.

        HTCondor lowers the interval so that a startd sees at least three keep-alives per lease;
        its 10-second floor is kept unless the lease itself is shorter than 30 seconds.
        """
        return max(min(self.alive_interval, lease / 3.0), min(10.0, lease / 3.0), 0.5)


def _user_of_uid(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


class Schedd(ToolRequests, ClaimHandling, LaneHandling, ShadowHandling):
    """The schedd's decisions (see the module docstring).

    Args:
        settings: its knobs.
        queue: the job queue it owns (open; the caller closes it).
        user_of_uid: maps a peer's uid to a user name (default: the password database).
        own_uid: the uid the schedd runs as (may submit for others, like root).
        read_input: reads a call's input file for a call lane, as its owner (default: from disk).
    """

    def __init__(self, settings: ScheddSettings, queue: JobQueue, *,
                 user_of_uid: Callable[[int], str | None] = _user_of_uid, own_uid: int | None = None,
                 read_input: Callable[[str, str | None], bytes] = read_input):
        self.settings = settings
        self.queue = queue
        self.queue.system_policy = settings.system_policy
        self.user_of_uid = user_of_uid
        self.own_uid = os.getuid() if own_uid is None else own_uid
        self.claims: dict[str, Claim] = {}
        self.shadows: dict[tuple[int, int], Shadow] = {}
        self.read_input = read_input
        self.lanes: dict[str, Lane] = {}                 # call lanes by claim id (htc.daemons.schedd.lanes)
        self.lane_idle: dict[tuple, list] = {}           # idle calls by lane key, a heap each
        self.lane_broken: dict[tuple, float] = {}        # lane keys sent to starters until then
        self.lane_orphans: dict[str, str] = {}           # a predecessor's lane claims -> startd, given back...
        self._orphans_release_at: float | None = None    # ... then (htc.daemons.schedd.lanes)
        self.reserved: set[tuple[int, int]] = set()
        self.offers: dict[str, dict[int, list[tuple[int, int]]]] = {}
        self.reuse_order: dict[str, deque[tuple[int, int]]] = {}  # claim reuse candidates, best first
        self._carves = 0  # claim requests made on partitionable slots (their keys until granted)
        self.autoclusters = AutoclusterTable()
        self.started = False
        self._dirty = True
        self._last_ad = -math.inf
        self._prompt_at: float | None = None   # new work: ads and a Reschedule are due then
        self._force_reschedule = False         # a tool asked for negotiation (condor_reschedule)
        self._reschedule_due = False           # jobs became idle (submit, release, requeue) since the last one
        self._next_periodic: float | None = None
        self._advertised: set[str] = set()

    # -- the core interface -------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The next ad update, periodic policy run, keep-alive, lease end or reconnect attempt."""
        if not self.started:
            return None
        gap = max(self.settings.min_interval, 0.05) if self._dirty else self.settings.interval
        times = [self._last_ad + gap, self._prompt_at, self._next_periodic, self._claims_deadline(),
                 self._shadow_deadline(), self._lanes_deadline()]
        return min(t for t in times if t is not None)

    def handle(self, event: c.Event, now: float) -> list[c.Action]:
        """Apply one event at ``now``; return the actions for the service.

        Raises:
            QueueStorageError: the job queue failed while starting up (the daemon cannot run).
        """
        out: list[c.Action] = []
        if isinstance(event, c.Received):
            self._received(event, now, out)
        elif isinstance(event, (CallDone, CallFailed)):
            self._answered(event, now, out)
        elif isinstance(event, c.Tick):
            self._tick(now, out)
        elif isinstance(event, c.Started):
            self._start(now, out)
        elif isinstance(event, c.SendFailed):
            out.append(c.Log(f"could not tell {event.to} {type(event.msg).__name__}: {event.error}"))
        elif isinstance(event, c.SendDone):
            pass
        elif isinstance(event, c.StopRequested):
            # Running jobs keep running under their lease; a restarted schedd reconnects to them.
            out.append(c.Log(f"schedd stopping with {len(self.shadows)} jobs running; they keep running "
                             "within their job leases"))
            out.append(c.Exit(0))
        elif isinstance(event, c.Reconfigured):
            if event.settings is not None:
                self.settings = event.settings
                self.queue.system_policy = event.settings.system_policy
                self._dirty = True
        else:
            raise TypeError(f"schedd: unexpected event {event!r}")
        return out

    # -- start-up: reconnect to the jobs that were running --------------------------------------

    def _start(self, now: float, out: list) -> None:
        self.started = True
        self._next_periodic = now + self.settings.periodic_interval
        # Results a predecessor committed but did not live to write: first, before any answer.
        owed, unreadable = owed_writes(self.queue)
        out += owed
        calls = sum(not isinstance(a, Owed) for a in owed)
        if calls:
            out.append(c.Log(f"writing the results of {calls} lane call(s) that were committed before the schedd "
                             "stopped and not yet written"))
        if unreadable:
            out.append(c.Log(f"{unreadable} entries of the job queue's outbox could not be read; dropped"))
        running = self.queue.query("JobStatus == 2 || JobStatus == 3 || JobStatus == 6 || JobStatus == 7")
        for job in self._lanes_after_restart(running, now, out):
            self._reattach(job, now, out)
        self._lane_index(now)
        out.append(c.Log(f"schedd {self.settings.name} ready: {self.queue.statistics().jobs} jobs in the queue, "
                         f"reconnecting to {len(self.shadows)} running"))
        self._advertise(now, out)

    def _reattach(self, job, now: float, out: list) -> None:
        job_id, status = job.job_id, JobStatus(job.status)
        claim_id, startd = ul.literal(job, "ClaimId"), ul.literal(job, "StartdIpAddr")
        if not (isinstance(claim_id, str) and isinstance(startd, str)):
            if status == JobStatus.REMOVED:
                self.queue.retire(job_id, now=now)
            else:
                self.queue.set_status(job_id, JobStatus.IDLE, now=now)
                out += ul.write(job, ul.shadow_exception_event(job, "the schedd restarted and the job's claim "
                                                               "was never recorded", now))
            return
        slot = ul.literal(job, "RemoteHost", "")
        lease = ul.number(job, "JobLeaseDuration", self.settings.default_lease) or self.settings.default_lease
        claim = Claim(claim_id, startd, self._submitter(job), slot, ClassAd(), ClaimState.ACTIVE, lease, now,
                      job=job_id, alive_due=now + self.settings.alive_every(lease))
        self.claims[claim_id] = claim
        started = ul.number(job, "JobCurrentStartDate", now)
        confirmed = ul.number(job, "JobCurrentStartExecutingDate", -1.0) >= started
        shadow = Shadow(job_id, claim_id, ShadowState.RECONNECTING, started=started, executed=confirmed,
                        acknowledged=confirmed, duration_limit=job_duration_limit(job))
        self.shadows[job_id] = shadow
        if status == JobStatus.REMOVED:
            shadow.stop = "remove"
            self._step(shadow, ShadowEvent.STOP)
            self._send_vacate(shadow, claim, False, out)
            return
        out += ul.write(job, ul.disconnected_event(job, "the schedd restarted", slot, startd, now))
        self._send_activation(shadow, claim, now, out)

    # -- messages -----------------------------------------------------------------------------

    def _received(self, event: c.Received, now: float, out: list) -> None:
        msg = event.msg
        handler = _HANDLERS.get(type(msg))
        if handler is None:
            out.append(c.unknown_request(event, "schedd"))
            return
        try:
            getattr(self, handler)(event, msg, now, out)
        except Denied as exc:
            out.append(c.Reply(event.conn_id, m.ErrorReply(code="denied", message=str(exc))))
        except JobNotFound as exc:
            out.append(c.Reply(event.conn_id, m.ErrorReply(code="not_found", message=str(exc))))
        except UsageError as exc:
            out.append(c.bad_request(event, str(exc)))
        except QueueStorageError as exc:
            out.append(c.Log(f"job queue failure while handling {type(msg).__name__}: {exc}"))
            out.append(c.Reply(event.conn_id, m.ErrorReply(code="internal", message=str(exc))))

    def _reschedule(self, event: c.Received, msg: m.Reschedule, now: float, out: list) -> None:
        # condor_reschedule: fresh Submitter ads first, so the cycle it asks for sees the queue.
        out.append(c.Reply(event.conn_id, m.Ack(detail="negotiation requested")))
        self._force_reschedule = True
        self._new_work(now)

    def _answered(self, event: CallDone | CallFailed, now: float, out: list) -> None:
        kind = event.cookie[0]
        if kind in ("lane", "lanecalls", "lanevacate"):
            self._lane_answered(event, now, out)
        elif kind == "claim":
            self._claim_answered(event, now, out)
        elif kind == "alive":
            self._keepalive_answered(event, now, out)
        elif kind in ("activate", "vacate", "suspend", "continue"):
            _, job_id, claim_id = event.cookie
            shadow, claim = self.shadows.get(job_id), self.claims.get(claim_id)
            if shadow is None or claim is None or shadow.claim_id != claim_id:
                return  # the run ended meanwhile (its exit report overtook this answer)
            if kind in ("suspend", "continue"):
                self._suspension_answered(shadow, kind, event, now, out)
            elif kind == "vacate":
                if isinstance(event, CallFailed) and event.refused:
                    self._end_run(shadow, "lost", now, out, reason=f"the startd no longer holds the claim "
                                                                   f"({event.error})")
            elif isinstance(event, CallDone):
                self._activation_answered(shadow, claim, now, out)
            else:
                self._activation_failed(shadow, claim, event, now, out)

    # -- the clock ----------------------------------------------------------------------------

    def _tick(self, now: float, out: list) -> None:
        self._claim_timers(now, out)
        self._shadow_timers(now, out)
        self._lane_timers(now, out)
        if self._next_periodic is not None and now >= self._next_periodic:
            self._next_periodic = now + self.settings.periodic_interval
            self._periodic(now, out)
        gap = max(self.settings.min_interval, 0.05) if self._dirty else self.settings.interval
        if now >= self._last_ad + gap or (self._prompt_at is not None and now >= self._prompt_at):
            self._advertise(now, out)

    def _periodic(self, now: float, out: list) -> None:
        for decision in self.queue.evaluate_periodic(now):
            job = self._job(decision.job_id)
            if job is None:
                continue
            event = (ul.held_event(job, decision.reason, decision.code, decision.subcode, now)
                     if decision.action is PolicyAction.HOLD else
                     ul.released_event(job, decision.reason, now) if decision.action is PolicyAction.RELEASE else
                     ul.aborted_event(job, decision.reason, now) if decision.action is PolicyAction.REMOVE else None)
            try:
                with self.queue.transaction():  # the event is kept with the change (schedd_owed)
                    self.queue.apply(decision, now=now)
                    if event is not None:
                        out += owe(self.queue, ul.write(job, event))
            except UsageError as exc:  # the job moved on since the evaluation
                out.append(c.Log(f"periodic policy for job {job.cluster_id}.{job.proc_id} not applied: {exc}"))
                continue
            active = JobStatus(job.status) in ACTIVE_STATES
            if decision.action is PolicyAction.HOLD:
                if active:
                    self._stop_shadow(job.job_id, "hold", False, now, out)
            elif decision.action is PolicyAction.REMOVE:
                if active and not self._stop_shadow(job.job_id, "remove", False, now, out):
                    self.queue.retire(job.job_id, now=now)
            self._changed()

    def _materialize(self, now: float, out: list) -> None:
        """Late materialization: clusters with max_materialize / max_idle get their next procs."""
        host = f"<{self.settings.machine}:{self.settings.address}>"
        for cluster, added in self.queue.materialize_all(now=now).items():
            jobs = sorted(self.queue.query(f"ClusterId == {cluster}"), key=lambda j: j.proc_id)[-added:]
            for job in jobs:
                out += ul.write(job, ul.submit_event(job, host, now))
            out.append(c.Log(f"cluster {cluster}: materialized {added} more jobs"))

    def _advertise(self, now: float, out: list) -> None:
        st = self.settings
        if self._dirty:
            self._materialize(now, out)
        counts = self._submitter_counts()
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
              f'NumUsers = {len(counts)}; ClaimsHeld = {len(self.claims)}; UpdateInterval = {int(st.interval)} ]')
        out.append(c.Send(st.collector, m.UpdateAd(ad_type=m.AdType.Schedd, name=st.name, ad_text=ad,
                                                    lifetime=lifetime)))
        # Only new idle work is worth a cycle: a job that merely started or ended changes the
        # ads, and asking for a cycle each time would have the negotiator re-read every idle job
        # of the queue after every job (O(jobs) per job in a busy pool).
        if (self._reschedule_due or self._force_reschedule) and totals[0] > 0 and st.send_reschedule:
            out.append(c.Send(st.negotiator, m.Reschedule()))
        self._dirty = self._force_reschedule = self._reschedule_due = False
        self._prompt_at = None
        self._last_ad = now

    # -- helpers the mixins share ---------------------------------------------------------------

    def _job(self, job_id):
        try:
            return self.queue.get_job(job_id)
        except JobNotFound:
            return None

    def _changed(self) -> None:
        """The queue changed: the collector (and maybe the negotiator) should hear soon."""
        self._dirty = True

    def _new_work(self, now: float) -> None:
        """Jobs may have become idle (submit, release) or a tool asked for a cycle: advertise
        and ask the negotiator within ``prompt_delay``, whatever SCHEDD_MIN_INTERVAL says."""
        self._dirty = True
        self._reschedule_due = True
        self._forget_reuse_order()
        if self._prompt_at is None:
            self._prompt_at = now + self.settings.prompt_delay

    def _submitter(self, job) -> str:
        from htc.daemons.schedd.claims import submitter_of

        return submitter_of(job, self.settings.uid_domain)

    def statistics(self) -> ScheddStatistics:
        """What the core follows right now: claims by state, shadows, reserved jobs."""
        states = [claim.state for claim in self.claims.values()]
        return ScheddStatistics(claims_requested=states.count(ClaimState.REQUESTED),
                                claims_idle=states.count(ClaimState.IDLE),
                                claims_active=states.count(ClaimState.ACTIVE),
                                shadows=len(self.shadows), reserved=len(self.reserved))


@dataclass(frozen=True)
class ScheddStatistics:
    """A snapshot of the schedd core's soft state (``Schedd.statistics()``)."""

    claims_requested: int
    claims_idle: int
    claims_active: int
    shadows: int
    reserved: int


#: message type -> the core's method answering it
_HANDLERS = {
    m.Submit: "_submit", m.QueryJobs: "_query", m.ActOnJobs: "_act", m.EditJobs: "_edit",
    m.Reschedule: "_reschedule", m.GetResourceRequests: "_resource_requests", m.MatchNotify: "_match",
    m.StarterUpdate: "_starter_update", m.JobOutput: "_job_output", m.JobExited: "_job_exited",
    m.ReleaseClaim: "_claim_released", m.CallsDone: "_calls_done",
}


def make_service(paths):
    """The schedd's service for the pool at ``paths`` (used by ``python -m htc.daemons schedd``).

    Raises:
        UsageError: the configuration is broken.
        QueueFileError: the job queue file is damaged or foreign.
    """
    from htc.daemons.schedd.service import make_schedd_service

    return make_schedd_service(paths)
