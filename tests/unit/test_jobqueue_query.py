"""-constraint queries: the SQL pushdown, per-cluster evaluation, the per-proc prefilter and
job-by-job evaluation give exactly the jobs a plain ClassAd evaluation of each whole job ad
selects."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htc.classad import ClassAd, ExprTree, quote
from htc.jobqueue import JobQueue, JobStatus
from htc.jobqueue.expr import GroupedEvaluator, is_true
from htc.jobqueue.prefilter import LiteralTest, drop_condition
from htc.jobqueue.query import narrow, plan
from htc.jobqueue.testing import SimpleCluster

NOW = 1_700_000_500

# Per-proc texts of Tag: plain literals in mixed case, escapes, texts that start with a
# string literal but are expressions, other types, LIKE's special characters, non-ASCII.
TAGS = ['"alpha"', '"ALPHA"', '"Alpha "', '""', r'"al\"pha"', r'"al\\pha"', 'strcat("al", "pha")',
        '"x" =?= "x" ? "alpha" : "beta"', "3", "undefined", '"%_^"', '"K\u212a"',
        '"alpha" == "ALPHA"']


@pytest.fixture(scope="module")
def queue():
    q = JobQueue.open(":memory:")
    owners = ['"alice"', '"ALICE"', '"bob"']
    for k in range(6):
        cid = q.next_cluster_id()
        ad = {"Owner": owners[k % 3], "JobStatus": "1", "QDate": str(1_700_000_000 + k),
              "JobPrio": str(k % 2), "RequestMemory": str(1024 * (k + 1)),
              "Foo": "ProcId * 2", "Bar": 'strcat(Args, "x")', "Args": '"none"', "Tag": '"beta"',
              "TagName": '"Tag"', "Picked": "eval(TagName)"}

        def per_proc(i, k=k):
            own = {}
            if k % 2 and i % 3 == 0:
                own["Args"] = f'"{i}"'
            if k == 4 and i == 2:
                own["RequestMemory"] = "RequestMemoryBase + 1"
                own["RequestMemoryBase"] = "100"
            if k == 5 and i == 1:
                own["Foo"] = "JobPrio + 100"
            if k != 2:
                own["Tag"] = TAGS[(5 * k + i) % len(TAGS)]
            if k == 5:
                own['Odd"Name'] = '"a quote in a name rules the SQL prefilter out"'
            return own

        q.submit(SimpleCluster(cid, ad, 5, per_proc=per_proc), now=1_700_000_000)
    q.hold((2, 1), "x")
    q.set_status((3, 0), JobStatus.RUNNING)
    q.set_prio((4, 3), 7)
    q.assign_autoclusters(["RequestMemory"])
    # Two spellings of one new name in one proc: the cluster's spelling wins, as in JobAd.
    q.set_attributes((2, 4), {"Foo2": "1", "FOO2": "2"})
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
         "Foo", "Bar", "QDate", "AutoClusterId", "Missing", "MY.JobStatus", "MY.Args",
         "Tag", "MY.Tag", "TARGET.Tag", 'MY["Tag"]', "Picked", 'eval("Args")', "Foo2", "MY.Missing"]
LITERALS = ["0", "1", "2", "5", "7", "1.0", "2048", "4096", '"alice"', '"ALICE"', '"bob"', '"3"',
            '"3x"', "undefined", "true", "1700000003", '"alpha"', '"ALPHA"', '"Alpha "', '""',
            r'"al\"pha"', r'"al\\pha"', '"%_^"', '"k\u212a"', '"K\u212a"', '"beta"']
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
    'Tag == "alpha"',
    'MY.Tag == "ALPHA" && JobStatus == 1',
    '"alpha" =?= Tag',
    'Tag =?= "alpha" && Args == "3"',
    r'Tag == "al\"pha"',
    'Tag == "%_^"',
    'Tag == ""',
    'Tag == "k\u212a"',
    'TARGET.Tag == "alpha"',
    'Missing == "alpha"',
    'MY["Tag"] == "alpha"',
    'eval(strcat("Ar", "gs")) == "3"',
    'Picked == "ALPHA"',
    'size(MY) > 0 && Args == "3"',
    "Foo2 == 1",
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


def test_plan_lists_string_equalities_a_prefilter_can_use():
    p = plan('JobStatus == 1 && Args == "a" && ("B" =?= MY.Tag) && Tag != "c"')
    assert p.tests == (LiteralTest("args", "a", False), LiteralTest("tag", "B", True))
    for constraint in ['Owner == "a" && x > 1', 'TARGET.Tag == "a"', "Tag == 1", 'Tag == "a" || x',
                       'CurrentTime == "a" && x', 'MY == "a"']:
        assert plan(constraint).tests == ()


def _plain_value(text):
    return text[1:-1] if text is not None and re.fullmatch(r'"[^"\\]*"', text) else None


def test_prefilter_drops_exactly_the_rows_whose_plain_text_differs(queue):
    # ClassAd == folds ASCII letters only; LIKE does the same. "K\u212a" is not "kk".
    for constraint, exact in [('Tag == "ALPHA"', False), ('Tag =?= "alpha"', True),
                              ('Tag == "k\u212a"', False), ('Tag == "%_^"', False)]:
        p = plan(constraint)
        clusters = {cid: queue._cluster(cid) for cid in range(1, 7)}
        where, params, check = narrow(queue._conn, p.where, p.params, clusters,
                                      GroupedEvaluator(p.residual_text, NOW), p.tests)
        kept = {tuple(r) for r in queue._conn.execute(
            f"SELECT cluster_id, proc_id FROM jobs WHERE {where}", params)}
        literal = p.tests[0].value
        assert check == {1, 2, 4, 5, 6}  # cluster 3's procs do not set Tag: decided once
        for job in queue.query(None):
            if job.cluster_id not in check:
                continue
            value = _plain_value(job.own.get("Tag"))
            fold = (lambda s: s) if exact else (lambda s: s.encode().lower())
            provably_false = (job.cluster_id != 6 and value is not None
                              and fold(value) != fold(literal))
            assert (job.job_id not in kept) == provably_false, (constraint, job.job_id)
        assert set(oracle(queue, constraint)) <= kept


def test_prefilter_is_not_used_where_sql_cannot_be_exact(queue):
    cluster = queue._cluster(1)
    assert drop_condition(cluster, (LiteralTest("tag", "a", False),)) is not None
    # No proc overrides RequestMemory; a name with a quote in cluster 6 rules SQL out.
    assert drop_condition(cluster, (LiteralTest("requestmemory", "a", False),)) is None
    assert drop_condition(queue._cluster(6), (LiteralTest("tag", "a", False),)) is None
    assert drop_condition(cluster, (LiteralTest("tag", "a\x00", False),)) is None


# Random per-proc texts for one attribute, against random literals: the prefilter must never
# drop a job the whole-ad evaluation selects.
CHARS = st.sampled_from(list('aAzZ"\\ %_^\u212ak\u00e9'))
RAW = st.text(CHARS, max_size=5)
PLAIN = RAW.filter(lambda s: '"' not in s and "\\" not in s).map(lambda s: f'"{s}"')
TEXTS = st.one_of(
    PLAIN, RAW.map(quote),
    st.tuples(RAW, RAW).map(lambda p: f"strcat({quote(p[0])}, {quote(p[1])})"),
    st.tuples(RAW, RAW).map(lambda p: f"{quote(p[0])} =?= {quote(p[0])} ? {quote(p[1])} : \"no\""),
    st.sampled_from(["3", "undefined", "error", "Other", "toUpper(Other)", "Tag"]),
)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_prefilter_never_drops_a_matching_job(data):
    texts = data.draw(st.lists(st.one_of(st.none(), TEXTS), min_size=1, max_size=6))
    values = [_plain_value(t) for t in texts if _plain_value(t) is not None]
    literal = data.draw(st.one_of(
        RAW, st.sampled_from(values or [""]).flatmap(
            lambda v: st.sampled_from([v, v.swapcase(), v.upper(), v + " "]))))
    op = data.draw(st.sampled_from(["==", "=?="]))
    constraint = f"Tag {op} {quote(literal)}" + data.draw(st.sampled_from(["", " && ProcId >= 0"]))
    q = JobQueue.open(":memory:")
    try:
        cid = q.next_cluster_id()

        def per_proc(i):
            return {} if texts[i] is None else {"Tag": texts[i]}

        q.submit(SimpleCluster(cid, {"Owner": '"a"', "Tag": '"aA"', "Other": '"Ak"'}, len(texts),
                               per_proc=per_proc), now=1)
        assert [j.job_id for j in q.query(constraint, now=NOW)] == oracle(q, constraint)
    finally:
        q.close()


def test_grouped_evaluation_does_not_share_values_read_dynamically():
    q = JobQueue.open(":memory:")
    cid = q.next_cluster_id()
    ad = {"Owner": '"a"', "Name": '"Args"', "Args": '"none"', "Pick": "eval(Name)"}
    q.submit(SimpleCluster(cid, ad, 4, per_proc=lambda i: {"Args": f'"{i}"', "Own": 'eval("Args")'}),
             now=1)
    jobs = q.query(None)
    assert [j.job_id for j in GroupedEvaluator('Pick == "2"').select(jobs)] == [(cid, 2)]
    assert [j.job_id for j in GroupedEvaluator('Own == "3"').select(jobs)] == [(cid, 3)]
    assert [j.job_id for j in GroupedEvaluator('MY["Args"] == "1"').select(jobs)] == [(cid, 1)]
    q.close()


def _counted(rows, attrs):
    totals: dict = {}
    for values, status, n in rows:
        key = (tuple(values.get(a) for a in attrs), status)
        totals[key] = totals.get(key, 0) + n
    return totals


@pytest.mark.parametrize("attrs", [["Owner"], ["Owner", "Picked"], ["Owner", "RequestMemory"], ["Args"],
                                   ["Tag", "Owner"], ["Owner", "JobPrio"]])
def test_status_counts_agree_with_looking_at_every_job(queue, attrs):
    # Owner and Picked come from the cluster and a column (the GROUP BY way); Args, Tag and
    # RequestMemory are overridden by some procs and JobPrio is a per-job column (job by job).
    every = [({a: job[a] for a in attrs if a in job}, int(job["JobStatus"]), 1)
             for job in queue.query(projection=[*attrs, "JobStatus"])]
    assert _counted(queue.status_counts(attrs), attrs) == _counted(every, attrs)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(alphabet="0123456789.eE+- x", max_size=12),
                 st.floats(allow_nan=False, allow_infinity=False).map(str),
                 st.integers().map(str)))
def test_a_value_taken_as_a_plain_number_without_parsing_is_one_the_parser_reads(text):
    from htc.errors import UsageError
    from htc.jobqueue.expr import _PLAIN_NUMBER, check_expression, parse

    def accepted(check) -> bool:
        try:
            check(text)
        except UsageError:
            return False
        return True
    parses = accepted(parse.__wrapped__)
    assert parses or not _PLAIN_NUMBER.match(text)  # the shortcut takes only what the parser reads
    assert accepted(lambda t: check_expression("X", t)) == parses  # and the check says what the parser says
