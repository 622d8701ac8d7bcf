"""Autoclusters: significant attributes, keys, stable ids and the schedd's request list."""

from __future__ import annotations

import pytest

from htc.classad import ClassAd, ExprTree
from htc.daemons.autocluster import (ALWAYS_SIGNIFICANT, AutoclusterTable, ResourceRequest,
                                     autocluster_key, job_order_key, job_significant_attributes,
                                     negotiator_significant_attributes)
from htc.errors import UsageError

SIG = ("requestcpus", "requestmemory", "requirements")


# ----------------------------------------------------------------- keys over plain dicts


def test_jobs_equal_on_significant_attributes_share_a_key():
    a = {"RequestCpus": 1, "RequestMemory": 1024, "Requirements": "x", "Cmd": "/bin/a", "ProcId": 0}
    b = {"requestcpus": 1, "REQUESTMEMORY": 1024, "Requirements": "x", "Cmd": "/bin/b", "ProcId": 7}
    assert autocluster_key(a, SIG) == autocluster_key(b, SIG)


@pytest.mark.parametrize("other", [
    {"RequestCpus": 2, "RequestMemory": 1024, "Requirements": "x"},       # different value
    {"RequestCpus": 1.0, "RequestMemory": 1024, "Requirements": "x"},     # int vs real
    {"RequestCpus": True, "RequestMemory": 1024, "Requirements": "x"},    # int vs bool
    {"RequestMemory": 1024, "Requirements": "x"},                          # missing
    {"RequestCpus": 1, "RequestMemory": 1024, "Requirements": "X"},       # strings are exact
])
def test_any_significant_difference_splits_the_autocluster(other):
    base = {"RequestCpus": 1, "RequestMemory": 1024, "Requirements": "x"}
    assert autocluster_key(base, SIG) != autocluster_key(other, SIG)


def test_table_gives_stable_ids_and_forgets_them_when_the_attributes_change():
    table = AutoclusterTable(significant=("RequestCpus",))
    one = table.id_of({"RequestCpus": 1})
    two = table.id_of({"RequestCpus": 2})
    assert one != two
    assert table.id_of({"RequestCpus": 1, "Cmd": "other"}) == one
    assert len(table) == 2
    assert table.set_significant(["requestcpus"]) is False  # same set, any case
    assert table.set_significant(["RequestCpus", "OpSys"]) is True
    assert len(table) == 0


def test_shape_id_of_gives_the_ids_of_id_of_in_the_same_order():
    shape = {"ClusterId": 0, "Owner": "", "RequestCpus": 1, "RequestMemory": 128,
             "Requirements": True, "Rank": 0.0}
    jobs = [dict(shape, ClusterId=i, Owner=f"u{i % 3}", RequestCpus=1 + i % 2,
                 RequestMemory=128 if i % 5 else 128.0) for i in range(20)]
    for significant in ((), ("owner",), ("clusterid", "kflops")):
        fast, slow = AutoclusterTable(significant), AutoclusterTable(significant)
        fast_id = fast.shape_id_of(shape)
        assert fast_id != fast.id_of  # the shortcut is taken for this shape
        assert [fast_id(j) for j in jobs] == [slow.id_of(j) for j in jobs]
        assert len(fast) == len(slow) > 1


def test_shape_id_of_is_id_of_for_a_job_whose_requirements_read_something():
    table = AutoclusterTable(SIG)
    assert table.shape_id_of({"Requirements": ExprTree("Memory > X"), "X": 1}) \
        == table.id_of
    assert table.shape_id_of(ClassAd({"Requirements": True})) == table.id_of


def test_minimum_attributes_are_always_significant():
    table = AutoclusterTable()
    assert table.id_of({"RequestMemory": 1024}) != table.id_of({"RequestMemory": 2048})
    assert {"requirements", "rank", "requestcpus", "requestmemory", "requestdisk"} <= set(
        ALWAYS_SIGNIFICANT)


