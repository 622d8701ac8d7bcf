"""The schedd core: the job queue, its shadows and its claims, without sockets or clocks.

Theory of operation
-------------------
``Schedd.handle(event, now)`` takes one event -- a tool's or daemon's message
(:class:`~htc.daemons.core.Received`), the answer to one of its own requests
(:class:`~htc.daemons.calls.CallDone` / ``CallFailed``, ``SendDone``/``SendFailed``),
a :class:`~htc.daemons.core.Tick` -- and returns actions: replies, requests to other daemons
(:class:`~htc.daemons.calls.Call` when the answer matters, ``Send`` when it does not),
user-log writes (:class:`~htc.daemons.schedd.events.WriteUserLog`) and log lines.

Its durable state is the job queue (:class:`htc.jobqueue.JobQueue`, ``$SPOOL/job_queue.db``),
which the core reads and changes directly: every change is one sqlite transaction that is
committed before the core answers anybody, which is the whole point of a queue (tests give the
core an in-memory queue). Everything else -- claims, shadows, reserved jobs, autoclusters -- is
soft state rebuilt after a restart from the Running jobs in the queue (see
:mod:`htc.daemons.schedd.shadows`).

The core composes one object per subject, each with its own state:

* :class:`~htc.daemons.schedd.requests.ToolRequests` -- submit and query;
  :class:`~htc.daemons.schedd.actions.JobActions` -- rm, hold, release, vacate, suspend, edit;
  :class:`~htc.daemons.schedd.access.Access` -- who the peer is and what it may do;
* :class:`~htc.daemons.schedd.matches.Matches` -- the negotiator's questions, matches, reuse order;
* :class:`~htc.daemons.schedd.claims.Claims` -- the claims, their reuse, leases and watches;
* :class:`~htc.daemons.schedd.shadows.Shadows` -- running jobs: activation, starter reports,
  stops, the end of a run, reconnection;
* :class:`~htc.daemons.schedd.lanes.Lanes` and
  :class:`~htc.daemons.schedd.lane_restart.LaneOrphans` -- call lanes;
* :class:`~htc.daemons.schedd.ads.Adverts` -- the Submitter and Scheduler ads and the
  Reschedule that goes with new work;
* :class:`~htc.daemons.schedd.local_jobs.LocalJobs` -- scheduler- and local-universe jobs,
  which the schedd runs itself (its service starts and signals their processes).

The jobs reserved for a claim being made (:attr:`Schedd.reserved`) are shared by matches,
claims, shadows and lanes. This module dispatches events (by type, through tables of
functions), starts up (reconnecting to the jobs that were running) and runs the clock-driven
work: ads, periodic job policy every PERIODIC_EXPR_INTERVAL, late materialization.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from htc.classad import ClassAd
from htc.config.hostname import sinful
from htc.daemons import core as c
from htc.daemons.calls import CallDone, CallFailed
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.access import Access, Denied, user_of_uid
from htc.daemons.schedd.actions import JobActions
from htc.daemons.schedd.batch_submit import submit_clusters
from htc.daemons.schedd.checkpoint_now import checkpoint_answered, checkpoint_jobs
from htc.daemons.schedd.ads import Adverts, submitter_of
from htc.daemons.schedd.callfiles import read_input
from htc.daemons.schedd.checkpoints import CheckpointStored, checkpoint_stored
from htc.daemons.schedd.claims import Claim, Claims
from htc.daemons.schedd.flock import Flocking
from htc.daemons.schedd.events import Answer, LocalJobExited, LocalJobFailed, LocalJobStarted, Owed
from htc.daemons.schedd.lane_restart import LaneOrphans
from htc.daemons.schedd.lanes import Lanes
from htc.daemons.schedd.local_jobs import LocalJobs
from htc.daemons.schedd.matches import Matches, Reserved
from htc.daemons.schedd.owed import owe, owed_writes
from htc.daemons.schedd.requests import ToolRequests
from htc.daemons.schedd.settings import ScheddSettings
from htc.daemons.schedd.shadow import Shadow, job_duration_limit
from htc.daemons.schedd.shadows import Shadows
from htc.daemons.schedd.states import ClaimState, ShadowEvent, ShadowState
from htc.errors import UsageError
from htc.jobqueue import Action as PolicyAction
from htc.jobqueue import JobNotFound, JobQueue, JobStatus, QueueStorageError
from htc.jobqueue.states import ACTIVE_STATES
from htc.wire import messages as m

__all__ = ["Schedd", "ScheddSettings", "ScheddStatistics"]


class Schedd:
    """The schedd's decisions (see the module docstring).

    Args:
        settings: its knobs.
        queue: the job queue it owns (open; the caller closes it).
        user_of_uid: maps a peer's uid to a user name (default: the password database).
        own_uid: the uid the schedd runs as (may submit for others, like root).
        read_input: reads a call's input file for a call lane, as its owner (default: from disk).
    """

    def __init__(self, settings: ScheddSettings, queue: JobQueue, *,
                 user_of_uid: Callable[[int], str | None] = user_of_uid, own_uid: int | None = None,
                 read_input: Callable[[str, str | None], bytes] = read_input):
        self.settings = settings
        self.queue = queue
        self.queue.system_policy = settings.system_policy
        self.queue.schedd_name = settings.name  # GlobalJobId = "<name>#<cluster>.<proc>#<qdate>"
        self.read_input = read_input
        self.access = Access(user_of_uid, os.getuid() if own_uid is None else own_uid)
        self.reserved = Reserved()   # jobs a claim is being made for (a set)
        self.requests = ToolRequests(self)
        self.job_actions = JobActions(self)
        self.matches = Matches(self)
        self.claims = Claims(self)
        self.shadows = Shadows(self)
        self.lanes = Lanes(self)
        self.orphans = LaneOrphans(self)
        self.adverts = Adverts(self)
        self.flocking = Flocking(self)
        self.local = LocalJobs(self)
        self.started = False
        self._next_periodic: float | None = None
        #: message type -> its handler (event, msg, now, out)
        self._on_message = {
            m.Submit: self.requests.submit, m.QueryJobs: self.requests.query,
            m.SubmitClusters: lambda e, msg, now, out: submit_clusters(self.requests, e, msg, now, out),
            m.ActOnJobs: self.job_actions.act, m.EditJobs: self.job_actions.edit,
            m.Reschedule: self._reschedule,
            m.GetResourceRequests: self.matches.resource_requests, m.MatchNotify: self.matches.match,
            m.StarterUpdate: self.shadows.starter_update, m.JobOutput: self.shadows.job_output,
            m.JobExited: self.shadows.job_exited, m.ReleaseClaim: self.claims.released,
            m.CallsDone: self.lanes.calls_done,
            m.CheckpointJobs: lambda e, msg, now, out: checkpoint_jobs(self, e, msg, now, out),
        }
        #: what a call was for -> the handler of its answer (event, now, out)
        self._on_answer = {
            Answer.CLAIM: self.claims.answered, Answer.ALIVE: self.claims.keepalive_answered,
            Answer.ACTIVATE: self.shadows.answered, Answer.VACATE: self.shadows.answered,
            Answer.SUSPEND: self.shadows.answered, Answer.CONTINUE: self.shadows.answered,
            Answer.LANE: self.lanes.answered, Answer.LANE_CALLS: self.lanes.answered,
            Answer.LANE_VACATE: self.lanes.answered,
            Answer.CHECKPOINT: lambda e, now, out: checkpoint_answered(self, e, now, out),
        }

    # -- the core interface -------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The next ad update, periodic policy run, keep-alive, lease end or reconnect attempt."""
        if not self.started:
            return None
        times = [self.adverts.deadline(), self._next_periodic, self.claims.deadline(), self.shadows.deadline(),
                 self.lanes.deadline(), self.orphans.deadline(), self.local.deadline()]
        return min(t for t in times if t is not None)

    def handle(self, event: c.Event, now: float) -> list[c.Action]:
        """Apply one event at ``now``; return the actions for the service.

        Raises:
            QueueStorageError: the job queue failed while starting up (the daemon cannot run).
            TypeError: an event the schedd does not know.
        """
        out: list[c.Action] = []
        c.dispatch(_ON_EVENT, "schedd", self, event, now, out)
        return out

    # -- events -------------------------------------------------------------------------------

    def _send_failed(self, event: c.SendFailed, now: float, out: list) -> None:
        out.append(c.Log(f"could not tell {event.to} {type(event.msg).__name__}: {event.error}"))

    def _send_done(self, event: c.SendDone, now: float, out: list) -> None:
        """A message nothing waits on (an ad, a Reschedule, a ReleaseClaim) was delivered."""

    def _stop(self, event: c.StopRequested, now: float, out: list) -> None:
        # Running jobs keep running under their lease; a restarted schedd reconnects to them.
        out.append(c.Log(f"schedd stopping with {len(self.shadows)} jobs running; they keep running "
                         "within their job leases"))
        out.append(c.Exit(0))

    def _reconfigured(self, event: c.Reconfigured, now: float, out: list) -> None:
        if event.settings is not None:
            self.settings = event.settings
            self.queue.system_policy = event.settings.system_policy
            self.adverts.changed()

    def _answered(self, event: CallDone | CallFailed, now: float, out: list) -> None:
        self._on_answer[event.cookie[0]](event, now, out)

    def _received(self, event: c.Received, now: float, out: list) -> None:
        msg = event.msg
        handler = self._on_message.get(type(msg))
        if handler is None:
            out.append(c.unknown_request(event, "schedd"))
            return
        try:
            handler(event, msg, now, out)
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
        self.adverts.force_reschedule = True
        self.new_work(now)

    # -- start-up: reconnect to the jobs that were running --------------------------------------

    def _start(self, event: c.Started, now: float, out: list) -> None:
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
        running = [job for job in running if not self.local.recover(job, now, out)]  # scheduler/local universe
        for job in self.orphans.after_restart(running, now, out):
            self._reattach(job, now, out)
        self.lanes.index(now)
        self.local.start_idle(now, out)
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
        claim = Claim(claim_id, startd, self.submitter(job), slot, ClassAd(), ClaimState.ACTIVE, lease, now,
                      job=job_id, alive_due=now + self.settings.alive_every(lease))
        self.claims.add(claim)
        started = ul.number(job, "JobCurrentStartDate", now)
        confirmed = ul.number(job, "JobCurrentStartExecutingDate", -1.0) >= started
        shadow = Shadow(job_id, claim_id, ShadowState.RECONNECTING, started=started, executed=confirmed,
                        acknowledged=confirmed, duration_limit=job_duration_limit(job))
        self.shadows.add(shadow)
        if status == JobStatus.REMOVED:
            shadow.stop = "remove"
            shadow.step(ShadowEvent.STOP)
            self.shadows.send_vacate(shadow, claim, False, out)
            return
        out += ul.write(job, ul.disconnected_event(job, "the schedd restarted", slot, startd, now))
        self.shadows.send_activation(shadow, claim, now, out)

    # -- the clock ----------------------------------------------------------------------------

    def _tick(self, event: c.Tick, now: float, out: list) -> None:
        self.claims.timers(now, out)
        self.shadows.timers(now, out)
        self.orphans.timers(now, out)
        self.lanes.timers(now, out)
        self.local.timers(now, out)
        if self._next_periodic is not None and now >= self._next_periodic:
            self._next_periodic = now + self.settings.periodic_interval
            self._periodic(now, out)
            self.local.start_idle(now, out)  # START_SCHEDULER_UNIVERSE may allow what it did not
        if self.adverts.due(now):
            self._advertise(now, out)

    def _periodic(self, now: float, out: list) -> None:
        for decision in self.queue.evaluate_periodic(now):
            job = self.job(decision.job_id)
            if job is None:
                continue
            write_event = _POLICY_EVENTS.get(decision.action)
            try:
                with self.queue.transaction():  # the event is kept with the change (schedd.owed)
                    self.queue.apply(decision, now=now)
                    if write_event is not None:
                        out += owe(self.queue, ul.write(job, write_event(job, decision, now)))
            except UsageError as exc:  # the job moved on since the evaluation
                out.append(c.Log(f"periodic policy for job {job.cluster_id}.{job.proc_id} not applied: {exc}"))
                continue
            active = JobStatus(job.status) in ACTIVE_STATES
            if decision.action is PolicyAction.HOLD:
                if active:
                    self.stop_run(job.job_id, "hold", False, now, out)
            elif decision.action is PolicyAction.REMOVE:
                if active and not self.stop_run(job.job_id, "remove", False, now, out):
                    self.queue.retire(job.job_id, now=now)
                self.job_actions.remove_others(job, now, out)
            self.changed()

    def _materialize(self, now: float, out: list) -> None:
        """Late materialization: clusters with max_materialize / max_idle get their next procs."""
        host = sinful(self.settings.address, self.settings.machine)

        def owe_submits(cluster: int, added: int) -> None:
            # Inside the transaction that adds the procs: their SUBMIT events are owed in the
            # queue's outbox with them, as a submit's (schedd.owed) -- a kill -9 before the
            # service writes them does not lose them.
            writes = []
            for job in self.queue.cluster_jobs(cluster)[-added:]:
                writes += ul.submit_writes(job, host, now)  # (a spooled cluster's: none, at its input)
            out.extend(owe(self.queue, writes))
            out.append(c.Log(f"cluster {cluster}: materialized {added} more jobs"))

        self.queue.materialize_all(now=now, then=owe_submits)

    def _advertise(self, now: float, out: list) -> None:
        if self.adverts.dirty:
            self._materialize(now, out)
            self.local.start_idle(now, out)  # new work may be scheduler/local universe jobs
        self.adverts.advertise(now, out)

    # -- what the parts share -------------------------------------------------------------------

    def job(self, job_id):
        """The job ``job_id`` in the queue (None: it is not there)."""
        try:
            return self.queue.get_job(job_id)
        except JobNotFound:
            return None

    def stop_run(self, job_id, why: str, fast: bool, now: float, out: list, **options) -> bool:
        """Stop the run of ``job_id`` (``remove``, ``hold``, ``vacate``): its local process
        (scheduler/local universe) or its shadow's. False: it has no run to stop."""
        return self.local.stop(job_id, why, fast, now, out, **options) or self.shadows.stop(job_id, why, fast, now, out)

    def changed(self) -> None:
        """The queue changed: the collector (and maybe the negotiator) should hear soon."""
        self.adverts.changed()

    def new_work(self, now: float, *, reuse_order_kept: bool = False) -> None:
        """Jobs may have become idle (submit, release) or a tool asked for a cycle: advertise
        and ask the negotiator within ``prompt_delay``, whatever SCHEDD_MIN_INTERVAL says.
        ``reuse_order_kept``: the claim-reuse orders already took the new jobs in
        (:meth:`~htc.daemons.schedd.matches.Matches.add_submitted`)."""
        self.adverts.new_work(now)
        if not reuse_order_kept:
            self.matches.forget_reuse_order()

    def submitter(self, job) -> str:
        """Whom ``job`` is charged to."""
        return submitter_of(job, self.settings.uid_domain)

    def statistics(self) -> ScheddStatistics:
        """What the core follows right now: claims by state, shadows, reserved jobs."""
        counts = self.claims.counts()
        return ScheddStatistics(claims_requested=counts[ClaimState.REQUESTED], claims_idle=counts[ClaimState.IDLE],
                                claims_active=counts[ClaimState.ACTIVE], shadows=len(self.shadows),
                                reserved=len(self.reserved))


