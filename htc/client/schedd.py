"""The job tools' library: submit, query, act on, edit and look back at jobs of a schedd.

Each function is one thing an HTCondor user does with a tool -- ``submit`` is condor_submit,
``query`` is condor_q, ``act`` is condor_rm / condor_hold / condor_release /
condor_vacate_job, ``edit`` is condor_qedit, ``set_priority`` is condor_prio, ``history`` is
condor_history, ``analyze`` is ``condor_q -better-analyze`` -- and the ``htc`` command is a
thin shell over them.  The executor and tests call the same functions.

Daemons are reached through :mod:`htc.client.daemon` (``"schedd"`` and ``"collector"`` on
this machine's pool unless a ``transport`` says otherwise); every reply is a checked
:mod:`htc.wire.messages` message.  ``history`` needs no daemon: like condor_history it reads
the schedd's history where it is stored, the ``history`` table of the job queue file
(``JOB_QUEUE_DB``), which sqlite lets a reader share with the running schedd.

Job selection follows condor_rm (:func:`parse_selection`): ``12`` is a cluster, ``12.3`` a
job, any other word an owner, ``-constraint`` an expression, ``-all`` every job you may act
on.  Named jobs are acted on one at a time so that each gets HTCondor's own line
(``Job 12.3 marked for removal``); clusters, owners and constraints go as one constraint
(``All jobs in cluster 12 have been marked for removal``).
"""

from __future__ import annotations

import getpass
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from htc.client.analyze import JobAnalysis, analyze_job
from htc.classad import ClassAd, ExprTree, quote
from htc.classad.errors import ClassAdParseError
from htc.client.daemon import AdType, query_collector, send_command
from htc.errors import UsageError
from htc.wire import messages as m
from htc.wire.messages import JobAction
from htc.wire.transport import DEFAULT_TIMEOUT, Transport

__all__ = [
    "SCHEDD", "SubmitResult", "JobSelection", "ActResult", "parse_selection", "build_cluster",
    "submit", "query", "act", "edit", "set_priority", "history", "analyze", "reschedule",
    "current_user",
]

#: the schedd's address on the pool's transport
SCHEDD = "schedd"

_JOB_ID = re.compile(r"^(\d+)(?:\.(\d+))?$")
_APPEND = re.compile(r"^\s*([+-]?[A-Za-z_][A-Za-z0-9_.]*)\s*=\s?(.*)$", re.S)


def current_user() -> str:
    """The name of the user running the tool (condor_q's default owner)."""
    return getpass.getuser()


# --- submit ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubmitResult:
    """Jobs ``cluster_id.first_proc`` .. ``cluster_id.last_proc`` are in the queue."""

    cluster_id: int
    first_proc: int
    num_procs: int
    warnings: tuple[str, ...] = ()

    @property
    def last_proc(self) -> int:
        """ProcId of the last job submitted."""
        return self.first_proc + self.num_procs - 1

    def summary(self) -> str:
        """condor_submit's last line: ``3 job(s) submitted to cluster 12.``"""
        return f"{self.num_procs} job(s) submitted to cluster {self.cluster_id}."

    def terse(self) -> str:
        """condor_submit ``-terse``: ``12.0 - 12.2``."""
        return f"{self.cluster_id}.{self.first_proc} - {self.cluster_id}.{self.last_proc}"


def _prepare(description: str, *, cwd: str | os.PathLike | None, filename: str | None,
             append: Sequence[str], queue: str | None):
    """The parsed description with ``-append`` commands and a ``-queue`` override applied."""
    from htc.submit import Submit

    sub = Submit(description, filename=filename, cwd=cwd)
    for command in append:
        match = _APPEND.match(command)
        if not match:
            raise UsageError(f"-append {command!r} is not a submit command; write it as 'name = value'")
        name, value = match.group(1), match.group(2).strip()
        if name.lower() == "queue":
            raise UsageError("-append cannot add a queue statement; use -queue ARGS instead")
        sub[name] = value
    if queue is not None:
        sub.setQArgs(queue)
    if not sub.has_queue_statement:
        where = filename or "(stdin)"
        raise UsageError(f'"{where}" doesn\'t contain any "queue" commands -- no jobs queued; '
                         "end the description with 'queue' or give -queue ARGS")
    return sub


