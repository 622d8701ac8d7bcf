"""What the schedd does for tools that submit jobs and read the queue: submit and query.

(Acting on jobs -- rm, hold, release, vacate, suspend, edit -- is :mod:`htc.daemons.schedd.actions`;
who may do what, :mod:`htc.daemons.schedd.access`.)

Theory of operation
-------------------
Every request is answered only after the queue change it asks for is committed; its user-log
events are written after that commit and before the reply, so a tool that sees the reply can
read the events.

Submit comes in two shapes, both in the one ``Submit`` message:

* **ads**: a cluster ad and one ad per proc, as a tool that expanded the submit description
  itself sends them. The schedd assigns the ClusterId and ProcIds and sets what only it may
  set (Owner, User, QDate, EnteredCurrentStatus, a default JobLeaseDuration).
* **a submit description**: a cluster ad holding ``SubmitDescription`` (the text),
  ``SubmitIwd`` (the submit directory) and optionally ``SubmitFile`` (its name, for
  messages), with one empty proc ad. The schedd expands it itself -- as HTCondor's factory
  clusters carry their submit digest -- so ``$(Cluster)`` is the real id and a malformed
  description is answered with ``bad_request`` naming the file, line and command; nothing is
  queued.

The owner of submitted jobs is the peer the socket names, never what the ads claim
(:mod:`htc.daemons.schedd.access`).

Before anything is built or stored, a submit is held against MAX_JOBS_PER_SUBMISSION (jobs one
submit adds), MAX_JOBS_PER_OWNER (the owner's jobs in the queue, plus these) and
MAX_JOBS_SUBMITTED (all jobs in the queue, plus these), as HTCondor's schedd does proc by proc;
a description's procs are counted from its queue statements without building one, so
``queue 100000000`` is refused at once with condor_submit's words ("Number of submitted jobs
would exceed MAX_JOBS_PER_SUBMISSION").
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from htc.classad import ClassAd, ClassAdParseError, ExprTree
from htc.classad.lexer import KEYWORDS
from htc.config.hostname import sinful
from htc.daemons import core as c
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.access import Denied, denied_log
from htc.daemons.schedd.adtexts import split_ad_text
from htc.daemons.schedd.owed import owe
from htc.daemons.schedd.shadow import ad_text
from htc.errors import UsageError
from htc.jobqueue import JobStatus
from htc.jobqueue.ads import quote
from htc.jobqueue.expr import job_classad
from htc.jobqueue.promises import submission_digest
from htc.wire import messages as m
from htc.wire.private import is_private, may_read_private, public

__all__ = ["DESCRIPTION_ATTRS", "SCHEDD_SETS", "Denied", "LimitExceeded", "ToolRequests", "description_message", "texts_of"]

#: attributes only the schedd sets on submitted ads (compared lower-case)
SCHEDD_SETS = frozenset({"clusterid", "procid", "owner", "user", "qdate", "enteredcurrentstatus"})
#: attributes of a submit-description cluster ad
DESCRIPTION_ATTRS = ("SubmitDescription", "SubmitIwd", "SubmitFile")


class LimitExceeded(UsageError):
    """A submit would pass MAX_JOBS_PER_SUBMISSION, MAX_JOBS_PER_OWNER or MAX_JOBS_SUBMITTED."""


#: the limits a submit must stay under, in the order HTCondor's NewCluster/NewProc test them
_LIMITS = ("MAX_JOBS_SUBMITTED", "MAX_JOBS_PER_OWNER", "MAX_JOBS_PER_SUBMISSION")
#: submit commands that make a cluster materialize late (only this many procs are queued at first)
_MATERIALIZE_CAPS = ("max_materialize", "max_idle", "materialize_max_idle")
_PLAIN_COUNT = re.compile(r"\s*\d{1,10}\s*\Z")


class _AdsCluster:
    """A cluster given as ads, in the shape ``JobQueue.submit`` takes."""

    def __init__(self, cluster_id: int, cluster_ad: dict[str, str], procs: list[dict[str, str]]):
        self.cluster_id = cluster_id
        self.cluster_ad = cluster_ad
        self.num_procs = len(procs)
        self._procs = procs

    def proc_ads(self, start: int = 0, stop: int | None = None):
        """Each proc's own attributes, ProcId included, for procs ``start`` to ``stop - 1``."""
        stop = self.num_procs if stop is None else min(stop, self.num_procs)
        for i in range(start, stop):
            yield {**self._procs[i], "ProcId": str(i)}


