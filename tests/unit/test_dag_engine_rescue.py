"""Rescue DAGs: the text HTCondor writes, names and numbers, picking the newest, applying one."""

from __future__ import annotations

import pytest

from htc.dag.engine import Exit, NodeStatus, Options, WriteFile
from htc.dag.engine.rescue import (
    RescueError, apply_rescue, newest_rescue, rescue_name, rescue_text,
)
from tests.dag_engine_sim import Sim, dag_of, final

S = NodeStatus
T = 1704164645.0            # 1/2/2024 03:04:05 UTC


def test_rescue_text_is_htcondors_format():
    dag = dag_of("A->B A->C B->D C->D")
    dag.file = "diamond.dag"
    text = rescue_text(dag, {"A": S.DONE, "B": S.ERROR, "C": S.DONE, "D": S.FUTILE},
                       {}, T)
    assert text == (
        "# Rescue DAG file, created after running\n"
        "#   the diamond.dag DAG file\n"
        "# Created 1/2/2024 03:04:05 UTC\n"
        "# Rescue DAG version: 2.1.0\n"
        "#\n"
        "# Total number of Nodes: 4\n"
        "# Nodes premarked DONE: 2\n"
        "# Nodes that failed: 1\n"
        "#   B,<ENDLIST>\n"
        "\n"
        "DONE A\n"
        "DONE C\n")


def test_no_failed_nodes_lists_just_endlist():
    dag = dag_of("A B")
    text = rescue_text(dag, {"A": S.DONE, "B": S.SUBMITTED}, {}, T)
    assert "# Nodes that failed: 0\n#   <ENDLIST>\n\nDONE A\n" in text


def test_failed_node_with_only_weak_children_is_written_done():
    dag = dag_of("A~>B C->D")
    text = rescue_text(dag, {"A": S.ERROR, "B": S.DONE, "C": S.ERROR, "D": S.FUTILE}, {}, T)
    assert "# Failed node with only weak child dependencies:\nDONE A\n" in text
    assert "DONE C" not in text


def test_failed_leaf_node_is_not_done():
    text = rescue_text(dag_of("A"), {"A": S.ERROR}, {}, T)
    assert "DONE A" not in text


def test_final_node_is_never_written_done():
    dag = final(dag_of("A"))
    text = rescue_text(dag, {"A": S.DONE, "F": S.DONE}, {}, T)
    assert "DONE F" not in text and "# Total number of Nodes: 2" in text


def test_retry_lines_only_without_reset_retries():
    dag = dag_of("A B", A={"retry": 3, "retry_unless_exit": 4}, B={"retry": 1})
    statuses = {"A": S.ERROR, "B": S.DONE}
    assert "RETRY" not in rescue_text(dag, statuses, {"A": 1}, T, reset_retries=True)
    text = rescue_text(dag, statuses, {"A": 1}, T, reset_retries=False)
    assert ("# 1 of 3 retries already performed; 2 remaining\n"
            "RETRY A 2 UNLESS-EXIT 4\n") in text
    assert "DONE B\n# 0 of 1 retries already performed; 1 remaining\nRETRY B 1\n" in text


def test_rescue_names_and_newest():
    assert rescue_name("/d/x.dag", 1) == "/d/x.dag.rescue001"
    names = ["/d/x.dag.rescue001", "/d/x.dag.rescue012", "/d/x.dag.rescue003",
             "/d/x.dag.rescue012.old", "/d/y.dag.rescue099", "/d/x.dag.rescue1000"]
    assert newest_rescue("/d/x.dag", names) == (12, "/d/x.dag.rescue012")
    assert newest_rescue("/d/x.dag", names, max_num=5) == (3, "/d/x.dag.rescue003")
    assert newest_rescue("/d/z.dag", names) is None


def test_apply_rescue_marks_done_and_sets_retries():
    dag = dag_of("A->B B->C", B={"retry": 5})
    text = ("# Rescue DAG file\n\nDONE A\n# 2 of 5 retries already performed; 3 remaining\n"
            "RETRY B 3 UNLESS-EXIT 9\n")
    assert apply_rescue(dag, text) == ["A"]
    assert dag.nodes["A"].done and not dag.nodes["B"].done
    assert dag.nodes["B"].retry == 3 and dag.nodes["B"].retry_unless_exit == 9


def test_apply_rescue_then_run_skips_done_nodes():
    dag = dag_of("A->B B->C")
    apply_rescue(dag, "DONE A\nDONE B\n")
    sim = Sim(dag)
    assert sim.go() == Exit(0, 0)
    assert sim.submits == ["C"]


def test_apply_rescue_errors_name_file_and_line():
    dag = dag_of("A")
    with pytest.raises(RescueError, match=r"r\.dag\.rescue001:2: .*node 'Z'"):
        apply_rescue(dag, "DONE A\nDONE Z\n", "r.dag.rescue001")
    with pytest.raises(RescueError, match=r":1: 'JOB A a.sub' is not a rescue DAG line"):
        apply_rescue(dag, "JOB A a.sub\n", "r")
    with pytest.raises(RescueError, match="RETRY needs a number"):
        apply_rescue(dag, "RETRY A x\n", "r")


def test_round_trip_rescue_of_a_failed_run():
    sim = Sim(dag_of("A->B A->C B->D C->D"), exits={"B": [1]})
    sim.go()
    text = [a.text for a in sim.of(WriteFile) if ".rescue" in a.path][0]
    dag = dag_of("A->B A->C B->D C->D")
    apply_rescue(dag, text)
    again = Sim(dag)
    assert again.go() == Exit(0, 0)
    assert again.submits == ["B", "D"]


def test_rescue_number_follows_the_newest_existing():
    sim = Sim(dag_of("A"), Options(last_rescue_num=4), exits={"A": [1]})
    sim.go()
    assert [a.path for a in sim.of(WriteFile) if ".rescue" in a.path] == \
        ["/d/test.dag.rescue005"]


def test_rescue_number_stops_at_the_maximum():
    sim = Sim(dag_of("A"), Options(last_rescue_num=7, max_rescue_num=7), exits={"A": [1]})
    sim.go()
    assert [a.path for a in sim.of(WriteFile) if ".rescue" in a.path] == \
        ["/d/test.dag.rescue007"]


def test_no_rescue_when_max_rescue_num_is_0():
    sim = Sim(dag_of("A"), Options(max_rescue_num=0), exits={"A": [1]})
    sim.go()
    assert not [a for a in sim.of(WriteFile) if ".rescue" in a.path]


def test_no_rescue_on_success():
    sim = Sim(dag_of("A"))
    sim.go()
    assert not [a for a in sim.of(WriteFile) if ".rescue" in a.path]


def test_one_rescue_file_per_run_even_if_written_twice():
    sim = Sim(final(dag_of("A")), exits={"A": [1], "F": [1]})
    sim.go()
    paths = [a.path for a in sim.of(WriteFile) if ".rescue" in a.path]
    assert len(paths) == 2 and len(set(paths)) == 1


def test_save_point_file_written_when_the_node_starts():
    dag = dag_of("A->B", B={"save_point": "/d/save_files/B-test.dag.save"})
    sim = Sim(dag)
    sim.go()
    saved = [a for a in sim.of(WriteFile) if a.path.endswith(".save")]
    assert len(saved) == 1
    assert saved[0].text.startswith("# Save file written at Start Node B\n# Created ")
    assert "DONE A\n" in saved[0].text
