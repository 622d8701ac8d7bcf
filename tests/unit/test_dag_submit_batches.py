"""The DAG manager sends the nodes the engine lets go together as SubmitClusters
(dag.manager.batches): one round trip per BATCH_NODES nodes, answered in order, a node at
fault failing alone, and a lost reply costing no node twice -- against a real schedd core
behind a real Unix socket."""

from __future__ import annotations

from dataclasses import replace

from stand_in_schedd import StandInSchedd
from test_dag_submit_link import _node
from test_schedd_core import Harness

from htc.dag.manager.batches import NodeRefused, submit_batch
from htc.dag.manager.submitter import ScheddLink, submission_id
from htc.errors import UsageError
from htc.wire import messages as m
from htc.wire.errors import WireError


class CoreSchedd(StandInSchedd):
    """A Unix-socket server on its own thread handing every request to a real schedd core (with
    an in-memory queue); with ``lose`` set, it handles the next SubmitClusters and then closes
    the connection instead of answering (a reply lost after the commit)."""

    def __init__(self, socket_dir, **settings):
        super().__init__(socket_dir)
        self.h = Harness(**settings)
        self.h.start()
        self.requests: list[m.Message] = []
        self.lose = 0

    async def _serve(self, conn) -> None:
        async with conn:
            while True:
                try:
                    msg = await conn.recv(timeout=60)
                except WireError:
                    return  # the client closed its end
                self.requests.append(msg)
                reply = self.h.request(msg)   # one thread (this loop's) uses the core
                if isinstance(msg, m.SubmitClusters) and self.lose:
                    self.lose -= 1
                    return  # committed, never answered
                await conn.send(reply)



def test_ready_nodes_go_in_batches_answered_in_order(tmp_path):
    subs = [_node(f"n{i}", str(tmp_path)) for i in range(23)]
    with CoreSchedd(tmp_path / "sockets") as schedd:
        link = ScheddLink(schedd.transport)
        try:
            results = submit_batch(subs, transport=schedd.transport, link=link, batch_nodes=10, parallel=2)
        finally:
            link.close()
    assert [type(m_) for m_ in schedd.requests] == [m.SubmitClusters] * 3
    assert sorted(len(r.clusters) for r in schedd.requests) == [3, 10, 10]
    jobs = {int(j["ClusterId"]): j for j in schedd.h.queue.query("true")}
    assert len(jobs) == 23
    for sub, result in zip(subs, results):   # each node's own cluster, in the nodes' order
        assert jobs[result.cluster]["SubmitEventNotes"] == f'"DAG Node: {sub.node}"'
        assert jobs[result.cluster]["DAGManNodesLog"] == f'"{tmp_path}/d.dag.nodes.log"'
    ids = [c.submission_id for r in schedd.requests for c in r.clusters]
    assert sorted(ids) == sorted(submission_id(s) for s in subs)   # the ids a single submit would send
    with CoreSchedd(tmp_path / "sockets2") as other:   # more than a message may carry: as many as it may
        results = submit_batch(subs[:3], transport=other.transport, batch_nodes=m.MAX_BATCH_CLUSTERS + 5)
    assert [len(r.clusters) for r in other.requests] == [3] and all(r.cluster for r in results)


def test_a_node_at_fault_fails_alone(tmp_path):
    good = [_node(f"n{i}", str(tmp_path)) for i in range(3)]
    bad_text = replace(_node("bad", str(tmp_path)), submit_text="executable = /bin/true\nthis is wrong\nqueue\n")
    # the fourth cluster of the batch is refused by the schedd
    with CoreSchedd(tmp_path / "sockets", max_jobs_per_owner=3) as schedd:
        results = submit_batch([good[0], bad_text, good[1], good[2], _node("n3", str(tmp_path))],
                               transport=schedd.transport)
    assert isinstance(results[1], UsageError) and "this is wrong" in str(results[1])
    assert [r.cluster for r in (results[0], results[2], results[3])] == [1, 2, 3]
    assert isinstance(results[4], NodeRefused) and "MAX_JOBS_PER_OWNER" in str(results[4])
    assert "node n3" in str(results[4])


def test_a_batch_whose_reply_was_lost_is_sent_again_and_queued_once(tmp_path):
    subs = [_node(f"n{i}", str(tmp_path)) for i in range(6)]
    with CoreSchedd(tmp_path / "sockets") as schedd:
        schedd.lose = 1
        link = ScheddLink(schedd.transport)
        try:
            results = submit_batch(subs, transport=schedd.transport, link=link)
        finally:
            link.close()
    assert [type(r) for r in schedd.requests] == [m.SubmitClusters] * 2   # sent again, same ids
    assert schedd.requests[0] == schedd.requests[1]
    assert [r.cluster for r in results] == [1, 2, 3, 4, 5, 6]
    assert schedd.h.queue.statistics().jobs == 6
