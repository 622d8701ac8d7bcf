"""Late materialization (``max_materialize`` / ``max_idle``): a cluster that stores its
template once and materializes procs as room appears. Mixed into ``JobQueue``.

A factory cluster keeps, in its ``clusters.factory`` record, what it takes to expand more
procs after a restart: the submit description, its directory, file name and environment.
While the submitting process lives, the submitted cluster object itself is kept and asked
for more procs; after a restart ``htc.submit`` rebuilds it from the record (or the
``rebuild_factory`` hook does, for clusters that were not submitted from a description).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from htc.errors import UsageError
from htc.jobqueue.records import JobNotFound
from htc.jobqueue.submission import prepare

_encode = msgspec.json.Encoder().encode
_decode_any = msgspec.json.Decoder().decode


def factory_room(factory: dict, present: int, idle: int) -> int:
    """How many more procs a late-materialization cluster may materialize now."""
    room = 1 << 62
    if factory.get("max_materialize") is not None:
        room = min(room, factory["max_materialize"] - present)
    if factory.get("max_idle") is not None:
        room = min(room, factory["max_idle"] - idle)
    return max(room, 0)


class QueueFactory:
    """Late materialization for ``JobQueue`` (it relies on the queue's connection and lock)."""

    def materialize(self, cluster_id: int, *, now: float | None = None,
                    then: Callable[[int, int], object] | None = None) -> int:
        """Materialize more procs of a late-materialization cluster, within its limits.

        ``max_materialize`` (JobMaterializeLimit) caps the procs in the queue at once,
        ``max_idle`` (JobMaterializeMaxIdle) the idle ones. Call it when jobs leave the queue
        or start running. ``then(cluster_id, added)``, when procs were added, runs inside the
        transaction that adds them (the schedd owes their SUBMIT events there, as a submit's:
        :mod:`htc.daemons.schedd.owed`); should it raise, nothing is added.

        Returns:
            How many procs were added (0 for clusters that are not factories, or are full).

        Raises:
            JobNotFound: no such cluster.
            UsageError: the cluster's submit description cannot be rebuilt after a restart.
        """
        now = time.time() if now is None else now
        with self.transaction():
            row = self._conn.execute("SELECT num_procs, next_proc, factory, owner, qdate FROM clusters "
                                     "WHERE cluster_id = ?", (cluster_id,)).fetchone()
            if row is None:
                raise JobNotFound(f"cluster {cluster_id} is not in the queue")
            num_procs, next_proc, factory_raw, owner, qdate = row
            if factory_raw is None or next_proc >= num_procs:
                return 0
            factory = _decode_any(factory_raw)
            present, idle = self._conn.execute(
                "SELECT count(*), coalesce(sum(status = 1), 0) FROM jobs WHERE cluster_id = ?",
                (cluster_id,)).fetchone()
            n = min(factory_room(factory, present, idle), num_procs - next_proc)
            if n <= 0:
                return 0
            source = self._factory_source(cluster_id, factory, owner, qdate)
            prep = prepare(source, now, validate=False)
            cluster = self._cluster(cluster_id)
            prep.attrs = dict(cluster.attrs)  # edits since the submit win over the source's ad
            prep.canon = {name.lower(): name for name in prep.attrs}
            prep.entered = int(now)
            prep.qdate, prep.owner = qdate, owner
            prep.proc_attrs = {n for n in cluster.canon.values() if n.lower() in cluster.proc_attrs}
            self._insert_procs(prep, next_proc, next_proc + n)
            self._conn.execute("UPDATE clusters SET next_proc = ?, proc_attrs = ? WHERE cluster_id = ?",
                               (next_proc + n, _encode(sorted(prep.proc_attrs)).decode(), cluster_id))
            self._clusters.pop(cluster_id, None)
            if then is not None:
                then(cluster_id, n)
            return n

    def materialize_all(self, *, now: float | None = None,
                        then: Callable[[int, int], object] | None = None) -> dict[int, int]:
        """:meth:`materialize` every factory cluster (``then`` inside each one's transaction that
        added procs); returns {cluster: procs added} (non-zero only)."""
        with self._reading() as conn:
            ids = [r[0] for r in conn.execute(
                "SELECT cluster_id FROM clusters WHERE factory IS NOT NULL AND next_proc < num_procs")]
        added = {cid: self.materialize(cid, now=now, then=then) for cid in ids}
        return {cid: n for cid, n in added.items() if n}

    def _factory_source(self, cluster_id: int, factory: dict, owner, qdate) -> object:
        source = self._factory_sources.get(cluster_id)
        if source is None:
            record = {"cluster_id": cluster_id, "submit_text": factory.get("submit_text"),
                      "cwd": factory.get("cwd"), "filename": factory.get("filename"),
                      "env": factory.get("env"), "owner": owner, "qdate": qdate}
            if self._rebuild_factory is not None:
                source = self._rebuild_factory(record)
            else:
                if not record["submit_text"]:
                    raise UsageError(
                        f"cluster {cluster_id} cannot materialize more jobs: its submit "
                        "description was not stored; remove it (htc rm) and submit again")
                from htc.submit import Submit  # late: the queue does not need it otherwise

                source = Submit(record["submit_text"], filename=record["filename"], cwd=record["cwd"],
                                env=record["env"]).cluster(cluster_id, qdate=qdate, owner=owner)
            self._factory_sources[cluster_id] = source
        return source
