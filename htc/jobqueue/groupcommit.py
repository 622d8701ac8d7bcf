"""Submitting clusters: cluster ids reserved ahead, and group commit of concurrent submits.

Theory of operation
-------------------
Submitting is the hot write path and uses group commit: a submitter appends its cluster to a
pending list and then takes the lock; whoever gets the lock first becomes the leader and
writes *all* pending clusters in one transaction -- one fsync for many submits -- each in
its own savepoint so that one bad cluster fails alone. Followers find their cluster already
committed when they get the lock. ``submit`` returns only after the COMMIT that made the
cluster durable. No background thread is involved.

The leader's transaction is :meth:`JobQueue.transaction` (``htc.jobqueue.queue``), each
cluster's savepoint a nested one; the rows a cluster becomes are made by
:mod:`htc.jobqueue.submission`. A submit from inside a transaction of the submitting thread
joins that transaction instead, and commits nobody else's cluster.

Cluster ids are reserved with :meth:`JobQueue.next_cluster_id` before the submit
description is expanded (the expansion needs ``$(Cluster)``). The reservation is a tiny
transaction committed without fsync: WAL frames are ordered, so the fsync of any later
commit -- in particular the cluster's own -- makes the reservation durable too, and a
reservation lost in a power failure belonged to a cluster nobody was told about.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Sequence

import msgspec

from htc.errors import UsageError
from htc.jobqueue.ads import ClusterAd
from htc.jobqueue.factory import factory_room
from htc.jobqueue.store import translate_errors
from htc.jobqueue.submission import insert_procs, prepare

_encode = msgspec.json.Encoder().encode


@dataclass
class _Ticket:
    cluster: object
    now: float
    done: bool = False
    result: int | None = None
    error: BaseException | None = None



class QueueSubmits:
    """``JobQueue``'s submit path (it relies on the queue's connection, lock, transactions and
    the ``_pending`` list and ``_pending_lock`` its ``__init__`` makes)."""

    def next_cluster_id(self) -> int:
        """Reserve the next cluster id (never handed out twice, even across restarts).

        Returns:
            The id to build the cluster with (``Submit.cluster(id, ...)``) and then submit.
        """
        with self._lock, translate_errors(self.path):
            if self._depth:
                return self._reserve_id()
            # Not fsynced on its own: the cluster's commit (or any later one) makes it durable.
            with self.transaction(durable=False):
                return self._reserve_id()

    def _reserve_id(self) -> int:
        cid = self._conn.execute("SELECT value FROM meta WHERE key = 'next_cluster_id'").fetchone()[0]
        self._conn.execute("UPDATE meta SET value = ? WHERE key = 'next_cluster_id'", (cid + 1,))
        return cid

    def submit(self, cluster: object, *, now: float | None = None, savepoint: bool = True) -> int:
        """Store a whole cluster in one transaction; return once it is durable.

        Concurrent callers (threads) share commits: see the module docstring.

        Args:
            cluster: ``htc.submit``'s ``SubmittedCluster`` or any object with ``cluster_ad``,
                ``num_procs``, ``proc_ads(start, stop)`` and a ClusterId reserved with
                :meth:`next_cluster_id`.
            now: the submit time (QDate when the ad has none); default: the clock.
            savepoint: inside this thread's transaction, whether a failure undoes this cluster alone.

        Returns:
            The ClusterId.

        Raises:
            UsageError: the cluster is malformed, its id was not reserved or is taken.
            QueueStorageError: the commit failed; the cluster is not in the queue.
        """
        ticket = _Ticket(cluster, time.time() if now is None else now)
        if self._owner == threading.get_ident():
            # Inside this thread's own transaction(): join it (durable when it commits), and
            # commit nobody else's cluster as part of a transaction we do not own. (Checked
            # without the lock: followers must be able to queue while a leader commits.)
            with self.transaction(savepoint=savepoint):
                return self._insert_cluster(cluster, ticket.now)
        with self._pending_lock:
            self._pending.append(ticket)
        with self._lock:
            if not ticket.done:
                self._commit_pending()
        if ticket.error is not None:
            raise ticket.error
        assert ticket.result is not None
        return ticket.result

    async def submit_async(self, cluster: object, *, now: float | None = None) -> int:
        """:meth:`submit` for an asyncio service: waits in a worker thread, shares commits."""
        return await asyncio.to_thread(self.submit, cluster, now=now)

    def submit_many(self, clusters: Sequence[object], *, now: float | None = None) -> list[int]:
        """Store several clusters in one transaction: all of them, or none.

        Raises:
            UsageError: one cluster is malformed; no cluster was stored.
        """
        when = time.time() if now is None else now
        with self.transaction():
            return [self._insert_cluster(c, when) for c in clusters]

    def _commit_pending(self) -> None:
        with self._pending_lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            with self.transaction():
                for ticket in batch:
                    try:
                        with self.transaction():
                            ticket.result = self._insert_cluster(ticket.cluster, ticket.now)
                    except Exception as exc:  # this cluster fails alone
                        ticket.error = exc
        except BaseException as exc:
            for ticket in batch:
                if ticket.error is None:
                    ticket.error = exc
                ticket.result = None
            for ticket in batch:
                ticket.done = True
            if not isinstance(exc, Exception):
                raise
            return
        for ticket in batch:
            ticket.done = True

    def _insert_cluster(self, cluster: object, now: float) -> int:
        prep = prepare(cluster, now, self._validate)
        cid = prep.cluster_id
        conn = self._conn
        reserved = conn.execute("SELECT value FROM meta WHERE key = 'next_cluster_id'").fetchone()[0]
        if cid >= reserved:
            raise UsageError(f"cluster id {cid} was never reserved; call "
                             "JobQueue.next_cluster_id() and build the cluster with its result")
        self._flush_history()  # a cluster that left in this transaction is there
        if conn.execute("SELECT 1 FROM clusters WHERE cluster_id = ? UNION ALL "
                        "SELECT 1 FROM history WHERE cluster_id = ? LIMIT 1", (cid, cid)).fetchone():
            raise UsageError(f"cluster {cid} was already submitted; reserve a new id for a new cluster")
        count = prep.num_procs
        if prep.factory is not None:
            count = min(count, factory_room(prep.factory, present=0, idle=0))
            self._factory_sources[cid] = cluster
        self._insert_procs(prep, 0, count)
        # The cluster row goes in last, when the procs' overridden attributes are known.
        proc_attrs = sorted(prep.proc_attrs)
        conn.execute(
            "INSERT INTO clusters (cluster_id, owner, qdate, num_procs, next_proc, ad, proc_attrs, factory) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (cid, prep.owner, prep.qdate, prep.num_procs, count, _encode(prep.attrs).decode(),
             _encode(proc_attrs).decode(), _encode(prep.factory).decode() if prep.factory else None))
        # Cached as read back (no SELECT and decoding when the schedd reads it); a rollback drops it.
        self._clusters[cid] = ClusterAd(cid, dict(prep.attrs), proc_attrs, prep.owner, prep.qdate, canon=prep.canon)
        return cid

    def _insert_procs(self, prep, start: int, stop: int) -> None:
        """Insert procs ``start`` to ``stop - 1`` (the caller records next_proc / proc_attrs)."""
        prep.schedd_name = self.schedd_name
        insert_procs(self._conn, prep, start, stop, self._validate)
        self._clusters.pop(prep.cluster_id, None)


__all__ = ["QueueSubmits"]
