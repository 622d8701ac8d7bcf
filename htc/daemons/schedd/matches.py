"""The schedd's side of negotiation: which jobs it offers, which job a match or a reused claim gets.

Theory of operation
-------------------
The negotiator asks for one submitter's idle work (GetResourceRequests); the schedd answers
with its autoclusters (:class:`~htc.daemons.autocluster.AutoclusterTable`, keyed by the
significant attributes the negotiator names), best job first, and remembers which jobs stood
behind each autocluster. A match (MatchNotify) names the autocluster; the schedd picks its
next idle job that no other claim is waiting for, *reserves* it, and asks the startd for the
claim (RequestClaim; the startd re-checks START). A partitionable slot answers with the claim
of the dynamic slot it carved, which the schedd adopts (:mod:`htc.daemons.schedd.claims`).
A cycle sends a schedd thousands of matches, so each costs about the same whatever their number:
the reserved jobs are set aside from the front of their autocluster's list (one whose claim is
refused goes back to its place), and the slot ad of a match is parsed only when read (the claim
keeps its text): whether the slot is partitionable is known from the first text of its kind
(the same text but for the values of its literal attributes: a partitionable slot's carves,
which differ in their sizes; the slots of one kind, in their names).

When a claim is reused (its job ended, or it was kept idle), :meth:`Matches.fitting_job`
names the next job for it: candidates come from a per-submitter list in the order the schedd
offers jobs (JobPrio, then the oldest), built from one query of the queue and consumed from
the front as jobs start -- like HTCondor's PrioRec array -- so that finishing each of N jobs
does not scan the N idle ones again. New clusters join the end of the list when none of their
jobs outranks its last job (:meth:`Matches.add_submitted`: a DAG submitting while many of its
nodes wait); other new work (a release, an edit, a job back to Idle, a submit that outranks)
discards the list (:meth:`Matches.forget_reuse_order`); the next reuse builds it afresh.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import deque

from htc.classad import ClassAd
from htc.classad.match import symmetric_match
from htc.daemons import core as c
from htc.daemons.autocluster import AutoclusterTable
from htc.daemons.calls import Call
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.ads import submitter_of
from htc.daemons.schedd.claims import Claim
from htc.daemons.schedd.events import Answer
from htc.daemons.schedd.local_jobs import is_local
from htc.daemons.schedd.shadow import ad_text
from htc.daemons.schedd.states import ClaimState
from htc.jobqueue import JobStatus
from htc.jobqueue.ads import JobAd
from htc.jobqueue.expr import GroupedEvaluator, job_classad
from htc.jobqueue.records import JobId
from htc.wire import messages as m

__all__ = ["Matches", "Offered", "Reserved", "public_ad", "public_ad_text"]

#: idle candidates a reused claim tries at most (HTCondor gives up on reuse sooner still)
_MAX_TRIED = 200

#: a line ``Name = <number>;`` of a slot ad text: a decimal integer or real literal (group 2);
#: the line end before it is matched (the regex looks for it, not for ``^`` at every character).
#: (Possessive: what a part takes is never given back, as giving it back could not make the line
#: match -- the next character would be a name's, a digit or the exponent's -- and the regex
#: does not try: a fifth of its work on a slot ad.)
_NUMBER = r"(?:0|[1-9][0-9]{0,17}+)(?:\.[0-9]{1,20}+(?:[eE][+-]?[0-9]{1,3}+)?+)?+"
_NUMBER_LINE = re.compile(r"\n([ \t]*+[A-Za-z_][A-Za-z0-9_]*+ = )(" + _NUMBER + r")(?=;)")

#: the same, or ``Name = "<printable ASCII but quote and backslash>";`` but for SlotType
_LITERAL_LINE = re.compile(r"\n([ \t]*+(?!(?i:slottype) =)[A-Za-z_][A-Za-z0-9_]*+ = )("
                           + _NUMBER + r'|"[ !#-\[\]-~]*+")(?=;)')

#: a string within a line (:func:`_plain`)
_QUOTED = re.compile(r'"[^"\n]*"')

#: the answer to a match taken (one frozen message for them all)
_TAKEN = m.Ack(detail="")

#: slot ad texts whose kind (partitionable or not) the matches remember (then they start afresh)
_SLOT_KINDS_KEPT = 4096


class Reserved(set):
    """The jobs a claim is being made for (:attr:`htc.daemons.schedd.core.Schedd.reserved`): a
    set whose :meth:`discard` and :meth:`remove` also tell ``on_discard`` (the matches put a job
    they had set aside back among the offered ones). Only these two take jobs out of it."""

    def __init__(self):
        super().__init__()
        self.on_discard = _ignore

    def discard(self, job_id) -> None:
        if job_id in self:
            super().discard(job_id)
            self.on_discard(job_id)

    def remove(self, job_id) -> None:
        super().remove(job_id)
        self.on_discard(job_id)


def _ignore(job_id) -> None:
    """No one follows the reservations yet (a :class:`Reserved` before its matches exist)."""


class Offered:
    """One autocluster's jobs offered to the negotiator, in the schedd's order, read from
    ``head`` on; ``back`` holds (a heap) the places before ``head`` of jobs set aside while
    reserved and whose reservation has ended since (:meth:`Matches._waiting_offered`);
    ``steps`` counts the jobs looked at."""

    __slots__ = ("ids", "head", "back", "steps")

    def __init__(self, ids: list[JobId]):
        self.ids = ids
        self.head = 0
        self.back: list[int] = []
        self.steps = 0

    def __bool__(self) -> bool:
        return bool(self.back) or self.head < len(self.ids)


class Matches:
    """What the schedd offered the negotiator, and the jobs it gives matched or reused claims.

    Args:
        schedd: the core it belongs to (its queue, settings, reserved jobs, claims).
    """

    def __init__(self, schedd):
        self.schedd = schedd
        self.offers: dict[str, dict[int, Offered]] = {}  # submitter -> autocluster -> jobs offered
        self._aside: dict[JobId, tuple[Offered, int]] = {}  # reserved offered jobs, set aside (_waiting_offered)
        schedd.reserved.on_discard = self._unreserved
        self.reuse_order: dict[str, deque[JobId]] = {}       # claim reuse candidates, best first
        self._order_floor: dict[str, float] = {}             # the priority of each order's last job
        self.autoclusters = AutoclusterTable()
        self._carves = 0  # claim requests made on partitionable slots (their keys until granted)
        self._slot_kinds: dict[tuple[str, ...], bool] = {}  # slot ad texts, sizes left out -> partitionable

    def idle_jobs_of(self, submitter: str, now: float, ordered: bool = True) -> list:
        """The submitter's idle jobs that no claim is being made for (never a scheduler- or
        local-universe job)."""
        sd = self.schedd
        uid_domain = sd.settings.uid_domain
        return [job for job in sd.queue.idle_jobs(now=now, ordered=ordered)
                if job.job_id not in sd.reserved and submitter_of(job, uid_domain) == submitter
                and not is_local(job)]  # scheduler/local universe: the schedd runs them itself

    # -- the negotiator's questions ---------------------------------------------------------

    def resource_requests(self, event: c.Received, msg: m.GetResourceRequests, now: float, out: list) -> None:
        """Answer GetResourceRequests: the submitter's idle work by autocluster."""
        table = self.autoclusters
        table.set_significant(msg.significant_attributes)
        jobs = sorted(self.idle_jobs_of(msg.submitter, now, ordered=False),
                      key=lambda j: (-j.prio, j.qdate, j.cluster_id, j.proc_id))  # the schedd's job order
        groups = table.ids_by_cluster(jobs)
        self.offers[msg.submitter] = {ac: Offered([job.job_id for job in members]) for ac, members in groups.items()}
        wire = tuple(m.ResourceRequest(autocluster_id=ac, count=len(members), job_ad=ad_text(public_ad(members[0])))
                     for ac, members in groups.items())
        out.append(c.Reply(event.conn_id, m.ResourceRequests(submitter=msg.submitter, requests=wire)))
        self.schedd.flocking.asked(msg.submitter, msg.pool, (job.job_id for job in jobs), now, out)

    def match(self, event: c.Received, msg: m.MatchNotify, now: float, out: list) -> None:
        """Answer MatchNotify: claim the slot for a job, or say that the match lapses."""
        lapsed = self._take_match(msg, now, out)
        # A match this schedd does not take is said so in the answer: the negotiator then stops
        # holding the slot back for it (else a partitionable slot's carve stays given away
        # until NEGOTIATOR_TIMEOUT passes or the startd reports, minutes with UPDATE_INTERVAL).
        out.append(c.Reply(event.conn_id, m.Ack(detail=f"{m.MATCH_LAPSED}{lapsed}") if lapsed else _TAKEN))

    def _take_match(self, msg: m.MatchNotify, now: float, out: list) -> str | None:
        """Claim the matched slot for a job; why the match lapses instead (None: taken)."""
        sd = self.schedd
        slot, partitionable = self._slot_of(msg.slot_ad)
        key = msg.claim_id
        if partitionable:
            # Every carve of a partitionable slot in a cycle carries the slot's one claim id;
            # each is a claim request of its own until the startd names the dynamic slot.
            self._carves += 1
            key = f"{msg.claim_id}#carve{self._carves}"
        elif key in sd.claims:
            return None  # the same match told twice
        job, slot = self._job_for_match(msg, slot, now)
        if job is None:
            out.append(c.Log(f"match of {msg.slot_name} for {msg.submitter}: no idle job left for it; "
                             "the match lapses"))
            return "no idle job left for it"
        settings = sd.settings
        # (claims being requested are among all claims: counting them, a walk of every claim,
        # is needed only when all claims could reach the limit)
        running = len(sd.shadows)
        if (running + len(sd.claims) >= settings.max_jobs_running
                and running + sd.claims.counts()[ClaimState.REQUESTED] >= settings.max_jobs_running):
            out.append(c.Log(f"match of {msg.slot_name}: MAX_JOBS_RUNNING ({settings.max_jobs_running}) "
                             "reached; the match lapses"))
            return f"MAX_JOBS_RUNNING ({settings.max_jobs_running}) reached"
        lease = ul.number(job, "JobLeaseDuration", settings.default_lease) or settings.default_lease
        claim = Claim(key, msg.startd_address, msg.submitter, msg.slot_name, slot,
                      ClaimState.REQUESTED, lease, now, job=job.job_id, pool=sd.flocking.pool_name(msg.pool))
        sd.claims.add(claim)
        sd.reserved.add(job.job_id)
        out.append(Call(msg.startd_address, m.RequestClaim(
            claim_id=msg.claim_id, schedd_name=settings.name, schedd_address=settings.address,
            submitter=msg.submitter, job_ad=public_ad_text(job), lease_duration=lease),
            cookie=(Answer.CLAIM, key), timeout=settings.request_claim_timeout))
        return None

    def _slot_of(self, text: str) -> tuple[ClassAd | str, bool]:
        """A match's slot ad, and whether its slot is partitionable: the ad parsed, or its text
        when a text like it (:func:`_kind_key`) was parsed before (a claim parses it if it reads
        it). The matches of a cycle come from a few kinds of slots: all but the first of each
        are not parsed here."""
        key = _kind_key(text)
        kind = self._slot_kinds.get(key)
        if kind is not None:
            return text, kind
        ad = ClassAd(text)
        kind = _partitionable(ad)
        if len(self._slot_kinds) >= _SLOT_KINDS_KEPT:
            self._slot_kinds.clear()
        self._slot_kinds[key] = kind
        return ad, kind

    def _job_for_match(self, msg: m.MatchNotify, slot: ClassAd | str, now: float):
        """The job for a match, and its slot's ad (parsed here if it had to be read)."""
        job = self._waiting_offered(self.offers.get(msg.submitter, {}).get(msg.autocluster_id))
        if job is not None:
            return job, slot
        slot_ad = slot if isinstance(slot, ClassAd) else ClassAd(slot)
        return self.fitting_job(msg.submitter, slot_ad, now), slot_ad

    def _waiting_offered(self, offered: Offered | None):
        """The first job of an autocluster's ``offered`` jobs that is still idle and unreserved
        (None: none is). Jobs met at the front that are no longer idle (started, held, gone) are
        dropped, so that asking again after each of N jobs started does not look at the started
        ones again (a wide DAG asks at every submission: N^2 queue reads otherwise). A dropped job
        that becomes idle again is offered afresh by the next request, and meanwhile a match takes
        it through :meth:`fitting_job` and a new submission does not count on it (a cycle, the
        cautious answer). Reserved jobs met at the front are set aside (a cycle's matches reserve
        one job each, and looking at every reserved one again at each match makes a cycle's cost
        grow with the square of its matches); one whose reservation ends while it is still set
        aside (its claim refused) goes back to its place, and is found there again."""
        if not offered:
            return None
        sd = self.schedd
        reserved = sd.reserved
        ids, back = offered.ids, offered.back
        while True:
            if back:  # jobs back from a reservation: all before the head
                i = back[0]
            elif offered.head < len(ids):
                i = offered.head
            else:
                return None
            offered.steps += 1
            job_id = ids[i]
            if job_id in reserved:
                self._aside[job_id] = (offered, i)  # until its reservation ends (_unreserved)
            else:
                job = sd.job(job_id)
                if job is not None and job.status == JobStatus.IDLE:
                    return job
            if back:
                heapq.heappop(back)
            else:
                offered.head += 1

    def _unreserved(self, job_id: JobId) -> None:
        """``job_id``'s reservation ended (its claim refused, or it started): a job set aside
        by :meth:`_waiting_offered` goes back to its place among its autocluster's offered jobs."""
        aside = self._aside.pop(job_id, None)
        if aside is not None:
            offered, i = aside
            heapq.heappush(offered.back, i)

    # -- reuse --------------------------------------------------------------------------------

    def fitting_job(self, submitter: str, slot_ad: ClassAd, now: float):
        """The submitter's best idle, unreserved job that matches ``slot_ad`` (None: none does).

        At most 200 idle candidates are tried (HTCondor gives up on reuse sooner still).
        """
        sd = self.schedd
        order = self.reuse_order.get(submitter)
        if order is None:
            jobs = self.idle_jobs_of(submitter, now)
            order = self.reuse_order[submitter] = deque(job.job_id for job in jobs)
            self._order_floor[submitter] = _prio(self.schedd.queue, jobs[-1], now) if jobs else math.inf
        front = None  # the idle job at the front of ``order``, read once
        while order and order[0] not in sd.reserved:
            front = sd.job(order[0])
            if front is not None and front.status == JobStatus.IDLE:
                break
            front = None
            order.popleft()  # started, held or gone: never a candidate again
        tried = 0
        for job_id in order:
            if job_id in sd.reserved:
                continue  # a claim is being made for it
            job = front if front is not None and job_id == order[0] else sd.job(job_id)
            if job is None or job.status != JobStatus.IDLE:
                continue
            if symmetric_match(job_classad(job), slot_ad):
                return job
            tried += 1
            if tried >= _MAX_TRIED:
                break
        return None

    def negotiator_has_such(self, jobs) -> bool:
        """True when every one of ``jobs`` (new idle jobs) is of an autocluster that the
        negotiator was offered in its last request for the job's submitter and could not place
        entirely (a job offered in it is still idle and unclaimed): a cycle for the new ones
        would find no slot either. They wait behind those, and start as running jobs end and
        their claims are reused (:meth:`fitting_job`) or at the next regular cycle -- so a DAG
        submitting one node per job end does not bring a negotiation cycle, and a query of all
        its idle nodes, per node."""
        uid_domain = self.schedd.settings.uid_domain
        by_submitter: dict[str, list] = {}
        for job in jobs:
            by_submitter.setdefault(submitter_of(job, uid_domain), []).append(job)
        for submitter, members in by_submitter.items():
            offered = self.offers.get(submitter)
            if not offered:
                return False
            for ac in self.autoclusters.ids_by_cluster(members):
                if self._waiting_offered(offered.get(ac)) is None:
                    return False
        return bool(by_submitter)

    def forget_reuse_order(self, submitter: str | None = None) -> None:
        """Jobs became idle or changed priority: the next reuse queries the queue again."""
        if submitter is None:
            self.reuse_order.clear()
            self._order_floor.clear()
        else:
            self.reuse_order.pop(submitter, None)
            self._order_floor.pop(submitter, None)

    def add_submitted(self, jobs, now: float) -> None:
        """New clusters' idle jobs join the reuse orders kept, instead of the orders being built
        again from the whole queue at the next reuse (a DAG submits while a thousand of its nodes
        wait: a query of them all per job end). The new clusters have the highest ids, so the
        schedd's job order puts them last among jobs of their priority: they are appended when
        none outranks the order's last job (its floor); otherwise that submitter's order is
        forgotten and built again when next needed."""
        sd = self.schedd
        uid_domain = sd.settings.uid_domain
        new: dict[str, list] = {}
        for job in jobs:
            if job.status == JobStatus.IDLE and not is_local(job):
                new.setdefault(submitter_of(job, uid_domain), []).append(job)
        for submitter, members in new.items():
            order = self.reuse_order.get(submitter)
            if order is None:
                continue  # built from the queue, new jobs included, when a claim is next reused
            keyed = sorted(((_prio(sd.queue, job, now), job) for job in members),
                           key=lambda pair: (-pair[0], pair[1].cluster_id, pair[1].proc_id))
            floor = self._order_floor.get(submitter, math.inf)
            last = max((job_id for job_id in order), default=(0, 0))
            if keyed[0][0] > floor or (keyed[0][1].cluster_id, keyed[0][1].proc_id) <= last:
                self.forget_reuse_order(submitter)  # a new job outranks one already in the order
                continue
            order.extend(job.job_id for _, job in keyed)
            self._order_floor[submitter] = keyed[-1][0]