def test_resource_requests_group_jobs_in_schedd_order():
    table = AutoclusterTable()
    jobs = [
        ("1.0", {"RequestMemory": 1024, "QDate": 100, "ClusterId": 1, "ProcId": 0}),
        ("2.0", {"RequestMemory": 4096, "QDate": 50, "ClusterId": 2, "ProcId": 0}),
        ("1.1", {"RequestMemory": 1024, "QDate": 100, "ClusterId": 1, "ProcId": 1}),
        ("3.0", {"RequestMemory": 1024, "QDate": 200, "ClusterId": 3, "ProcId": 0,
                 "JobPrio": 5}),
    ]
    reqs = table.resource_requests(jobs)
    # job 3.0 has the highest JobPrio, so its autocluster (1024 MiB) comes first
    assert [r.count for r in reqs] == [3, 1]
    assert reqs[0].job_ids == ("3.0", "1.0", "1.1")
    assert reqs[0].job["ClusterId"] == 3  # the representative is the best job
    assert reqs[1].job_ids == ("2.0",)
    assert table.resource_requests(jobs, limit=1) == reqs[:1]


def test_job_order_is_prio_then_qdate_then_ids():
    jobs = [{"QDate": 5, "ClusterId": 2, "ProcId": 0}, {"QDate": 5, "ClusterId": 1, "ProcId": 3},
            {"QDate": 9, "JobPrio": 1}, {"QDate": 1}]
    ordered = sorted(jobs, key=job_order_key)
    assert ordered == [jobs[2], jobs[3], jobs[1], jobs[0]]


def test_resource_request_is_checked():
    with pytest.raises(UsageError, match="stands for at least one idle job"):
        ResourceRequest(autocluster_id=4, job={}, count=0)
    with pytest.raises(UsageError, match="lists 1 job ids for a count of 2"):
        ResourceRequest(autocluster_id=4, job={}, count=2, job_ids=("1.0",))


# ----------------------------------------------------------------- references from ClassAds


def test_job_own_requirements_references_are_followed():
    job = ClassAd("""[
        Requirements = TARGET.Memory >= RequestMemory && TARGET.OpSys == MyOS;
        RequestMemory = ifThenElse(MemoryUsage =!= undefined, MemoryUsage, 512);
        MemoryUsage = 700; MyOS = "LINUX"; Cmd = "/bin/x"; Rank = TARGET.Mips
    ]""")
    attrs = job_significant_attributes(job)
    assert {"requestmemory", "memoryusage", "myos"} <= set(attrs)
    assert "cmd" not in attrs and "memory" not in attrs and "mips" not in attrs


def test_negotiator_collects_what_slots_read_from_jobs():
    slot = ClassAd("""[
        Name = "slot1@a"; Memory = 4096; KeyboardIdle = 1000;
        Start = KeyboardIdle > 900 && TARGET.Owner != "mallory" && ImageSize < Memory;
        Requirements = START; Rank = TARGET.Department == "physics";
        ChildCpus = { TARGET.Ignored };
        Weird = CurrentTime + RemoteUserPrio
    ]""")
    attrs = negotiator_significant_attributes(
        [slot], policy_exprs=["RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2 && JobFoo",
                              "MY.Memory + StartdCopied"],
        startd_job_attrs=["StartdCopied"])
    # ImageSize is unresolved in the slot ad, so ClassAd scoping reads it from the job
    assert set(attrs) == {"owner", "imagesize", "department", "jobfoo"}


def test_significant_attributes_agree_with_htcondor():
    import classad2  # HTCondor's own engine, the test oracle

    classad2.parseOne("[a = 1]")  # compat mode first (see shared/reference/oracles.md)
    text = """[
        Name = "slot1@a"; Memory = 4096; Cpus = 4; Arch = "X86_64";
        Start = (TARGET.RequestCpus <= Cpus) && (Owner =!= "bob") && NiceUser =!= true;
        Requirements = START && TARGET.Arch == Arch; Rank = TARGET.JobPrio * 10 + Foo
    ]"""
    ours = set(negotiator_significant_attributes([ClassAd(text)]))
    theirs = set()
    ad = classad2.ClassAd(text)
    for name in ad.keys():
        value = ad.lookup(name)
        for ref in filter(None, ad.externalRefs(value)):  # literals give ['']
            theirs.add(ref.split(".", 1)[1].lower() if "." in ref else ref.lower())
    assert ours == theirs


