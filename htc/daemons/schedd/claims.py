"""The schedd's claims: resource requests for the negotiator, matches, claiming, reuse, leases.

Theory of operation
-------------------
The negotiator asks for one submitter's idle work (GetResourceRequests); the schedd answers
with its autoclusters (:class:`~htc.daemons.autocluster.AutoclusterTable`, keyed by the
significant attributes the negotiator names), best job first, and remembers which jobs stood
behind each autocluster. A match (MatchNotify) names the autocluster; the schedd picks its
next idle job that no other claim is waiting for, *reserves* it, and asks the startd for the
claim (RequestClaim; the startd re-checks START). A partitionable slot answers with the claim
of the dynamic slot it carved, which the schedd adopts.

Each claim is a record moved by the table :data:`CLAIM`::

    REQUESTED --granted--> IDLE --activate--> ACTIVE --job_done--> IDLE ...
        | refused             | release / lost     | lost (startd dropped it, lease over)
        v                     v                    v
       GONE                  GONE                 GONE

When a job ends normally its claim is *reused* (HTCondor's claim reuse, reference §4.5): the
next idle job of the same submitter whose Requirements and the slot's match starts on it at
once, without a negotiation cycle; when none fits the claim is released (ReleaseClaim). The
candidates come from a per-submitter list in the order the schedd offers jobs (JobPrio, then
the oldest), built from one query of the queue and consumed from the front as jobs start --
like HTCondor's PrioRec array -- so that finishing each of N jobs does not scan the N idle
ones again. New work (a submit, a release, an edit, a job back to Idle) discards the list; the
next reuse builds it afresh.

Leases. A claim lives ``JobLeaseDuration`` seconds past the last sign of life of its startd
(a keep-alive answered, a starter update). A startd that answers ``not_found`` has dropped the
claim: the job on it is gone and goes back to Idle; one that does not answer gets until the
lease ends.

Claim watches. The keep-alive of a granted claim is a *watch*: ``ClaimKeepAlive(watch=W)``,
whose answer the startd holds up to ``W`` seconds (ALIVE_INTERVAL, at most a third of the
lease and at most a minute; :mod:`htc.daemons.startd.watches`), and the next one goes as soon
as it is answered. So a connection to the startd stays open per claim, as HTCondor's shadow
keeps one to its starter, and a startd killed under its jobs is noticed at once: the held
request fails with ``closed``. The schedd then asks again at once: a startd that answers
(a connection that broke, a startd alive) is watched again; one that no longer knows the claim
(restarted) or at whose address nobody listens (dead: its in-process starters, and the jobs
they ran, died with it) has lost the claim -- the job is written JOB_DISCONNECTED then
JOB_RECONNECT_FAILED and goes back to Idle, a lane's calls in flight are EVICTED and idle
again, all within a second of the kill. Only a startd that stays silent (a hung host, a
network cut) keeps its claims until the lease ends. The other way round, the startd sees the
watch's connection close when the schedd dies, and releases the claims that run no job.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from htc.classad import ClassAd
from htc.classad.match import symmetric_match
from htc.daemons import core as c
from htc.daemons.schedd import userlog as ul
from htc.daemons.autocluster import AutoclusterTable
from htc.daemons.calls import Call
from htc.daemons.schedd.shadow import ad_text
from htc.jobqueue import JobStatus
from htc.jobqueue.expr import job_classad
from htc.jobqueue.records import JobId
from htc.wire import messages as m


class ClaimState(enum.Enum):
    """Where one of the schedd's claims stands."""

    REQUESTED = "Requested"  # RequestClaim sent, no answer yet
    IDLE = "Idle"            # claimed, no job on it
    ACTIVE = "Active"        # a shadow runs a job on it
    GONE = "Gone"


_C = ClaimState

#: The claim's legal steps: (state, trigger) -> new state.
CLAIM: dict[tuple[ClaimState, str], ClaimState] = {
    (_C.REQUESTED, "granted"): _C.IDLE,
    (_C.REQUESTED, "refused"): _C.GONE,
    (_C.REQUESTED, "lost"): _C.GONE,
    (_C.IDLE, "activate"): _C.ACTIVE,
    (_C.IDLE, "release"): _C.GONE,
    (_C.IDLE, "lost"): _C.GONE,
    (_C.ACTIVE, "job_done"): _C.IDLE,
    (_C.ACTIVE, "release"): _C.GONE,
    (_C.ACTIVE, "lost"): _C.GONE,
}