def _prio(queue, job, now: float) -> float:
    """``job``'s place in the schedd's job order: its SCHEDD_JOB_PRIO_EXPR value (-inf if not a
    number, as :meth:`~htc.jobqueue.JobQueue.idle_jobs` sorts it)."""
    value = GroupedEvaluator(queue.prio_expr, now).value(job)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else -math.inf


def _kind_key(text: str) -> tuple[object, ...]:
    """A slot ad text without the literal values of its ``Name = <literal>;`` lines: texts with
    the same key parse alike (or fail alike) and are of the same kind, partitionable or not.

    A decimal number there, replaced by another, stays a number token in code, and digits in
    a string or a comment (nothing an escape, a quote or a comment's end can be made of, next
    to a space and a semicolon). When the text is :func:`_plain` each line starts in code, so
    a string of printable ASCII without quote or backslash there, replaced by another, stays a
    string token too. Whether the slot is partitionable reads the ad's PartitionableSlot and
    SlotType unevaluated: the first counts only as the literal true (never a number or a
    string), and a SlotType string is never left out; a SlotType with a number left out holds
    digits, never the word partitionable. So the carves of a partitionable slot (the same text
    but their sizes) and the slots of one kind (other names and addresses) share a key."""
    plain = _plain(text)
    parts = (_LITERAL_LINE if plain else _NUMBER_LINE).split("\n" + text)  # (every line after a line end)
    parts[2::3] = [""] * (len(parts) // 3)  # (split: text, prefix, literal, text, ...)
    return (plain, *parts)


def _plain(text: str) -> bool:
    """True when every line of ``text`` starts in code (not in a string or a comment): it has
    no comment, no escape, no quoted name, and an even number of quotes on every line."""
    return ("\\" not in text and "/*" not in text and "//" not in text and "'" not in text
            and '"' not in _QUOTED.sub("", text))  # (quotes paired within lines: none left over)


def _partitionable(slot_ad: ClassAd) -> bool:
    return slot_ad.get("PartitionableSlot") is True or str(slot_ad.get("SlotType", "")).lower() == "partitionable"


def public_ad(job) -> dict[str, str]:
    """A stored job ad without the attributes other daemons must not see (its claim id)."""
    to_dict = getattr(job, "to_dict", None)
    if to_dict is None:
        return {k: v for k, v in job.items() if k != "ClaimId"}
    # (a JobAd's to_dict is its items, in their order, without a lookup per attribute: a
    # MatchNotify's RequestClaim carries the job's whole ad)
    ad = to_dict()
    ad.pop("ClaimId", None)
    return ad


def public_ad_text(job) -> str:
    """``ad_text(public_ad(job))``, the text of the job's ad a RequestClaim carries; a
    :class:`~htc.jobqueue.ads.JobAd` prints its cluster's part once per cluster
    (:meth:`~htc.jobqueue.ads.JobAd.text_without`)."""
    if job.__class__ is JobAd:
        return job.text_without("ClaimId")
    return ad_text(public_ad(job))
