"""The schedd's claims: the book of claims on startds' slots, their reuse, leases and watches.

Theory of operation
-------------------
A claim starts with a match (:mod:`htc.daemons.schedd.matches`: RequestClaim sent, the claim
REQUESTED) and is a record moved by the table :data:`~htc.daemons.schedd.states.CLAIM`::

    REQUESTED --granted--> IDLE --activate--> ACTIVE --job_done--> IDLE ...
        | refused             | release / lost     | lost (startd dropped it, lease over)
        v                     v                    v
       GONE                  GONE                 GONE

The claims of the core are a :class:`Claims` (claim id -> :class:`Claim`), which also holds
what the core does with them.

When a job ends normally its claim is *reused* (HTCondor's claim reuse, reference §4.5): the
next idle job of the same submitter whose Requirements and the slot's match starts on it at
once, without a negotiation cycle; when none fits the claim is released (ReleaseClaim). Which
job fits is :meth:`htc.daemons.schedd.matches.Matches.fitting_job`'s to say.

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
again, all within a second of the kill. The other way round, the startd sees the
watch's connection close when the schedd dies, and releases the claims that run no job.

Disconnected jobs. A startd that stays *silent* (a hung host; a cut link, which SSH keepalives
notice in seconds and whose connects then time out: :class:`~htc.wire.errors.HostSilent`) may
still be running the job, so the claim is kept until its lease ends, as HTCondor's shadow keeps
a disconnected job: the first unanswered watch writes JOB_DISCONNECTED, the startd is asked
again every ``reconnect_retry`` seconds, and either it answers within the lease (the job was
never gone: JOB_RECONNECTED) or the lease ends (JOB_RECONNECT_FAILED; the job is Idle again
and matched anew). The startd does the same on its side: a claim whose schedd has been silent
for the lease is evicted and its job killed (:mod:`htc.daemons.startd.evaluation`), so a job
rescheduled elsewhere no longer runs on the cut-off host, and a late exit report of the old run
(the link back) finds the job no longer running on that claim and changes nothing
(:meth:`htc.daemons.schedd.shadows.Shadows.job_exited`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import InitVar, dataclass
from typing import Any

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.calls import Call, CallDone, CallFailed
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.events import Answer
from htc.daemons.schedd.states import CLAIM, ClaimEvent, ClaimState, transition
from htc.jobqueue.expr import job_classad
from htc.jobqueue.records import JobId
from htc.wire import messages as m

__all__ = ["MAX_WATCH", "Claim", "Claims", "watch_seconds"]

#: the longest a claim watch is held (s); a startd holds one at most htc.daemons.startd.watches.MAX_WATCH
MAX_WATCH = 60.0


def watch_seconds(alive_every: float) -> float:
    """How long a claim watch is held: the claim's keep-alive interval, at most :data:`MAX_WATCH`."""
    return min(alive_every, MAX_WATCH)