@dataclass(eq=False)
class Claim:
    """One claim of the schedd on a startd's slot."""

    id: str
    startd: str
    submitter: str
    slot_name: str
    slot_ad: ClassAd
    state: ClaimState
    lease: float
    last_alive: float
    job: JobId | None = None
    alive_due: float | None = None
    ended_by_startd: bool = False  # the startd said it ended the claim (ReleaseClaim from it)
    watching: bool = False  # a keep-alive (a watch: its answer held by the startd) is on its way
    broken_at: float | None = None  # when the startd closed the claim's watch unanswered
    linger_until: float | None = None  # idle with no job to give it: released then (SCHEDD_CLAIM_LINGER)
    slot_values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.set_slot_ad(self.slot_ad)

    def set_slot_ad(self, ad: ClassAd) -> None:
        """Adopt the slot's ad (values kept for the user log's resource table)."""
        self.slot_ad = ad
        self.slot_values = {key: ad[key] for key in ("Cpus", "Memory", "Disk") if key in ad}


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


class ClaimHandling:
    """The schedd core's negotiation and claims. A mixin of :class:`htc.daemons.schedd.core.Schedd`."""

    def _claim_step(self, claim: Claim, trigger: str) -> None:
        claim.state = c.transition(CLAIM, f"claim {claim.id.split('#')[0]}", claim.state, trigger)
        if claim.state is ClaimState.GONE:
            self.claims.pop(claim.id, None)

    def _idle_jobs_of(self, submitter: str, now: float, ordered: bool = True) -> list:
        uid_domain = self.settings.uid_domain
        return [job for job in self.queue.idle_jobs(now=now, ordered=ordered)
                if job.job_id not in self.reserved and submitter_of(job, uid_domain) == submitter]

    # -- the negotiator's questions ---------------------------------------------------------

    def _resource_requests(self, event: c.Received, msg: m.GetResourceRequests, now: float, out: list) -> None:
        table: AutoclusterTable = self.autoclusters
        table.set_significant(msg.significant_attributes)
        jobs = sorted(self._idle_jobs_of(msg.submitter, now, ordered=False),
                      key=lambda j: (-j.prio, j.qdate, j.cluster_id, j.proc_id))  # the schedd's job order
        groups = table.ids_by_cluster(jobs)
        self.offers[msg.submitter] = {ac: [job.job_id for job in members] for ac, members in groups.items()}
        wire = tuple(m.ResourceRequest(autocluster_id=ac, count=len(members), job_ad=ad_text(_public(members[0])))
                     for ac, members in groups.items())
        out.append(c.Reply(event.conn_id, m.ResourceRequests(submitter=msg.submitter, requests=wire)))

    def _match(self, event: c.Received, msg: m.MatchNotify, now: float, out: list) -> None:
        lapsed = self._take_match(msg, now, out)
        # A match this schedd does not take is said so in the answer: the negotiator then stops
        # holding the slot back for it (else a partitionable slot's carve stays given away
        # until NEGOTIATOR_TIMEOUT passes or the startd reports, minutes with UPDATE_INTERVAL).
        out.append(c.Reply(event.conn_id, m.Ack(detail=f"{m.MATCH_LAPSED}{lapsed}" if lapsed else "")))

    def _take_match(self, msg: m.MatchNotify, now: float, out: list) -> str | None:
        """Claim the matched slot for a job; why the match lapses instead (None: taken)."""
        slot_ad = ClassAd(msg.slot_ad)
        key = msg.claim_id
        if _partitionable(slot_ad):
            # Every carve of a partitionable slot in a cycle carries the slot's one claim id;
            # each is a claim request of its own until the startd names the dynamic slot.
            self._carves += 1
            key = f"{msg.claim_id}#carve{self._carves}"
        elif key in self.claims:
            return None  # the same match told twice
        job = self._job_for_match(msg, slot_ad, now)
        if job is None:
            out.append(c.Log(f"match of {msg.slot_name} for {msg.submitter}: no idle job left for it; "
                             "the match lapses"))
            return "no idle job left for it"
        if len(self.shadows) + sum(cl.state is ClaimState.REQUESTED for cl in self.claims.values()) \
                >= self.settings.max_jobs_running:
            out.append(c.Log(f"match of {msg.slot_name}: MAX_JOBS_RUNNING ({self.settings.max_jobs_running}) "
                             "reached; the match lapses"))
            return f"MAX_JOBS_RUNNING ({self.settings.max_jobs_running}) reached"
        lease = ul.number(job, "JobLeaseDuration", self.settings.default_lease) or self.settings.default_lease
        claim = Claim(key, msg.startd_address, msg.submitter, msg.slot_name, slot_ad,
                      ClaimState.REQUESTED, lease, now, job=job.job_id)
        self.claims[claim.id] = claim
        self.reserved.add(job.job_id)
        out.append(Call(msg.startd_address, m.RequestClaim(
            claim_id=msg.claim_id, schedd_name=self.settings.name, schedd_address=self.settings.address,
            submitter=msg.submitter, job_ad=ad_text(_public(job)), lease_duration=lease),
            cookie=("claim", key), timeout=self.settings.request_claim_timeout))
        return None

    def _job_for_match(self, msg: m.MatchNotify, slot_ad: ClassAd, now: float):
        for job_id in self.offers.get(msg.submitter, {}).get(msg.autocluster_id, ()):
            job = self._job(job_id)
            if job is not None and job.status == JobStatus.IDLE and job_id not in self.reserved:
                return job
        return self._fitting_job(msg.submitter, slot_ad, now)

    def _fitting_job(self, submitter: str, slot_ad: ClassAd, now: float):
        """The submitter's best idle, unreserved job that matches ``slot_ad`` (None: none does).

        At most 200 idle candidates are tried (HTCondor gives up on reuse sooner still).
        """
        order = self.reuse_order.get(submitter)
        if order is None:
            order = self.reuse_order[submitter] = deque(job.job_id for job in self._idle_jobs_of(submitter, now))
        while order and order[0] not in self.reserved:
            front = self._job(order[0])
            if front is not None and front.status == JobStatus.IDLE:
                break
            order.popleft()  # started, held or gone: never a candidate again
        tried = 0
        for job_id in order:
            if job_id in self.reserved:
                continue  # a claim is being made for it
            job = self._job(job_id)
            if job is None or job.status != JobStatus.IDLE:
                continue
            if symmetric_match(job_classad(job), slot_ad):
                return job
            tried += 1
            if tried >= 200:
                break
        return None

    def _forget_reuse_order(self, submitter: str | None = None) -> None:
        """Jobs became idle or changed priority: the next reuse queries the queue again."""
        if submitter is None:
            self.reuse_order.clear()
        else:
            self.reuse_order.pop(submitter, None)

    # -- claiming -----------------------------------------------------------------------------

    def _claim_answered(self, event, now: float, out: list) -> None:
        claim = self.claims.get(event.cookie[1])
        if claim is None:
            return
        reply = getattr(event, "reply", None)
        if reply is None or not reply.accepted:
            why = reply.reason if reply is not None else event.error
            out.append(c.Log(f"claim on {claim.slot_name} refused: {why}"))
            if claim.job is not None:
                self.reserved.discard(claim.job)
            self._claim_step(claim, "refused")
            self._changed()
            return
        if reply.claim_id != claim.id:  # a partitionable slot carved a dynamic one
            self.claims.pop(claim.id, None)
            claim.id = reply.claim_id
            self.claims[claim.id] = claim
        if reply.slot_ad:
            ad = ClassAd(reply.slot_ad)
            claim.set_slot_ad(ad)
            name = ad.get("Name")
            claim.slot_name = name if isinstance(name, str) else claim.slot_name
        claim.last_alive = now
        claim.alive_due = now  # its watch starts at once
        self._claim_step(claim, "granted")
        job_id, claim.job = claim.job, None
        if job_id is None or not self._start_job(claim, job_id, now, out):
            self._claim_done(claim, reusable=True, release=True, now=now, out=out)

    def _claim_done(self, claim: Claim, reusable: bool, release: bool, now: float, out: list) -> None:
        """The job on ``claim`` is finished: start the next fitting job on it, or let it go."""
        claim.job = None
        if claim.state is ClaimState.ACTIVE:
            self._claim_step(claim, "job_done")
        if claim.ended_by_startd:
            reusable = release = False
        if reusable and claim.state is ClaimState.IDLE:
            job = self._fitting_job(claim.submitter, claim.slot_ad, now)
            if job is not None and self._start_job(claim, job.job_id, now, out):
                out.append(c.Log(f"claim on {claim.slot_name} reused for job {job.cluster_id}.{job.proc_id}"))
                return
            if self.settings.claim_linger > 0 and not self.queue.count("JobStatus == 1"):
                # Nothing is waiting anywhere: keep the claim a moment for this user's next
                # submit (a futures client submits one call after another), which then starts
                # at once instead of after a negotiation and a new claim.
                claim.linger_until = now + self.settings.claim_linger
                return
        if claim.state is ClaimState.GONE:
            return
        if reusable or release:
            why = "no more jobs for this claim" if reusable else "its last job could not start on it"
            out.append(c.Send(claim.startd, m.ReleaseClaim(claim_id=claim.id, reason=why)))
            if self.queue.count("JobStatus == 1"):
                # Idle jobs that could not use this claim: the negotiator may find them another
                # slot, or this one carved anew, now rather than SCHEDD_MIN_INTERVAL later.
                self._new_work(now)
        self._claim_step(claim, "release")

    def _use_lingering_claims(self, now: float, out: list) -> None:
        """New idle jobs (submit, release): start those that fit on claims kept idle for them."""
        lingering = [claim for claim in self.claims.values()
                     if claim.linger_until is not None and claim.state is ClaimState.IDLE and not claim.ended_by_startd]
        if lingering:
            self._forget_reuse_order()  # the new jobs are candidates too
        for claim in lingering:
            job = self._fitting_job(claim.submitter, claim.slot_ad, now)
            if job is not None and _wastes(claim.slot_ad, job):
                continue  # a slot carved for a bigger job: free it for the negotiator instead
            if job is not None and self._start_job(claim, job.job_id, now, out):
                claim.linger_until = None
                out.append(c.Log(f"claim on {claim.slot_name} kept idle, reused for job "
                                 f"{job.cluster_id}.{job.proc_id}"))
        if lingering and self.queue.count("JobStatus == 1"):
            # Jobs these claims cannot take are waiting (another user's, or bigger ones): give
            # the slots back so the negotiator can place them, as if the claims never lingered.
            for claim in lingering:
                if claim.linger_until is not None and claim.state is ClaimState.IDLE:
                    self._release_lingering(claim, now, out)

    def _release_lingering(self, claim: Claim, now: float, out: list) -> None:
        claim.linger_until = None
        out.append(c.Send(claim.startd, m.ReleaseClaim(claim_id=claim.id, reason="no more jobs for this claim")))
        self._claim_step(claim, "release")

    # -- leases and watches ------------------------------------------------------------------

    def _claims_deadline(self) -> float | None:
        times = []
        for claim in self.claims.values():
            if claim.state is ClaimState.REQUESTED:
                continue
            times.append(claim.last_alive + claim.lease)
            if claim.alive_due is not None and not claim.watching:
                times.append(claim.alive_due)
            if claim.linger_until is not None:
                times.append(claim.linger_until)
        return min(times, default=None)

    def _claim_timers(self, now: float, out: list) -> None:
        for claim in list(self.claims.values()):
            if claim.state is ClaimState.REQUESTED:
                continue
            if now >= claim.last_alive + claim.lease:
                self._claim_lost(claim, f"no word from {claim.startd} for the whole job lease "
                                        f"({claim.lease:g} s)", now, out)
                continue
            if claim.linger_until is not None and now >= claim.linger_until:
                if claim.state is ClaimState.IDLE:
                    self._release_lingering(claim, now, out)
                    continue
                claim.linger_until = None
            if not claim.watching and (claim.alive_due is None or claim.alive_due <= now):
                self._watch_claim(claim, out)

    def _watch_claim(self, claim: Claim, out: list) -> None:
        """Send the claim's next keep-alive as a watch (the startd holds its answer)."""
        seconds = watch_seconds(self.settings.alive_every(claim.lease))
        claim.watching, claim.alive_due = True, None
        out.append(Call(claim.startd, m.ClaimKeepAlive(claim_id=claim.id, watch=seconds), cookie=("alive", claim.id),
                        timeout=seconds + max(30.0, seconds)))

    def _keepalive_answered(self, event, now: float, out: list) -> None:
        claim = self.claims.get(event.cookie[1])
        if claim is None:
            return
        claim.watching = False
        if getattr(event, "reply", None) is not None:
            claim.last_alive = now
            if claim.broken_at is not None:
                out.append(c.Log(f"claim on {claim.slot_name}: {claim.startd} answers again; watching it again"))
                claim.broken_at = None
            self._watch_claim(claim, out)
        elif event.refused:
            why = f"{claim.startd} no longer holds the claim ({event.error})"
            if claim.broken_at is not None:
                self._startd_gone(claim, f"the startd restarted: {why}", now, out)
            else:
                self._claim_lost(claim, why, now, out)
        elif event.code == "closed" and claim.broken_at is None:
            # The startd closed the connection of the held watch without answering: it died (and
            # its starters with it) or the connection broke. Ask again at once to tell which.
            claim.broken_at = now
            out.append(c.Log(f"claim on {claim.slot_name}: {claim.startd} closed the claim's watch; asking again"))
            self._watch_claim(claim, out)
        elif event.code == "closed" and now - claim.broken_at < self.settings.reconnect_retry:
            # Asked again on a pooled connection to the same dead startd, whose end closed with
            # the rest: each such connection is dropped when it fails, so ask again at once.
            self._watch_claim(claim, out)
        elif event.code == "unreachable" and claim.broken_at is not None:
            self._startd_gone(claim, f"{claim.startd} closed the claim's watch and nobody listens at its address "
                                     f"any more ({event.error})", now, out)
        else:
            claim.alive_due = now + self.settings.reconnect_retry  # silence: asked again within the lease

    def _startd_gone(self, claim: Claim, why: str, now: float, out: list) -> None:
        """The startd that held ``claim`` is gone, and the job on it with it: say so in the job's
        log as HTCondor's shadow does (disconnected, then the reconnect failed) and end the run."""
        shadow = self.shadows.get(claim.job) if claim.job is not None else None
        job = self._job(shadow.job_id) if shadow is not None and shadow.claim_id == claim.id else None
        if job is not None:
            out += ul.write(job, ul.disconnected_event(job, "the connection to the startd closed", claim.slot_name,
                                                       claim.startd, now))
        self._claim_lost(claim, why, now, out)
        self._new_work(now)  # its work is idle again: to the negotiator now, not SCHEDD_MIN_INTERVAL later

    def _claim_released(self, event: c.Received, msg: m.ReleaseClaim, now: float, out: list) -> None:
        """The startd ended one of our claims (owner back, drain, lease): use it no more."""
        out.append(c.Reply(event.conn_id, m.Ack()))
        claim = self.claims.get(msg.claim_id)
        if claim is None:
            return
        claim.ended_by_startd = True
        out.append(c.Log(f"{claim.startd} ended the claim on {claim.slot_name}: {msg.reason or 'no reason given'}"))
        if claim.state is ClaimState.IDLE:
            self._claim_step(claim, "lost")
        # An active claim waits for its job's exit report; a keep-alive answered not_found ends
        # the run if that report never comes.

    def _claim_lost(self, claim: Claim, why: str, now: float, out: list) -> None:
        self._lane_claim_lost(claim, why, now, out)
        shadow = self.shadows.get(claim.job) if claim.job is not None else None
        if shadow is not None and shadow.claim_id == claim.id:
            self._end_run(shadow, "lost", now, out, reason=why)  # frees the claim too
        if claim.id in self.claims:
            out.append(c.Log(f"claim on {claim.slot_name} lost: {why}"))
            self._claim_step(claim, "lost")