def build_cluster(description: str, *, cwd: str | os.PathLike | None = None, filename: str | None = None,
                  append: Sequence[str] = (), queue: str | None = None, cluster_id: int = 1):
    """Turn a submit description into a cluster ready for the queue, without submitting.

    Args:
        description: submit-description text.
        cwd: the submit directory (relative paths resolve against it; default: current).
        filename: where the text came from, for messages and ``$(SUBMIT_FILE)``.
        append: ``-append`` commands (``"request_memory = 2G"``), each applying as if written
            just before every queue statement.
        queue: ``-queue`` arguments replacing the description's queue statements.
        cluster_id: the ClusterId to build with.

    Returns:
        ``htc.submit.SubmittedCluster``.

    Raises:
        UsageError: the description does not parse, has no queue statement, or an ``-append``
            command is not ``name = value``.
    """
    sub = _prepare(description, cwd=cwd, filename=filename, append=append, queue=queue)
    return sub.cluster(cluster_id)


#: a cluster id no schedd hands out soon: if it shows up in the ads, they depend on $(Cluster)
_SENTINEL_CLUSTER = 987654321


def submit(description: str, *, cwd: str | os.PathLike | None = None, filename: str | None = None,
           append: Sequence[str] = (), queue: str | None = None, transport: Transport | None = None,
           timeout: float = DEFAULT_TIMEOUT, submission_id: str | None = None,
           resend_for: float = 0.0) -> SubmitResult:
    """condor_submit: put the jobs of a submit description in the schedd's queue.

    The description is expanded here first, so that mistakes are reported before anything is
    sent and ``$ENV()`` sees this environment. When the job ads depend on the cluster id
    (``output = out.$(Cluster).$(Process)``), which only the schedd knows, the description
    itself is sent and the schedd expands it with the real id.  Either way nothing is queued
    unless everything is: the schedd stores the whole cluster in one transaction and answers
    only once it is durable.

    Args:
        description: submit-description text (a file's contents, or standard input).
        cwd, filename, append, queue: as for :func:`build_cluster`.
        transport: how to reach the schedd (default: this machine's pool).
        timeout: seconds for the schedd to answer.
        submission_id: the client's name for this submission (``Submit.submission_id``): sent
            again with the same id, the same description is answered with the first cluster.
        resend_for: with ``submission_id``, seconds to keep sending the same Submit again when
            its answer is lost (the connection broke or timed out after it went out, the schedd
            is restarting): a schedd that queued it answers with that cluster, so a lost answer
            never queues the jobs twice. An unreachable schedd at the first try fails at once.

    Returns:
        A :class:`SubmitResult` (cluster id and the range of procs).

    Raises:
        UsageError: the description is wrong (the message names the line and command).
        DaemonUnreachable: no schedd is running (start the pool with 'htc pool start').
        RemoteError: the schedd refused the cluster; its reason is in the message.
    """
    from htc.daemons.schedd.requests import description_message

    sub = _prepare(description, cwd=cwd, filename=filename, append=append, queue=queue)
    cluster = sub.cluster(_SENTINEL_CLUSTER, check=_per_submission_limit)
    mark = str(_SENTINEL_CLUSTER)
    # the schedd assigns the cluster id (Submit's contract); send none
    cluster_ad = {k: v for k, v in cluster.cluster_ad.items() if k.lower() != "clusterid"}
    procs = list(cluster.proc_ads())
    if any(mark in text for text in cluster_ad.values()) or any(mark in t for p in procs for t in p.values()):
        msg = description_message(sub.submit_text, sub.cwd, filename)
    else:
        msg = m.Submit(cluster_ad=_ad_text(cluster_ad), proc_ads=tuple(_ad_text(p) for p in procs))
    if submission_id is not None:
        msg = m.Submit(cluster_ad=msg.cluster_ad, proc_ads=msg.proc_ads, submission_id=submission_id)
    reply = _send_submission(msg, transport, timeout, resend_for if submission_id is not None else 0.0)
    return SubmitResult(cluster_id=reply.cluster_id, first_proc=reply.first_proc, num_procs=reply.num_procs,
                        warnings=tuple(cluster.warnings))


def _per_submission_limit(num_procs: int) -> None:
    """Refuse, before expanding a proc, what the schedd would refuse (MAX_JOBS_PER_SUBMISSION).

    The schedd checks every limit again; this spares expanding ``queue 100000000`` here first.
    """
    from htc.config import load_config

    # Read as a tool (SUBMIT), not as the schedd: a client is not held to a daemon's config
    # safety rules (it may use a pool another user runs); the schedd's own check decides anyway.
    limit = load_config("SUBMIT").param("MAX_JOBS_PER_SUBMISSION")
    if limit is not None and num_procs > limit:
        raise UsageError(f"Number of submitted jobs would exceed MAX_JOBS_PER_SUBMISSION: this submission "
                         f"makes {num_procs} jobs and the limit is {limit}; submit fewer jobs at a time. "
                         "No jobs were queued.")