def texts_of(ad_text_: str, what: str) -> dict[str, str]:
    """A wire ClassAd as ``{attribute: expression text}``.

    Raises:
        UsageError: the text is not a ClassAd (names ``what``).
    """
    cached = _PARSED.get(ad_text_)
    if cached is not None:
        return dict(cached)
    if _PLAIN_AD.match(ad_text_):  # what an executor sends per call: names set to plain strings
        pairs = _PLAIN_ATTR.findall(ad_text_)
        names = {name.lower() for name, _ in pairs}
        if len(names) == len(pairs) and names.isdisjoint(KEYWORDS):
            return dict(pairs)
    texts = split_ad_text(ad_text_)  # the values seen before are not parsed again
    if texts is None:
        try:
            ad = ClassAd(ad_text_)
        except ClassAdParseError as exc:
            raise UsageError(f"the {what} is not ClassAd text: {exc}") from None
        texts = {name: ad.lookup(name).unparse() for name in ad}
    if len(ad_text_) > 200:  # a cluster ad a client sends again and again (an executor's template)
        if len(_PARSED) >= 64:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[ad_text_] = texts
    return dict(texts)


#: recently parsed long ads (text -> attribute texts), oldest first
_PARSED: dict[str, dict[str, str]] = {}
# An ad whose every attribute is a string of printable ASCII without quotes or backslashes
# (and whose names are neither repeated nor keywords): its texts are read off without the
# parser, as the parser would give them back.
_PLAIN_STRING = r'"[ !#-\[\]-~]*"'
_PLAIN_AD = re.compile(r"\[(?: *[A-Za-z_][A-Za-z0-9_]* = %s;)* *[A-Za-z_][A-Za-z0-9_]* = %s *\]\Z"
                       % (_PLAIN_STRING, _PLAIN_STRING))
_PLAIN_ATTR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*) = (%s)" % _PLAIN_STRING)


def description_message(text: str, iwd: str | os.PathLike, filename: str | None = None) -> m.Submit:
    """The Submit message asking the schedd to expand a submit description itself.

    Args:
        text: the submit description.
        iwd: the submit directory (relative paths in the description resolve against it).
        filename: the file the text came from, named in error messages.

    Returns:
        A Submit whose cluster ad carries the description (see the module docstring).

    Raises:
        UsageError: ``iwd`` is not an absolute path.
    """
    iwd = os.fspath(iwd)
    if not os.path.isabs(iwd):
        raise UsageError(f"the submit directory {iwd!r} must be an absolute path")
    attrs = {"SubmitDescription": quote(text), "SubmitIwd": quote(iwd)}
    if filename:
        attrs["SubmitFile"] = quote(filename)
    return m.Submit(cluster_ad=ad_text(attrs), proc_ads=("[ ]",))


def _materialized_at_first(num_procs: int, value) -> int:
    """How many of ``num_procs`` procs a submit queues at once.

    A late-materialization cluster (``max_materialize``, ``max_idle``) queues only that many
    at first, and it is those that HTCondor holds against the limits. ``value(name)`` gives a
    submit command's value or an ad attribute's text; only plain counts are taken as caps.
    """
    caps = [num_procs]
    for name in (*_MATERIALIZE_CAPS, "JobMaterializeLimit", "JobMaterializeMaxIdle"):
        text = value(name)
        if isinstance(text, str) and _PLAIN_COUNT.match(text):
            caps.append(int(text))
    return min(caps)


def _without(attrs: Mapping[str, str], names) -> dict[str, str]:
    return {k: v for k, v in attrs.items() if k.lower() not in names}


