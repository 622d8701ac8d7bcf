"""Every DAG file of /work/shared/conformance/dagman/ parses with the nodes, edges and settings
it says, and writing it back gives the same model (parse(write(parse(f))) == parse(f)).

The two files that are only pieces of another (``job_dagman_splice_connect-A-inc1.dag`` and
``-inc2.dag``, INCLUDEd by the splice_connect DAGs) name splices and nodes they do not define,
so on their own DAGMan rejects them, and so does htc. ``htcondor2-dags/diamond/diamond.dag``
has the htcondor2.dags writer's quirk ``CATEGORY cat1 2`` (meant as ``MAXJOBS cat1 2``): DAGMan
rejects it (no node ``cat1``), so htc does too, naming the line; there is no lenient mode (a
DAG DAGMan refuses must not run under htc either), and the rest of the file parses once that
line says ``MAXJOBS``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from htc.dag.errors import DagError
from htc.dag.model import Dag, NodeKind, Var
from htc.dag.parser import parse_dag, parse_dag_text
from htc.dag.writer import dag_text

CONFORMANCE = Path("/work/shared/conformance/dagman")
TESTS = CONFORMANCE / "htcondor-tests"
DAGS2 = CONFORMANCE / "htcondor2-dags"

#: files that are pieces of another DAG, rejected alone, with the reason DAGMan gives
FRAGMENTS = {"job_dagman_splice_connect-A-inc1.dag": "Unknown splice 'SpliceA'",
             "job_dagman_splice_connect-A-inc2.dag": "Unknown node 'NodeA'",
             "diamond.dag": "Unknown node 'cat1'"}
ALL_FILES = sorted(CONFORMANCE.rglob("*.dag"))
WHOLE = [f for f in ALL_FILES if f.name not in FRAGMENTS]


def facts(dag: Dag) -> tuple:
    """What a DAG means: nodes (without where they were written), edges, settings."""
    nodes = []
    for name, node in dag.nodes.items():
        n = dataclasses.asdict(node)
        del n["source"], n["dag_file"]
        for script in n["scripts"].values():
            del script["source"]
        nodes.append((name, n))
    edges = {(p, c, bool(w)) for p, c, w in dag.graph.edges(data="weak")}
    settings = {k: getattr(dag, k) for k in (
        "maxjobs", "config", "set_job_attrs", "env_get", "env_set", "dot", "node_status",
        "jobstate_log", "submit_descriptions")}
    return nodes, edges, settings, dag.reject is not None


def edges(dag: Dag) -> set[tuple[str, str]]:
    return set(dag.graph.edges)


def test_the_corpus_is_there() -> None:
    assert len(ALL_FILES) == 28 and len(WHOLE) == 25


@pytest.mark.parametrize("path", WHOLE, ids=lambda p: p.name)
def test_writing_back_keeps_the_meaning(path: Path) -> None:
    dag = parse_dag(path)
    again = parse_dag_text(dag_text(dag), path, allow_any_node_name_characters=True)
    assert facts(again) == facts(dag)


@pytest.mark.parametrize("name", sorted(FRAGMENTS))
def test_fragments_and_the_diamond_quirk_are_rejected_as_dagman_does(name: str) -> None:
    path = next(f for f in ALL_FILES if f.name == name)
    with pytest.raises(DagError, match=FRAGMENTS[name]) as info:
        parse_dag(path)
    assert info.value.file == str(path) and info.value.line is not None


def test_diamond_parses_once_its_quirk_says_maxjobs() -> None:
    path = DAGS2 / "diamond" / "diamond.dag"
    text = path.read_text()
    assert text.splitlines()[1] == "CATEGORY cat1 2"
    with pytest.raises(DagError) as info:
        parse_dag(path)
    assert info.value.line == 2
    dag = parse_dag_text(text.replace("CATEGORY cat1 2", "MAXJOBS cat1 2"), path)
    assert list(dag.nodes) == ["A:0", "BC:0", "BC:1", "D:0", "CLEANUP"]
    assert edges(dag) == {("A:0", "BC:0"), ("A:0", "BC:1"), ("BC:0", "D:0"), ("BC:1", "D:0")}
    a = dag.nodes["A:0"]
    assert (a.retry, a.retry_unless_exit, a.priority, a.category) == (2, 42, 10, "cat1")
    assert a.scripts["POST"].args == ["$JOB", "$RETURN"] and dag.maxjobs == {"cat1": 2}
    assert (dag.nodes["D:0"].abort_status, dag.nodes["D:0"].abort_return) == (3, 1)
    assert dag.final.name == "CLEANUP" and dag.final.submit_file == str(path.parent / "CLEANUP.sub")


def test_basic_and_unlessexit() -> None:
    node = parse_dag(TESTS / "job_dagman_basic.dag").nodes["NODERET"]
    assert node.scripts["PRE"].executable == "./x_dagman_premonitor.pl"
    assert node.scripts["PRE"].args == [] and node.scripts["POST"].args == ["$RETURN"]
    node = parse_dag(TESTS / "job_dagman_unlessexit.dag").nodes["NODERET"]
    assert (node.retry, node.retry_unless_exit) == (1, 3)


def test_abort_a() -> None:
    dag = parse_dag(TESTS / "job_dagman_abort-A.dag")
    c = dag.nodes["C"]
    assert (c.abort_status, c.abort_return, c.retry) == (5, 0, 3)
    assert c.vars == [Var("nodename", "$(JOB)")]
    assert edges(dag) == {("A", "B"), ("B", "C"), ("C", "D")}
    assert dag.node_status.file == str(TESTS / "job_dagman_abort-A.status")
    assert dag.node_status.min_update == 600


def test_final_a() -> None:
    dag = parse_dag(TESTS / "job_dagman_final-A.dag")
    final = dag.final
    assert final.name == "A_C" and final.kind is NodeKind.FINAL
    assert final.scripts["POST"].args == ["A_C", "Post", "$DAG_STATUS", "$FAILED_COUNT",
                                          "$RETURN"]
    assert final.vars == [Var("msg", "OK done with A_C")]
    assert edges(dag) == {("A_A", "A_B")}
    assert dag.jobstate_log == str(TESTS / "job_dagman_final-A.dag.jobstate.log")
    # two NODE_STATUS_FILE lines: the first counts (DAGMan warns and keeps it)
    assert dag.node_status.min_update == 60 and len(dag.warnings) == 1


def test_pre_skip_and_reject() -> None:
    dag = parse_dag(TESTS / "job_dagman_pre_skip-A.dag")
    assert [dag.nodes[n].pre_skip for n in "AB"] == [2, 2]
    dag = parse_dag(TESTS / "job_dagman_reject-1.dag")
    assert dag.reject is not None and dag.reject.line == 6
    assert edges(dag) == {("NodeA", "NodeB")}


def test_vars_values_with_escapes() -> None:
    dag = parse_dag(TESTS / "job_dagman_vars.dag")
    v = {name: {x.name: x.value for x in node.vars} for name, node in dag.nodes.items()}
    assert v["NodeA"] == {"nodename": "X$(JOB)", "first": "Alberto Contador",
                          "second": "Andy\tSchleck", "third": "Lance_Armstrong",
                          "misc": "!@#$%^&*()_-=+=[]{}?"}
    assert v["NodeB"] == {"nodename": "$(JOB)Y", "third": "Pedro_Delgado",
                          "first": 'Greg""_LeMond', "second": "\\Laurent_Fignon"}
    assert v["NodeD"]["second"] == 'Andreas\\"_Kloden' and v["NodeD"]["third"] == "\\Ivan_Basso"
    assert v["NodeE"] == {"nodename": "$(JOB)", "My.A": '"bob"', "noderetry": "X$(RETRY)"}
    assert v["NodeF"]["My.DagNodeRetry"] == "$(RETRY)"
    assert v["NodeG"]["args"] == ("'Vincenzo ''The Shark'' Nibali' "
                                  "'Bernard \"\"The Badger\"\" Hinault'")
    assert (dag.nodes["NodeF"].abort_status, dag.nodes["NodeF"].retry) == (2, 3)


def test_node_prio_and_node_status() -> None:
    dag = parse_dag(TESTS / "job_dagman_node_prio.dag")
    assert dag.config == str(TESTS / "job_dagman_node_prio.config")
    assert [dag.nodes[f"B{i}"].priority for i in range(1, 11)] == [5, 3, 8, 6, 10, 1, 9, 2, 7, 4]
    assert dag.nodes["A"].priority == 0 and len(dag.children("A")) == 10
    dag = parse_dag(TESTS / "job_dagman_node_status.dag")
    ns = dag.node_status
    assert (ns.min_update, ns.always_update) == (0, True)
    copy = {name: node.vars for name, node in dag.nodes.items()}
    assert copy["A"] == copy["C"] == [Var("copystatus", "1")]
    assert all(copy[f"B{i}"] == [Var("copystatus", "0")] for i in range(1, 11))
    assert dag.graph.number_of_edges() == 20


def test_script_args_and_defer() -> None:
    dag = parse_dag(TESTS / "job_dagman_script_args.dag")
    assert dag.nodes["NodeA"].scripts["PRE"].args == ["$JOB", "Pre", '"Cadel_Evans"', "$RETRY"]
    assert dag.nodes["NodeB"].scripts["PRE"].args[2] == "'Bernard_Hinault'"
    assert dag.nodes["NodeC"].scripts["PRE"].args == ["$JOB", "Pre", "Miguel", "\\Indurain",
                                                      "$RETRY"]
    assert dag.nodes["NodeD"].scripts["POST"].args[-1] == "$JOBID"
    dag = parse_dag(TESTS / "job_dagman_script_defer.dag")
    s = {n: next(iter(node.scripts.values())) for n, node in dag.nodes.items()}
    assert [(s[n].kind, s[n].defer_status, s[n].defer_time) for n in ("NodeA", "NodeB", "NodeC")] \
        == [("PRE", 3, 30), ("PRE", 4, 20), ("POST", 5, 25)]
    assert edges(dag) == {("NodeA", "NodeB"), ("NodeB", "NodeC")}


def test_set_attr_last_wins() -> None:
    dag = parse_dag(TESTS / "job_dagman_set_attr1.dag")
    assert dag.set_job_attrs == {"test_attr0": "Bodrum", "test_attr1": "123",
                                 "test_attr2": '"0.987 6.402"'}


def test_jobstate_log_continuations() -> None:
    dag = parse_dag(TESTS / "job_dagman_jobstate_log.dag")
    assert dag.jobstate_log == str(TESTS / "job_dagman_jobstate_log.dag.jobstate.log")
    a = dag.nodes["NodeA"]
    assert a.submit_file == str(TESTS / "job_dagman_jobstate_log-nodeA.cmd") and a.source.line == 5
    assert a.scripts["PRE"].args == ["$JOB"] and a.scripts["POST"].args == ["$JOB"]
    assert dag.nodes["NodeC"].retry == 1
    assert edges(dag) == {("NodeA", "NodeB"), ("NodeB", "NodeC"), ("NodeC", "NodeD"),
                          ("NodeD", "NodeE")}


def test_cmd_order_forward_references() -> None:
    dag = parse_dag(TESTS / "job_dagman_cmd_order.dag")
    a, b, z = (dag.nodes[n] for n in ("NodeA", "NodeB", "NodeZ"))
    assert edges(dag) == {("NodeA", "NodeB")} and dag.maxjobs == {"Cat1": 2}
    assert (a.priority, a.abort_status, a.retry, a.category) == (10, 2, 1, "Cat1")
    assert (b.priority, b.abort_status, b.retry, b.category) == (20, 3, 3, "Cat1")
    assert b.kind is NodeKind.SUBDAG
    assert b.submit_file == str(TESTS / "job_dagman_cmd_order-lower.dag")
    assert z.kind is NodeKind.FINAL and set(z.scripts) == {"PRE", "POST"}
    assert z.vars == [Var("nodename", "$(JOB)")] and z.scripts["PRE"].args == ["1"]


def test_node_dir() -> None:
    dag = parse_dag(TESTS / "job_dagman_node_dir.dag")
    b, c = dag.nodes["NodeB"], dag.nodes["NodeC"]
    sub = TESTS / "job_dagman_node_dir-subdir"
    assert b.dir == str(sub) and b.submit_file == str(sub / "job_dagman_node_dir-nodeB.cmd")
    assert c.dir == str(TESTS) and c.submit_file == str(sub / "job_dagman_node_dir-nodeC.cmd")
    assert c.scripts["PRE"].executable == "job_dagman_node_dir-subdir/job_dagman_node_dir-preB.pl"
    assert edges(dag) == {("NodeA", "NodeB"), ("NodeA", "NodeC"), ("NodeB", "NodeD"),
                          ("NodeC", "NodeD")}


def test_subdag_upper() -> None:
    dag = parse_dag(TESTS / "job_dagman_subdag-A-upper.dag")
    assert [n.kind for n in dag.nodes.values()] == [NodeKind.JOB, NodeKind.SUBDAG,
                                                    NodeKind.SUBDAG, NodeKind.JOB]
    assert dag.nodes["C"].submit_file == str(TESTS / "job_dagman_subdag-A-lower2.dag")
    assert edges(dag) == {("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")}


def test_splice_cat_categories_and_throttles() -> None:
    dag = parse_dag(TESTS / "job_dagman_splice-cat.dag")
    assert len(dag.nodes) == 21
    root = dag.nodes["root"]
    assert root.submit_text == "executable = x_sleep.pl\narguments  = 1\n"
    assert (root.abort_status, root.abort_return) == (0, 0)
    cats = {name: node.category for name, node in dag.nodes.items()}
    assert cats["B0"] == "cat0" and cats["D0+B1"] == "D0+cat1" and cats["E0"] == "+catS"
    assert cats["D0+D1+B2"] == "D0+D1+cat2" and cats["D0+E1+D2"] == "D0+E1+cat3"
    assert cats["D0+F1"] == cats["D0+E1+F2"] == "+catS"
    # a splice's MAXJOBS is read when the splice is; its includer's come later and win
    assert dag.maxjobs == {"cat0": 10, "+catS": 2, "D0+cat1": 12, "D0+D1+cat2": 33,
                           "D0+E1+cat2": 32, "D0+D1+cat3": 22, "D0+E1+cat3": 22}
    assert dag.nodes["D0+D1+A2"].vars == [Var("racer", "Fausto Coppi")]
    # a splice in PARENT/CHILD: its initial nodes as a child, its terminal nodes as a parent
    assert set(dag.parents("D0+A1")) == {"B0", "C0"} and dag.parents("E0") == ["D0+F1"]
    assert set(dag.children("D0+B1")) == {"D0+D1+A2", "D0+E1+A2"}
    assert set(dag.parents("D0+F1")) == {"D0+D1+F2", "D0+E1+F2"}


def test_splice_connect_edges_through_pins() -> None:
    dag = parse_dag(TESTS / "job_dagman_splice_connect-A.dag")
    assert sorted(dag.nodes) == sorted(f"Splice{s}+Node{n}" for s in "ABC" for n in "ABC")
    assert edges(dag) == {
        # SpliceA pins out 1,2,3 = A,B,C; SpliceB pins in 1,2,3 = A,B,C (inc2, INCLUDEd)
        ("SpliceA+NodeA", "SpliceB+NodeA"), ("SpliceA+NodeB", "SpliceB+NodeB"),
        ("SpliceA+NodeC", "SpliceB+NodeC"),
        # SpliceB pins out 3,2,1 = A,B,C; SpliceC pins in 1,2,3 = A,B,C
        ("SpliceB+NodeC", "SpliceC+NodeA"), ("SpliceB+NodeB", "SpliceC+NodeB"),
        ("SpliceB+NodeA", "SpliceC+NodeC")}
    # each "skewer" runs the same output file end to end
    skewer = [v.value for n in ("SpliceA+NodeA", "SpliceB+NodeA", "SpliceC+NodeC")
              for v in dag.nodes[n].vars if v.name == "file"]
    assert skewer == ["job_dagman_splice_connect-A-skewer1.out"] * 3


def test_htcondor2_dags_fanout_and_manytomany() -> None:
    dag = parse_dag(DAGS2 / "fanout" / "fanout.dag")
    assert dag.config == str(DAGS2 / "fanout" / "dagman.config")
    assert (dag.dot.update, dag.dot.overwrite) == (True, False)
    assert (dag.node_status.min_update, dag.node_status.always_update) == (30, True)
    assert dag.set_job_attrs == {"TestAttr": "17"}
    assert dag.nodes["gen:1"].noop and dag.nodes["gen:2"].done
    assert dag.nodes["inner:0"].kind is NodeKind.SUBDAG
    assert set(dag.parents("inner:0")) == {"proc:0", "proc:1", "proc:2"}
    dag = parse_dag(DAGS2 / "manytomany" / "manytomany.dag")
    assert all(dag.nodes[f"L1:{i}"].pre_skip == 99 for i in range(4))
    assert set(dag.children("__JOIN__:0")) == {f"L2:{i}" for i in range(4)}
    assert dag.nodes["__JOIN__:2"].noop and dag.parents("L3:1") == ["__JOIN__:2"]


def test_splice_files_parse_on_their_own() -> None:
    dag = parse_dag(TESTS / "job_dagman_splice-cat-splice1.dag")
    assert len(dag.nodes) == 4 + 2 * 6 and dag.nodes["D1+B2"].category == "D1+cat2"
    assert dag.maxjobs == {"D1+cat2": 33, "D1+cat3": 22, "+catS": 3, "E1+cat2": 32,
                           "E1+cat3": 22, "cat1": 11}
    dag = parse_dag(TESTS / "job_dagman_splice-cat-splice2.dag")
    assert dag.maxjobs == {"cat2": 32, "cat3": 22, "+catS": 4} and len(dag.nodes) == 6
    for n in (1, 2, 3):     # pins alone make no edges; splice2's come from an INCLUDE
        dag = parse_dag(TESTS / f"job_dagman_splice_connect-A-splice{n}.dag")
        assert list(dag.nodes) == ["NodeA", "NodeB", "NodeC"] and not dag.graph.edges
