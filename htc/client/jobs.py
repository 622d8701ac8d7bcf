"""The job tools that talk to the schedd about jobs already queued, and condor_history.

``query`` is condor_q, ``act`` is condor_rm / condor_hold / condor_release /
condor_vacate_job, ``edit`` is condor_qedit, ``set_priority`` is condor_prio, ``analyze`` is
``condor_q -better-analyze``, ``history`` is condor_history.  ``history`` needs no daemon: like
condor_history it reads the schedd's history where it is stored, the ``history`` table of the
job queue file (``JOB_QUEUE_DB``), which sqlite lets a reader share with the running schedd.

Named jobs are acted on one at a time so that each gets HTCondor's own line
(``Job 12.3 marked for removal``); clusters, owners and constraints go as one constraint
(``All jobs in cluster 12 have been marked for removal``).
"""

from __future__ import annotations

import dataclasses
import getpass
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from htc.classad import ClassAd, quote
from htc.client import request
from htc.client.analysis import JobAnalysis, PoolMatch, analyze_job, pool_match
from htc.client.request import SCHEDD, AdType
from htc.client.selection import JobSelection, check_expression
from htc.errors import HTCError, UsageError
from htc.wire import messages as m
from htc.wire.messages import JobAction
from htc.wire.transport import DEFAULT_TIMEOUT, Transport

__all__ = [
    "ActResult", "act", "analyze", "current_user", "edit", "history", "history_path", "query", "schedds",
    "set_priority", "submitter_schedds",
]


def current_user() -> str:
    """The name of the user running the tool (condor_q's default owner)."""
    return getpass.getuser()



# --- query ---------------------------------------------------------------------------------------


def query(constraint: str = "", projection: Iterable[str] = (), *, limit: int | None = None,
          transport: Transport | None = None, timeout: float = DEFAULT_TIMEOUT,
          address: str = SCHEDD) -> list[ClassAd]:
    """condor_q: the job ads in the queue for which ``constraint`` is true.

    Args:
        constraint: a ClassAd expression (empty: every job).
        projection: attributes to return (empty: whole ads).
        limit: at most this many jobs.
        transport, timeout: how to reach the schedd and how long to wait.
        address: the schedd's address (a Scheduler ad's ``MyAddress``; default: the pool's schedd).

    Returns:
        The ads, in ClusterId.ProcId order.

    Raises:
        UsageError: the constraint does not parse.
        DaemonUnreachable, RemoteError: as for :func:`~htc.client.submit`.
    """
    check_expression(constraint, "constraint")
    reply = request.send_command(address, m.QueryJobs(constraint=constraint, projection=tuple(projection),
                                                     limit=limit), transport=transport, timeout=timeout)
    return [ClassAd(text) for text in reply.ads]



def schedds(constraint: str = "", *, transport: Transport | None = None,
            timeout: float = DEFAULT_TIMEOUT) -> list[ClassAd]:
    """The Scheduler ads of the pool's collector (``condor_q -global``), by Name."""
    ads = request.query_collector(AdType.Schedd, constraint, transport=transport, timeout=timeout)
    return sorted(ads, key=lambda ad: str(ad.get("Name", "")))


def submitter_schedds(submitter: str, *, transport: Transport | None = None,
                      timeout: float = DEFAULT_TIMEOUT) -> list[ClassAd]:
    """The Submitter ads named ``submitter`` (``user@UID_DOMAIN``; the domain is added when
    missing, as ``condor_q -submitter`` does): one per schedd holding that user's jobs."""
    if "@" not in submitter:
        from htc.config import load_config

        submitter = f"{submitter}@{load_config().param('UID_DOMAIN')}"
    ads = request.query_collector(AdType.Submitter, f"Name == {quote(submitter)}", transport=transport,
                                  timeout=timeout)
    return sorted(ads, key=lambda ad: str(ad.get("ScheddName", "")))


# --- acting on jobs -------------------------------------------------------------------------------


#: per action: (past tense for success, infinitive for "Permission denied to ...", what a job
#: must be doing for the action: the "not ... to be <past>" text)
_WORDS = {
    JobAction.Remove: ("marked for removal", "remove", None),
    JobAction.RemoveX: ("removed locally (remote state unknown)", "force removal of", None),
    JobAction.Hold: ("held", "hold", None),
    JobAction.Release: ("released", "release", "held"),
    JobAction.Vacate: ("vacated", "vacate", "running"),
    JobAction.VacateFast: ("fast-vacated", "fast-vacate", "running"),
    JobAction.Suspend: ("suspended", "suspend", "running"),
    JobAction.Continue: ("continued", "continue", "suspended"),
}
_ALREADY = {JobAction.Hold: "already held", JobAction.Remove: "already marked for removal",
            JobAction.Suspend: "already suspended", JobAction.Continue: "already running",
            JobAction.RemoveX: "already marked for forced removal"}


