"""``JobAd.text_without``: a stored job's ad as ClassAd text, less one attribute, from the
cluster's text kept once per cluster -- the same text as printing the whole ad."""

from __future__ import annotations

import pytest

from htc.classad import ClassAd
from htc.jobqueue import JobQueue
from htc.jobqueue.ads import items_text
from htc.jobqueue.testing import SimpleCluster


@pytest.fixture()
def queue():
    q = JobQueue.open(":memory:")
    cid = q.next_cluster_id()
    ad = {"Owner": '"alice"', "JobStatus": "1", "QDate": "1700000000", "JobPrio": "0",
          "RequestMemory": "1024", "Args": '"none"', "ClaimId": '"cluster-claim"'}
    owns = [{}, {"Extra": "7", "extra2": '"y"'}, {"RequestMemory": "2048"},
            {"requestmemory": "4096"}, {"ClaimId": '"own-claim"'}]
    q.submit(SimpleCluster(cid, ad, len(owns), per_proc=lambda i: dict(owns[i])),
             now=1_700_000_000)
    q.set_prio((cid, 1), 5)  # a hot attribute of the proc's own
    yield q, cid, len(owns)
    q.close()


@pytest.mark.parametrize("hidden", ["ClaimId", "Owner", "JobPrio", "RequestMemory", "Args",
                                    "Extra", "NotThere"])
def test_text_without_is_the_whole_ads_text_less_the_hidden_attribute(queue, hidden):
    q, cid, procs = queue
    for proc in range(procs):
        for _ in range(2):  # (the second time from the cluster's kept text)
            job = q.get_job((cid, proc))
            whole = {k: v for k, v in job.to_dict().items() if k != hidden}
            text = job.text_without(hidden)
            assert text == "[ " + items_text(whole.items()) + " ]"
            read = ClassAd(text)
            assert hidden.lower() not in {k.lower() for k in read}
            assert set(read) == set(whole)


def test_items_text_prints_values_not_yet_text():
    assert items_text({"A": "1", "B": 2}.items()) == "A = 1; B = 2"
    assert items_text([]) == ""
