"""The Python DAG API on a real personal pool: build, submit, follow, results, removal.

Each test builds a DAG with ``htc.dag.DAG``, submits it with ``dag.submit()`` (written into the
pool's work directory, submitted as ``htc dag submit`` does: the schedd runs the manager as a
scheduler-universe job) and follows it through the handle, then checks against what the run
left: the nodes log, the node jobs' outputs, the rescue DAG.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dag_pool import DagDir, dag_pool, function_node_python, in_queue, wait_until
from htc.dag import DAG, DagTimeout
from htc.errors import UsageError

pytestmark = pytest.mark.slow


@pytest.fixture
def d(monkeypatch):
    with dag_pool() as pool:
        yield DagDir(pool, monkeypatch)


@pytest.fixture(scope="module")
def py():
    """``python=`` and ``environment=`` for function nodes: as root, jobs run as another account,
    which needs a Python it can reach (what an administrator prepares for execute nodes)."""
    with function_node_python("htc-dag-py-") as options:
        yield options


def echo(text: str) -> dict[str, str]:
    return {"executable": "/bin/echo", "arguments": text, "output": "$(JOB).out", "request_memory": "32MB"}


def add(x, y):
    return x + y


def test_a_python_built_dag_runs_in_order_and_function_nodes_pass_values_on(d, py):
    dag = DAG("mixed", **py)
    first = dag.job("first", echo("one $(word)"), vars={"word": "two"})
    a = dag.function("a", add, 1, 2)
    b = dag.function("b", add, a, 10)   # a's value, 3, is b's first argument
    c = dag.function("c", sorted, [b, a])
    first >> dag.job("join", noop=True) >> a   # a NOOP node: no job, done as soon as it is ready
    handle = dag.submit(d.work / "mixed")
    assert handle.wait(timeout=300) == 0, d.dagman_out("mixed/mixed.dag")
    assert handle.status() == {"first": "DONE", "a": "DONE", "b": "DONE", "c": "DONE", "join": "DONE"}
    assert handle.result("b") == 13 and handle.result(c) == [3, 13]
    assert (d.work / "mixed" / "first.out").read_text() == "one two\n"
    events = d.node_events("mixed/mixed.dag")
    seq = [(n, type(e).__name__) for n, e in events]
    assert seq.index(("first", "JobTerminatedEvent")) < seq.index(("a", "SubmitEvent"))
    assert seq.index(("a", "JobTerminatedEvent")) < seq.index(("b", "SubmitEvent"))
    assert seq.index(("b", "JobTerminatedEvent")) < seq.index(("c", "SubmitEvent"))


def boom(_value):
    raise ValueError("this node fails on purpose")


def test_a_failing_function_node_fails_the_dag_its_child_is_futile_and_its_error_comes_back(d, py):
    dag = DAG("fails", **py)
    a = dag.function("a", add, 1, 1)
    bad = dag.function("bad", boom, a)
    dag.function("after", add, bad, 1)
    handle = dag.submit(d.work / "fails")
    assert handle.wait(timeout=300) == 1
    assert handle.status() == {"a": "DONE", "bad": "ERROR", "after": "FUTILE"}
    with pytest.raises(ValueError, match="this node fails on purpose"):
        handle.result("bad")
    assert handle.result("a") == 2
    rescue = d.work / "fails" / "fails.dag.rescue001"
    assert "DONE a" in rescue.read_text().splitlines()
    with pytest.raises(UsageError, match="'nope' is not a function node"):
        handle.result("nope")


def test_wait_times_out_and_remove_stops_the_dag_with_a_rescue_dag(d):
    dag = DAG("slow")
    dag.job("quick", echo("quick"))
    dag.job("sleeper", {"executable": "/bin/sleep", "arguments": "300", "request_memory": "32MB"})
    dag["quick"] >> dag["sleeper"]
    handle = dag.submit(d.work / "slow")
    wait_until(lambda: handle.status()["sleeper"] == "SUBMITTED", 120, "the sleeper node to be submitted")
    with pytest.raises(DagTimeout, match="has not finished after 0.5 s"):
        handle.wait(timeout=0.5)
    assert not handle.done()
    handle.remove()
    assert handle.wait(timeout=120) == 2  # removed: DAGMan's EXIT_ABORT
    wait_until(lambda: not in_queue(d.pool, handle.cluster), 60, "the manager job to leave the queue")
    rescue = (d.work / "slow" / "slow.dag.rescue001").read_text().splitlines()
    assert "DONE quick" in rescue and "DONE sleeper" not in rescue


def test_a_dag_file_read_back_runs_with_the_same_meaning(d):
    d.write("read/r.dag", "JOB A a.sub\nJOB B a.sub\nVARS B msg=\"bee\"\nPARENT A CHILD B\n")
    d.write("read/a.sub", "executable = /bin/echo\narguments = $(JOB) $(msg)\noutput = $(JOB).out\n"
                          "request_memory = 32MB\nqueue\n")
    dag = DAG.read(d.work / "read" / "r.dag")
    dag.job("C", echo("sea"))
    dag["B"] >> dag["C"]
    handle = dag.submit(d.work / "again")
    assert handle.wait(timeout=300) == 0
    assert handle.status() == {"A": "DONE", "B": "DONE", "C": "DONE"}
    assert (d.work / "read" / "B.out").read_text() == "B bee\n"  # A and B still run in their own DIR
    assert (d.work / "again" / "C.out").read_text() == "sea\n"


def test_a_subdag_built_in_python_runs_as_a_nested_dag(d):
    inner = DAG("inner")
    inner.job("x", echo("inner x")) >> inner.job("y", echo("inner y"))
    outer = DAG("outer")
    outer.job("before", echo("before")) >> outer.subdag("nested", inner) >> outer.job("after", echo("after"))
    handle = outer.submit(d.work / "outer")
    assert handle.wait(timeout=300) == 0, d.dagman_out("outer/outer.dag")
    assert handle.status() == {"before": "DONE", "nested": "DONE", "after": "DONE"}
    assert (d.work / "outer" / "nested" / "y.out").read_text() == "inner y\n"
    assert (d.work / "outer" / "after.out").read_text() == "after\n"
