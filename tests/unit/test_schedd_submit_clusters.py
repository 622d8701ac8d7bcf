"""SubmitClusters: several clusters in one request and one transaction, each answered as its own
Submit would be; a batch sent again after a lost reply queues nothing twice."""

from __future__ import annotations

import pytest
from test_schedd_core import BOB, Harness, job, run_first_job, sent

from htc.classad import ClassAd
from htc.daemons import core as c
from htc.daemons.schedd.events import WriteUserLog
from htc.daemons.schedd.requests import description_message
from htc.eventlog.events import EventType
from htc.wire import messages as m
from htc.wire.errors import MessageInvalid


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.start()
    return harness


def node(name: str, sid: str | None = None, cmd: str = "/bin/true") -> m.ClusterSubmission:
    """A DAG node's cluster as ads, writing its SUBMIT event to a shared nodes log too."""
    return m.ClusterSubmission(
        cluster_ad=f'[ Cmd = "{cmd}"; UserLog = "/logs/{name}.log"; DAGManNodesLog = "/logs/dag.nodes.log"; '
                   f'SubmitEventNotes = "DAG Node: {name}" ]',
        proc_ads=("[ ]",), submission_id=sid)


def test_the_message_is_checked_when_built_and_when_received():
    with pytest.raises(MessageInvalid, match="clusters is empty"):
        m.SubmitClusters(clusters=())
    with pytest.raises(MessageInvalid, match="proc_ads is empty"):
        m.ClusterSubmission(cluster_ad="[ ]", proc_ads=())
    with pytest.raises(MessageInvalid, match="more than"):
        m.SubmitClusters(clusters=(node("a"),) * (m.MAX_BATCH_CLUSTERS + 1))
    with pytest.raises(MessageInvalid, match="either cluster_id"):
        m.ClusterSubmitted(cluster_id=3, num_procs=1, error="both")
    with pytest.raises(MessageInvalid):
        m.ClusterSubmission(cluster_ad="[ ]", proc_ads=("[ ]",), submission_id="spaces are not allowed")
    msg = m.SubmitClusters(clusters=(node("a", "dag-1-a"), node("b")))
    assert m.decode(m.encode(msg)) == msg
    reply = m.SubmitClustersReply(results=(m.ClusterSubmitted(cluster_id=4, num_procs=1),
                                           m.ClusterSubmitted(error="no")))
    assert m.decode(m.encode(reply)) == reply


def test_a_batch_is_one_commit_one_log_write_per_log_and_one_reply_in_order(h):
    commits = []
    h.queue._conn.set_trace_callback(lambda sql: commits.append(sql) if sql.strip().upper() == "COMMIT" else None)
    before = len(h.actions)
    reply = h.request(m.SubmitClusters(clusters=tuple(node(f"n{i}", f"dag-7-n{i}-retry0") for i in range(5))))
    h.queue._conn.set_trace_callback(None)
    assert isinstance(reply, m.SubmitClustersReply)
    assert [r.cluster_id for r in reply.results] == [1, 2, 3, 4, 5] and {r.num_procs for r in reply.results} == {1}
    assert len(commits) == 1  # the batch is one transaction (its cluster ids reserved inside it)
    out = h.actions[before:]
    writes = [a for a in out if isinstance(a, WriteUserLog)]
    nodes_log = [w for w in writes if w.path == "/logs/dag.nodes.log"]
    assert len(nodes_log) == 1 and [e.cluster for e in nodes_log[0].events] == [1, 2, 3, 4, 5]
    assert [e.log_notes for e in nodes_log[0].events] == [f"DAG Node: n{i}" for i in range(5)]
    assert {w.owner for w in writes} == {"alice"} and len(writes) == 6  # each node's own log, and the nodes log
    reschedules = [a for a in out if isinstance(a, c.Send) and isinstance(a.msg, m.Reschedule)]
    assert len(reschedules) <= 1  # the negotiator hears of the batch once
    jobs = h.queue.query("true")
    assert [(j.cluster_id, j["Owner"]) for j in jobs] == [(i, '"alice"') for i in range(1, 6)]