def _send_submission(msg: m.Submit, transport: Transport | None, timeout: float, resend_for: float) -> m.Message:
    """Send ``msg``; while its answer is lost, send it again for ``resend_for`` seconds (see
    :func:`submit`)."""
    import sys
    import time

    from htc.wire.errors import ConnectionClosed, DaemonUnreachable, RequestTimeout

    deadline = None
    delay = 0.2
    while True:
        try:
            return send_command(SCHEDD, msg, transport=transport, timeout=timeout)
        except (ConnectionClosed, RequestTimeout, DaemonUnreachable) as exc:
            if resend_for <= 0:
                raise
            if deadline is None:
                if isinstance(exc, DaemonUnreachable):
                    raise  # nothing went out
                deadline = time.monotonic() + resend_for
                print(f"htc: the schedd's answer to the submission was lost ({exc}); sending it again",
                      file=sys.stderr)
            if time.monotonic() > deadline:
                raise UsageError(f"the schedd did not answer for {resend_for:g} s after it may have queued the jobs "
                                 f"({exc}); 'htc q' shows whether they are queued (submission id "
                                 f"{msg.submission_id})") from None
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def _ad_text(attrs: Mapping[str, str]) -> str:
    """``{name: expression text}`` as new-syntax ClassAd text for the wire."""
    return "[ " + "; ".join(f"{name} = {text}" for name, text in attrs.items()) + " ]"


# --- query ---------------------------------------------------------------------------------------


def query(constraint: str = "", projection: Iterable[str] = (), *, limit: int | None = None,
          transport: Transport | None = None, timeout: float = DEFAULT_TIMEOUT) -> list[ClassAd]:
    """condor_q: the job ads in the queue for which ``constraint`` is true.

    Args:
        constraint: a ClassAd expression (empty: every job).
        projection: attributes to return (empty: whole ads).
        limit: at most this many jobs.
        transport, timeout: how to reach the schedd and how long to wait.

    Returns:
        The ads, in ClusterId.ProcId order.

    Raises:
        UsageError: the constraint does not parse.
        DaemonUnreachable, RemoteError: as for :func:`submit`.
    """
    _check_expression(constraint, "constraint")
    reply = send_command(SCHEDD, m.QueryJobs(constraint=constraint, projection=tuple(projection), limit=limit),
                         transport=transport, timeout=timeout)
    return [ClassAd(text) for text in reply.ads]


def _check_expression(text: str, what: str) -> None:
    if not text:
        return
    try:
        ExprTree(text)
    except ClassAdParseError as exc:
        raise UsageError(f"the {what} {text!r} is not a ClassAd expression: {exc}") from None


# --- acting on jobs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobSelection:
    """Which jobs a tool acts on, as condor_rm reads its arguments."""

    jobs: tuple[str, ...] = ()
    clusters: tuple[int, ...] = ()
    users: tuple[str, ...] = ()
    constraint: str = ""
    all: bool = False

    def group_constraint(self) -> str:
        """The one constraint for clusters, users, ``-constraint`` and ``-all`` (condor_rm's
        ``handleConstraints``), or ``""`` when only named jobs are selected."""
        parts = [f"ClusterId == {c}" for c in self.clusters] + [f"Owner == {quote(u)}" for u in self.users]
        usercluster = " || ".join(parts)
        if self.constraint and usercluster:
            return f"({self.constraint}) && ({usercluster})"
        if self.constraint:
            return self.constraint
        if usercluster:
            return usercluster
        return "true" if self.all else ""

    def group_label(self) -> str:
        """How condor_rm names the group in its message (`` in cluster 12``, `` of user "a"``)."""
        if self.constraint or len(self.clusters) + len(self.users) > 1:
            return f" matching constraint ({self.group_constraint()})"
        if self.clusters:
            return f" in cluster {self.clusters[0]}"
        if self.users:
            return f" of user {quote(self.users[0])}"
        return ""

    def constraint_for_all(self) -> str:
        """One constraint selecting everything selected (named jobs included)."""
        parts = []
        for job in self.jobs:
            cluster, proc = job.split(".")
            parts.append(f"(ClusterId == {cluster} && ProcId == {proc})")
        group = self.group_constraint()
        if group:
            parts.append(f"({group})")
        return " || ".join(parts)

    @property
    def empty(self) -> bool:
        """Nothing was selected."""
        return not (self.jobs or self.group_constraint())


