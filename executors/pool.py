"""The pool backend: every call is a job in an htc schedd.

Theory of operation
-------------------
**Jobs.** Calls with the same options share one *template* job ad, and each call adds a small
proc ad (:mod:`htc.executors.pool_ads` builds both). A batch of calls with the same options is
one ``Submit`` message -- one cluster, one transaction in the schedd's queue. The execute side
gets its input from the starter and sends ``htc_result.pkl`` back with the rest of the
sandbox's new files; nothing on an execute node talks to the client.

**Watching** the jobs -- the session's event log, and now and then the queue -- is the other
half of the backend, :class:`~htc.executors.pool_watch.JobWatcher`.

**Infrastructure failures** are the pool's fault, not the function's: a shadow exception or
failed reconnect (the schedd requeues the job itself), or a hold for a file-transfer or
starter failure, which the backend releases up to ``infrastructure_retries`` times while the
future shows ``retrying``. Other holds (``htc hold``, a policy, a timeout, memory) fail the
future; the job stays held in the queue for inspection (an unnamed session removes its jobs
when it ends).

**Talking to the schedd** goes through one :class:`~htc.executors.schedd_link.ScheddLink`:
one connection from any thread, requests retried while the schedd restarts, and the executor
broken (:class:`ScheddLost`) only once the pool's master gave up on it. Every ``Submit``
carries a submission id made of the session and its calls: a retry after a lost answer -- to
this schedd or to the one the master started after a crash -- gets the cluster the first try
made, never a second one.

**Attach.** The session journal names every call and its job; replaying the event log from
its start brings each future to where the job is now (finished ones read their result file).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from htc.classad import ClassAd, quote
from htc.errors import HTCError, UsageError
from htc.executors.backend import CallSpec, JobUpdate, RecoveredCall
from htc.executors.errors import ImpossibleRequest, ScheddLost, SessionError
from htc.executors.options import CallOptions
from htc.executors.pool_ads import ad_text, impossible_request, job_python, job_template, proc_ad, submission_id
from htc.executors.pool_watch import Job, JobWatcher
from htc.executors.schedd_link import ScheddLink, transport_for
from htc.executors.spool import Spool, options_from_json
from htc.wire import messages as m
from htc.wire.errors import RemoteError

__all__ = ["PoolBackend", "remove_session_jobs"]

_MAX_PROCS_PER_SUBMIT = 2000
_SLOTS_FRESH = 30.0
_FIRST_SLOTS_WAIT = 10.0


def _session_constraint(spool: Spool) -> str:
    return f"HTCSession == {quote(spool.name)}"


def _history_path(pool: Any, home: Path | None) -> Path | None:
    """The job queue file of a pool given by its home (None: the configured one)."""
    return home / "spool" / "job_queue.db" if pool is not None and home else None


class PoolBackend:
    """Runs calls as jobs of a schedd. See the module docstring.

    Args:
        pool: None (the personal pool under ``$HTC_HOME``, started if needed), a pool's home
            directory, or a :class:`~htc.wire.transport.Transport`.
        schedd: the schedd's address on that transport.
        lost_after: seconds of failed requests before the schedd counts as lost.
    """

    kind = "pool"

    def __init__(self, pool: Any = None, *, schedd: str = "schedd", lost_after: float = 60.0):
        self.pool = pool
        self.schedd = schedd
        self.lost_after = lost_after
        self.spool: Spool | None = None
        self.home: Path | None = None
        self._link: ScheddLink | None = None
        self._watcher: JobWatcher | None = None
        self._job_of: dict[str, str] = {}
        self._templates: dict[int, tuple[CallOptions, dict[str, str]]] = {}
        self._cluster_ads: dict[int, str] = {}  # the templates' text, by id(options) as _templates
        self._slots: tuple[float, list[ClassAd]] = (0.0, [])
        self._named = False
        self._python: str | None = None

    def __repr__(self) -> str:
        return f"PoolBackend(pool={self.pool!r}, schedd={self.schedd!r})"

    def _request(self, msg: m.Message, *, timeout: float = 30.0, retry: bool = True) -> m.Message:
        assert self._link is not None
        return self._link.request(msg, timeout=timeout, retry=retry)

    # --- Backend: the session -----------------------------------------------------------------
    def open(self, spool: Spool, *, named: bool, create: bool) -> None:
        """Reach the schedd (starting the personal pool if needed) for ``spool``'s session.

        Raises:
            ScheddLost: the pool has no schedd answering.
            UsageError: ``pool`` is not a pool.
        """
        self.spool = spool
        spool.flat = True  # most calls' files share calls/ (see htc.executors.spool)
        spool.recycle = not named  # no later client reads an anonymous session's results
        self._named = named
        transport, self.home = self._transport()
        self._link = ScheddLink(transport, self.schedd, self.lost_after, f"htc-pool-io-{spool.name}")
        try:
            self._request(m.Ping(), timeout=10.0, retry=False)
        except (ScheddLost, RemoteError, HTCError) as exc:
            self._link.io.close()
            where = self.home or self.pool
            raise ScheddLost(f"no schedd answers in the pool at {where}: {exc}; 'htc pool status' shows which daemons "
                             "run (HTCExecutor(backend='local') runs calls without a pool)") from exc
        self._watch_session()

    def _transport(self) -> tuple[Any, Path | None]:
        """The transport to the pool's daemons and its home (the remote backend reaches another machine)."""
        return transport_for(self.pool)

    def _watch_session(self) -> None:
        """Start following the session's jobs (its event log, and now and then the queue)."""
        assert self.spool is not None and self._link is not None
        self._watcher = JobWatcher(self.spool, self._link, self._log_path(), _session_constraint(self.spool))

    def _log_path(self) -> Path:
        assert self.spool is not None
        return self.spool.path / "jobs.log"

    def close(self, *, detach: bool) -> None:
        """Stop watching; an unnamed session also removes whatever of its jobs is left in the queue."""
        try:
            if not detach and self._link is not None and self.spool is not None and self._watcher is not None \
                    and self._watcher.jobs:
                # Held jobs of failed calls, and anything else of this session still queued:
                # nobody can collect them once the session's directory is gone.
                try:
                    self._request(m.ActOnJobs(action=m.JobAction.Remove, constraint=_session_constraint(self.spool),
                                              reason="the executor that submitted it has shut down"),
                                  timeout=10.0, retry=False)
                except (HTCError, OSError) as exc:
                    print(f"htc executor: could not remove the jobs of session {self.spool.name}: {exc}",
                          file=sys.stderr)
        finally:
            if self._watcher is not None:
                self._watcher.close()
            if self._link is not None:
                self._link.close()
                self._link = None

    # --- Backend: watching (htc.executors.pool_watch) ------------------------------------------------
    def poll(self, timeout: float) -> list[JobUpdate]:
        """Follow the session's event log (and, now and then, the queue) for up to ``timeout`` s."""
        assert self._watcher is not None
        return self._watcher.poll(timeout)

    def wake(self) -> None:
        """Make a blocked :meth:`poll` return soon."""
        if self._watcher is not None:
            self._watcher.wake()

    # --- Backend: submitting ----------------------------------------------------------------------
    def _template(self, options: CallOptions) -> dict[str, str]:
        cached = self._templates.get(id(options))
        if cached is not None:
            return cached[1]
        assert self.spool is not None
        ad = job_template(options, self.spool, self._log_path(), job_python(options, self._client_python))
        self._templates[id(options)] = (options, ad)
        return ad

    def _cluster_ad(self, options: CallOptions) -> str:
        """The template's ClassAd text, made once per option set (a template does not change,
        and _templates keeps ``options`` alive, so its id names no other)."""
        text = self._cluster_ads.get(id(options))
        if text is None:
            text = self._cluster_ads[id(options)] = ad_text(self._template(options))
        return text

    def _client_python(self) -> str:
        """A root client's interpreter for the slot accounts, looked over (and mirrored) once a session."""
        if self._python is None:
            from htc.executors.client_env import client_python

            self._python = client_python()
        return self._python

    def check_request(self, options: CallOptions) -> None:
        """Refuse at once a request no slot of the pool could ever satisfy.

        Raises:
            ImpossibleRequest: naming what is too big or never true, and the largest slot.
            OptionError: the options do not make a valid job.
        """
        template = self._template(options)
        problem = impossible_request(options, template, self._slot_ads())
        if problem:
            raise ImpossibleRequest(problem)

    def _slot_ads(self) -> list[ClassAd]:
        fetched, ads = self._slots
        if time.monotonic() - fetched < _SLOTS_FRESH:
            return ads
        assert self._link is not None
        # A pool started a moment ago has no slot ads yet; give its startd a few seconds.
        deadline = time.monotonic() + (_FIRST_SLOTS_WAIT if not fetched else 0.0)
        while True:
            try:
                ads = self._link.startd_ads(timeout=10.0)
            except (HTCError, OSError, TimeoutError):
                ads = []
            if ads or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        self._slots = (time.monotonic(), ads)
        return ads

    def submit_calls(self, calls: Sequence[CallSpec]) -> list[str]:
        """Queue the calls: one cluster (one transaction) per option set and 2,000 calls.

        Raises:
            ScheddLost: the schedd stayed unreachable.
            RemoteError: the schedd refused the jobs (the message says why).
        """
        assert self.spool is not None and self._watcher is not None
        job_ids: dict[str, str] = {}
        groups: dict[int, list[CallSpec]] = {}
        for spec in calls:
            groups.setdefault(id(spec.options), []).append(spec)
        journal = []
        for group in groups.values():
            cluster_ad = self._cluster_ad(group[0].options)
            for start in range(0, len(group), _MAX_PROCS_PER_SUBMIT):
                part = group[start:start + _MAX_PROCS_PER_SUBMIT]
                procs = tuple(self._proc_ad(spec) for spec in part)
                for spec, job_id in zip(part, self._submit_cluster(cluster_ad, procs, part)):
                    job_ids[spec.call_id] = job_id
                    self._watcher.follow(job_id, Job(spec.call_id, spec.label, spec.options))
                    self._job_of[spec.call_id] = job_id
                    journal.append({"op": "job", "id": spec.call_id, "job": job_id})
        if self._named:
            self.spool.record(journal)
        self._watcher.expect_news()
        # No Reschedule of our own: the schedd starts new calls on a claim it kept for us, and
        # otherwise asks the negotiator for a cycle itself (SCHEDD_SEND_RESCHEDULE).
        return [job_ids[spec.call_id] for spec in calls]

    def _proc_ad(self, spec: CallSpec) -> str:
        """The call's proc ad (its files written into the session here)."""
        assert self.spool is not None
        return proc_ad(spec, self.spool)

    def _submit_cluster(self, cluster_ad: str, procs: tuple[str, ...], specs: list[CallSpec]) -> list[str]:
        # The batch's submission id makes a retry after a lost reply -- to this schedd or to
        # the one the master starts after a crash -- answer the cluster the first try made.
        assert self.spool is not None
        msg = m.Submit(cluster_ad=cluster_ad, proc_ads=procs, submission_id=submission_id(self.spool.name, specs))
        reply = self._request(msg, timeout=60.0)
        return [f"{reply.cluster_id}.{reply.first_proc + i}" for i in range(reply.num_procs)]

    # --- Backend: acting on jobs ------------------------------------------------------------------------
    def _act(self, action: m.JobAction, job_ids: list[str], reason: str) -> None:
        if job_ids:
            self._request(m.ActOnJobs(action=action, ids=tuple(job_ids), reason=reason))

    def remove(self, call_ids: Sequence[str], reason: str) -> None:
        """``htc rm`` the calls' jobs."""
        assert self._watcher is not None
        ids = []
        for cid in call_ids:
            job_id = self._job_of.get(cid)
            if job_id is not None and self._watcher.jobs[job_id].state != "done":
                self._watcher.jobs[job_id].removing = True
                ids.append(job_id)
        self._act(m.JobAction.Remove, ids, reason)

    def vacate(self, call_ids: Sequence[str]) -> None:
        """``htc vacate_job`` the calls' running jobs (they checkpoint and go back to idle)."""
        ids = [self._job_of[c] for c in call_ids if c in self._job_of]
        self._act(m.JobAction.Vacate, ids, "htc executor: future.vacate()")

    # --- Backend: introspection ---------------------------------------------------------------------------
    def output(self, call_id: str, stream: str) -> Path:
        """Where the call's output arrives (in its job's Iwd)."""
        assert self.spool is not None
        return self.spool.output_path(call_id, stream)

    def job_ad(self, call_id: str) -> ClassAd:
        """The job's ad from the queue, or from the history once it left.

        Raises:
            SessionError: the job is in neither.
        """
        job_id = self._job_of.get(call_id)
        if job_id is None:
            raise SessionError(f"call {call_id} has no job in this session")
        cluster, proc = job_id.split(".")
        reply = self._request(m.QueryJobs(constraint=f"ClusterId == {cluster} && ProcId == {proc}"))
        if reply.ads:
            return ClassAd(reply.ads[0])
        from htc.client import history

        try:
            found = history(f"ClusterId == {cluster} && ProcId == {proc}", limit=1,
                            path=_history_path(self.pool, self.home))
        except UsageError:
            found = []
        if not found:
            raise SessionError(f"job {job_id} is neither in the queue nor in the history this machine can read")
        return found[0]

    def why(self, call_id: str) -> str:
        """What the job is doing, and for an idle job the slots' view (``-better-analyze``)."""
        job_id = self._job_of.get(call_id)
        if job_id is None:
            return f"call {call_id} has no job yet"
        try:
            ad = self.job_ad(call_id)
        except SessionError as exc:
            return str(exc)
        status = ad.get("JobStatus")
        if status == 5:
            return (f"job {job_id} is held: {ad.get('HoldReason')} (HoldReasonCode {ad.get('HoldReasonCode')}); "
                    f"'htc release {job_id}' runs it again")
        if status == 2:
            return f"job {job_id} is running on {ad.get('RemoteHost', 'a slot')}"
        if status != 1:
            return f"job {job_id} has status {status}"
        from htc.client import analyze_job

        assert self._link is not None
        slots = self._link.startd_ads(timeout=10.0)
        return f"job {job_id} is idle.\n" + analyze_job(ad, slots).render()

    # --- Backend: attach -------------------------------------------------------------------------------
    def recover(self) -> list[RecoveredCall]:
        """The calls of the session's journal, with their jobs (the event log is replayed by poll)."""
        assert self.spool is not None and self._watcher is not None
        calls: dict[str, dict[str, Any]] = {}
        jobs: dict[str, str] = {}
        for entry in self.spool.journal():
            if entry.get("op") == "call":
                calls[entry["id"]] = entry
            elif entry.get("op") == "job":
                jobs[entry["id"]] = entry["job"]
        if calls:
            jobs.update(self._queued_call_ids(set(calls) - set(jobs)))
        out = []
        for call_id, entry in calls.items():
            options = options_from_json(entry.get("options", {}))
            job_id = jobs.get(call_id)
            data = None
            if job_id is not None:
                self._watcher.follow(job_id, Job(call_id, entry["label"], options))
                self._job_of[call_id] = job_id
            else:
                try:
                    data = self.spool.call_path(call_id).read_bytes()
                except FileNotFoundError:
                    data = None
            out.append(RecoveredCall(call_id, entry["label"], job_id, tuple(entry.get("parents", ())), options,
                                     None, data))
        self._watcher.reconcile_soon()
        return out

    def _queued_call_ids(self, call_ids: set[str]) -> dict[str, str]:
        """Jobs of the session the journal does not name (the client died right after
        submitting): in the queue, or -- finished meanwhile -- in the history, so that attach
        does not submit them again."""
        if not call_ids:
            return {}
        assert self.spool is not None
        reply = self._request(m.QueryJobs(constraint=_session_constraint(self.spool),
                                          projection=("ClusterId", "ProcId", "HTCCallId")))
        ads = [ClassAd(text) for text in reply.ads]
        if len(ads) < len(call_ids):
            ads += self._session_history()
        found = {}
        for ad in ads:
            if ad.get("HTCCallId") in call_ids:
                found[str(ad["HTCCallId"])] = f"{ad['ClusterId']}.{ad['ProcId']}"
        return found

    def _session_history(self) -> list[ClassAd]:
        """The session's finished jobs, from the history this machine can read (none when it
        cannot: the pool is elsewhere, or its queue file is not readable)."""
        from htc.client import history

        assert self.spool is not None
        try:
            return history(_session_constraint(self.spool), path=_history_path(self.pool, self.home))
        except (HTCError, OSError):
            return []

    def collected(self, call_ids: Sequence[str]) -> None:
        """Nothing to free: results stay in the spool until the session is forgotten or expires."""
        assert self._watcher is not None
        for cid in call_ids:
            job_id = self._job_of.get(cid)
            if job_id is not None and job_id in self._watcher.jobs:
                self._watcher.jobs[job_id].state = "done"


def remove_session_jobs(spool: Spool) -> None:
    """Remove every job of a session from its pool's queue (``htc.executors.forget``); quiet when the
    pool is not running."""
    info = spool.info()
    from htc.executors.remote import forget_remote, is_remote_pool

    if is_remote_pool(info.get("pool")):
        forget_remote(spool, info["pool"], info.get("schedd"))
        return
    try:
        transport, _ = transport_for(info.get("pool"), start=False)
    except (HTCError, OSError):
        return
    link = ScheddLink(transport, "schedd", 60.0, f"htc-pool-io-{spool.name}")
    try:
        link.request(m.ActOnJobs(action=m.JobAction.Remove, constraint=_session_constraint(spool),
                                 reason="htc.executors.forget()"), timeout=10.0, retry=False)
    except (HTCError, OSError):
        return
    finally:
        link.close()