@dataclass(eq=False)
class Claim:
    """One claim of the schedd on a startd's slot."""

    id: str
    startd: str
    submitter: str
    slot_name: str
    #: the slot's ad, or its text (parsed when first read: :attr:`slot_ad`)
    slot: InitVar[ClassAd | str]
    state: ClaimState
    lease: float
    last_alive: float
    job: JobId | None = None
    alive_due: float | None = None
    ended_by_startd: bool = False  # the startd said it ended the claim (ReleaseClaim from it)
    watching: bool = False  # a keep-alive (a watch: its answer held by the startd) is on its way
    broken_at: float | None = None  # when the startd closed the claim's watch unanswered
    disconnected: bool = False  # JOB_DISCONNECTED written for the job on it: the startd went silent
    linger_until: float | None = None  # idle with no job to give it: released then (SCHEDD_CLAIM_LINGER)
    #: kept idle by its last job's KeepClaimIdle: not given back for other users' waiting jobs
    #: before ``linger_until`` (DAGMan's claim held for a node's children)
    held: bool = False
    #: the FLOCK_TO pool whose negotiator made the match ("" for the schedd's own pool)
    pool: str = ""

    def __post_init__(self, slot: ClassAd | str) -> None:
        self.set_slot_ad(slot)

    def set_slot_ad(self, ad: ClassAd | str) -> None:
        """Adopt the slot's ad, or its text: a match's ad is read only if the claim is (a
        partitionable slot's grant brings the dynamic slot's own ad, and a refused claim is
        gone), as HTCondor's schedd keeps the match ad as it came."""
        self._slot_ad, self._slot_text = (ad, None) if isinstance(ad, ClassAd) else (None, ad)
        self._slot_values: dict[str, Any] | None = None
        self._weight: float | None = None

    @property
    def slot_ad(self) -> ClassAd:
        """The slot's ad (parsed from its text when first read)."""
        if self._slot_ad is None:
            self._slot_ad = ClassAd(self._slot_text)
        return self._slot_ad

    @property
    def slot_values(self) -> dict[str, Any]:
        """The slot's Cpus, Memory and Disk, for the user log's resource table."""
        if self._slot_values is None:
            ad = self.slot_ad
            self._slot_values = {key: ad[key] for key in ("Cpus", "Memory", "Disk") if key in ad}
        return self._slot_values

    @property
    def weight(self) -> float:
        """The slot's weight (:func:`slot_weight_of`, evaluated once for every run on the claim),
        by which a run's time counts in ``CumulativeSlotTime``."""
        if self._weight is None:
            self._weight = slot_weight_of(self.slot_ad)
        return self._weight




def slot_weight_of(ad: ClassAd | None) -> float:
    """The weight of a slot (its ``SlotWeight``, else its ``Cpus``; 1 unknown), by which
    HTCondor multiplies a run's time into ``CumulativeSlotTime``."""
    for name in ("SlotWeight", "Cpus"):
        try:
            value = ad.eval(name) if ad is not None and name in ad else None
        except Exception:  # an expression the job's side cannot evaluate: try the next
            value = None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return 1.0