@dataclass(frozen=True)
class ActResult:
    """What an action did: HTCondor's lines, each marked as success or not."""

    action: JobAction
    #: (succeeded, condor_rm's line) in the order the jobs were named
    lines: tuple[tuple[bool, str], ...] = ()
    #: totals over every job the schedd considered
    totals: m.ActOnJobsReply = field(default_factory=m.ActOnJobsReply)

    @property
    def ok(self) -> bool:
        """True when every part of the selection was acted on."""
        return all(good for good, _ in self.lines)

    def totals_line(self) -> str:
        """condor_rm ``-totals``: ``2 Succeeded, 0 Failed, 0 Not Found, ...``."""
        t = self.totals
        return (f"{t.success} Succeeded, {t.error} Failed, {t.not_found} Not Found, {t.bad_status} Bad Status, "
                f"{t.already_done} Already Done, {t.permission_denied} Permission Denied")


def _job_line(action: JobAction, job: str, reply: m.ActOnJobsReply) -> tuple[bool, str]:
    """condor_rm's per-job line (JobActionResults::getResultString) from a one-job reply."""
    past, verb, needs = _WORDS[action]
    if reply.success:
        return True, f"Job {job} {past}"
    if reply.permission_denied:
        return False, f"Permission denied to {verb} job {job}"
    if reply.already_done:
        return False, f"Job {job} {_ALREADY.get(action, past)}"
    if reply.bad_status:
        if needs:
            return False, f"Job {job} not {needs} to be {past}"
        return False, f"Invalid result for job {job}"
    if reply.not_found:
        return False, f"Job {job} not found"
    return False, f"No result found for job {job}"


def _sum(replies: Iterable[m.ActOnJobsReply]) -> m.ActOnJobsReply:
    fields = ("success", "not_found", "bad_status", "already_done", "permission_denied", "error")
    totals = dict.fromkeys(fields, 0)
    for reply in replies:
        for name in fields:
            totals[name] += getattr(reply, name)
    return m.ActOnJobsReply(**totals)


def act(action: JobAction | str, selection: JobSelection, *, reason: str = "", subcode: int | None = None,
        transport: Transport | None = None, timeout: float = DEFAULT_TIMEOUT) -> ActResult:
    """condor_rm / condor_hold / condor_release / condor_vacate_job on the selected jobs.

    Args:
        action: a :class:`~htc.wire.messages.JobAction` (or its name, ``"Remove"``).
        selection: from :func:`parse_selection`.
        reason: recorded as the job's RemoveReason / HoldReason / ReleaseReason.
        subcode: HoldReasonSubCode for a hold.
        transport, timeout: how to reach the schedd and how long to wait.

    Returns:
        An :class:`ActResult`; print its ``lines`` (successes on standard output, the rest on
        standard error) and exit 1 unless ``ok``.

    Raises:
        UsageError: ``action`` is not a job action.
        DaemonUnreachable, RemoteError: as for :func:`~htc.client.submit`.
    """
    try:
        action = JobAction(action)
    except ValueError:
        raise UsageError(f"{action!r} is not a job action; use one of "
                         f"{', '.join(a.value for a in JobAction)}") from None
    lines: list[tuple[bool, str]] = []
    replies: list[m.ActOnJobsReply] = []
    extra = {"reason_subcode": subcode} if action is JobAction.Hold else {}
    for job in selection.jobs:
        reply = request.send_command(SCHEDD, m.ActOnJobs(action=action, ids=(job,), reason=reason, **extra),
                                     transport=transport, timeout=timeout)
        replies.append(reply)
        lines.append(_job_line(action, job, reply))
    group = selection.group_constraint()
    if group:
        reply = request.send_command(SCHEDD, m.ActOnJobs(action=action, constraint=group, reason=reason, **extra),
                                     transport=transport, timeout=timeout)
        replies.append(reply)
        past, verb, _ = _WORDS[action]
        label = selection.group_label()
        if reply.success and not (reply.error or reply.permission_denied):
            lines.append((True, f"All jobs{label} have been {past}"))
        else:
            lines.append((False, f"Couldn't find/{verb} all jobs{label}"))
    return ActResult(action, tuple(lines), _sum(replies))


