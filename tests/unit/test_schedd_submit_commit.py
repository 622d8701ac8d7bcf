"""A Submit is one commit of the job queue: the cluster id is taken in the cluster's own
transaction (not in a commit before it), and a refused submit takes none."""

from __future__ import annotations

from htc.jobqueue import JobQueue
from htc.wire import messages as m
from tests.unit.test_schedd_core import Harness, job


def test_a_submit_is_one_commit_and_a_refused_one_takes_no_cluster_id(tmp_path):
    h = Harness(JobQueue.open(str(tmp_path / "job_queue.db")))
    h.start()
    before = h.queue._commits
    h.submit(job())
    assert h.queue._commits - before == 1
    next_id = h.queue.next_cluster_id()
    refused = m.Submit(cluster_ad='[ Cmd = "/bin/true"; JobPrio = "high" ]', proc_ads=("[ ]",))
    reply = h.request(refused)
    assert isinstance(reply, m.ErrorReply) and "JobPrio" in reply.message, reply
    assert h.queue.next_cluster_id() == next_id + 1  # the refused submit's id was not taken
    h.queue.close()