#: the longest a claim watch is held (s); a startd holds one at most htc.daemons.startd.watches.MAX_WATCH
MAX_WATCH = 60.0


def watch_seconds(alive_every: float) -> float:
    """How long a claim watch is held: the claim's keep-alive interval, at most :data:`MAX_WATCH`."""
    return min(alive_every, MAX_WATCH)


def _wastes(slot_ad: ClassAd, job) -> bool:
    """Whether ``job`` would leave CPUs of a slot carved for an earlier, bigger job unused.

    Plain reuse takes that chance (the claim is there and the job is next), but a claim kept
    idle is a choice: a 2-CPU slot kept for a 1-CPU job holds a CPU another job could use.
    """
    cpus = slot_ad.get("Cpus")
    try:
        wanted = job_classad(job).eval("RequestCpus")
    except Exception:  # noqa: BLE001 - an unevaluable request is the default of one CPU
        wanted = 1
    if not isinstance(wanted, int | float) or isinstance(wanted, bool):
        wanted = 1
    return isinstance(cpus, int) and not isinstance(cpus, bool) and cpus > max(wanted, 1)


def _partitionable(slot_ad: ClassAd) -> bool:
    return slot_ad.get("PartitionableSlot") is True or str(slot_ad.get("SlotType", "")).lower() == "partitionable"


def _public(job) -> dict[str, str]:
    """A stored job ad without the attributes other daemons must not see (its claim id)."""
    return {k: v for k, v in job.items() if k != "ClaimId"}


__all__ = ["CLAIM", "MAX_WATCH", "Claim", "ClaimHandling", "ClaimState", "submitter_of", "watch_seconds"]