def parse_selection(args: Sequence[str] = (), constraint: str | None = None, all: bool = False) -> JobSelection:
    """Read condor_rm-style job arguments.

    Args:
        args: ``CLUSTER``, ``CLUSTER.PROC`` or owner names.
        constraint: a ``-constraint`` expression.
        all: ``-all``.

    Returns:
        The :class:`JobSelection`.

    Raises:
        UsageError: nothing is selected, a cluster number is not positive, or the constraint
            does not parse.
    """
    jobs: list[str] = []
    clusters: list[int] = []
    users: list[str] = []
    for arg in args:
        match = _JOB_ID.match(arg)
        if match:
            cluster = int(match.group(1))
            if cluster <= 0:
                raise UsageError(f"Invalid cluster # from {arg}; clusters are numbered from 1")
            if match.group(2) is None:
                clusters.append(cluster)
            else:
                jobs.append(f"{cluster}.{int(match.group(2))}")
        elif re.match(r"^-?\d", arg):
            raise UsageError(f"{arg!r} is not a job id; write CLUSTER or CLUSTER.PROC")
        else:
            users.append(arg)
    if constraint:
        _check_expression(constraint, "constraint")
    selection = JobSelection(tuple(jobs), tuple(clusters), tuple(users), constraint or "", all)
    if selection.empty:
        raise UsageError("no jobs selected; name jobs (CLUSTER or CLUSTER.PROC), an owner, "
                         "-constraint EXPR, or -all")
    return selection


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
        DaemonUnreachable, RemoteError: as for :func:`submit`.
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
        reply = send_command(SCHEDD, m.ActOnJobs(action=action, ids=(job,), reason=reason, **extra),
                             transport=transport, timeout=timeout)
        replies.append(reply)
        lines.append(_job_line(action, job, reply))
    group = selection.group_constraint()
    if group:
        reply = send_command(SCHEDD, m.ActOnJobs(action=action, constraint=group, reason=reason, **extra),
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
        DaemonUnreachable, RemoteError: as for :func:`submit` (the schedd refuses protected
            attributes such as ClusterId, ProcId, Owner, JobStatus).
    """
    for name, text in attributes.items():
        _check_expression(text, f"value of {name}")
    constraint = selection.constraint_for_all()
    reply = send_command(SCHEDD, m.EditJobs(attributes=dict(attributes), constraint=constraint),
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
        DaemonUnreachable, RemoteError: as for :func:`submit`.
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


def reschedule(*, transport: Transport | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
    """condor_reschedule: ask the schedd for a negotiation cycle soon.

    Raises:
        DaemonUnreachable, RemoteError: as for :func:`submit`.
    """
    send_command(SCHEDD, m.Reschedule(), transport=transport, timeout=timeout)


# --- history ----------------------------------------------------------------------------------


def history_path() -> str:
    """The job queue file whose ``history`` table holds finished jobs (``JOB_QUEUE_DB``)."""
    from htc.config import load_config

    return str(load_config("SCHEDD").param("JOB_QUEUE_DB"))


def history(constraint: str = "", *, limit: int | None = None, owner: str | None = None,
            path: str | os.PathLike | None = None) -> list[ClassAd]:
    """condor_history: finished (completed or removed) jobs, newest first.

    Args:
        constraint: a ClassAd expression the job ads must satisfy.
        limit: at most this many jobs (``-limit``/``-match``).
        owner: only this owner's jobs.
        path: the job queue file (default: the configured ``JOB_QUEUE_DB``).

    Returns:
        Whole job ads.

    Raises:
        UsageError: the constraint does not parse, or there is no job queue file yet (no
            schedd has run in this pool).
    """
    from htc.jobqueue import JobQueue, QueueFileError

    _check_expression(constraint, "constraint")
    where = os.fspath(path) if path is not None else history_path()
    try:
        queue = JobQueue.open(where, create=False, verify=False)
    except QueueFileError as exc:
        raise UsageError(f"no job history at {where}: {exc}; jobs appear there once a schedd of this pool "
                         "has finished them") from None
    try:
        rows = queue.history(constraint or None, limit=limit, owner=owner)
    finally:
        queue.close()
    return [ClassAd("[ " + "; ".join(f"{name} = {text}" for name, text in row.items()) + " ]") for row in rows]


# --- analysis -------------------------------------------------------------------------------------


def analyze(selection: JobSelection | None = None, *, slot_constraint: str = "",
            transport: Transport | None = None, timeout: float = DEFAULT_TIMEOUT) -> list[JobAnalysis]:
    """condor_q -better-analyze: explain, for each selected job, how the pool's slots match it.

    Args:
        selection: the jobs (None: the caller's idle jobs).
        slot_constraint: only consider slots for which this is true (``-machine``).
        transport, timeout: how to reach the schedd and the collector.

    Returns:
        One :class:`~htc.client.analyze.JobAnalysis` per job; print ``render()``.

    Raises:
        DaemonUnreachable, RemoteError: the schedd or the collector is not answering.
    """
    if selection is None:
        constraint = f"Owner == {quote(current_user())} && JobStatus == 1"
    else:
        constraint = selection.constraint_for_all()
    jobs = query(constraint, transport=transport, timeout=timeout)
    slots = query_collector(AdType.Startd, slot_constraint, transport=transport, timeout=timeout)
    return [analyze_job(job, slots) for job in jobs]