def test_a_batch_sent_again_after_a_lost_reply_queues_nothing_twice(h):
    batch = m.SubmitClusters(clusters=tuple(node(f"n{i}", f"dag-7-n{i}-retry0") for i in range(3)))
    first = h.request(batch)
    before = len(h.actions)
    again = h.request(batch)
    assert again == first and h.queue.statistics().jobs == 3
    assert h.events(h.actions[before:]) == []  # no SUBMIT event either
    # A bigger batch holding the three again and two new ones queues only the new ones.
    bigger = m.SubmitClusters(clusters=batch.clusters + (node("n3", "dag-7-n3-retry0"), node("n4", "dag-7-n4-retry0")))
    reply = h.request(bigger)
    assert reply.results[:3] == first.results and [r.cluster_id for r in reply.results[3:]] == [4, 5]
    assert h.queue.statistics().jobs == 5
    # A single Submit with one of the batch's ids is answered with that cluster, and the other way round.
    single = h.request(m.Submit(cluster_ad=batch.clusters[1].cluster_ad, proc_ads=batch.clusters[1].proc_ads,
                                submission_id="dag-7-n1-retry0"))
    assert single.cluster_id == first.results[1].cluster_id
    sub = h.request(m.Submit(cluster_ad=node("x").cluster_ad, proc_ads=("[ ]",), submission_id="solo"))
    assert h.request(m.SubmitClusters(clusters=(node("x", "solo"),))).results[0].cluster_id == sub.cluster_id
    assert h.queue.statistics().jobs == 6


def test_a_refused_cluster_gets_its_error_and_the_others_are_queued(h):
    h.request(m.SubmitClusters(clusters=(node("a", "sid-a"),)))
    bad_description = description_message("executable = /bin/echo\nthis is wrong\nqueue\n", "/work", "bad.sub")
    reply = h.request(m.SubmitClusters(clusters=(
        node("b", "sid-b"),
        m.ClusterSubmission(cluster_ad=bad_description.cluster_ad, proc_ads=bad_description.proc_ads),
        node("a-other", "sid-a", cmd="/bin/false"),     # a remembered id with other ads
        m.ClusterSubmission(cluster_ad="[ Cmd = ]", proc_ads=("[ ]",)),
        node("c", "sid-c"),
        node("c", "sid-c"),                              # the same id twice in one batch: one cluster
        node("d", "sid-c", cmd="/bin/false"),            # ... and with other ads: refused
    )))
    r = reply.results
    assert r[0].cluster_id == 2 and r[4].cluster_id > 2 and r[5] == r[4]  # (a refused description used an id)
    assert "Line 2 of submit file bad.sub" in r[1].error
    assert "new id" in r[2].error and "cluster 1" in r[2].error
    assert "not ClassAd text" in r[3].error
    assert "new id" in r[6].error and f"cluster {r[4].cluster_id}" in r[6].error
    assert h.queue.statistics().jobs == 3


def test_the_owner_is_the_peer_and_limits_count_the_whole_batch():
    h = Harness(max_jobs_per_owner=4)
    h.start()
    bad = h.request(m.SubmitClusters(clusters=(node("fine", "sid-fine"), m.ClusterSubmission(
        cluster_ad='[ Cmd = "/bin/true"; Owner = "alice" ]', proc_ads=("[ ]",)),)), uid=BOB)
    assert isinstance(bad, m.ErrorReply) and bad.code == "denied"
    assert h.queue.statistics().jobs == 0 and h.queue.find_submission("bob", "sid-fine") is None  # all or nothing
    reply = h.request(m.SubmitClusters(clusters=tuple(node(f"n{i}") for i in range(6))), uid=BOB)
    assert [bool(r.cluster_id) for r in reply.results] == [True] * 4 + [False] * 2
    assert "MAX_JOBS_PER_OWNER" in reply.results[4].error
    assert {j["Owner"] for j in h.queue.query("true")} == {'"bob"'} and h.queue.statistics().jobs == 4


def test_a_description_in_a_batch_is_expanded_with_its_real_cluster_id(h):
    first = description_message(job(queue="queue 2"), "/work", "a.sub")
    second = description_message(job(), "/work", "b.sub")
    reply = h.request(m.SubmitClusters(clusters=(
        m.ClusterSubmission(cluster_ad=first.cluster_ad, proc_ads=first.proc_ads, submission_id="a"),
        m.ClusterSubmission(cluster_ad=second.cluster_ad, proc_ads=second.proc_ads, submission_id="b"))))
    assert [(r.cluster_id, r.num_procs) for r in reply.results] == [(1, 2), (2, 1)]
    assert [j["Args"] for j in h.queue.query("true")] == ['"1.0"', '"1.1"', '"2.0"']
    assert h.events().count(EventType.SUBMIT) == 3


def _next_on_claim(h: Harness, claim_id: str, job_id: str) -> str:
    """End ``job_id`` on the claim; the job the claim is reused for (``cluster.proc``)."""
    before = len(h.actions)
    h.exited(claim_id, job_id, exit_code=0)
    [again] = h.calls(m.ActivateClaim, h.actions[before:])
    h.ack(again)
    ad = ClassAd(again.msg.job_ad)
    return f"{ad['ClusterId']}.{ad['ProcId']}"


