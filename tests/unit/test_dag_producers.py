"""DAG files written by real producers parse: ``htcondor2.dags`` (HTCondor's own Python DAG
writer) and ``ezdag`` (a workflow library built on it), generated here into tmp_path."""

from __future__ import annotations

import warnings
from pathlib import Path
from unittest import mock

import htcondor2
import pytest
from htcondor2 import dags

from htc.dag.errors import DagError
from htc.dag.model import NodeKind, Var
from htc.dag.parser import parse_dag

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import ezdag

SUB = htcondor2.Submit({"executable": "/bin/echo", "arguments": "$(node_arg)",
                        "output": "$(JOB).out", "log": "wf.log"})


def test_htcondor2_dags_layers_scripts_and_edges(tmp_path: Path) -> None:
    dag = dags.DAG(dagman_job_attributes={"Team": '"dags"'}, jobstate_log="js.log",
                   node_status_file=dags.NodeStatusFile(path="st", update_time=5,
                                                        always_update=True),
                   dot_config=dags.DotConfig(path="g.dot", update=True, overwrite=False))
    a = dag.layer(name="A", submit_description=SUB, vars=[{"node_arg": "a b"}],
                  pre=dags.Script(executable="pre.sh", arguments=["$JOB"]),
                  post=dags.Script(executable="post.sh", arguments=["$JOB", "$RETURN"]),
                  retries=2, retry_unless_exit=42, priority=10, category="cat1",
                  abort=dags.DAGAbortCondition(node_exit_value=3, dag_return_value=1))
    b = a.child_layer(name="B", submit_description=SUB,
                      vars=[{"node_arg": str(i)} for i in range(3)], noop={1: True},
                      done={2: True})
    c = b.child_layer(name="C", submit_description=SUB, vars=[{"node_arg": "c"}] * 2,
                      edge=dags.Grouper(parent_chunk_size=3, child_chunk_size=2))
    c.child_subdag(name="inner", dag_file="inner.dag")
    dag.final(name="END", submit_description=SUB)
    path = dags.write_dag(dag, tmp_path, dag_file_name="wf.dag")

    parsed = parse_dag(path)
    assert [n for n in parsed.nodes if not n.startswith("__JOIN__")] == [
        "A:0", "B:0", "B:1", "B:2", "C:0", "C:1", "inner:0", "END"]
    node = parsed.nodes["A:0"]
    assert node.vars == [Var("node_arg", "a b")] and node.submit_file == str(tmp_path / "A.sub")
    assert (node.retry, node.retry_unless_exit, node.priority, node.category) == (2, 42, 10,
                                                                                  "cat1")
    assert (node.abort_status, node.abort_return) == (3, 1)
    assert node.scripts["POST"].args == ["$JOB", "$RETURN"]
    assert parsed.nodes["B:1"].noop and parsed.nodes["B:2"].done
    assert set(parsed.children("A:0")) == {"B:0", "B:1", "B:2"}
    # the Grouper edge goes through a NOOP join node
    join = next(n for n in parsed.nodes if n.startswith("__JOIN__"))
    assert set(parsed.parents(join)) == {"B:0", "B:1", "B:2"} and parsed.nodes[join].noop
    assert set(parsed.children(join)) == {"C:0", "C:1"}
    assert parsed.nodes["inner:0"].kind is NodeKind.SUBDAG
    assert parsed.final.name == "END"
    assert parsed.set_job_attrs == {"Team": '"dags"'}
    assert parsed.jobstate_log == str(tmp_path / "js.log")
    assert (parsed.node_status.min_update, parsed.dot.update) == (5, True)


def test_htcondor2_dags_max_jobs_quirk_is_refused_as_dagman_does(tmp_path: Path) -> None:
    dag = dags.DAG()
    dag.layer(name="A", submit_description=SUB, category="cat1")
    dag.max_jobs_per_category["cat1"] = 2
    path = dags.write_dag(dag, tmp_path, dag_file_name="q.dag")
    assert "CATEGORY cat1 2" in Path(path).read_text()
    with pytest.raises(DagError, match="Unknown node 'cat1'"):
        parse_dag(path)


def test_ezdag_workflows_parse(tmp_path: Path) -> None:
    with mock.patch("shutil.which", side_effect=lambda x: f"/bin/{x}"):
        dag = ezdag.DAG("wf")
        process = ezdag.Layer("process", submit_description={"request_cpus": 1},
                              retries=2)
        outputs = []
        for i in range(3):
            out = f"out_{i}.txt"
            process += ezdag.Node(arguments=[ezdag.Argument("index", i),
                                             ezdag.Option("bins", [i, i + 3])],
                                  inputs=ezdag.Option("input", "data.txt"),
                                  outputs=ezdag.Argument("output", out))
            outputs.append(out)
        dag.attach(process)
        combine = ezdag.Layer("combine")
        combine += ezdag.Node(arguments=ezdag.Option("verbose"),
                              inputs=ezdag.Argument("inputs", outputs),
                              outputs=ezdag.Argument("output", "all.txt"))
        dag.attach(combine)
        dag.write(tmp_path)

    parsed = parse_dag(tmp_path / "wf.dag")
    names = list(parsed.nodes)
    assert names == ["process:00000", "process:00001", "process:00002", "combine:00000"]
    assert set(parsed.parents("combine:00000")) == set(names[:3])
    node = parsed.nodes["process:00001"]
    assert node.retry == 2 and node.submit_file == str(tmp_path / "process.sub")
    values = {v.name: v.value for v in node.vars}
    assert values["nodename"] == "process:00001" and values["bins"] == "--bins 1 --bins 4"
    assert values["output_output__remap"] == ""
    assert {v.name: v.value for v in parsed.nodes["combine:00000"].vars}["inputs"] == \
        "out_0.txt out_1.txt out_2.txt"
