"""The DAG manager submits its nodes over connections to the schedd that it keeps
(dag.manager.submitter.ScheddLink), and a kept connection the schedd closed costs no node: the
submission goes again on a new connection with the same submission id."""

from __future__ import annotations


import pytest
from stand_in_schedd import StandInSchedd

from htc.dag.manager.submitter import NodeSubmission, ScheddLink, submit_many
from htc.wire import messages as m
from htc.wire.errors import WireError


class FakeSchedd(StandInSchedd):
    """A real Unix-socket server on its own thread that answers every Submit (and every cluster of
    a SubmitClusters) with a new cluster,
    counting the connections it accepted; with ``close_after_reply`` it closes each connection
    after one answer (as a schedd that restarted, or timed out an idle client, would have)."""

    def __init__(self, socket_dir, *, close_after_reply: bool = False):
        super().__init__(socket_dir)
        self.close_after_reply = close_after_reply
        self.connections = 0
        self.submission_ids: list[str] = []
        self._next = 0

    async def _serve(self, conn) -> None:
        self.connections += 1
        async with conn:
            while True:
                try:
                    msg = await conn.recv(timeout=60)
                except WireError:
                    return  # the client closed its end
                if isinstance(msg, m.SubmitClusters):   # (benchmarks/dag_submit_bench.py's batches)
                    results = []
                    for cluster in msg.clusters:
                        self.submission_ids.append(cluster.submission_id)
                        self._next += 1
                        results.append(m.ClusterSubmitted(cluster_id=self._next, num_procs=1))
                    await conn.send(m.SubmitClustersReply(results=tuple(results)))
                    continue
                assert isinstance(msg, m.Submit)
                self.submission_ids.append(msg.submission_id)
                self._next += 1
                await conn.send(m.SubmitReply(cluster_id=self._next, num_procs=1))
                if self.close_after_reply:
                    return



def _node(name: str, cwd: str) -> NodeSubmission:
    return NodeSubmission(node=name, submit_file=None, submit_text="executable = /bin/true\nqueue\n", cwd=cwd,
                          macros={"JOB": name}, prepend={}, attrs={}, notes=f"DAG Node: {name}", priority=0,
                          retry=0, node_log=f"{cwd}/d.dag.nodes.log", dag_id=7)


def test_nodes_are_submitted_over_kept_connections(tmp_path):
    with FakeSchedd(tmp_path / "sockets") as schedd:
        link = ScheddLink(schedd.transport)
        try:
            results = []
            for batch in range(3):   # three rounds of ready nodes, as the manager's loop sends them
                results += submit_many([_node(f"n{batch}_{i}", str(tmp_path)) for i in range(6)],
                                       transport=schedd.transport, workers=2, link=link)
        finally:
            link.close()
    assert sorted(r.cluster for r in results) == list(range(1, 19))
    assert len(schedd.submission_ids) == 18
    # two in flight at most: two connections for the 18 submissions (a new one each before)
    assert schedd.connections <= 2 and link.opened == schedd.connections


def test_a_kept_connection_the_schedd_closed_costs_no_node(tmp_path):
    with FakeSchedd(tmp_path / "sockets", close_after_reply=True) as schedd:
        link = ScheddLink(schedd.transport)
        try:
            results = submit_many([_node(f"n{i}", str(tmp_path)) for i in range(5)], transport=schedd.transport,
                                  workers=1, link=link)
        finally:
            link.close()
    assert [r.cluster for r in results] == [1, 2, 3, 4, 5]
    # each node reached the schedd exactly once: the request on the closed connection never did
    assert sorted(schedd.submission_ids) == sorted(f"dagman-7-n{i}-retry0" for i in range(5))


def test_without_a_blocking_form_the_link_says_so(tmp_path):
    class Other:
        """A transport that is not a UnixTransport (SSH has no blocking form)."""

    assert ScheddLink(Other()).send(m.Submit(cluster_ad="[ A = 1 ]", proc_ads=("[ ]",)), 5.0) is None


@pytest.mark.parametrize("workers", [1, 4])
def test_without_a_link_each_submission_opens_its_own_connection(tmp_path, workers):
    with FakeSchedd(tmp_path / "sockets") as schedd:
        results = submit_many([_node(f"n{i}", str(tmp_path)) for i in range(4)], transport=schedd.transport,
                              workers=workers)
    assert sorted(r.cluster for r in results) == [1, 2, 3, 4]
    assert schedd.connections == 4