class Claims(Mapping):
    """The schedd's claims (claim id -> :class:`Claim`) and what it does with them: a granted
    claim's first job, reuse, lingering, keep-alive watches, leases, losses.

    Args:
        schedd: the core it belongs to (its queue, settings, matches, shadows and lanes).
    """

    def __init__(self, schedd):
        self.schedd = schedd
        self._by_id: dict[str, Claim] = {}

    def __getitem__(self, claim_id: str) -> Claim:
        return self._by_id[claim_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    # (the dict's own look-ups: these are on every message's path)
    def __contains__(self, claim_id) -> bool:
        return claim_id in self._by_id

    def get(self, claim_id, default=None):
        return self._by_id.get(claim_id, default)

    def values(self):
        return self._by_id.values()

    def add(self, claim: Claim) -> None:
        """Follow ``claim`` (requested for a match, or found after a restart)."""
        self._by_id[claim.id] = claim

    def step(self, claim: Claim, event: ClaimEvent) -> None:
        """Move ``claim`` by ``event`` through :data:`~htc.daemons.schedd.states.CLAIM`; a claim
        that is GONE leaves the book.

        Raises:
            IllegalTransition: the table has no such step.
        """
        claim.state = transition(CLAIM, f"claim {claim.id.split('#')[0]}", claim.state, event)
        if claim.state is ClaimState.GONE:
            self._by_id.pop(claim.id, None)

    def counts(self) -> dict[ClaimState, int]:
        """How many claims are in each state."""
        states = [claim.state for claim in self._by_id.values()]
        return {state: states.count(state) for state in ClaimState}

    # -- claiming -----------------------------------------------------------------------------

    def answered(self, event: CallDone | CallFailed, now: float, out: list) -> None:
        """The startd granted (or refused) a RequestClaim: start the reserved job on it."""
        sd = self.schedd
        claim = self._by_id.get(event.cookie[1])
        if claim is None:
            return
        reply = getattr(event, "reply", None)
        if reply is None or not reply.accepted:
            why = reply.reason if reply is not None else event.error
            out.append(c.Log(f"claim on {claim.slot_name} refused: {why}"))
            if claim.job is not None:
                sd.reserved.discard(claim.job)
            self.step(claim, ClaimEvent.REFUSED)
            sd.changed()
            return
        if reply.claim_id != claim.id:  # a partitionable slot carved a dynamic one
            self._by_id.pop(claim.id, None)
            claim.id = reply.claim_id
            self._by_id[claim.id] = claim
        if reply.slot_ad:
            ad = ClassAd(reply.slot_ad)
            claim.set_slot_ad(ad)
            name = ad.get("Name")
            claim.slot_name = name if isinstance(name, str) else claim.slot_name
        claim.last_alive = now
        claim.alive_due = now  # its watch starts at once
        self.step(claim, ClaimEvent.GRANTED)
        job_id, claim.job = claim.job, None
        if job_id is None or not sd.shadows.start_job(claim, job_id, now, out):
            self.done(claim, reusable=True, release=True, now=now, out=out)

    def done(self, claim: Claim, reusable: bool, release: bool, now: float, out: list,
             keep_idle: float = 0.0) -> None:
        """The job on ``claim`` is finished: start the next fitting job on it, or keep it idle
        (SCHEDD_CLAIM_LINGER while nothing waits; the job's KeepClaimIdle, ``keep_idle``
        seconds, even while other jobs wait), or let it go."""
        sd = self.schedd
        claim.job = None
        if claim.state is ClaimState.ACTIVE:
            self.step(claim, ClaimEvent.JOB_DONE)
        if claim.ended_by_startd:
            reusable = release = False
        if reusable and claim.state is ClaimState.IDLE:
            job = sd.matches.fitting_job(claim.submitter, claim.slot_ad, now)
            if job is not None and sd.shadows.start_job(claim, job.job_id, now, out):
                out.append(c.Log(f"claim on {claim.slot_name} reused for job {job.cluster_id}.{job.proc_id}"))
                return
            linger = 0.0
            if sd.settings.claim_linger > 0 and not sd.queue.exists("JobStatus == 1"):
                # Nothing is waiting anywhere: keep the claim a moment for this user's next
                # submit (a futures client submits one call after another), which then starts
                # at once instead of after a negotiation and a new claim.
                linger = sd.settings.claim_linger
            if keep_idle > linger:
                # The job asked for it (KeepClaimIdle: a DAG node whose children come next),
                # as HTCondor's schedd keeps such a claim Claimed/Idle whatever else waits.
                claim.linger_until, claim.held = now + keep_idle, True
                out.append(c.Log(f"claim on {claim.slot_name} kept idle for {keep_idle:g} s (KeepClaimIdle)"))
                return
            if linger > 0:
                claim.linger_until, claim.held = now + linger, False
                return
        if claim.state is ClaimState.GONE:
            return
        if reusable or release:
            why = "no more jobs for this claim" if reusable else "its last job could not start on it"
            out.append(c.Send(claim.startd, m.ReleaseClaim(claim_id=claim.id, reason=why)))
            if sd.queue.exists("JobStatus == 1"):
                # Idle jobs that could not use this claim: the negotiator may find them another
                # slot, or this one carved anew, now rather than SCHEDD_MIN_INTERVAL later.
                sd.new_work(now)
        self.step(claim, ClaimEvent.RELEASE)

    def use_lingering(self, now: float, out: list) -> None:
        """New idle jobs (submit, release): start those that fit on claims kept idle for them."""
        sd = self.schedd
        lingering = [claim for claim in self._by_id.values()
                     if claim.linger_until is not None and claim.state is ClaimState.IDLE and not claim.ended_by_startd]
        if lingering:
            sd.matches.forget_reuse_order()  # the new jobs are candidates too
        for claim in lingering:
            job = sd.matches.fitting_job(claim.submitter, claim.slot_ad, now)
            if job is not None and _wastes(claim.slot_ad, job):
                continue  # a slot carved for a bigger job: free it for the negotiator instead
            if job is not None and sd.shadows.start_job(claim, job.job_id, now, out):
                claim.linger_until, claim.held = None, False
                out.append(c.Log(f"claim on {claim.slot_name} kept idle, reused for job "
                                 f"{job.cluster_id}.{job.proc_id}"))
        if lingering and sd.queue.exists("JobStatus == 1"):
            # Jobs these claims cannot take are waiting (another user's, or bigger ones): give
            # the slots back so the negotiator can place them, as if the claims never lingered.
            for claim in lingering:
                if claim.linger_until is not None and claim.state is ClaimState.IDLE and not claim.held:
                    self._release_lingering(claim, out)

    def _release_lingering(self, claim: Claim, out: list) -> None:
        claim.linger_until, claim.held = None, False
        out.append(c.Send(claim.startd, m.ReleaseClaim(claim_id=claim.id, reason="no more jobs for this claim")))
        self.step(claim, ClaimEvent.RELEASE)

    # -- leases and watches ------------------------------------------------------------------

    def deadline(self) -> float | None:
        """The next lease end, keep-alive or end of a lingering claim."""
        times = []
        for claim in self._by_id.values():
            if claim.state is ClaimState.REQUESTED:
                continue
            times.append(claim.last_alive + claim.lease)
            if claim.alive_due is not None and not claim.watching:
                times.append(claim.alive_due)
            if claim.linger_until is not None:
                times.append(claim.linger_until)
        return min(times, default=None)

    def timers(self, now: float, out: list) -> None:
        """Leases that ran out, lingering claims whose time is up, watches due."""
        for claim in list(self._by_id.values()):
            if claim.state is ClaimState.REQUESTED:
                continue
            if now >= claim.last_alive + claim.lease:
                self.lost(claim, f"no word from {claim.startd} for the whole job lease ({claim.lease:g} s)", now, out)
                self.schedd.new_work(now)  # its job is idle again: to the negotiator now
                continue
            if claim.linger_until is not None and now >= claim.linger_until:
                if claim.state is ClaimState.IDLE:
                    self._release_lingering(claim, out)
                    continue
                claim.linger_until, claim.held = None, False
            if not claim.watching and (claim.alive_due is None or claim.alive_due <= now):
                self.watch(claim, out)

    def watch(self, claim: Claim, out: list) -> None:
        """Send the claim's next keep-alive as a watch (the startd holds its answer)."""
        seconds = watch_seconds(self.schedd.settings.alive_every(claim.lease))
        claim.watching, claim.alive_due = True, None
        out.append(Call(claim.startd, m.ClaimKeepAlive(claim_id=claim.id, watch=seconds),
                        cookie=(Answer.ALIVE, claim.id), timeout=seconds + max(30.0, seconds)))

    def keepalive_answered(self, event: CallDone | CallFailed, now: float, out: list) -> None:
        """A watch came back: answered (watch again), refused (the claim is gone), closed or silent."""
        claim = self._by_id.get(event.cookie[1])
        if claim is None:
            return
        claim.watching = False
        if getattr(event, "reply", None) is not None:
            claim.last_alive = now
            if claim.broken_at is not None:
                out.append(c.Log(f"claim on {claim.slot_name}: {claim.startd} answers again; watching it again"))
                claim.broken_at = None
            if claim.disconnected:
                claim.disconnected = False
                job = self._running_job(claim)
                if job is not None:
                    out += ul.write(job, ul.reconnected_event(job, claim.slot_name, claim.startd, now))
            self.watch(claim, out)
        elif event.refused:
            why = f"{claim.startd} no longer holds the claim ({event.error})"
            if claim.broken_at is not None:
                self._startd_gone(claim, f"the startd restarted: {why}", now, out)
            else:
                self.lost(claim, why, now, out)
        elif event.code == "closed" and claim.broken_at is None:
            # The startd closed the connection of the held watch without answering: it died (and
            # its starters with it) or the connection broke. Ask again at once to tell which.
            claim.broken_at = now
            out.append(c.Log(f"claim on {claim.slot_name}: {claim.startd} closed the claim's watch; asking again"))
            self.watch(claim, out)
        elif event.code == "closed" and now - claim.broken_at < self.schedd.settings.reconnect_retry:
            # Asked again on a pooled connection to the same dead startd, whose end closed with
            # the rest: each such connection is dropped when it fails, so ask again at once.
            self.watch(claim, out)
        elif event.code == "unreachable" and claim.broken_at is not None:
            self._startd_gone(claim, f"{claim.startd} closed the claim's watch and nobody listens at its address "
                                     f"any more ({event.error})", now, out)
        else:
            # Silence (a hung or cut-off host): the job may still run there; asked again until
            # the lease ends (timers), the job disconnected meanwhile, as HTCondor's shadow has it.
            self._disconnect(claim, f"{claim.startd} does not answer ({event.error})", now, out)
            claim.alive_due = now + self.schedd.settings.reconnect_retry

    def _running_job(self, claim: Claim):
        """The queue's record of the job a shadow runs on ``claim``, or None."""
        sd = self.schedd
        shadow = sd.shadows.get(claim.job) if claim.job is not None else None
        return sd.job(shadow.job_id) if shadow is not None and shadow.claim_id == claim.id else None

    def _disconnect(self, claim: Claim, reason: str, now: float, out: list) -> None:
        """Write JOB_DISCONNECTED for the job on ``claim`` (once per disconnection)."""
        if claim.disconnected:
            return
        job = self._running_job(claim)
        if job is None:
            return
        claim.disconnected = True
        out.append(c.Log(f"claim on {claim.slot_name}: job {claim.job} disconnected: {reason}; waiting up to "
                         f"the job lease ({claim.lease:g} s) for {claim.startd}"))
        out += ul.write(job, ul.disconnected_event(job, reason, claim.slot_name, claim.startd, now))

    def _startd_gone(self, claim: Claim, why: str, now: float, out: list) -> None:
        """The startd that held ``claim`` is gone, and the job on it with it: say so in the job's
        log as HTCondor's shadow does (disconnected, then the reconnect failed) and end the run."""
        self._disconnect(claim, "the connection to the startd closed", now, out)
        self.lost(claim, why, now, out)
        self.schedd.new_work(now)  # its work is idle again: to the negotiator now, not SCHEDD_MIN_INTERVAL later

    def released(self, event: c.Received, msg: m.ReleaseClaim, now: float, out: list) -> None:
        """The startd ended one of our claims (owner back, drain, lease): use it no more."""
        out.append(c.Reply(event.conn_id, m.Ack()))
        claim = self._by_id.get(msg.claim_id)
        if claim is None:
            return
        claim.ended_by_startd = True
        out.append(c.Log(f"{claim.startd} ended the claim on {claim.slot_name}: {msg.reason or 'no reason given'}"))
        if claim.state is ClaimState.IDLE:
            self.step(claim, ClaimEvent.LOST)
        # An active claim waits for its job's exit report; a keep-alive answered not_found ends
        # the run if that report never comes.

    def lost(self, claim: Claim, why: str, now: float, out: list) -> None:
        """``claim`` is gone: the lane or the run on it ends, and it leaves the book."""
        sd = self.schedd
        sd.lanes.claim_lost(claim, why, now, out)
        shadow = sd.shadows.get(claim.job) if claim.job is not None else None
        if shadow is not None and shadow.claim_id == claim.id:
            sd.shadows.end_run(shadow, "lost", now, out, reason=why)  # frees the claim too
        if claim.id in self._by_id:
            out.append(c.Log(f"claim on {claim.slot_name} lost: {why}"))
            self.step(claim, ClaimEvent.LOST)


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