@dataclass(frozen=True)
class ScheddStatistics:
    """A snapshot of the schedd core's soft state (``Schedd.statistics()``)."""

    claims_requested: int
    claims_idle: int
    claims_active: int
    shadows: int
    reserved: int


#: event type -> the core's handler (self, event, now, out)
_ON_EVENT = {
    c.Received: Schedd._received,
    CallDone: Schedd._answered,
    CallFailed: Schedd._answered,
    c.Tick: Schedd._tick,
    c.Started: Schedd._start,
    c.SendFailed: Schedd._send_failed,
    c.SendDone: Schedd._send_done,
    c.StopRequested: Schedd._stop,
    c.Reconfigured: Schedd._reconfigured,
    LocalJobStarted: lambda sd, event, now, out: sd.local.started(event, now, out),
    LocalJobFailed: lambda sd, event, now, out: sd.local.failed(event, now, out),
    LocalJobExited: lambda sd, event, now, out: sd.local.exited(event, now, out),
    CheckpointStored: checkpoint_stored,
}

#: a periodic policy decision -> the user-log event that announces it (none for the others)
_POLICY_EVENTS = {
    PolicyAction.HOLD: lambda job, d, now: ul.held_event(job, d.reason, d.code, d.subcode, now),
    PolicyAction.RELEASE: lambda job, d, now: ul.released_event(job, d.reason, now),
    PolicyAction.REMOVE: lambda job, d, now: ul.aborted_event(job, d.reason, now),
}