def _described(text: str = "") -> m.ClusterSubmission:
    msg = description_message(job(text), "/work", "node.sub")
    return m.ClusterSubmission(cluster_ad=msg.cluster_ad, proc_ads=msg.proc_ads)


def test_new_clusters_join_the_claim_reuse_order_instead_of_rebuilding_it(h, monkeypatch):
    """A DAG submits while many of its nodes wait: each submit must not make the next job end
    query (and sort) every idle job again; a new job that outranks the waiting ones still goes first."""
    h.request(m.SubmitClusters(clusters=(_described(),) * 3))                 # clusters 1-3
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    built = []
    real = h.queue.idle_jobs
    monkeypatch.setattr(h.queue, "idle_jobs", lambda *a, **k: built.append(1) or real(*a, **k))
    assert _next_on_claim(h, claim_id, "1.0") == "2.0" and len(built) == 1   # the order is built once
    h.request(m.SubmitClusters(clusters=(_described(),) * 2))                 # clusters 4, 5: after 3
    assert _next_on_claim(h, claim_id, "2.0") == "3.0"
    assert _next_on_claim(h, claim_id, "3.0") == "4.0" and len(built) == 1   # taken in, not rebuilt
    h.request(m.SubmitClusters(clusters=(_described("priority = 5"),)))       # cluster 6 outranks 5
    assert _next_on_claim(h, claim_id, "4.0") == "6.0" and len(built) == 2   # the order is built again
    assert _next_on_claim(h, claim_id, "6.0") == "5.0"


def test_no_negotiation_cycle_for_jobs_like_those_already_waiting_unplaced(h):
    """Like jobs offered to the negotiator still wait (no slot for them): new ones of the same
    autocluster bring no Reschedule; a new kind of job, or none waiting, does."""
    h.request(m.SubmitClusters(clusters=(_described(),) * 3))
    assert len(sent(h.tick(h.now + 1), m.Reschedule)) == 1
    reqs = h.request(m.GetResourceRequests(submitter="alice@localhost", significant_attributes=("RequestMemory",)))
    assert [r.count for r in reqs.requests] == [3]     # offered; the negotiator places none of them
    h.request(m.SubmitClusters(clusters=(_described(),) * 2))
    out = h.tick(h.now + 2)
    assert sent(out, m.Reschedule) == [] and sent(out, m.UpdateAd)   # the ads follow, no cycle
    h.request(m.SubmitClusters(clusters=(_described("request_memory = 4096"),)))   # another kind
    assert len(sent(h.tick(h.now + 3), m.Reschedule)) == 1
    h.request(m.ActOnJobs(action=m.JobAction.Remove, ids=("1", "2", "3")))
    h.request(m.GetResourceRequests(submitter="alice@localhost", significant_attributes=("RequestMemory",)))
    h.request(m.ActOnJobs(action=m.JobAction.Remove, ids=("4", "5", "6")))    # nothing waits now
    h.request(m.SubmitClusters(clusters=(_described(),)))
    assert len(sent(h.tick(h.now + 4), m.Reschedule)) == 1


def test_asking_whether_like_jobs_wait_does_not_reread_the_offered_jobs_gone_since(h, monkeypatch):
    """A wide DAG submits after every few job ends: whether like jobs still wait unplaced must
    not read every job offered in the last cycle that started (or went) since -- once each."""
    h.request(m.SubmitClusters(clusters=(_described(),) * 30))
    h.tick(h.now + 1)
    h.request(m.GetResourceRequests(submitter="alice@localhost", significant_attributes=("RequestMemory",)))
    h.request(m.ActOnJobs(action=m.JobAction.Remove, ids=tuple(str(cid) for cid in range(1, 30))))
    h.tick(h.now + 2)
    reads = []
    real = h.core.job
    monkeypatch.setattr(h.core, "job", lambda job_id: reads.append(job_id) or real(job_id))
    h.request(m.SubmitClusters(clusters=(_described(),)))
    assert sent(h.tick(h.now + 3), m.Reschedule) == []     # job 30 still waits unplaced: no cycle
    first = len(reads)
    h.request(m.SubmitClusters(clusters=(_described(),)))
    assert sent(h.tick(h.now + 4), m.Reschedule) == []
    assert first >= 29 and len(reads) - first <= 3        # the removed 29 are not read again
    h.request(m.ActOnJobs(action=m.JobAction.Remove, ids=("30",)))
    h.tick(h.now + 5)
    h.request(m.SubmitClusters(clusters=(_described(),)))  # none of the offered ones waits now
    assert len(sent(h.tick(h.now + 6), m.Reschedule)) == 1