class ToolRequests:
    """The schedd's answers to tools that submit and query.

    Args:
        schedd: the core it belongs to (its queue, settings, access rules, lanes and claims).
    """

    def __init__(self, schedd):
        self.schedd = schedd
        #: upper bounds of the queue's job counts ("": all jobs, "@owner": one owner's); see _check_limits
        self._bounds: dict[str, int] = {}

    # -- submit ---------------------------------------------------------------------------------

    def submit(self, event: c.Received, msg: m.Submit, now: float, out: list) -> None:
        """Queue a cluster (given as ads or as a submit description) for the peer's account."""
        cluster_attrs = texts_of(msg.cluster_ad, "cluster_ad")
        owner, user = self.owner_of(event, cluster_attrs, "Submit", out)
        digest = None
        if msg.submission_id is not None:
            digest = submission_digest((msg.cluster_ad, *msg.proc_ads))
            if self._submitted_before(event, msg, owner, digest, out):
                return
        sd = self.schedd
        # The cluster, its id and its submission id: one commit, made durable before the reply by
        # the job start on a kept claim just below (its durable commit fsyncs the WAL, this
        # commit's frames first), else by the sync after it -- one fsync per submit either way.
        with sd.queue.transaction(durable=False):
            cluster = self.build(cluster_attrs, msg.proc_ads, owner, user, now, out)  # (refused: no id taken)
            jobs, logs = self.store(cluster, owner, msg.submission_id, digest, now)
            out += self.submit_events(logs)
            out.append(c.Log(f"submitted cluster {cluster.cluster_id} ({cluster.num_procs} jobs) for {user}"))
            out.append(c.Reply(event.conn_id, m.SubmitReply(cluster_id=cluster.cluster_id,
                                                            num_procs=cluster.num_procs)))
            self.take_at_once(jobs, now, out)
        self.after_submit(jobs, now, out)

    def owner_of(self, event: c.Received, cluster_attrs: Mapping[str, str], what: str, out: list) -> tuple[str, str]:
        """The owner of the jobs the peer submits, and their ``User`` attribute.

        Raises:
            Denied: the peer may not submit as the ``Owner`` its cluster ad names (logged).
        """
        sd = self.schedd
        claimed = ul.literal(cluster_attrs, "Owner")
        try:
            owner = sd.access.owner(event, claimed if isinstance(claimed, str) else None)
        except Denied as exc:
            out.append(denied_log(event, what, str(exc)))
            raise
        return owner, sd.access.user_attribute(event, owner, sd.settings.uid_domain)

    def build(self, cluster_attrs: dict[str, str], proc_ads, owner: str, user: str, now: float, out: list):
        """The cluster, with its new id, ready for :meth:`store` (nothing is stored yet).

        Raises:
            UsageError: a malformed ad or description, or a limit refuses it (:class:`LimitExceeded`).
        """
        sd = self.schedd
        if "SubmitDescription" in cluster_attrs:
            cid = sd.queue.next_cluster_id()
            cluster = self._expand_description(cluster_attrs, cid, owner, now, out)
            cluster.cluster_ad["User"] = quote(user)
        else:
            procs = [_without(texts_of(text, f"proc ad {i}"), SCHEDD_SETS) for i, text in enumerate(proc_ads)]
            cid = sd.queue.next_cluster_id()
            attrs, lease = {}, False
            for name, text in cluster_attrs.items():  # (one pass: an executor's template has sixty)
                low = name.lower()
                if low not in SCHEDD_SETS:
                    attrs[name] = text
                    lease = lease or low == "jobleaseduration"
            attrs.update(ClusterId=str(cid), Owner=quote(owner), User=quote(user), QDate=str(int(now)),
                         EnteredCurrentStatus=str(int(now)))
            if not lease:
                attrs["JobLeaseDuration"] = str(int(sd.settings.default_lease))
            self._check_limits(owner, _materialized_at_first(len(procs), attrs.get), out)
            cluster = _AdsCluster(cid, attrs, procs)
        # As HTCondor's schedd at commit: the procs of the cluster (a factory's: all it will make),
        # from which condor_q's batch view counts TOTAL and DONE once procs have left the queue.
        cluster.cluster_ad["TotalSubmitProcs"] = str(cluster.num_procs)
        return cluster

    def store(self, cluster, owner: str, submission_id: str | None, digest: str | None,
              now: float) -> tuple[list, dict[tuple[str, str], list]]:
        """Put ``cluster`` (and its submission id) in the queue, inside the caller's transaction;
        its jobs, and their SUBMIT events by log path (its log and its DAG nodes log)."""
        sd = self.schedd
        # No savepoint of its own: a failure fails the caller's block (SubmitClusters keeps
        # one per cluster around this call).
        sd.queue.submit(cluster, now=now, savepoint=False)
        if submission_id is not None:
            sd.queue.remember_submission(owner, submission_id, cluster.cluster_id, cluster.num_procs, digest, now=now)
        host = sinful(sd.settings.address, sd.settings.machine)
        by_log: dict[tuple[str, str], list] = {}
        jobs = sd.queue.cluster_jobs(cluster.cluster_id)
        for job in jobs:
            for action in ul.submit_writes(job, host, now):  # (a spooled job's log: at its input, schedd.spool)
                by_log.setdefault((action.path, owner), []).extend(action.events)
        return jobs, by_log

    def submit_events(self, by_log: dict[tuple[str, str], list]) -> list:
        """The SUBMIT events of :meth:`store` (``(path, owner) -> events``, merged over clusters:
        one write per log), owed in the queue's outbox with the clusters
        (:mod:`htc.daemons.schedd.owed`); inside the transaction."""
        return owe(self.schedd.queue, [ul.WriteUserLog(path, tuple(events), owner)
                                       for (path, owner), events in by_log.items()])

    def take_at_once(self, jobs: list, now: float, out: list) -> None:
        """Inside the new clusters' transaction: the claim-reuse orders take the jobs in, and the
        calls that lanes take at once start in the same commit (one commit, the pages of both
        written to the WAL once, made durable by :meth:`after_submit`'s one sync)."""
        sd = self.schedd
        sd.matches.add_submitted(jobs, now)   # the claim-reuse orders take them in (or are forgotten)
        for job in jobs:
            sd.lanes.enqueue(job)
        sd.lanes.feed_all(now, out)

    def after_submit(self, jobs: list, now: float, out: list) -> None:
        """After the commit of new clusters (and :meth:`take_at_once` in it): start what kept
        claims can take, make the commit durable, and tell the negotiator of idle work."""
        sd = self.schedd
        try:
            sd.claims.use_lingering(now, out)
        finally:
            sd.queue.sync()  # durable before the reply and the SUBMIT events go out (nothing left if a start did it)
        idle = []
        if sd.lanes.all_in_flight(jobs):
            pass  # every job is a call its lane took in the clusters' commit: none is idle (no count to ask)
        elif any(sd.queue.cluster_count(cid, JobStatus.IDLE) for cid in sorted({job.cluster_id for job in jobs})):
            idle = [job for job in map(sd.job, (j.job_id for j in jobs)) if job is not None and job.status == JobStatus.IDLE]
        if idle and sd.matches.negotiator_has_such(idle):
            sd.adverts.changed()  # like jobs wait unplaced already: no cycle for these (Matches.negotiator_has_such)
        elif idle:
            sd.new_work(now, reuse_order_kept=True)  # the negotiator hears of the new jobs within milliseconds
        else:
            # Every job started at once (a call on a lane, a node on a kept claim): no idle work
            # for the negotiator, so the ads follow at the queue-changed pace (SCHEDD_MIN_INTERVAL)
            # instead of a Submitter and a Scheduler ad to the collector for every call.
            sd.adverts.changed()

    def _submitted_before(self, event: c.Received, msg: m.Submit, owner: str, digest: str, out: list) -> bool:
        """A Submit sent again (its reply was lost): answer the original SubmitReply, queue nothing."""
        known = self.schedd.queue.find_submission(owner, msg.submission_id)
        if known is None:
            return False
        cid, num_procs, was = known
        if was != digest:
            raise UsageError(f"submission id {msg.submission_id!r} already named other jobs of {owner} (cluster "
                             f"{cid}); a new submission needs a new id")
        out.append(c.Log(f"submission {msg.submission_id} of {owner} came again: answered with its cluster {cid}"))
        out.append(c.Reply(event.conn_id, m.SubmitReply(cluster_id=cid, num_procs=num_procs)))
        return True

    def _expand_description(self, attrs: Mapping[str, str], cid: int, owner: str, now: float,
                            out: list | None = None):
        """Expand a submit description into a cluster (see the module docstring).

        The procs are counted before any is built, and the limits are checked on that count
        (:meth:`_check_limits`): ``queue 100000000`` is refused in milliseconds.

        Raises:
            UsageError: the description is malformed (a ``SubmitError`` naming file, line and
                command) or a limit refuses it (:class:`LimitExceeded`).
        """
        from htc.submit import Submit  # the submit language is only needed for this shape

        text = ul.literal(attrs, "SubmitDescription")
        iwd = ul.literal(attrs, "SubmitIwd")
        filename = ul.literal(attrs, "SubmitFile")
        if not isinstance(text, str) or not isinstance(iwd, str) or not os.path.isabs(iwd):
            raise UsageError("a submit-description cluster needs SubmitDescription (the text) and SubmitIwd "
                             "(the absolute submit directory) as string literals")
        # host_access=False: the schedd runs as root, so a user's description may not make it
        # read a file (include : /etc/shadow), list a directory or run a command for it
        sub = Submit(text, filename=filename if isinstance(filename, str) else None, cwd=iwd, env={},
                     host_access=False, settings=self.schedd.settings.submit)
        if not sub.has_queue_statement:
            raise UsageError(f'"{filename or "the submit description"}" doesn\'t contain any "queue" commands -- '
                             "no jobs queued; end the description with 'queue'")

        def check(num_procs: int) -> None:
            self._check_limits(owner, _materialized_at_first(num_procs, sub.expand), out, num_procs)

        return sub.cluster(cid, qdate=int(now), owner=owner, check=check)

    def _check_limits(self, owner: str, num_procs: int, out: list | None = None,
                      all_procs: int | None = None) -> None:
        """Refuse a submit of ``num_procs`` jobs that would pass a queue limit, as HTCondor does.

        HTCondor's schedd tests, before each new proc: the queue's jobs plus those added so far
        against MAX_JOBS_SUBMITTED, the owner's jobs plus those added against MAX_JOBS_PER_OWNER,
        and the jobs added against MAX_JOBS_PER_SUBMISSION; the first proc that would pass one
        fails the whole submit. The same outcome is reached here from the count alone, before
        any proc is built. Jobs in the queue in any state count, as in HTCondor.

        The counts are ``COUNT(*)`` queries (5-10 ms each with 100,000 jobs queued), so they
        are remembered as upper bounds -- jobs enter the queue only through a submit, which
        adds its procs (``all_procs``: a late-materialization cluster's whole count) to the
        bounds, and leave it only -- and queried again only when a bound plus this submit
        would reach a limit. A bound is never below the truth, so no submit over a limit passes.

        Raises:
            LimitExceeded: with condor_submit's words ("Number of submitted jobs would exceed
                MAX_JOBS_PER_SUBMISSION") and the figures; the refusal is also logged.
        """
        s, queue = self.schedd.settings, self.schedd.queue
        bounds = self._bounds
        total, owned = bounds.get(""), bounds.get("@" + owner)
        if total is None or total + num_procs > s.max_jobs_submitted:
            total = bounds[""] = queue.count()
        if owned is None or owned + num_procs > s.max_jobs_per_owner:
            owned = bounds["@" + owner] = queue.count(f"Owner == {quote(owner)}")
        held = {"MAX_JOBS_SUBMITTED": (total, s.max_jobs_submitted),
                "MAX_JOBS_PER_OWNER": (owned, s.max_jobs_per_owner),
                "MAX_JOBS_PER_SUBMISSION": (0, s.max_jobs_per_submission)}
        # the proc that would fail each test is the room left under it; the earliest one fails
        failing = [(max(limit - now, 0), order, knob) for order, (knob, (now, limit)) in
                   enumerate((k, held[k]) for k in _LIMITS)
                   if num_procs > limit - now or (knob == "MAX_JOBS_SUBMITTED" and now >= limit)]
        if not failing:
            added = num_procs if all_procs is None else max(all_procs, num_procs)
            bounds[""], bounds["@" + owner] = total + added, owned + added
            return
        _, _, knob = min(failing)
        now_, limit = held[knob]
        if knob == "MAX_JOBS_PER_SUBMISSION":
            figures = f"this submission makes {num_procs} jobs and the limit is {limit}"
            advice = "submit fewer jobs at a time"
        elif knob == "MAX_JOBS_PER_OWNER":
            figures = (f"{owner} has {now_} jobs in the queue, {num_procs} more would make "
                       f"{now_ + num_procs} and the limit is {limit}")
            advice = "remove jobs you no longer need, or wait for some to leave the queue"
        else:
            figures = (f"the queue holds {now_} jobs, {num_procs} more would make {now_ + num_procs} "
                       f"and the limit is {limit}")
            advice = "wait for jobs to leave the queue"
        if out is not None:
            out.append(c.Log(f"submit by {owner} refused: {knob} exceeded ({figures})"))
        raise LimitExceeded(f"Number of submitted jobs would exceed {knob}: {figures}; {advice}. "
                            "No jobs were queued.")

    # -- query ----------------------------------------------------------------------------------

    def query(self, event: c.Received, msg: m.QueryJobs, now: float, out: list) -> None:
        """Answer QueryJobs: the matching ads, without their private attributes (ClaimId).

        A constraint that could read a private attribute is evaluated on the stripped ads, so it
        cannot reveal a claim id bit by bit (:mod:`htc.wire.private`).
        """
        queue, projection = self.schedd.queue, list(msg.projection) or None
        if msg.constraint and may_read_private(msg.constraint):
            try:
                test = ExprTree(msg.constraint)
            except ClassAdParseError as exc:
                raise UsageError(f"the constraint is not a ClassAd expression: {exc}") from None
            jobs = []
            for job in queue.query(None, now=now):
                ad = job_classad(job, now)
                for name in [n for n in ad if is_private(n)]:
                    del ad[name]
                value = test.eval(ad)
                if value is True or (type(value) in (int, float) and value != 0):
                    jobs.append({k: job[k] for k in projection if k in job} if projection else job)
                    if msg.limit is not None and len(jobs) >= msg.limit:
                        break
        else:
            jobs = queue.query(msg.constraint or None, projection=projection, limit=msg.limit, now=now)
        ads = tuple(ad_text(public(dict(job.items()))) for job in jobs)
        out.append(c.Reply(event.conn_id, m.AdsReply(ads=ads)))