def edit(selection: JobSelection, attributes: Mapping[str, str], *, transport: Transport | None = None,
         timeout: float = DEFAULT_TIMEOUT) -> int:
    """condor_qedit: set attributes of the selected jobs to ClassAd expressions.

    Args:
        selection: the jobs (named jobs, clusters, owners, ``-constraint``).
        attributes: attribute name -> new value as ClassAd expression text (strings need
            their quotes: ``'"night"'``).
        transport, timeout: how to reach the schedd and how long to wait.

    Returns:
        How many jobs were changed.

    Raises:
        UsageError: a value is not a ClassAd expression, or an attribute name is invalid.
        DaemonUnreachable, RemoteError: as for :func:`~htc.client.submit` (the schedd refuses protected
            attributes such as ClusterId, ProcId, Owner, JobStatus).
    """
    for name, text in attributes.items():
        check_expression(text, f"value of {name}")
    constraint = selection.constraint_for_all()
    reply = request.send_command(SCHEDD, m.EditJobs(attributes=dict(attributes), constraint=constraint),
                                 transport=transport, timeout=timeout)
    return reply.matched


def set_priority(selection: JobSelection, value: int, *, relative: bool = False,
                 transport: Transport | None = None, timeout: float = DEFAULT_TIMEOUT) -> int:
    """condor_prio: set (``-p N``) or adjust (``+N``/``-N``) the JobPrio of the selected jobs.

    Args:
        selection: the jobs.
        value: the new JobPrio, or the change when ``relative``.
        relative: add ``value`` to each job's JobPrio instead of setting it.
        transport, timeout: how to reach the schedd and how long to wait.

    Returns:
        How many jobs were changed.

    Raises:
        DaemonUnreachable, RemoteError: as for :func:`~htc.client.submit`.
    """
    if not relative:
        return edit(selection, {"JobPrio": str(int(value))}, transport=transport, timeout=timeout)
    changed = 0
    for ad in query(selection.constraint_for_all(), ("ClusterId", "ProcId", "JobPrio"),
                    transport=transport, timeout=timeout):
        prio = ad.get("JobPrio", 0)
        prio = prio if isinstance(prio, int) and not isinstance(prio, bool) else 0
        one = JobSelection(jobs=(f"{ad['ClusterId']}.{ad['ProcId']}",))
        changed += edit(one, {"JobPrio": str(prio + int(value))}, transport=transport, timeout=timeout)
    return changed


# --- history ----------------------------------------------------------------------------------


def history_path() -> str:
    """The job queue file whose ``history`` table holds finished jobs (``JOB_QUEUE_DB``)."""
    from htc.config import load_config

    return str(load_config("SCHEDD").param("JOB_QUEUE_DB"))


def history(constraint: str = "", *, limit: int | None = None, owner: str | None = None,
            path: str | os.PathLike | None = None, forwards: bool = False,
            since: str | None = None, scan_limit: int | None = None) -> list[ClassAd]:
    """condor_history: finished (completed or removed) jobs, newest first.

    Args:
        constraint: a ClassAd expression the job ads must satisfy.
        limit: at most this many jobs (``-limit``/``-match``), the first ones in the order asked for.
        owner: only this owner's jobs.
        path: the job queue file (default: the configured ``JOB_QUEUE_DB``).
        forwards: oldest first (``-forwards``) instead of newest first.
        since: stop the scan, newest first, at the first job for which this expression is
            true (condor_history's ``-since``; ``-completedsince T`` is
            ``CompletionDate <= T``); that job and older ones are left out. As in
            condor_history the scan looks at every job, whether or not it satisfies
            ``constraint``, so ``since`` may name a job the constraint leaves out.
        scan_limit: stop after reading this many jobs of the history, matching or not
            (``-scanlimit``).

    Returns:
        Whole job ads.

    Raises:
        UsageError: the constraint does not parse, or there is no job queue file yet (no
            schedd has run in this pool).
    """
    from htc.classad import ExprTree
    from htc.jobqueue import JobQueue, QueueFileError

    check_expression(constraint, "constraint")
    if since is not None:
        check_expression(since, "-since / -completedsince expression")
    where = os.fspath(path) if path is not None else history_path()
    try:
        queue = JobQueue.open(where, create=False, verify=False)
    except QueueFileError as exc:
        raise UsageError(f"no job history at {where}: {exc}; jobs appear there once a schedd of this pool "
                         "has finished them") from None
    scan = since is not None or scan_limit is not None
    try:
        if scan:  # every record, newest first: the scan stops before the constraint is looked at
            rows = queue.history(None, limit=None if forwards else scan_limit)
        else:
            rows = queue.history(constraint or None, limit=None if forwards else limit, owner=owner)
    finally:
        queue.close()
    ads = [ClassAd("[ " + "; ".join(f"{name} = {text}" for name, text in row.items()) + " ]") for row in rows]
    if since is not None:  # newest first, also for -forwards -completedsince (the newer jobs, oldest first)
        stop = ExprTree(since)
        ads = next((ads[:ix] for ix, ad in enumerate(ads) if stop.eval(ad) is True), ads)
    if forwards:
        ads.reverse()
    if scan:
        test = ExprTree(constraint) if constraint else None
        ads = [ad for ad in (ads if scan_limit is None else ads[:scan_limit])
               if (owner is None or ad.get("Owner") == owner) and (test is None or test.eval(ad) is True)]
    return ads[:limit] if limit is not None else ads


