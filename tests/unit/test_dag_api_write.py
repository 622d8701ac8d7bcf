"""DAG.write and DAG.read: the files a Python-built DAG becomes, read back by htc and by HTCondor."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import htcondor2
import pytest

from htc.dag import DAG, DagError, parse_dag
from htc.wire import callfile as cf

ROOT = Path(__file__).resolve().parents[2]
TRUE = {"executable": "/bin/true"}


def everything(tmp_path: Path) -> DAG:
    (tmp_path / "given.sub").write_text("executable = /bin/echo\nqueue\n")
    dag = DAG("all")
    a = dag.job("A", tmp_path / "given.sub", vars={"x": 'say "hi"'}, retry=2, retry_unless_exit=3,
                pre="pre.sh $JOB", post="post.sh $JOB $RETURN", priority=5, category="io")
    b = dag.layer("B", "executable = /bin/echo\narguments = $(n)\n", vars=[{"n": i} for i in range(2)])
    c = dag.function("C", sum, [1, 2])
    dag.function("D", max, c, 0)
    join = dag.job("join", noop=True)
    a >> b >> join >> c
    dag.edge("A", "join", weak=True)
    dag.final("fin", TRUE)
    dag.maxjobs("io", 1)
    return dag


def test_write_puts_the_dag_file_and_the_files_it_needs_beside_it(tmp_path):
    out = tmp_path / "out"
    path = everything(tmp_path).write(out / "all.dag")
    assert path == out / "all.dag"
    assert sorted(os.listdir(out)) == sorted(["all.dag", "B:0.sub", "B:1.sub", "C.call", "C.sub", "D.call", "D.sub",
                                              "join.sub", "fin.sub"])
    assert (out / "B:0.sub").read_text() == "executable = /bin/echo\narguments = $(n)\nqueue\n"
    assert cf.read_call(out / "D.call")[0].parents == ("C",)
    assert "transfer_input_files = D.call, C.result" in (out / "D.sub").read_text()


def test_what_is_written_reads_back_with_the_same_meaning(tmp_path):
    dag = everything(tmp_path)
    back = parse_dag(dag.write(tmp_path / "out" / "all.dag"))
    assert list(back.nodes) == list(dag.model.nodes)
    assert {(p, c, w) for p, c, w in back.graph.edges(data="weak")} == \
        {(p, c, w) for p, c, w in dag.graph.edges(data="weak")}
    a = back.nodes["A"]
    assert a.submit_file == str(tmp_path / "given.sub")
    assert [(v.name, v.value) for v in a.vars] == [("x", 'say "hi"')]
    assert (a.retry, a.retry_unless_exit, a.priority, a.category) == (2, 3, 5, "io")
    assert (a.scripts["PRE"].executable, a.scripts["POST"].args) == ("pre.sh", ["$JOB", "$RETURN"])
    assert back.nodes["join"].noop and back.final.name == "fin" and back.maxjobs == {"io": 1}
    assert back.nodes["C"].submit_file == str(tmp_path / "out" / "C.sub")


def test_htcondors_own_dag_parser_accepts_what_is_written(tmp_path, monkeypatch):
    # condor_submit_dag's parse (htcondor2.Submit.from_dag) refuses what DAGMan's parser refuses;
    # it only needs a condor_dagman on PATH to name in the submit description
    fake = tmp_path / "bin" / "condor_dagman"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    path = everything(tmp_path).write(tmp_path / "out" / "all.dag")
    monkeypatch.chdir(path.parent)
    sub = htcondor2.Submit.from_dag(path.name)
    assert sub["universe"] == "scheduler"
    bad = tmp_path / "out" / "bad.dag"  # the oracle does refuse a broken file
    bad.write_text(path.read_text() + "FROB A\n")
    with pytest.raises(Exception, match="'FROB' is not a valid DAG command"):
        htcondor2.Submit.from_dag(bad.name)


def test_read_change_and_write_a_dag_file(tmp_path):
    shutil.copytree(ROOT / "examples" / "dag_diamond", tmp_path / "d")
    dag = DAG.read(tmp_path / "d" / "diamond.dag")
    assert dag.name == "diamond" and list(dag.model.nodes) == ["A", "B", "C", "D"]
    dag.job("E", TRUE)
    dag["D"] >> dag["E"]
    back = parse_dag(dag.write(tmp_path / "e" / "diamond.dag"))
    assert set(back.graph.edges) == {("A", "B"), ("A", "C"), ("B", "D"), ("C", "D"), ("D", "E")}
    assert back.nodes["B"].dir == str(tmp_path / "d")  # the read nodes still run where their files are
    assert back.nodes["C"].retry == 2 and back.nodes["D"].scripts["POST"].executable == "check.sh"
    assert back.nodes["E"].dir == str(tmp_path / "e")


def test_a_cycle_is_refused_when_written_naming_its_nodes(tmp_path):
    dag = DAG("loop")
    a, b = dag.job("a", TRUE), dag.job("b", TRUE)
    a >> b >> a
    with pytest.raises(DagError, match="cycle"):
        dag.write(tmp_path / "loop.dag")


def test_a_subdag_given_as_a_dag_is_written_in_its_own_directory_and_a_service_node_too(tmp_path):
    inner = DAG("inner")
    inner.job("x", TRUE) >> inner.job("y", TRUE)
    outer = DAG("outer")
    first = outer.job("first", TRUE)
    sub = outer.subdag("nested", inner, retry=1)
    first >> sub >> outer.subdag("external", tmp_path / "other.dag")
    outer.service("watch", TRUE)
    back = parse_dag(outer.write(tmp_path / "out" / "outer.dag"))
    nested = back.nodes["nested"]
    assert nested.kind.value == "SUBDAG" and nested.retry == 1
    assert nested.dir == str(tmp_path / "out" / "nested")
    assert nested.submit_file == str(tmp_path / "out" / "nested" / "inner.dag")
    assert set(parse_dag(nested.submit_file).graph.edges) == {("x", "y")}
    assert back.nodes["external"].submit_file == str(tmp_path / "other.dag")
    assert back.nodes["watch"].kind.value == "SERVICE"
    assert set(back.graph.edges) == {("first", "nested"), ("nested", "external")}
    with pytest.raises(Exception, match="cannot be in an edge"):
        outer["watch"] >> first
    with pytest.raises(Exception, match="a SERVICE node takes no retry"):
        outer.service("s2", TRUE, retry=1)
    with pytest.raises(Exception, match="cannot be a SUBDAG of itself"):
        outer.subdag("self", outer)
