"""The schedd's durable job queue.

Theory of operation
-------------------
:class:`JobQueue` owns one sqlite connection (see :mod:`htc.jobqueue.store` for the file and
schema) and serialises every use of it with one re-entrant lock. Every change is a
transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``); nested uses become savepoints, so a failing
part rolls back alone and the caller decides. One job's changes (status, attributes, its
exit), which check everything before they write, nest without a savepoint: should one fail
after writing anyway, the transaction around it cannot commit (see :meth:`JobQueue.transaction`).

Submitting is the hot write path and uses group commit, and cluster ids are reserved before
a cluster is built: :mod:`htc.jobqueue.groupcommit` (:class:`~htc.jobqueue.groupcommit.QueueSubmits`).

Reads hand out :class:`~htc.jobqueue.ads.JobAd` views over a per-cluster cache of parsed
cluster ads. The cache is dropped whenever another connection changed the file
(``PRAGMA data_version``, :mod:`htc.jobqueue.reads`) and whenever this queue changes a cluster ad.

Status changes go through the transition table of :mod:`htc.jobqueue.states`; a job that
reaches Completed, or Removed while nothing runs it, moves to the history table in the same
transaction.

Durability. A commit is durable when it returns (a durable transaction runs with
``synchronous=FULL``: sqlite fsyncs the WAL at its commit; between transactions the connection
stays at NORMAL, so bookkeeping commits pay for no PRAGMA).
A caller that does not need that yet -- bookkeeping nobody has been told about, or a change a
durable commit will follow at once -- opens ``transaction(durable=False)``: the commit is
atomic and survives a crash of the process (the WAL is written before COMMIT returns), but a
power failure may take it back until the next durable commit or :meth:`JobQueue.sync`, which
fsyncs the WAL once for everything before it (WAL frames are ordered). A schedd finishing one
job and starting the next on the same claim so pays one fsync, not two.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from typing import Callable, Iterator, Sequence

import msgspec

from htc.jobqueue import store
from htc.jobqueue.ads import HOT_ATTRS, ClusterAd, JobAd, quote
from htc.jobqueue.changes import QueueChanges
from htc.jobqueue.expr import GroupedEvaluator
from htc.jobqueue.factory import QueueFactory
from htc.jobqueue.groupcommit import QueueSubmits, _Ticket
from htc.jobqueue.history import QueueHistory
from htc.jobqueue.promises import QueuePromises
from htc.jobqueue.query import narrow, plan, select_rows
from htc.jobqueue.reads import QueueReads
from htc.jobqueue.records import JobId, JobNotFound, QueueStatistics
from htc.jobqueue.states import JobStatus
from htc.jobqueue.store import JOB_COLUMNS, translate_errors

_decode_attrs = msgspec.json.Decoder(dict[str, str]).decode
_decode_list = msgspec.json.Decoder(list[str]).decode

#: The seed's PRIO expression (Condor 4.x ``PRIO``), rewritten over today's attributes: the
#: schedd offers a user's jobs in descending PRIO -- job priority first, then jobs that
#: already hold a checkpoint, then the oldest. Knob ``SCHEDD_JOB_PRIO_EXPR``.
DEFAULT_PRIO_EXPR = "(JobPrio * 10) + ifThenElse(NumCkpts > 0, 1, 0) - (QDate / 1000000000.0)"

_HOT_NAMES = frozenset(HOT_ATTRS)  # lower-case names of the per-job columns


class JobQueue(QueueSubmits, QueueChanges, QueueHistory, QueueFactory, QueuePromises, QueueReads):
    """A durable job queue in one sqlite file (see the module docstring)."""

    def __init__(self, db, path: str, *, prio_expr: str = DEFAULT_PRIO_EXPR,
                 system_policy=None, rebuild_factory: Callable[[dict], object] | None = None,
                 validate: bool = True):
        from htc.jobqueue.policy import SystemPolicy  # policy imports expr; keep import light

        self._db = db
        self._conn: sqlite3.Connection = db.conn
        self.path = path
        self.prio_expr = prio_expr
        self.system_policy = system_policy or SystemPolicy()
        self._rebuild_factory = rebuild_factory
        self._validate = validate
        #: the schedd's name (its ``Name``): set, each new proc gets a ``GlobalJobId``
        self.schedd_name: str | None = None
        self._lock = threading.RLock()
        self._depth = 0
        self._broken = False  # a nested block failed after writing: this transaction must not commit
        self._pending: list[_Ticket] = []
        self._pending_lock = threading.Lock()
        self._clusters: dict[int, ClusterAd] = {}
        self._factory_sources: dict[int, object] = {}
        self._data_version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        # Between transactions the connection stays at NORMAL, and a durable transaction
        # switches to FULL around itself: most commits of a busy schedd are bookkeeping
        # (durable=False), which so pay for no PRAGMA of their own (see "Durability" above).
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._commits = 0
        self._unsynced = False  # a non-durable commit awaits the next fsync of the WAL
        self._owner: int | None = None  # thread running the outermost transaction
        # Job rows read in the current transaction, by job id: a change to a job reads it
        # several times (load, policy, history); every write to a job drops its row here.
        self._rows: dict[tuple[int, int], tuple] = {}
        self._history_rows: list[tuple] = []  # jobs moved to the history, written at the commit (history)
        self._paid_later: list[int] = []  # outbox entries paid, deleted by the next commit (promises)
        GroupedEvaluator(prio_expr)  # refuse a PRIO expression that does not parse, now

    @classmethod
    def open(cls, path: str, *, create: bool = True, verify: bool = True, **options) -> JobQueue:
        """Open the queue at ``path`` (``":memory:"`` for a throw-away one).

        Args:
            path: the queue file.
            create: create an empty queue when there is none.
            verify: check the whole file with sqlite's quick_check first.
            **options: ``prio_expr`` (the ``SCHEDD_JOB_PRIO_EXPR`` knob), ``system_policy``
                (a :class:`~htc.jobqueue.policy.SystemPolicy` of the ``SYSTEM_PERIODIC_*``
                knobs), ``rebuild_factory`` (callable rebuilding a late-materialization
                source from its stored record), ``validate`` (parse every submitted
                expression; default true).

        Returns:
            The open queue; close it (or use ``with``).

        Raises:
            QueueFileError: the file is missing (``create=False``), foreign or damaged; it
                was not modified.
            UsageError: an option is invalid (an unparsable PRIO expression...).
        """
        db = store.open_database(path, create=create, verify=verify)
        try:
            return cls(db, path, **options)
        except BaseException:
            db.conn.close()
            raise

    def close(self) -> None:
        """Close the database connection (the WAL stays durable; outbox entries paid later go first)."""
        with self._lock, contextlib.suppress(store.QueueStorageError, sqlite3.Error):
            self.pay_now()
        with self._lock:
            self._conn.close()

    def __enter__(self) -> JobQueue:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transactions --------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = True, savepoint: bool = True) -> Iterator[None]:
        """Group changes into one atomic, durable commit (nested uses are savepoints).

        Everything done by this thread inside the block -- including :meth:`submit` -- is
        durable only when the outermost block exits and commits.

        Args:
            durable: fsync at commit (the default). With False the commit survives a crash of
                the process but not of the machine until the next durable commit or
                :meth:`sync` (see the module docstring). Only the outermost block decides.
            savepoint: for a nested use, whether a failure inside it rolls back alone. With
                False (a change that checks everything before it writes, as each status
                change does) there is no savepoint to pay for, and should the block fail after
                it wrote, the outermost block rolls everything back and raises
                ``QueueStorageError`` instead of committing a half-made change.

        Raises:
            QueueStorageError: sqlite failed (disk full, I/O error); nothing was committed.
        """
        with self._lock, translate_errors(self.path):
            if self._depth and savepoint:
                name = f"sp{self._depth}"
                self._conn.execute(f"SAVEPOINT {name}")
                broken, moved = self._broken, len(self._history_rows)
                self._depth += 1
                try:
                    yield
                except BaseException:
                    self._conn.execute(f"ROLLBACK TO {name}")
                    self._conn.execute(f"RELEASE {name}")
                    self._broken = broken  # whatever failed inside is undone with the savepoint
                    del self._history_rows[moved:]
                    self._clusters.clear()
                    self._rows.clear()
                    raise
                finally:
                    self._depth -= 1
                self._conn.execute(f"RELEASE {name}")
                return
            if self._depth:
                # Without a savepoint (two statements each; one job's status change nests two
                # or three deep): a block that failed after writing part of itself leaves the
                # whole transaction unable to commit, since that part cannot be undone alone.
                before = self._conn.total_changes
                self._depth += 1
                try:
                    yield
                except BaseException:
                    if self._conn.total_changes != before:
                        self._broken = True
                    self._clusters.clear()
                    self._rows.clear()
                    raise
                finally:
                    self._depth -= 1
                return
            if durable:
                self._conn.execute("PRAGMA synchronous = FULL")  # may not change inside a transaction
            self._rows.clear()
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._broken = False
                self._depth = 1
                self._owner = threading.get_ident()
                version = self._conn.execute("PRAGMA data_version").fetchone()[0]
                if version != self._data_version:
                    self._clusters.clear()  # another process changed the queue meanwhile
                try:
                    yield
                except BaseException:
                    self._depth = 0
                    self._owner = None
                    self._conn.execute("ROLLBACK")
                    self._clusters.clear()
                    raise
                self._depth = 0
                self._owner = None
                if self._broken:
                    self._conn.execute("ROLLBACK")
                    self._clusters.clear()
                    raise store.QueueStorageError(
                        f"a change to the job queue {self.path} failed after it had written part of "
                        "itself, and its caller went on: nothing of the transaction was committed")
                try:
                    self._commit()  # COMMIT, with the outbox entries paid since (htc.jobqueue.promises)
                except BaseException:
                    # A failed COMMIT (disk full, I/O error) may leave the transaction open.
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    self._clusters.clear()
                    raise
            finally:
                self._rows.clear()
                self._history_rows.clear()  # written by the commit, or rolled back
                if durable:
                    self._conn.execute("PRAGMA synchronous = NORMAL")
            self._unsynced = not durable
            self._commits += 1
            # Our own commits leave data_version as it was; the value read under the write
            # lock is the one to compare the next read with (a commit of another process
            # after ours changes it, and the next read then drops the caches).
            self._data_version = version

    def sync(self) -> None:
        """Make every commit so far durable: one fsync of the WAL (nothing when none is pending).

        Raises:
            QueueStorageError: the fsync failed (an I/O error).
        """
        with self._lock:
            if not self._unsynced or self._depth:
                return
            if self.path != ":memory:":
                try:
                    fd = os.open(self.path + "-wal", os.O_RDONLY)
                except FileNotFoundError:
                    fd = None  # checkpointed and truncated: the frames are in the (synced) file
                if fd is not None:
                    try:
                        os.fsync(fd)
                    except OSError as exc:
                        raise store.QueueStorageError(f"the job queue {self.path} could not be made durable: "
                                                      f"{exc}; check the disk") from None
                    finally:
                        os.close(fd)
            self._unsynced = False

    # -- reading -------------------------------------------------------------------------

    def _cluster(self, cid: int) -> ClusterAd:
        cached = self._clusters.get(cid)
        if cached is None:
            row = self._conn.execute("SELECT ad, proc_attrs, owner, qdate FROM clusters "
                                     "WHERE cluster_id = ?", (cid,)).fetchone()
            if row is None:
                raise JobNotFound(f"cluster {cid} is not in the queue")
            cached = ClusterAd(cid, _decode_attrs(row[0]), _decode_list(row[1]), row[2], row[3])
            self._clusters[cid] = cached
        return cached

    def _job_from_row(self, row: tuple) -> JobAd:
        # The row tuple doubles as the hot-attribute tuple (columns 0-7 are in HOT_ATTRS order).
        return JobAd(self._cluster(row[0]), row[8], row)

    def get_job(self, job_id: JobId) -> JobAd:
        """One job's ad.

        Raises:
            JobNotFound: no such job in the queue (see :meth:`history` for finished ones).
        """
        cid, pid = job_id
        with self._reading():
            return self._load(job_id)

    def cluster_jobs(self, cluster_id: int) -> list[JobAd]:
        """The jobs of one cluster, in ProcId order: ``query(f"ClusterId == {cluster_id}")``
        without planning a constraint or estimating its share of the queue (the schedd reads
        every cluster back this way as it submits it)."""
        with self._reading() as conn:
            rows = conn.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE cluster_id = ? ORDER BY proc_id",
                                (cluster_id,)).fetchall()
            get = self._cluster
            return [JobAd(get(r[0]), r[8], r) for r in rows]

    def cluster_count(self, cluster_id: int, status: int) -> int:
        """How many jobs of one cluster are in ``status`` (a count by the key, no constraint)."""
        with self._reading() as conn:
            return conn.execute("SELECT count(*) FROM jobs WHERE cluster_id = ? AND status = ?",
                                (cluster_id, int(status))).fetchone()[0]

    def query(self, constraint: str | None = None, *, projection: Sequence[str] | None = None,
              limit: int | None = None, now: float | None = None) -> list:
        """The jobs for which ``constraint`` is true, in ClusterId.ProcId order.

        Args:
            constraint: a ClassAd expression (``htc q -constraint``); None selects every job.
            projection: attribute names; when given, each result is a plain dict holding
                just those attributes (the ones the job has).
            limit: stop after this many jobs.
            now: the time ``CurrentTime`` stands for (default: the clock).

        Returns:
            :class:`~htc.jobqueue.ads.JobAd` views, or dicts with ``projection``.

        Raises:
            UsageError: the constraint does not parse.
        """
        p = plan(constraint)
        with self._reading() as conn:
            where, params = p.where, p.params
            indexed = p.indexed()
            if indexed is not None:
                # An index only pays off for a small part of the table; past that, reading
                # the table in key order beats index-then-table lookups, so the terms are
                # written "+column" to keep sqlite off the index (the primary key stays usable).
                estimate = conn.execute(f"SELECT count(*) FROM jobs WHERE {indexed[0]}",
                                        indexed[1]).fetchone()[0]
                total = conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
                if estimate * 5 > total:
                    where = " AND ".join("+" + c[1] for c in p.clauses)
            evaluator = None
            check: set[int] = set()
            clusters: dict[int, ClusterAd] = {}
            if p.residual:
                evaluator = GroupedEvaluator(p.residual_text, time.time() if now is None else now)
                for (cid,) in conn.execute("SELECT cluster_id FROM clusters").fetchall():
                    clusters[cid] = self._cluster(cid)
                narrowed = narrow(conn, where, params, clusters, evaluator, p.tests)
                if narrowed is None:
                    return []
                where, params, check = narrowed
            sql = f"SELECT {JOB_COLUMNS} FROM jobs WHERE {where} ORDER BY cluster_id, proc_id"
            if not check and limit is not None:
                sql += f" LIMIT {int(limit)}"
            rows = conn.execute(sql, params).fetchall()
            if not check:
                get = self._cluster
                jobs = [JobAd(get(r[0]), r[8], r) for r in rows]
            else:
                jobs = select_rows(rows, clusters, evaluator, limit, check)
        if projection is not None:
            return [{name: job[name] for name in projection if name in job} for job in jobs]
        return jobs

    def status_counts(self, attrs: Sequence[str]) -> list[tuple[dict[str, str], int, int]]:
        """How many jobs have each status, by the values of ``attrs`` (expression texts).

        One ``GROUP BY`` over clusters, owners and statuses rather than a look at every job:
        where no proc of a cluster overrides one of ``attrs``, its procs share the cluster's
        values (``Owner`` is a column of its own).

        Returns:
            ``(values, status, count)`` triples; ``values`` maps each of ``attrs`` the job has.
        """
        wanted = {a.lower() for a in attrs} - {"owner"}
        owner_attr = next((a for a in attrs if a.lower() == "owner"), None)
        out: list[tuple[dict[str, str], int, int]] = []
        with self._reading() as conn:
            rows = conn.execute("SELECT cluster_id, owner, status, COUNT(*) FROM jobs "
                                "GROUP BY cluster_id, owner, status").fetchall()
            for cid, owner, status, n in rows:
                cluster = self._cluster(cid)
                if cluster.proc_attrs & wanted or wanted & _HOT_NAMES:
                    break
                values = {a: cluster.attrs[a] for a in attrs if a in cluster.attrs}
                if owner_attr is not None and owner is not None:
                    values[owner_attr] = quote(owner)
                out.append((values, status, n))
            else:
                return out
        # Some proc overrides one of them (or it is a per-job column): look at each job.
        return [({a: job[a] for a in attrs if a in job}, int(job.get("JobStatus", "0")), 1)
                for job in self.query(projection=[*attrs, "JobStatus"])]

    def count(self, constraint: str | None = None) -> int:
        """How many jobs match ``constraint`` (every job when None)."""
        p = plan(constraint)
        if p.sql_only:
            with self._reading() as conn:
                return conn.execute(f"SELECT count(*) FROM jobs WHERE {p.where}", p.params).fetchone()[0]
        return len(self.query(constraint))

    def exists(self, constraint: str | None = None) -> bool:
        """Whether any job matches ``constraint``: :meth:`count` that stops at the first."""
        if (p := plan(constraint)).sql_only:
            with self._reading() as conn:
                return bool(conn.execute(f"SELECT EXISTS (SELECT 1 FROM jobs WHERE {p.where})", p.params).fetchone()[0])
        return bool(self.query(constraint, limit=1))

    def jobs_by_owner(self, owner: str, status: int | None = None) -> list[JobAd]:
        """One owner's jobs (optionally in one status): the index behind ``htc q <owner>``."""
        if status is None:
            return self.query(f"Owner == {quote(owner)}")
        return self.query(f"Owner == {quote(owner)} && JobStatus == {int(status)}")

    def statistics(self) -> QueueStatistics:
        """Counts of clusters, jobs by status, and finished jobs in the history."""
        with self._reading() as conn:
            self._flush_history()
            clusters = conn.execute("SELECT count(*) FROM clusters").fetchone()[0]
            by_status = {JobStatus(s): n for s, n in
                         conn.execute("SELECT status, count(*) FROM jobs GROUP BY status")}
            history = conn.execute("SELECT count(*) FROM history").fetchone()[0]
        return QueueStatistics(clusters, sum(by_status.values()), by_status, history, self._commits)

    # The rest of the API is mixed in: cluster ids and submits, group commit included
    # (QueueSubmits, htc.jobqueue.groupcommit); status changes, edits, policy, job order and
    # autoclusters (QueueChanges, htc.jobqueue.changes); the history (QueueHistory,
    # htc.jobqueue.history); reads' cache checks (QueueReads); late materialization
    # (QueueFactory, htc.jobqueue.factory); remembered submissions and results owed to disk
    # (QueuePromises, htc.jobqueue.promises).