def test_grouping_stored_jobs_by_cluster_gives_the_ids_of_keying_each_job():
    from htc.jobqueue import JobQueue
    from htc.jobqueue.expr import job_classad
    from htc.jobqueue.testing import SimpleCluster

    q = JobQueue.open(":memory:")
    base = {"Owner": '"u"', "JobStatus": "1", "QDate": "1", "RequestMemory": "100", "Requirements": "Foo > 1",
            "Foo": "2"}
    # Cluster 1: proc 0 overrides a significant attribute (RequestMemory), proc 1 one that a
    # Requirements reference makes significant (Foo), proc 2 only an insignificant one.
    overrides = {0: {"RequestMemory": "200"}, 1: {"Foo": "3"}, 2: {"Iwd": '"/x"'}}
    q.submit(SimpleCluster(q.next_cluster_id(), base, 5, per_proc=lambda i: overrides.get(i, {})), now=1)
    q.submit(SimpleCluster(q.next_cluster_id(), {**base, "RequestMemory": "300"}, 3), now=1)
    jobs = q.query()
    table = AutoclusterTable(("RequestMemory",))
    groups = table.ids_by_cluster(jobs)
    expected = AutoclusterTable(("RequestMemory",))
    by_job = {job.job_id: expected.id_of(job_classad(job)) for job in jobs}
    got = {job.job_id: ac for ac, members in groups.items() for job in members}
    # The same partition of jobs (ids are handed out in first-seen order by both).
    assert {frozenset(j for j, a in got.items() if a == ac) for ac in set(got.values())} == \
        {frozenset(j for j, a in by_job.items() if a == ac) for ac in set(by_job.values())}
    assert len(groups) == 4  # 1.0 alone, 1.1 alone, the rest of cluster 1, cluster 2


def test_ids_by_cluster_remembers_each_cluster_between_cycles_until_something_decisive_changes(monkeypatch):
    """Many one-job clusters (a DAG's nodes) are keyed once, not every negotiation cycle; an
    edit of the cluster ad, a hot attribute that decides (JobPrio) or new significant
    attributes key them again."""
    import htc.jobqueue.expr as expr
    from htc.jobqueue import JobQueue
    from htc.jobqueue.testing import SimpleCluster

    q = JobQueue.open(":memory:")
    base = {"Owner": '"u"', "JobStatus": "1", "QDate": "1", "RequestMemory": "100"}
    for _ in range(20):
        q.submit(SimpleCluster(q.next_cluster_id(), base, 1), now=1)
    built = []
    real = expr.job_classad
    monkeypatch.setattr(expr, "job_classad", lambda job, *a: built.append(job.job_id) or real(job, *a))
    table = AutoclusterTable(("RequestMemory",))
    first = table.ids_by_cluster(q.query())
    assert len(first) == 1 and len(built) == 20
    built.clear()
    again = table.ids_by_cluster(q.query())   # the next cycle: the same ids, nothing built
    assert again.keys() == first.keys() and built == []
    q.edit_cluster(3, "RequestMemory", "200")      # a changed cluster ad is keyed again
    groups = table.ids_by_cluster(q.query())
    assert built == [(3, 0)] and len(groups) == 2
    built.clear()
    table.set_significant(("RequestMemory", "JobPrio"))   # new significant attributes: all again
    groups = table.ids_by_cluster(q.query())
    assert len(built) == 20 and len(groups) == 2
    built.clear()
    q.set_prio((5, 0), 7)                          # a hot attribute that now decides
    groups = table.ids_by_cluster(q.query())
    assert len(groups) == 3 and (5, 0) in built


def test_a_new_cluster_has_its_significant_attributes_worked_out_once(monkeypatch):
    """Keying a new one-job cluster (a DAG node at every submission) walks its Requirements and
    Rank references once, not once to key it and again to name its id."""
    import htc.daemons.autocluster as autocluster
    from htc.jobqueue import JobQueue
    from htc.jobqueue.testing import SimpleCluster

    q = JobQueue.open(":memory:")
    base = {"Owner": '"u"', "JobStatus": "1", "QDate": "1", "RequestMemory": "100", "Requirements": "Foo > 1",
            "Foo": "2"}
    for _ in range(5):
        q.submit(SimpleCluster(q.next_cluster_id(), base, 1), now=1)
    walks = []
    real = autocluster.job_significant_attributes
    monkeypatch.setattr(autocluster, "job_significant_attributes", lambda *a: walks.append(1) or real(*a))
    groups = AutoclusterTable(("RequestMemory",)).ids_by_cluster(q.query())
    assert len(groups) == 1 and len(walks) == 5
