"""The Python DAG API: building the model (nodes, settings, edges, layers) and function nodes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from htc.dag import DAG, Layer, NodeRef
from htc.dag import function_nodes as fnodes
from htc.dag.model import NodeKind, Script
from htc.errors import UsageError
from htc.wire import callfile as cf

TRUE = {"executable": "/bin/true"}


def test_job_takes_a_submit_file_text_or_a_dict(tmp_path):
    dag = DAG("d")
    a = dag.job("a", tmp_path / "a.sub")
    b = dag.job("b", "executable = /bin/echo\narguments = hi")
    c = dag.job("c", {"executable": "/bin/echo", "arguments": "$(n)"})
    assert a.node.submit_file == str(tmp_path / "a.sub") and a.node.submit_text is None
    assert b.node.submit_text == "executable = /bin/echo\narguments = hi\nqueue\n"
    assert c.node.submit_text == "executable = /bin/echo\narguments = $(n)\nqueue\n"
    assert dag.job("e", "executable = /bin/true\nqueue 3\n").node.submit_text == "executable = /bin/true\nqueue 3\n"
    assert [n.name for n in dag] == ["a", "b", "c", "e"] and len(dag) == 4 and "a" in dag and a in dag


def test_job_settings_land_in_the_model(tmp_path):
    dag = DAG("d")
    n = dag.job("n", TRUE, vars={"x": 1, "y": "two"}, dir=tmp_path, retry=3, retry_unless_exit=42,
                pre="check.sh $JOB", post=["post.sh", "$RETURN"], priority=7, category="big", done=True,
                pre_skip=9, abort_on=5, abort_return=1).node
    assert [(v.name, v.value) for v in n.vars] == [("x", "1"), ("y", "two")]
    assert n.dir == str(tmp_path) and n.retry == 3 and n.retry_unless_exit == 42
    assert (n.scripts["PRE"].executable, n.scripts["PRE"].args) == ("check.sh", ["$JOB"])
    assert (n.scripts["POST"].executable, n.scripts["POST"].args) == ("post.sh", ["$RETURN"])
    assert (n.priority, n.category, n.done, n.pre_skip, n.abort_status, n.abort_return) == (7, "big", True, 9, 5, 1)
    ref = dag["n"].configure(vars={"x": "3"}, pre=Script("PRE", "other.sh", ["a"], defer_status=4, defer_time=10))
    assert [(v.name, v.value) for v in ref.node.vars] == [("y", "two"), ("x", "3")]
    assert ref.node.scripts["PRE"].defer_status == 4


def test_noop_nodes_need_no_submit_description_and_others_do():
    dag = DAG("d")
    assert dag.job("join", noop=True).node.noop
    with pytest.raises(UsageError, match="needs submit="):
        dag.job("x")
    assert "x" not in dag  # a refused node leaves nothing behind


@pytest.mark.parametrize("name", ["PARENT", "child", "All_Nodes", "a+b", "a b", ""])
def test_node_names_dagman_rejects_are_refused(name):
    with pytest.raises(UsageError, match="cannot be a node name"):
        DAG("d").job(name, TRUE)


def test_duplicate_names_and_bad_dag_names_are_refused():
    dag = DAG("d")
    dag.job("a", TRUE)
    with pytest.raises(UsageError, match="already has a node named 'a'"):
        dag.job("a", TRUE)
    with pytest.raises(UsageError, match="cannot name a file"):
        DAG("a/b")


def test_edges_by_operator_lists_layers_and_helpers():
    dag = DAG("d")
    a, b, c, d = (dag.job(x, TRUE) for x in "abcd")
    assert (a >> [b, c] >> d) == d  # returns the right side: chains read left to right
    assert set(dag.graph.edges) == {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")}
    e, f = dag.job("e", TRUE), dag.job("f", TRUE)
    [e, f] >> a
    dag.chain(d, dag.job("g", TRUE), dag.nodes("e"))
    assert {("e", "a"), ("f", "a"), ("d", "g"), ("g", "e")} <= set(dag.graph.edges)
    dag.edge("b", "e", weak=True)
    assert dag.model.is_weak("b", "e")
    x = dag.layer("x", TRUE, vars=[{"n": i} for i in range(3)])
    y = dag.layer("y", TRUE, vars=2)
    x >> y
    assert x.names == ["x:0", "x:1", "x:2"] and len(y) == 2
    assert all(dag.graph.has_edge(p, c) for p in x.names for c in y.names)
    assert [(v.name, v.value) for v in dag["x:2"].node.vars] == [("n", "2")]
    dag.fan_out("x:0", ["a", "b"])
    dag.fan_in(["x:1", "x:2"], "a")
    assert dag.graph.has_edge("x:0", "b") and dag.graph.has_edge("x:2", "a")


def test_edges_name_what_is_wrong():
    dag = DAG("d")
    a = dag.job("a", TRUE)
    fin = dag.final("fin", TRUE)
    with pytest.raises(UsageError, match="has no node 'zz'"):
        a >> "zz"
    with pytest.raises(UsageError, match="'fin' is a FINAL node; it cannot be in an edge"):
        a >> fin
    with pytest.raises(UsageError, match="its own parent"):
        dag.edge(a, a)
    with pytest.raises(UsageError, match="belongs to another DAG"):
        a >> DAG("other").job("b", TRUE)


def test_final_and_maxjobs():
    dag = DAG("d")
    fin = dag.final("fin", TRUE, post="cleanup.sh")
    assert fin.node.kind is NodeKind.FINAL and dag.model.final is fin.node
    with pytest.raises(UsageError, match="at most one"):
        dag.final("fin2", TRUE)
    with pytest.raises(UsageError, match="takes no priority, retry"):
        DAG("e").final("f", TRUE, retry=2, priority=1)
    dag.maxjobs("big", 2)
    assert dag.model.maxjobs == {"big": 2}


def test_a_function_node_argument_that_is_a_function_node_adds_the_edge():
    dag = DAG("d")
    a = dag.function("a", sum, [1, 2])
    b = dag.function("b", max, a, 10)
    c = dag.function("c", dict, first=a, both=[a, b])
    assert dag.graph.has_edge("a", "b") and dag.graph.has_edge("a", "c") and dag.graph.has_edge("b", "c")
    assert dag.calls["c"].parents == ["a", "b"]
    plain = dag.job("plain", TRUE)
    with pytest.raises(UsageError, match="'plain' is an argument of function node 'd2' but is not a function node"):
        dag.function("d2", print, plain)
    with pytest.raises(UsageError, match="cannot hold ','"):
        dag.function("x,y", print)
    with pytest.raises(TypeError, match="needs a callable"):
        dag.function("z", 3)
    assert "d2" not in dag and "z" not in dag


def _run_worker(sandbox: Path) -> int:
    from htc.executors.worker import run

    return run(sandbox)


def test_function_nodes_call_files_run_in_the_executors_worker_and_pass_values_on(tmp_path):
    dag = DAG("d")
    a = dag.function("a", sum, [1, 2, 3])
    b = dag.function("b", lambda x, k=0: x * 10 + k, a, k=4)
    for name in "ab":
        (tmp_path / name).mkdir()
        fnodes.write_call(tmp_path / name, name, dag.calls[name])
    assert cf.read_call(tmp_path / "b" / "b.call")[0].parents == ("a",)
    assert _run_worker(tmp_path / "a") == 0
    shutil.copy(tmp_path / "a" / cf.RESULT_FILE, tmp_path / "b" / "a.result")  # what the child's job transfers in
    assert _run_worker(tmp_path / "b") == 0
    shutil.copy(tmp_path / "b" / cf.RESULT_FILE, tmp_path / "b.result")  # what transfer_output_remaps brings back
    assert fnodes.read_result(tmp_path, "b") == 64


def test_a_function_that_raises_fails_its_node_and_its_result_reraises(tmp_path):
    def boom():
        raise ValueError("no good")

    dag = DAG("d")
    dag.function("bad", boom)
    fnodes.write_call(tmp_path, "bad", dag.calls["bad"])
    assert _run_worker(tmp_path) == 1  # the worker's EXIT_EXCEPTION: the node fails
    (tmp_path / cf.RESULT_FILE).rename(tmp_path / "bad.result")
    with pytest.raises(ValueError, match="no good"):
        fnodes.read_result(tmp_path, "bad")


def test_a_result_not_there_yet_says_so(tmp_path):
    with pytest.raises(cf.CallFileError, match="function node 'n' has no result yet"):
        fnodes.read_result(tmp_path, "n")


def test_function_node_submit_description_runs_the_worker_by_module_name():
    text = fnodes.submit_text("b", ["a"], python="/usr/bin/python3", extra={"request_memory": "1GB"})
    lines = dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line)
    assert lines["executable"] == "/usr/bin/python3"
    assert lines["arguments"] == "-m htc.executors.worker"
    assert lines["transfer_input_files"] == "b.call, a.result"
    assert lines["transfer_output_remaps"] == '"htc_result.pkl = b.result"'
    assert lines["request_memory"] == "1GB"
    assert text.endswith("queue\n")


def test_refs_compare_by_dag_and_name():
    dag = DAG("d")
    a = dag.job("a", TRUE)
    assert a == dag["a"] and hash(a) == hash(dag["a"]) and isinstance(a, NodeRef)
    assert a != DAG("d").job("a", TRUE)
    assert isinstance(dag.nodes(), Layer) and dag.nodes().names == ["a"]
    with pytest.raises(KeyError, match="has no node 'b'"):
        dag["b"]


def test_root_is_told_before_submitting_when_slot_accounts_cannot_run_the_python(tmp_path, monkeypatch):
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    python = hidden / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    monkeypatch.setattr(fnodes.os, "geteuid", lambda: 0)
    with pytest.raises(UsageError, match="slot accounts cannot reach"):
        fnodes.check_python_for_root(str(python))
    dag = DAG("d", python=str(python))
    dag.function("f", print)
    with pytest.raises(UsageError, match="slot accounts cannot reach"):
        dag.submit(tmp_path / "out")
    fnodes.check_python_for_root("/bin/sh")  # an interpreter everyone can run: no complaint
    monkeypatch.setattr(fnodes.os, "geteuid", lambda: 1000)
    fnodes.check_python_for_root(str(python))  # not root: the jobs run as this user, who can
