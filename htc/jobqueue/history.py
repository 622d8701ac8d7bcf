"""The job history: how jobs move there (without their private attributes) and how it is read.

Theory of operation
-------------------
A job leaves the queue when it completes (or is removed while not running): its row in
``jobs`` is deleted and its whole ad -- the cluster's attributes with the proc's own over them,
less the private ones (``ClaimId``...: :func:`htc.wire.private.public`) -- becomes a row of
``history``, in the transaction of the change that ended it. A call lane ends tens of calls in
one transaction (a ``CallsDone`` batch), so the history rows wait in ``_history_rows`` and are
written with one ``executemany`` just before the transaction's COMMIT
(:meth:`QueuePromises._commit <htc.jobqueue.promises.QueuePromises._commit>`), or before anything
inside it reads the history (:meth:`QueueHistory.history`, a new cluster's id check). A
transaction that rolls back forgets them with it (``JobQueue.transaction`` empties the list;
a savepoint's rollback drops those added inside it). Other connections only ever see
committed rows, so they cannot tell the difference, and the queue's lock keeps other threads
out of a transaction until it ends.

Which attribute names are private is judged once per name (:func:`_private_names`): a cluster's
names once per cluster (a memo in its cache), a job's own names against the sets of names
judged before.
"""

from __future__ import annotations

from typing import Iterable

import msgspec

from htc.jobqueue.ads import JobAd
from htc.jobqueue.expr import is_true
from htc.wire.private import is_private, public

_encode = msgspec.json.Encoder().encode
_decode_attrs = msgspec.json.Decoder(dict[str, str]).decode


def _public_ad(job: JobAd) -> dict[str, str]:
    """``public(job.to_dict())`` (:func:`htc.wire.private.public`), looking at the cluster's
    attribute names once per cluster (a memo in its cache) and at each job's own names only."""
    ad = job.to_dict()
    cache = job.cluster.cache
    names = cache.get(_PRIVATE_NAMES)
    if names is None:
        names = cache[_PRIVATE_NAMES] = tuple(_private_names(job.cluster.attrs))
    for name in names:
        ad.pop(name, None)
    own = job.own
    if own:
        for name in _private_names(own):
            ad.pop(name, None)
    return ad


def _private_names(attrs: Iterable[str]) -> set[str]:
    """The names among ``attrs`` that :func:`htc.wire.private.public` leaves out: two set
    operations over the names judged before (every job's own names come here on its way to
    the history), :func:`is_private` for new ones (all forgotten past :data:`_NAMES_KEPT`)."""
    names = set(attrs)
    new = names.difference(_PUBLIC_NAMES, _PRIVATE_NAMES_SEEN)
    if new:
        if len(_PUBLIC_NAMES) + len(new) > _NAMES_KEPT:
            _PUBLIC_NAMES.clear()
            _PRIVATE_NAMES_SEEN.clear()
        for name in new:
            (_PRIVATE_NAMES_SEEN if is_private(name) else _PUBLIC_NAMES).add(name)
    return names & _PRIVATE_NAMES_SEEN


#: attribute names :func:`_private_names` judged (case-sensitive, as the ads' keys are)
_PUBLIC_NAMES: set[str] = set()
_PRIVATE_NAMES_SEEN: set[str] = set()
_NAMES_KEPT = 100_000


#: the key of a cluster's private attribute names in its ``ClusterAd.cache``
_PRIVATE_NAMES = ("changes", "private names")


class QueueHistory:
    """The history half of ``JobQueue`` (it relies on the queue's connection, lock and caches)."""

    def _to_history(self, job: JobAd, now: float) -> bool:
        """Move ``job`` (inside the caller's transaction) from the queue to the history: its row
        goes now, its history row at the commit (the module docstring). True: it was its
        cluster's last job, and the cluster is gone too."""
        cid, pid = job.job_id
        text = _encode(_public_ad(job)).decode()
        self._conn.execute("DELETE FROM jobs WHERE cluster_id = ? AND proc_id = ?", (cid, pid))
        self._rows.pop((cid, pid), None)
        # After the DELETE: a failure before it leaves nothing to take back (and a block that
        # fails after it has written, so the transaction rolls back, and the list is emptied).
        self._history_rows.append((cid, pid, job.owner, job.status, int(now), text))
        row = self._conn.execute(
            "SELECT next_proc >= num_procs AND NOT EXISTS "
            "(SELECT 1 FROM jobs WHERE cluster_id = ?) FROM clusters WHERE cluster_id = ?",
            (cid, cid)).fetchone()
        if row and row[0]:
            self._conn.execute("DELETE FROM clusters WHERE cluster_id = ?", (cid,))
            self._clusters.pop(cid, None)
            self._factory_sources.pop(cid, None)
            return True
        return False

    def _flush_history(self) -> None:
        """Write the history rows of the jobs moved in this transaction (before its COMMIT, and
        before anything in it reads the history): one statement for them all."""
        rows = self._history_rows
        if rows:
            self._conn.executemany(
                "INSERT OR REPLACE INTO history (cluster_id, proc_id, owner, status, completion_date, ad) "
                "VALUES (?, ?, ?, ?, ?, ?)", rows)
            rows.clear()

    def history(self, constraint: str | None = None, *, limit: int | None = None,
                owner: str | None = None) -> list[dict[str, str]]:
        """Finished jobs (Completed or Removed), newest first (``htc history``).

        Args:
            constraint: ClassAd expression the job ads must satisfy.
            limit: at most this many jobs.
            owner: only this owner's jobs (uses the index).

        Returns:
            Whole job ads as ``{attribute: expression text}`` dicts.
        """
        sql = "SELECT ad FROM history"
        params: tuple = ()
        if owner is not None:
            sql += " WHERE owner = ?"
            params = (owner,)
        sql += " ORDER BY completion_date DESC, cluster_id DESC, proc_id DESC"
        if constraint is None and limit is not None:
            sql += f" LIMIT {int(limit)}"
        from htc.jobqueue.expr import parse
        from htc.classad import ClassAd

        expr = parse(constraint) if constraint else None
        out = []
        with self._reading() as conn:
            self._flush_history()  # inside this thread's transaction: its own moves too
            for (raw,) in conn.execute(sql, params):
                ad = public(_decode_attrs(raw))  # a history written before ClaimId was dropped
                if expr is not None:
                    classad = ClassAd()
                    for name, text in ad.items():
                        classad[name] = parse(text)
                    if not is_true(expr.eval(classad)):
                        continue
                out.append(ad)
                if limit is not None and len(out) >= limit:
                    break
        return out


__all__ = ["QueueHistory"]