def since_expression(word: str) -> str:
    """condor_history's ``-since`` argument as the expression that stops the scan: a job id
    (``12``: ``ClusterId == 12``; ``12.3``: ``ClusterId == 12 && ProcId == 3``) or any
    expression that is not a literal (``'CompletionDate <= 1700000000'``).

    Raises:
        UsageError: neither (condor_history's "invalid -since constraint").
    """
    import re

    from htc.classad import ClassAdParseError, ExprTree
    from htc.classad.ast import Literal

    tree = None
    try:
        tree = ExprTree(word)
    except ClassAdParseError:
        tree = None  # not an expression: maybe a job id, tried next
    if tree is None or tree.node.__class__ is Literal:
        found = re.fullmatch(r"\s*(\d+)(?:\.(\d+))?\s*", word)
        if found:
            cluster, proc = found.groups()
            return f"ClusterId == {int(cluster)}" + (f" && ProcId == {int(proc)}" if proc is not None else "")
        raise UsageError(f"invalid -since constraint: {word}: constraint must be a job-id, or expression.")
    return word


# --- analysis -------------------------------------------------------------------------------------


def analyze(selection: JobSelection | None = None, *, slot_constraint: str = "",
            transport: Transport | None = None, timeout: float = DEFAULT_TIMEOUT,
            collector_transport: Transport | None = None, own_pool: str = "", flock_pools: Sequence[tuple[str, Transport]] = ()) -> list[JobAnalysis]:
    """condor_q -better-analyze: explain, for each selected job, how the pool's slots match it.

    Args:
        selection: the jobs (None: the caller's idle jobs).
        slot_constraint: only consider slots for which this is true (``-machine``).
        transport, timeout: how to reach the schedd and the collector.
        collector_transport: how to reach the collector when not through ``transport`` (a
            submit host of a multi-host pool runs none: its COLLECTOR_HOST's).
        own_pool, flock_pools: the schedd's pool's name and its FLOCK_TO pools (name, a transport
            whose ``collector`` is that pool's): each analysis then also says how many slots of
            each pool match (``JobAnalysis.pools``); a pool that cannot be asked says why.

    Returns:
        One :class:`~htc.client.analysis.JobAnalysis` per job; print ``render()``.

    Raises:
        DaemonUnreachable, RemoteError: the schedd or the collector is not answering.
    """
    if selection is None:
        constraint = f"Owner == {quote(current_user())} && JobStatus == 1"
    else:
        constraint = selection.constraint_for_all()
    jobs = query(constraint, transport=transport, timeout=timeout)
    slots = request.query_collector(AdType.Startd, slot_constraint, transport=collector_transport or transport,
                                    timeout=timeout)
    analyses = [analyze_job(job, slots) for job in jobs]
    if not flock_pools or not analyses:
        return analyses
    others: list[tuple[str, list | str]] = []
    for name, pool_transport in flock_pools:
        try:
            others.append((name, request.query_collector(AdType.Startd, slot_constraint, transport=pool_transport,
                                                         timeout=timeout)))
        except HTCError as exc:
            others.append((name, str(exc)))
    out = []
    for job, analysis in zip(jobs, analyses):
        pools = [pool_match(own_pool or "(local)", analysis, flocked=False)]
        for name, found in others:
            pools.append(PoolMatch(name, flocked=True, error=found) if isinstance(found, str)
                         else pool_match(name, analyze_job(job, found), flocked=True))
        out.append(dataclasses.replace(analysis, pools=tuple(pools)))
    return out
