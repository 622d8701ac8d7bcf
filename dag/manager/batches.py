"""Submitting several ready nodes in one round trip: ``SubmitClusters``.

Theory of operation
-------------------
Each node's job is its own cluster, as in DAGMan. When the engine lets several nodes go at
once (a wide DAG's first round, a fan-out's children), sending each as its own ``Submit``
costs a round trip and, in the schedd, a commit, an fsync and a pass over its claims and
lanes per node. :func:`submit_batch` sends them as ``SubmitClusters`` messages instead: each
node's description is expanded here exactly as for a single submission
(:func:`htc.client.submission.cluster_submission`: the fields of the ``Submit`` that
:func:`~htc.client.submission.submit_message` builds, with the same ``-append`` commands and
the same submission id, :func:`~htc.dag.manager.submitter.submission_id`), and up to
``DAGMAN_SUBMIT_BATCH_SIZE`` (:data:`BATCH_NODES`) of them go in one message, which the schedd
stores in one transaction and answers with one result per node.

The batch is exactly the nodes the engine asked for together: the engine already applied
``-maxjobs``, ``-maxidle``, the category throttles and ``DAGMAN_MAX_SUBMITS_PER_INTERVAL``
and chose the nodes in their order and priority, so batching changes how they travel, never
which go. The results come back in the nodes' order. :data:`PARALLEL_BATCHES` messages are in
flight at once, so that the schedd stores one batch while the next is expanded here.

Failures are per node where the node is at fault (a description that does not expand, a
cluster the schedd refuses: that node's error, the others are queued) and per message where
the connection is (the schedd away, the reply lost): the message is sent again with the same
submission ids -- the schedd answers the clusters it already queued with their ids, so a lost
reply never queues a node twice -- for up to ``attempts`` tries with backoff, as
:func:`~htc.dag.manager.submitter.submit_node` does for one node.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

from htc.client.submission import cluster_submission
from htc.dag.manager.submitter import NodeSubmission, ScheddLink, Submitted, describe, submission_id
from htc.errors import HTCError, UsageError
from htc.wire import messages as m

__all__ = ["BATCH_NODES", "PARALLEL_BATCHES", "NodeRefused", "submit_batch"]

#: the most nodes in one SubmitClusters (DAGMAN_SUBMIT_BATCH_SIZE's default): a round of a thousand
#: ready nodes takes twenty round trips, and the schedd answers its other requests (shadows, the
#: negotiator) between them
BATCH_NODES = 50
#: SubmitClusters in flight at once: the schedd stores one while the next is expanded here
PARALLEL_BATCHES = 2
#: seconds to keep sending a batch whose answer was lost (as a single node's ``resend_for``)
RESEND_FOR = 60.0
#: seconds for the schedd to answer one batch
TIMEOUT = 60.0


class NodeRefused(HTCError):
    """The schedd refused one node's cluster of a batch (the others were queued)."""


def submit_batch(subs: list[NodeSubmission], *, attempts: int = 1, transport=None,
                 link: ScheddLink | None = None, batch_nodes: int = BATCH_NODES,
                 parallel: int = PARALLEL_BATCHES) -> list[Submitted | HTCError]:
    """Submit ``subs`` in SubmitClusters of up to ``batch_nodes`` nodes; returns, in order, each
    node's :class:`Submitted` or the error that stopped it (see the module docstring)."""
    results: list[Submitted | HTCError | None] = [None] * len(subs)
    batch_nodes = max(1, min(batch_nodes, m.MAX_BATCH_CLUSTERS))
    chunks = [list(range(k, min(k + batch_nodes, len(subs)))) for k in range(0, len(subs), batch_nodes)]

    def one(chunk: list[int]) -> None:
        items = []
        for i in chunk:
            try:
                items.append((i, _cluster(subs[i])))
            except HTCError as exc:
                results[i] = exc
        if not items:
            return
        msg = m.SubmitClusters(clusters=tuple(item for _, item in items))
        try:
            reply = _send(msg, attempts=attempts, transport=transport, link=link)
        except HTCError as exc:
            for i, _ in items:
                results[i] = exc
            return
        for (i, _), result in zip(items, reply.results):
            if result.error:
                results[i] = NodeRefused(f"the schedd refused the job of node {subs[i].node}: {result.error}")
            else:
                results[i] = Submitted(cluster=result.cluster_id, procs=result.num_procs)

    if len(chunks) <= 1 or parallel <= 1:
        for chunk in chunks:
            one(chunk)
    else:
        with ThreadPoolExecutor(max_workers=min(parallel, len(chunks)), thread_name_prefix="batch") as pool:
            list(pool.map(one, chunks))
    return [r if r is not None else HTCError(f"node {subs[i].node} was not submitted") for i, r in enumerate(results)]


def _cluster(sub: NodeSubmission) -> m.ClusterSubmission:
    """The node's cluster as a single submission would send it.

    Raises:
        UsageError: the description does not expand (names the node's file and line).
    """
    text, append, filename = describe(sub)
    cluster, _warnings = cluster_submission(text, cwd=sub.cwd or os.getcwd(), filename=filename, append=append,
                                            submission_id=submission_id(sub))
    return cluster


def _send(msg: m.SubmitClusters, *, attempts: int, transport, link: ScheddLink | None) -> m.SubmitClustersReply:
    """The schedd's reply to ``msg``: over ``link`` first; a lost answer is asked again (same ids)
    for :data:`RESEND_FOR` seconds; a schedd that is away is tried ``attempts`` times in all.

    Raises:
        RemoteError: the schedd refused the whole batch (``denied``, ``internal``).
        HTCError: the schedd could not be reached, every time.
    """
    from htc.client.request import SCHEDD, send_command
    from htc.wire.errors import ConnectionClosed, DaemonUnreachable, RemoteError, RequestTimeout

    lost = (ConnectionClosed, RequestTimeout, DaemonUnreachable)
    wait = 1.0
    for attempt in range(1, max(1, attempts) + 1):
        try:
            reply, maybe_queued = None, False
            if link is not None:
                try:
                    reply = link.send(msg, TIMEOUT)
                except lost as exc:
                    # lost or never sent: sent again below on a new connection, same ids
                    maybe_queued = not isinstance(exc, DaemonUnreachable)
            deadline = time.monotonic() + RESEND_FOR
            delay = 0.2
            while reply is None:
                try:
                    reply = send_command(SCHEDD, msg, transport=transport, timeout=TIMEOUT)
                except lost as exc:
                    nothing_sent = isinstance(exc, DaemonUnreachable) and not maybe_queued
                    if nothing_sent or time.monotonic() > deadline:
                        raise  # the schedd is not there (retried below), or it stayed away too long
                    maybe_queued = True
                    time.sleep(delay)  # the answer was lost: ask again, the schedd answers from the ids
                    delay = min(delay * 2, 2.0)
            if not isinstance(reply, m.SubmitClustersReply) or len(reply.results) != len(msg.clusters):
                raise HTCError(f"the schedd answered a SubmitClusters of {len(msg.clusters)} nodes with "
                               f"{type(reply).__name__}, not one result per node; if it is an older htc, set "
                               "DAGMAN_SUBMIT_BATCH_SIZE = 1 to send each node alone")
            return reply
        except UsageError:
            raise
        except RemoteError as exc:
            if exc.code in ("denied", "bad_request") or attempt >= attempts:
                raise
        except HTCError:
            if attempt >= attempts:
                raise
        time.sleep(wait)  # the schedd is away: DAGMan backs off and tries again
        wait = min(wait * 2, 30.0)
    raise AssertionError("unreachable")
