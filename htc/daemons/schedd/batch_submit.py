"""SubmitClusters: several new clusters in one round trip and one transaction.

Theory of operation
-------------------
A DAG manager with many ready nodes submits each node as a cluster of its own, as DAGMan
does. Sent one ``Submit`` at a time, each node costs a round trip, a commit, an fsync, a pass
over the kept claims and lanes and a note to the negotiator; sent as one ``SubmitClusters``,
the batch costs each of those once.

Each cluster of the batch is answered exactly as its own ``Submit`` would be
(:class:`htc.daemons.schedd.requests.ToolRequests` does the work, piece by piece):

1. **one transaction** holds the whole batch. Per cluster: the owner (the peer, as for
   Submit); the idempotency check -- a ``submission_id`` the schedd remembers for that owner
   (from an earlier request, or from earlier in this batch: same transaction) is answered
   with its first cluster and queues nothing (other ads under the same id: an error for that
   cluster); then, in a savepoint, the build (expanding a description, the queue limits,
   which count the clusters stored before it) and the store with its submission id. A
   cluster that is refused gets its error in the reply, its savepoint undone; the others go
   on. The SUBMIT events of all of them are owed in the same transaction, merged (one write
   per log, so a DAG's nodes log gets one append per batch). A peer that may not submit as
   an ``Owner`` a cluster ad names has the whole batch refused (``denied``); a queue failure
   fails the whole request (``internal``), and the client sends the batch again, same ids.
3. **after the commit**: the reply (one result per cluster, in order), then what follows any
   submit, once: kept claims and lanes take what they can, the commit is made durable (one
   fsync) before the reply leaves, and the negotiator hears of idle work.

A reply lost after the commit is harmless: the batch sent again is answered from the
remembered submission ids, cluster by cluster, and nothing is queued twice.
"""

from __future__ import annotations

from htc.daemons import core as c
from htc.daemons.schedd.access import Denied
from htc.daemons.schedd.requests import texts_of
from htc.errors import UsageError
from htc.jobqueue.promises import submission_digest
from htc.wire import messages as m

__all__ = ["submit_clusters"]


def submit_clusters(requests, event: c.Received, msg: m.SubmitClusters, now: float, out: list) -> None:
    """Queue the clusters of ``msg`` in one transaction and answer one result per cluster.

    Args:
        requests: the schedd's :class:`~htc.daemons.schedd.requests.ToolRequests`.

    Raises:
        Denied: the peer may not submit as an ``Owner`` a cluster ad names (the whole batch is
            refused and nothing of it queued: it is one peer's request).
        QueueStorageError: the transaction failed; nothing of the batch is queued.
    """
    sd = requests.schedd
    results: list[m.ClusterSubmitted] = []
    jobs: list = []
    queued: list[int] = []
    users: set[str] = set()
    by_log: dict[tuple[str, str], list] = {}
    with sd.queue.transaction(durable=False):   # made durable by after_submit's sync
        for i, item in enumerate(msg.clusters):
            try:
                cluster_attrs = texts_of(item.cluster_ad, f"cluster_ad of cluster {i}")
                owner, user = requests.owner_of(event, cluster_attrs, "SubmitClusters", out)
                digest = None
                if item.submission_id is not None:
                    digest = submission_digest((item.cluster_ad, *item.proc_ads))
                    # (a cluster stored earlier in this batch is found too: same transaction)
                    known = sd.queue.find_submission(owner, item.submission_id)
                    if known is not None:
                        results.append(_known(item.submission_id, owner, digest, known, out))
                        continue
                with sd.queue.transaction(durable=False):   # a savepoint: a refusal undoes only this one
                    cluster = requests.build(cluster_attrs, item.proc_ads, owner, user, now, out)
                    cluster_jobs, logs = requests.store(cluster, owner, item.submission_id, digest, now)
            except Denied:
                raise  # one peer's request: refused as a whole (nothing queued), with the denied code
            except UsageError as exc:
                results.append(m.ClusterSubmitted(error=str(exc) or type(exc).__name__))
                continue
            jobs += cluster_jobs
            for key, events in logs.items():
                by_log.setdefault(key, []).extend(events)
            queued.append(cluster.cluster_id)
            users.add(user)
            results.append(m.ClusterSubmitted(cluster_id=cluster.cluster_id, num_procs=cluster.num_procs))
        out += requests.submit_events(by_log)
        if queued:
            requests.take_at_once(jobs, now, out)
    if queued:
        out.append(c.Log(f"submitted {len(queued)} clusters ({len(jobs)} jobs) in one batch for "
                         f"{', '.join(sorted(users))}: {_ranges(queued)}"))
    refused = sum(1 for r in results if r.error)
    if refused:
        out.append(c.Log(f"{refused} of the {len(results)} clusters of a SubmitClusters were refused"))
    out.append(c.Reply(event.conn_id, m.SubmitClustersReply(results=tuple(results))))
    if queued:
        requests.after_submit(jobs, now, out)


def _known(submission_id: str, owner: str, digest: str, known, out: list) -> m.ClusterSubmitted:
    """The result of a cluster whose submission id the schedd remembers (sent again)."""
    cid, num_procs, was = known
    if was != digest:
        return m.ClusterSubmitted(error=f"submission id {submission_id!r} already named other jobs of {owner} "
                                        f"(cluster {cid}); a new submission needs a new id")
    out.append(c.Log(f"submission {submission_id} of {owner} came again: answered with its cluster {cid}"))
    return m.ClusterSubmitted(cluster_id=cid, num_procs=num_procs)


def _ranges(ids: list[int]) -> str:
    """``[3, 4, 5, 9]`` as ``3-5, 9`` (for the log line)."""
    spans: list[list[int]] = []
    for cid in sorted(ids):
        if spans and cid == spans[-1][1] + 1:
            spans[-1][1] = cid
        else:
            spans.append([cid, cid])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
