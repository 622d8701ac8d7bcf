"""Changing jobs in the queue: states, attributes, policy, history, job order and
autoclusters. Mixed into :class:`htc.jobqueue.queue.JobQueue`.

Every method that changes something runs in one transaction (or joins the caller's
``JobQueue.transaction()``), so a crash leaves each change either whole or absent.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Iterable, Mapping

import msgspec

from htc.errors import UsageError
from htc.eventlog.writer import clean_text
from htc.jobqueue.ads import HOT_ATTRS, JobAd, int_literal, parse_literal, quote
from htc.jobqueue.expr import GroupedEvaluator, check_expression, evaluate_in, is_true
from htc.jobqueue.policy import Action, Decision, ExitInfo, PolicyEvaluator, exit_attributes
from htc.jobqueue.records import JobId, JobNotFound, StatusChange
from htc.jobqueue.store import JOB_COLUMNS
from htc.jobqueue.states import (ACTIVE_STATES, TERMINAL_STATES, HoldReasonCode, JobStatus,
                                 check_transition)

_encode = msgspec.json.Encoder().encode
_decode_attrs = msgspec.json.Decoder(dict[str, str]).decode

_COLUMN_INDEX = {name.strip(): i for i, name in enumerate(JOB_COLUMNS.split(","))}

#: Attributes ``edit`` (condor_qedit) refuses: identity, state and bookkeeping of the queue.
PROTECTED_ATTRS = frozenset(name.lower() for name in (
    "ClusterId", "ProcId", "JobStatus", "LastJobStatus", "EnteredCurrentStatus", "Owner",
    "User", "OsUser", "QDate", "MyType", "TargetType", "GlobalJobId", "AutoClusterId",
    "NumJobCompletions", "CompletionDate",
))
_POLICY_ATTRS = ("periodichold", "periodicrelease", "periodicremove")
_HOLD_ATTRS = ("HoldReason", "HoldReasonCode", "HoldReasonSubCode")




class QueueChanges:
    """The changing half of ``JobQueue`` (it relies on the queue's connection and lock)."""

    # -- helpers -------------------------------------------------------------------------

    def _load(self, job_id: JobId) -> JobAd:
        # Inside this thread's transaction a row read before (and not written since) is reused;
        # so is one read earlier in this thread's one_look block outside a transaction (every
        # transaction starts without rows: htc.jobqueue.reads).
        if self._depth:
            cached = self._owner == threading.get_ident()
        else:
            cached = self._looked and self._looker == threading.get_ident()
        row = self._rows.get(job_id) if cached else None
        if row is None:
            row = self._conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE cluster_id = ? AND proc_id = ?",
                                     (job_id[0], job_id[1])).fetchone()
            if row is None:
                raise JobNotFound(f"job {job_id[0]}.{job_id[1]} is not in the queue; it may have "
                                  "finished (see history) or never existed")
            if cached:
                self._rows[(row[0], row[1])] = row
        return self._job_from_row(row)

    def _store_own(self, job: JobAd, own: dict[str, str], **columns: object) -> None:
        sets = ", ".join(f"{name} = ?" for name in columns)
        params = list(columns.values())
        text = _encode(own).decode() if own else None
        self._conn.execute(
            f"UPDATE jobs SET {sets + ', ' if sets else ''}ad = ? WHERE cluster_id = ? AND proc_id = ?",
            (*params, text, job.cluster_id, job.proc_id))
        if self._rows.get(job.job_id) is job._hot:
            # ``job`` was read from the row this transaction holds: keep the row as it is now
            # for the next read (otherwise it is read again).
            row = list(job._hot)
            for name, value in columns.items():
                row[_COLUMN_INDEX[name]] = value
            row[8] = text
            self._rows[job.job_id] = tuple(row)
        else:
            self._rows.pop(job.job_id, None)

    def _note_proc_attrs(self, cluster_id: int, names: Iterable[str]) -> None:
        cluster = self._cluster(cluster_id)
        new = [n for n in names if n.lower() not in cluster.proc_attrs]
        if new:
            known = {cluster.canon[low] for low in cluster.proc_attrs}  # (canon: lower -> name, over proc_attrs too)
            self._conn.execute("UPDATE clusters SET proc_attrs = ? WHERE cluster_id = ?",
                               (_encode(sorted(known | set(new))).decode(), cluster_id))
            # The cluster as a read of the row now gives it, without reading and decoding the row
            # (a one-call cluster of an executor gets ClaimId and the like at its start): a new
            # ClusterAd, since the memos in a cache may depend on which attributes procs set.
            self._clusters[cluster_id] = cluster.with_proc_attrs(new)

    def _int_attr(self, job: JobAd, name: str, default: int = 0) -> int:
        try:
            value = parse_literal(job.get(name, str(default)))
        except ValueError:
            return default
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    # -- job states ----------------------------------------------------------------------

    def set_status(self, job_id: JobId, new: int, *, reason: str | None = None,
                   code: int | None = None, subcode: int | None = None,
                   now: float | None = None, attrs: Mapping[str, str] | None = None) -> StatusChange:
        """Move a job to another state, enforcing the transition table.

        Args:
            job_id: ``(cluster, proc)``.
            new: the new ``JobStatus``.
            reason: HoldReason (to Held), ReleaseReason (Held to Idle), RemoveReason (to Removed).
            code, subcode: HoldReasonCode / HoldReasonSubCode when holding (default 0).
            now: the time of the change (EnteredCurrentStatus); default: the clock.
            attrs: other attributes to set in the same change (as :meth:`set_attributes`
                would, but not the per-job columns such as JobPrio).

        Returns:
            What changed, the event to log, and whether the job left the queue.

        Raises:
            JobNotFound: no such job.
            IllegalTransition: the table has no such change (the message lists legal ones).
        """
        now = time.time() if now is None else now
        with self.transaction(savepoint=False):
            job = self._load(job_id)
            old = JobStatus(job.status)
            event = check_transition(f"{job_id[0]}.{job_id[1]}", old, new)
            new = JobStatus(new)
            own = dict(job.own)
            for name, text in (attrs or {}).items():
                if name.lower() in HOT_ATTRS:
                    raise UsageError(f"{HOT_ATTRS[name.lower()]} cannot be set along with a status change; "
                                     "use set_attributes")
                if self._validate:
                    check_expression(name, text)
                own[job.cluster.canon.get(name.lower(), name)] = text
            own["LastJobStatus"] = str(int(old))
            if new == JobStatus.HELD:
                own["HoldReason"] = quote(clean_text(reason or "Unspecified"))
                own["HoldReasonCode"] = str(int(code or HoldReasonCode.Unspecified))
                own["HoldReasonSubCode"] = str(int(subcode or 0))
                own["NumHolds"] = str(self._int_attr(job, "NumHolds") + 1)
            if old == JobStatus.HELD:
                for name in _HOLD_ATTRS:
                    if name in job:
                        own["Last" + name] = job[name]
                    if name in job.cluster.attrs:
                        own[name] = "undefined"  # hide the cluster's value (submitted on hold)
                    else:
                        own.pop(name, None)
                if reason:
                    own["ReleaseReason"] = quote(clean_text(reason))
            if new == JobStatus.REMOVED and reason:
                own["RemoveReason"] = quote(clean_text(reason))
            if new == JobStatus.RUNNING and old == JobStatus.IDLE:
                own["JobCurrentStartDate"] = str(int(now))
                own["NumJobStarts"] = str(self._int_attr(job, "NumJobStarts") + 1)
            if new == JobStatus.COMPLETED:
                own["CompletionDate"] = str(int(now))
            leaves = new == JobStatus.COMPLETED or (new == JobStatus.REMOVED and old not in ACTIVE_STATES)
            updated = JobAd(job.cluster, own, (job.cluster_id, job.proc_id, int(new), job.prio,
                                               job.owner, job.qdate, int(now), job.hot_value("autoclusterid")))
            if leaves and new == JobStatus.COMPLETED and self._leave_in_queue(updated, now):
                leaves = False
            if leaves:
                removed = self._to_history(updated, now)
                return StatusChange(job_id, old, new, event, True, removed)
            self._note_proc_attrs(job.cluster_id, own)
            self._store_own(job, own, status=int(new), entered_status=int(now))
            return StatusChange(job_id, old, new, event)

    @staticmethod
    def _leave_in_queue(job: JobAd, now: float) -> bool:
        """``LeaveJobInQueue`` of a completed job (a plain true or false is read, not evaluated)."""
        text = job.get("LeaveJobInQueue", "false")
        try:
            value = parse_literal(text)
        except ValueError:
            value = None
        return value if isinstance(value, bool) else is_true(evaluate_in(job, text, now))

    def set_status_many(self, job_ids: Iterable[JobId], new: int, **options) -> list[StatusChange]:
        """:meth:`set_status` for many jobs in one transaction: all change, or none.

        Raises:
            JobNotFound, IllegalTransition: for the first job that cannot change; nothing changed.
        """
        with self.transaction():
            return [self.set_status(job_id, new, **options) for job_id in job_ids]

    def hold(self, job_id: JobId, reason: str, *, code: int = HoldReasonCode.UserRequest,
             subcode: int = 0, now: float | None = None) -> StatusChange:
        """Hold a job (``condor_hold``: code 1 UserRequest unless told otherwise)."""
        return self.set_status(job_id, JobStatus.HELD, reason=reason, code=code, subcode=subcode, now=now)

    def release(self, job_id: JobId, reason: str | None = None, *, now: float | None = None) -> StatusChange:
        """Release a held job back to Idle (``condor_release``)."""
        return self.set_status(job_id, JobStatus.IDLE, reason=reason, now=now)

    def remove(self, job_id: JobId, reason: str | None = None, *, now: float | None = None) -> StatusChange:
        """Remove a job (``condor_rm``). An idle or held job leaves the queue at once; a running
        one stays Removed until the schedd has stopped it and calls :meth:`retire`."""
        return self.set_status(job_id, JobStatus.REMOVED, reason=reason, now=now)

    def retire(self, job_id: JobId, *, now: float | None = None) -> bool:
        """Move a Removed or Completed job to the history.

        Returns:
            True when this was the cluster's last job (the cluster is gone too).

        Raises:
            JobNotFound: no such job.
            UsageError: the job is not Removed or Completed.
        """
        now = time.time() if now is None else now
        with self.transaction(savepoint=False):
            job = self._load(job_id)
            if job.status not in TERMINAL_STATES:
                raise UsageError(f"job {job_id[0]}.{job_id[1]} is {JobStatus(job.status).name}; "
                                 "only Removed or Completed jobs move to the history")
            return self._to_history(job, now)

    # -- attributes ----------------------------------------------------------------------

    def set_attributes(self, job_id: JobId, attrs: Mapping[str, str | None]) -> dict[str, str | None]:
        """Set (or, with None, drop) attributes of one job: the daemons' way to update ads.

        JobPrio, EnteredCurrentStatus and AutoClusterId update their columns. A value equal
        to the cluster's is stored as no override; None removes this job's own value.

        Returns:
            The previous expression text of each attribute (None where it had none).

        Raises:
            JobNotFound: no such job.
            UsageError: an attribute only the queue may set (JobStatus, ClusterId, ProcId,
                Owner, QDate), or a text that is not a ClassAd expression.
        """
        with self.transaction(savepoint=False):
            job = self._load(job_id)
            own = dict(job.own)
            columns: dict[str, object] = {"autocluster_id": None}
            previous: dict[str, str | None] = {}
            for name, text in attrs.items():
                low = name.lower()
                previous[name] = job.get(name)
                if low in ("jobstatus", "clusterid", "procid", "owner", "qdate"):
                    raise UsageError(f"{HOT_ATTRS[low]} of job {job_id[0]}.{job_id[1]} cannot be set "
                                     "directly" + ("; use set_status" if low == "jobstatus" else ""))
                if low in ("jobprio", "enteredcurrentstatus", "autoclusterid"):
                    column = {"jobprio": "prio", "enteredcurrentstatus": "entered_status",
                              "autoclusterid": "autocluster_id"}[low]
                    if text is None:
                        raise UsageError(f"{HOT_ATTRS[low]} cannot be deleted; set a number")
                    columns[column] = int_literal(HOT_ATTRS[low], text)
                    continue
                canon = job.cluster.canon.get(low, name)
                if text is None or job.cluster.attrs.get(canon) == text:
                    own.pop(canon, None)
                    continue
                if self._validate:
                    check_expression(canon, text)
                own[canon] = text
            self._note_proc_attrs(job.cluster_id, own)
            self._store_own(job, own, **columns)
            return previous

    def edit(self, job_id: JobId, attr: str, text: str) -> str | None:
        """``condor_qedit`` for one job: set a user-editable attribute to an expression.

        Returns:
            The attribute's previous expression text (None if unset), for the
            ATTRIBUTE_UPDATE event.

        Raises:
            UsageError: the attribute is protected (ClusterId, JobStatus, Owner...), or the
                text is not a ClassAd expression.
            JobNotFound: no such job.
        """
        if attr.lower() in PROTECTED_ATTRS:
            raise UsageError(f"{attr} is a protected attribute; condor_qedit cannot change it")
        check_expression(attr, text)
        return self.set_attributes(job_id, {attr: text})[attr]

    def edit_cluster(self, cluster_id: int, attr: str, text: str) -> None:
        """``condor_qedit`` for a whole cluster: its ad and every proc (overrides dropped).

        Raises:
            UsageError: protected attribute or bad expression. JobNotFound: no such cluster.
        """
        low = attr.lower()
        if low in PROTECTED_ATTRS:
            raise UsageError(f"{attr} is a protected attribute; condor_qedit cannot change it")
        check_expression(attr, text)
        with self.transaction():
            cluster = self._cluster(cluster_id)
            if low in ("jobprio",):
                self._rows.clear()
                self._conn.execute("UPDATE jobs SET prio = ?, autocluster_id = NULL WHERE cluster_id = ?",
                                   (int_literal("JobPrio", text), cluster_id))
                return
            canon = cluster.canon.get(low, attr)
            attrs = dict(cluster.attrs)
            attrs[canon] = text
            self._conn.execute("UPDATE clusters SET ad = ? WHERE cluster_id = ?",
                               (_encode(attrs).decode(), cluster_id))
            if low in cluster.proc_attrs:
                rows = self._conn.execute("SELECT proc_id, ad FROM jobs WHERE cluster_id = ? AND ad IS NOT NULL",
                                          (cluster_id,)).fetchall()
                for pid, raw in rows:
                    own = _decode_attrs(raw)
                    if own.pop(canon, None) is not None:
                        self._rows.clear()
                        self._conn.execute("UPDATE jobs SET ad = ? WHERE cluster_id = ? AND proc_id = ?",
                                           (_encode(own).decode() if own else None, cluster_id, pid))
            self._rows.clear()
            self._conn.execute("UPDATE jobs SET autocluster_id = NULL WHERE cluster_id = ?", (cluster_id,))
            self._clusters.pop(cluster_id, None)

    def set_prio(self, job_id: JobId, prio: int) -> int:
        """``condor_prio``: set JobPrio. Returns the old priority (for the ATTRIBUTE_UPDATE event)."""
        if isinstance(prio, bool) or not isinstance(prio, int):
            raise UsageError(f"a job priority is an integer, not {prio!r}")
        old = self.set_attributes(job_id, {"JobPrio": str(prio)})["JobPrio"]
        return int(old) if old is not None else 0

    # -- policy --------------------------------------------------------------------------

    def evaluate_periodic(self, now: float | None = None) -> list[Decision]:
        """Evaluate PeriodicHold/Release/Remove and the SYSTEM_PERIODIC_* knobs for every job.

        Returns:
            One decision per job whose policy fired; nothing is changed (see :meth:`apply`).
        """
        now = time.time() if now is None else now
        system = self.system_policy
        system_set = any((system.periodic_hold, system.periodic_release, system.periodic_remove))
        evaluator = PolicyEvaluator(system, now)
        decisions = []
        with self._reading() as conn:
            for cid, raw, proc_attrs in conn.execute("SELECT cluster_id, ad, proc_attrs FROM clusters").fetchall():
                names = raw.lower() + proc_attrs.lower()
                if not system_set and not any(f'"{a}"' in names for a in _POLICY_ATTRS):
                    continue
                rows = conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE cluster_id = ? AND status "
                                    "NOT IN (3, 4) ORDER BY proc_id", (cid,)).fetchall()
                for row in rows:
                    decision = evaluator.periodic(self._job_from_row(row))
                    if decision is not None:
                        decisions.append(decision)
        return decisions

    def on_exit(self, job_id: JobId, info: ExitInfo, *, now: float | None = None,
                attrs: Mapping[str, str] | None = None) -> Decision:
        """Record how a job's process exited and decide what follows (on_exit_*, retries).

        Records ExitCode or ExitSignal, ExitBySignal, JobCoreDumped and NumJobCompletions in
        the job ad (durably), with ``attrs`` (the run's usage, say: one write for both), then
        evaluates the policy. Apply the decision with :meth:`apply`.

        Raises:
            JobNotFound: no such job.
            UsageError: the job is not running (only a running job can exit).
        """
        now = time.time() if now is None else now
        with self.transaction(savepoint=False):
            self.set_attributes(job_id, self._exit_changes(job_id, info, attrs)[1])
            job = self._load(job_id)
        return PolicyEvaluator(self.system_policy, now).on_exit(job)

    def _exit_changes(self, job_id: JobId, info: ExitInfo,
                      attrs: Mapping[str, str] | None) -> tuple[JobAd, dict[str, str]]:
        """The running job, and the attributes its exit records (with ``attrs``).

        Raises:
            JobNotFound: no such job.
            UsageError: the job is not running (only a running job can exit).
        """
        job = self._load(job_id)
        if job.status not in ACTIVE_STATES:
            raise UsageError(f"job {job_id[0]}.{job_id[1]} is {JobStatus(job.status).name}; only "
                             "a running job can exit")
        return job, {**(attrs or {}), **exit_attributes(info, self._int_attr(job, "NumJobCompletions") + 1)}

    def exit_and_apply(self, job_id: JobId, info: ExitInfo, *, now: float | None = None,
                       attrs: Mapping[str, str] | None = None) -> tuple[Decision, StatusChange]:
        """:meth:`on_exit` and :meth:`apply` in one transaction, what a shadow does when a job ends.

        The decision is made on the ad as the exit leaves it. A job that completes then goes to
        the history with the exit's attributes in one step, without first writing them into a
        row it leaves at once (a third of the writes of a quick job's end); any other decision
        records them first, as :meth:`on_exit` does.

        Raises:
            JobNotFound: no such job.
            UsageError: the job is not running (only a running job can exit).
        """
        now = time.time() if now is None else now
        with self.transaction(savepoint=False):
            job, changes = self._exit_changes(job_id, info, attrs)
            own = dict(job.own)
            canon = job.cluster.canon
            for name, text in changes.items():
                own[canon.get(name.lower(), name)] = text
            decision = PolicyEvaluator(self.system_policy, now).on_exit(JobAd(job.cluster, own, job._hot))
            if decision.action is Action.COMPLETE:
                return decision, self.set_status(job_id, JobStatus.COMPLETED, now=now, attrs=changes)
            self.set_attributes(job_id, changes)
            return decision, self.apply(decision, now=now)

    def apply(self, decision: Decision, *, now: float | None = None) -> StatusChange:
        """Carry out a policy decision as a status change.

        Raises:
            JobNotFound: the job left the queue meanwhile.
            IllegalTransition: the job's state changed meanwhile so the decision no longer fits.
        """
        target = {
            Action.HOLD: JobStatus.HELD, Action.RELEASE: JobStatus.IDLE,
            Action.REMOVE: JobStatus.REMOVED, Action.REQUEUE: JobStatus.IDLE,
            Action.COMPLETE: JobStatus.COMPLETED,
        }[decision.action]
        return self.set_status(decision.job_id, target, reason=decision.reason,
                               code=decision.code, subcode=decision.subcode, now=now)

    # -- job order and autoclusters ------------------------------------------------------

    def idle_jobs(self, owner: str | None = None, *, limit: int | None = None,
                  now: float | None = None, ordered: bool = True) -> list[JobAd]:
        """Idle jobs in the order the schedd offers them: descending ``SCHEDD_JOB_PRIO_EXPR``
        (the seed's PRIO), then ClusterId, ProcId. A non-numeric PRIO sorts last. With
        ``ordered=False`` they come in ClusterId, ProcId order, without evaluating the
        expression for each (for a caller that sorts them its own way)."""
        constraint = "JobStatus == 1" + (f" && Owner == {quote(owner)}" if owner is not None else "")
        jobs = self.query(constraint, now=now)
        if not ordered:
            return jobs[:limit] if limit is not None else jobs
        evaluator = GroupedEvaluator(self.prio_expr, time.time() if now is None else now)

        def key(job: JobAd) -> tuple:
            value = evaluator.value(job)
            number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else -math.inf
            return (-number, job.cluster_id, job.proc_id)

        jobs.sort(key=key)
        return jobs[:limit] if limit is not None else jobs

    def assign_autoclusters(self, significant_attrs: Iterable[str]) -> dict[int, list[JobId]]:
        """Group idle jobs by the values of the significant attributes (HTCondor autoclusters).

        Jobs keep their AutoClusterId until an edit touches them; call
        :meth:`reset_autoclusters` when the significant attributes change.

        Returns:
            ``{AutoClusterId: [job ids]}`` over all idle jobs.
        """
        names = sorted({n for n in significant_attrs}, key=str.lower)
        with self.transaction():
            ids = {sig: acid for acid, sig in self._conn.execute("SELECT autocluster_id, signature FROM autoclusters")}
            rows = self._conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE autocluster_id IS NULL").fetchall()
            updates = []
            per_cluster: dict[int, str] = {}
            for row in rows:
                job = self._job_from_row(row)
                varies = any(n.lower() in job.cluster.proc_attrs or n.lower() in
                             ("procid", "jobstatus", "jobprio", "enteredcurrentstatus") for n in names)
                sig = None if varies else per_cluster.get(job.cluster_id)
                if sig is None:
                    sig = _encode([[n, job.get(n)] for n in names]).decode()
                    if not varies:
                        per_cluster[job.cluster_id] = sig
                acid = ids.get(sig)
                if acid is None:
                    acid = self._conn.execute("INSERT INTO autoclusters (signature) VALUES (?)",
                                              (sig,)).lastrowid
                    ids[sig] = acid
                updates.append((acid, job.cluster_id, job.proc_id))
            self._rows.clear()
            self._conn.executemany("UPDATE jobs SET autocluster_id = ? WHERE cluster_id = ? AND proc_id = ?",
                                   updates)
            groups: dict[int, list[JobId]] = {}
            for acid, cid, pid in self._conn.execute(
                    "SELECT autocluster_id, cluster_id, proc_id FROM jobs WHERE status = 1 "
                    "AND autocluster_id IS NOT NULL ORDER BY autocluster_id, cluster_id, proc_id"):
                groups.setdefault(acid, []).append((cid, pid))
            return groups

    def reset_autoclusters(self) -> None:
        """Forget every AutoClusterId (the significant attributes changed)."""
        with self.transaction():
            self._rows.clear()
            self._conn.execute("UPDATE jobs SET autocluster_id = NULL WHERE autocluster_id IS NOT NULL")
            self._conn.execute("DELETE FROM autoclusters")

    def jobs_in_autocluster(self, autocluster_id: int, *, limit: int | None = None) -> list[JobAd]:
        """Idle jobs of one autocluster, in ClusterId.ProcId order (uses the index)."""
        return self.query(f"AutoClusterId == {int(autocluster_id)} && JobStatus == 1", limit=limit)
