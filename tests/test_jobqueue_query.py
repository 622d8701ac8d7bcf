"""-constraint queries: the SQL pushdown and per-cluster evaluation give exactly the jobs a
plain ClassAd evaluation of each whole job ad selects."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htc.classad import ClassAd, ExprTree
from htc.jobqueue import JobQueue, JobStatus
from htc.jobqueue.expr import is_true
from htc.jobqueue.query import plan
from htc.jobqueue.testing import SimpleCluster

NOW = 1_700_000_500


@pytest.fixture(scope="module")
def queue():
    q = JobQueue.open(":memory:")
    owners = ['"alice"', '"ALICE"', '"bob"']
    for k in range(6):
        cid = q.next_cluster_id()
        ad = {"Owner": owners[k % 3], "JobStatus": "1", "QDate": str(1_700_000_000 + k),
              "JobPrio": str(k % 2), "RequestMemory": str(1024 * (k + 1)),
              "Foo": "ProcId * 2", "Bar": 'strcat(Args, "x")', "Args": '"none"'}

        def per_proc(i, k=k):
            own = {}
            if k % 2 and i % 3 == 0:
                own["Args"] = f'"{i}"'
            if k == 4 and i == 2:
                own["RequestMemory"] = "RequestMemoryBase + 1"
                own["RequestMemoryBase"] = "100"
            if k == 5 and i == 1:
                own["Foo"] = "JobPrio + 100"
            return own

        q.submit(SimpleCluster(cid, ad, 5, per_proc=per_proc), now=1_700_000_000)
    q.hold((2, 1), "x")
    q.set_status((3, 0), JobStatus.RUNNING)
    q.set_prio((4, 3), 7)
    q.assign_autoclusters(["RequestMemory"])
    yield q
    q.close()


def oracle(q, constraint):
    expr = ExprTree(constraint)
    chosen = []
    for job in q.query(None):
        ad = ClassAd()
        for name, text in job.to_dict().items():
            ad[name] = ExprTree(text)
        ad["CurrentTime"] = NOW
        if is_true(expr.eval(ad)):
            chosen.append(job.job_id)
    return chosen


ATTRS = ["JobStatus", "Owner", "ProcId", "ClusterId", "JobPrio", "RequestMemory", "Args",
         "Foo", "Bar", "QDate", "AutoClusterId", "Missing", "MY.JobStatus", "MY.Args"]
LITERALS = ["0", "1", "2", "5", "7", "1.0", "2048", "4096", '"alice"', '"ALICE"', '"bob"', '"3"',
            '"3x"', "undefined", "true", "1700000003"]
OPS = ["==", "!=", "<", "<=", ">", ">=", "=?=", "=!="]

atoms = st.builds(lambda a, o, l, flip: f"{l} {o} {a}" if flip else f"{a} {o} {l}",
                  st.sampled_from(ATTRS), st.sampled_from(OPS), st.sampled_from(LITERALS), st.booleans())
constraints = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"{a} && {b}", inner, inner),
        st.builds(lambda a, b: f"({a} || {b})", inner, inner),
        st.builds(lambda a: f"!({a})", inner),
    ),
    max_leaves=4,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(constraints)
def test_query_matches_evaluating_every_whole_job_ad(queue, constraint):
    assert [j.job_id for j in queue.query(constraint, now=NOW)] == oracle(queue, constraint)


@pytest.mark.parametrize("constraint", [
    'Owner == "alice" && JobStatus == 1',
    'Owner =?= "ALICE"',
    "RequestMemory > 4096",
    "RequestMemory > 4096 && JobStatus == 1 && ProcId > 0",
    "Foo > 6",
    'Bar == "3x"',
    "JobPrio > 5 || JobStatus == 5",
    "AutoClusterId =!= undefined && ClusterId == 5",
    "CurrentTime > 1700000000 && ProcId == 4",
])
def test_handpicked_constraints_and_limits(queue, constraint):
    expected = oracle(queue, constraint)
    assert [j.job_id for j in queue.query(constraint, now=NOW)] == expected
    assert [j.job_id for j in queue.query(constraint, now=NOW, limit=2)] == expected[:2]
    assert queue.count(constraint) == len(expected) or "CurrentTime" in constraint


def test_plan_pushes_only_exact_conjuncts():
    p = plan('Owner == "a" && JobStatus == 1 && RequestMemory > 5')
    assert [c[0] for c in p.clauses] == ["owner", "status"] and p.residual_text == "(RequestMemory > 5)"
    assert plan('JobStatus == "1"').clauses == ()          # would be coerced by sqlite
    assert plan("JobStatus =?= 1.0").clauses == ()         # 1 =?= 1.0 is false in ClassAds
    assert plan('Owner > "a"').clauses == ()               # string ordering stays ClassAd's
    assert plan("2 < JobStatus").clauses[0][1] == "status > ?"
    assert plan("JobStatus == 1 || Owner == \"a\"").clauses == ()
    assert plan("true && MY.ProcId == 3").clauses[0][1] == "proc_id = ?"
    assert plan("JobStatus == 1").residual_text is None
