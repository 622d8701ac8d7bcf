"""The DAG file parser, command by command (semantics reference 3.1 and 3.2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from htc.dag.errors import DagError
from htc.dag.model import NodeKind, Var
from htc.dag.parser import parse_dag, parse_dag_text
from htc.errors import UsageError


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def parse(tmp: Path, text: str, **kw):
    return parse_dag(write(tmp, "top.dag", text), **kw)


def fails(tmp: Path, text: str, *parts: str, line: int | None = None) -> DagError:
    with pytest.raises(DagError) as info:
        parse(tmp, text)
    for part in parts:
        assert part in str(info.value), str(info.value)
    if line is not None:
        assert info.value.line == line and info.value.file == str(tmp / "top.dag")
    return info.value


# --- lexical rules ------------------------------------------------------------------------
def test_keywords_ignore_case_and_dash_or_underscore(tmp_path: Path) -> None:
    dag = parse(tmp_path, "job A a.sub\nJob B b.sub\npre-skip A 3\nABORT_DAG_ON A 2 return 1\n"
                          "abort-dag-on B 4\nRetry B 2 unless_exit 5\nparent A child B\n")
    a, b = dag.nodes["A"], dag.nodes["B"]
    assert a.pre_skip == 3 and (a.abort_status, a.abort_return) == (2, 1)
    assert (b.abort_status, b.retry, b.retry_unless_exit) == (4, 2, 5)
    assert dag.parents("B") == ["A"]


def test_node_names_are_case_sensitive(tmp_path: Path) -> None:
    dag = parse(tmp_path, "JOB a x.sub\nJOB A x.sub\nPARENT a CHILD A\n")
    assert list(dag.nodes) == ["a", "A"] and dag.children("a") == ["A"]


def test_an_unknown_command_names_file_line_and_word(tmp_path: Path) -> None:
    err = fails(tmp_path, "JOB A a.sub\n# c\nFOO A\n", "'FOO' is not a valid DAG command",
                line=3)
    assert str(err).startswith(f"{tmp_path / 'top.dag'}:3 ")
    assert isinstance(err, UsageError) and "nothing was submitted" in str(err)


def test_there_is_no_data_command(tmp_path: Path) -> None:
    fails(tmp_path, "DATA A a.sub\n", "'DATA' is not a valid DAG command")


def test_commands_may_name_nodes_defined_later(tmp_path: Path) -> None:
    dag = parse(tmp_path, "PARENT A CHILD B\nRETRY B 2\nVARS A x=\"1\"\nJOB A a.sub\nJOB B b.sub\n")
    assert dag.children("A") == ["B"] and dag.nodes["B"].retry == 2
    assert dag.nodes["A"].vars == [Var("x", "1")]


@pytest.mark.parametrize("name", ["PARENT", "child", "All_Nodes"])
def test_reserved_words_cannot_name_nodes(tmp_path: Path, name: str) -> None:
    fails(tmp_path, f"JOB {name} a.sub\n", "reserved word", line=1)


def test_plus_is_reserved_for_splices_unless_allowed(tmp_path: Path) -> None:
    fails(tmp_path, "JOB a+b a.sub\n", "illegal", "'+'", "DAGMAN_ALLOW_ANY_NODE_NAME_CHARACTERS")
    assert "a+b" in parse(tmp_path, "JOB a+b a.sub\n", allow_any_node_name_characters=True).nodes


def test_a_name_used_twice_is_an_error_naming_the_first(tmp_path: Path) -> None:
    fails(tmp_path, "JOB A a.sub\nFINAL A a.sub\n", "'A' is already used", "top.dag:1", line=2)


# --- nodes --------------------------------------------------------------------------------
def test_node_kinds_flags_and_paths(tmp_path: Path) -> None:
    dag = parse(tmp_path, "JOB A a.sub DIR sub NOOP DONE\nJOB B ../b.sub\nFINAL F f.sub\n"
                          "SERVICE S s.sub\nPROVISIONER P p.sub\n"
                          "SUBDAG EXTERNAL D inner.dag DIR deep\n")
    a, b, f = dag.nodes["A"], dag.nodes["B"], dag.nodes["F"]
    assert (a.kind, a.noop, a.done) == (NodeKind.JOB, True, True)
    assert a.dir == str(tmp_path / "sub") and a.submit_file == str(tmp_path / "sub" / "a.sub")
    assert b.dir == str(tmp_path) and b.submit_file == str(tmp_path.parent / "b.sub")
    assert f.kind is NodeKind.FINAL and dag.final is f
    assert dag.nodes["S"].kind is NodeKind.SERVICE
    assert dag.nodes["P"].kind is NodeKind.PROVISIONER
    d = dag.nodes["D"]
    assert d.kind is NodeKind.SUBDAG and d.submit_file == str(tmp_path / "deep" / "inner.dag")
    assert a.source.line == 1 and a.dag_file == str(tmp_path / "top.dag")
    assert set(dag.graph.nodes) == set(dag.nodes)


def test_subdag_needs_external(tmp_path: Path) -> None:
    fails(tmp_path, "SUBDAG D inner.dag\n", "Missing EXTERNAL keyword", line=1)


def test_unexpected_words_after_a_node_are_errors(tmp_path: Path) -> None:
    fails(tmp_path, "JOB A a.sub NOOPS\n", "Unexpected token 'NOOPS'", line=1)
    fails(tmp_path, "JOB A\n", "No submit description provided")


def test_one_final_node_at_most(tmp_path: Path) -> None:
    fails(tmp_path, "FINAL A a.sub\nFINAL B b.sub\n", "at most one FINAL", line=2)


def test_inline_submit_descriptions(tmp_path: Path) -> None:
    dag = parse(tmp_path, "JOB A {\n  executable = /bin/true\n  # c\n  arguments = 1\n} NOOP\n"
                          "JOB B @=end\nexecutable = /bin/echo\n}\n@end DIR x\nJOB C c.sub\n")
    a, b = dag.nodes["A"], dag.nodes["B"]
    assert a.submit_text == "executable = /bin/true\narguments = 1\n" and a.noop
    assert a.submit_file is None
    assert b.submit_text == "executable = /bin/echo\n}\n" and b.dir == str(tmp_path / "x")
    assert dag.nodes["C"].source.line == 10


def test_an_unclosed_inline_description_is_an_error(tmp_path: Path) -> None:
    fails(tmp_path, "JOB A {\nexecutable = x\n", "Missing inline description closing token: }",
          line=1)


def test_submit_description_blocks_are_found_by_name_in_either_order(tmp_path: Path) -> None:
    dag = parse(tmp_path, "JOB A desc\nSUBMIT-DESCRIPTION desc {\n executable = /bin/true\n}\n"
                          "JOB B other.sub\n")
    a = dag.nodes["A"]
    assert (a.submit_file, a.submit_text, a.description_name) == (
        None, "executable = /bin/true\n", "desc")
    assert dag.submit_descriptions == {"desc": "executable = /bin/true\n"}
    assert dag.nodes["B"].submit_file == str(tmp_path / "other.sub")


# --- node commands ------------------------------------------------------------------------
def test_script_with_defer_debug_and_arguments(tmp_path: Path) -> None:
    dag = parse(tmp_path, "JOB A a.sub\nSCRIPT DEFER 4 20 DEBUG dbg.txt STDERR PRE A pre.sh $JOB"
                          " \"x y\" 'z'\nscript post A ./post.sh $RETURN\nSCRIPT HOLD A h.sh\n")
    s = dag.nodes["A"].scripts
    pre = s["PRE"]
    assert (pre.executable, pre.args) == ("pre.sh", ["$JOB", '"x', 'y"', "'z'"])
    assert (pre.defer_status, pre.defer_time) == (4, 20)
    assert (pre.debug_file, pre.debug_stream) == (str(tmp_path / "dbg.txt"), "STDERR")
    assert s["POST"].executable == "./post.sh" and s["POST"].args == ["$RETURN"]
    assert s["HOLD"].executable == "h.sh" and s["POST"].source.line == 3


def test_script_errors(tmp_path: Path) -> None:
    fails(tmp_path, "JOB A a.sub\nSCRIPT MID A x.sh\n", "Missing script type", line=2)
    fails(tmp_path, "JOB A a.sub\nSCRIPT PRE A\n", "No script specified", line=2)
    fails(tmp_path, "JOB A a.sub\nSCRIPT PRE B x.sh\n", "Unknown node 'B'", line=2)
    fails(tmp_path, "JOB A a.sub\nSCRIPT DEFER x 1 PRE A x.sh\n", "Invalid DEFER status", line=2)


def test_retry_abort_priority_category_maxjobs(tmp_path: Path) -> None:
    dag = parse(tmp_path, "JOB A a.sub\nRETRY A 3 UNLESS-EXIT 7\nABORT-DAG-ON A 5 RETURN 0\n"
                          "PRIORITY A -4\nCATEGORY A big\nMAXJOBS big 2\nMAXJOBS big 3\n")
    a = dag.nodes["A"]
    assert (a.retry, a.retry_unless_exit, a.abort_status, a.abort_return) == (3, 7, 5, 0)
    assert (a.priority, a.category, dag.maxjobs) == (-4, "big", {"big": 3})


@pytest.mark.parametrize("line,message", [
    ("RETRY A -1", "Invalid max retry value '-1'"),
    ("RETRY A 1 UNLESS 3", "Unexpected token 'UNLESS'"),
    ("ABORT-DAG-ON A 1 RETURN 256", "Invalid RETURN code '256'"),
    ("PRIORITY A high", "Invalid priority value 'high'"),
    ("MAXJOBS c -2", "Invalid throttle limit '-2'"),
    ("PRE_SKIP A", "Missing exit code"),
    ("CATEGORY A", "No category name specified"),
    ("VARS A", "No key=value pairs specified"),
    ("VARS A novalue", "Non key=value token specified: novalue"),
    ("VARS A queue_x=\"1\"", "name can not begin with 'queue'"),
    ("VARS A x=\"1", "no ending quote"),
    ("PARENT A", "Missing CHILD specifier"),
    ("PARENT A CHILD", "No children node(s) specified"),
    ("PARENT CHILD A", "No parent node(s) specified"),
    ("DONE ALL_NODES", "does not take ALL_NODES"),
    ("REJECT now", "Unexpected token 'now'"),
])
def test_command_errors_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    err = fails(tmp_path, f"JOB A a.sub\n{line}\n", message, line=2)
    assert "Failed to parse" in str(err)


def test_final_nodes_take_no_edges_retries_or_priorities(tmp_path: Path) -> None:
    fails(tmp_path, "JOB A a.sub\nFINAL F f.sub\nPARENT A CHILD F\n", "FINAL node 'F'", line=3)
    fails(tmp_path, "FINAL F f.sub\nRETRY F 2\n", "cannot have retries", line=2)
    fails(tmp_path, "SERVICE S s.sub\nJOB A a.sub\nPARENT S CHILD A\n", "SERVICE node 'S'")


def test_vars_forms(tmp_path: Path) -> None:
    dag = parse(tmp_path, 'JOB A a.sub\nVARS A x = "1" +Attr="\\"q\\"" y="a b"\n'
                          'VARS A PREPEND p="2"\nVARS A APPEND q="3"\nVARS A x="again"\n')
    assert dag.nodes["A"].vars == [Var("x", "again"), Var("My.Attr", '"q"'), Var("y", "a b"),
                                   Var("p", "2", prepend=True), Var("q", "3", append=True)]


def test_all_nodes_and_a_later_specific_command_last_one_wins(tmp_path: Path) -> None:
    dag = parse(tmp_path, "JOB A a.sub\nJOB B b.sub\nFINAL F f.sub\nSERVICE S s.sub\n"
                          "RETRY ALL_NODES 2\nRETRY A 5\nPRIORITY B 9\nPRIORITY ALL_NODES 1\n"
                          'VARS ALL_NODES v="all"\nVARS B v="b"\n'
                          "SCRIPT POST ALL_NODES post.sh $JOB\n")
    a, b, f, s = (dag.nodes[n] for n in "ABFS")
    assert (a.retry, b.retry, a.priority, b.priority) == (5, 2, 1, 1)
    assert a.vars == [Var("v", "all")] and b.vars == [Var("v", "b")]
    assert "POST" in a.scripts and a.scripts["POST"] is not b.scripts["POST"]
    assert (f.retry, f.vars, f.scripts, s.priority) == (0, [], {}, 0)


def test_done_and_save_point_file(tmp_path: Path) -> None:
    dag = parse(tmp_path, "JOB A a.sub\nJOB B b.sub\nDONE A\nSAVE_POINT_FILE A\n"
                          "SAVE_POINT_FILE B keep/b.save\n")
    assert dag.nodes["A"].done and not dag.nodes["B"].done
    assert dag.nodes["A"].save_point == str(tmp_path / "save_files" / "A-top.dag.save")
    assert dag.nodes["B"].save_point == str(tmp_path / "keep" / "b.save")


def test_tolerance(tmp_path: Path) -> None:
    dag = parse(tmp_path, "JOB A a.sub\nJOB B b.sub\nTOLERANCE A 3\nTOLERANCE B 10% fail_fast\n")
    assert (dag.nodes["A"].tolerance, dag.nodes["A"].tolerance_mode) == ("3", None)
    assert (dag.nodes["B"].tolerance, dag.nodes["B"].tolerance_mode) == ("10%", "FAIL-FAST")


# --- edges --------------------------------------------------------------------------------
def test_parent_child_is_many_to_many_and_weak_loses_to_strong(tmp_path: Path) -> None:
    dag = parse(tmp_path, "JOB A a\nJOB B b\nJOB C c\nJOB D d\nPARENT A B CHILD C D\n"
                          "WEAK PARENT A CHILD C\nweak parent B CHILD D E\nJOB E e\n")
    assert {(p, c) for p, c in dag.graph.edges} == {
        ("A", "C"), ("A", "D"), ("B", "C"), ("B", "D"), ("B", "E")}
    assert not dag.is_weak("A", "C") and not dag.is_weak("B", "D") and dag.is_weak("B", "E")


def test_unknown_nodes_in_edges_are_named(tmp_path: Path) -> None:
    fails(tmp_path, "JOB A a\nPARENT A CHILD Z\n", "Unknown node or splice 'Z'", line=2)


def test_a_cycle_is_reported_with_its_nodes(tmp_path: Path) -> None:
    err = fails(tmp_path, "JOB A a\nJOB B b\nJOB C c\nJOB D d\nPARENT A CHILD B\n"
                          "PARENT B CHILD C\nPARENT C CHILD A D\n", "cycle")
    cycle = str(err).split("cycle: ")[1].split(" (")[0].split(" -> ")
    assert cycle[0] == cycle[-1] and set(cycle) == {"A", "B", "C"}
    for line in (5, 6, 7):
        assert f"top.dag:{line}" in str(err).split("PARENT/CHILD lines")[1]


# --- DAG-wide commands --------------------------------------------------------------------
def test_dag_wide_settings(tmp_path: Path) -> None:
    dag = parse(tmp_path, "CONFIG dagman.config\nJOBSTATE_LOG js.log\nJOBSTATE_LOG other.log\n"
                          "NODE_STATUS_FILE st 30 ALWAYS-UPDATE\nNODE_STATUS_FILE other\n"
                          "DOT d.dot UPDATE DONT-OVERWRITE INCLUDE head.dot\n"
                          "SET_JOB_ATTR a = 1\nSET_JOB_ATTR a = \"x y\"\nSET_JOB_ATTR b=2\n"
                          "ENV GET HOME PATH\nENV SET A=1;B=two words\nJOB A a.sub\nREJECT\n")
    assert dag.config == str(tmp_path / "dagman.config")
    assert dag.jobstate_log == str(tmp_path / "js.log") and len(dag.warnings) == 2
    ns = dag.node_status
    assert (ns.file, ns.min_update, ns.always_update) == (str(tmp_path / "st"), 30, True)
    d = dag.dot
    assert (d.file, d.update, d.overwrite, d.include) == (
        str(tmp_path / "d.dot"), True, False, str(tmp_path / "head.dot"))
    assert dag.set_job_attrs == {"a": '"x y"', "b": "2"}
    assert dag.env_get == ["HOME", "PATH"] and dag.env_set == [("A", "1"), ("B", "two words")]
    assert dag.reject.line == 13


def test_two_config_files_are_an_error(tmp_path: Path) -> None:
    fails(tmp_path, "CONFIG a.config\nCONFIG b.config\n", "one configuration file", line=2)


# --- INCLUDE and SPLICE -------------------------------------------------------------------
def test_include_is_textual(tmp_path: Path) -> None:
    write(tmp_path, "inc/part.dag", "JOB B b.sub\nPARENT A CHILD B\nRETRY ALL_NODES 1\n")
    dag = parse(tmp_path, "JOB A a.sub\nINCLUDE inc/part.dag\nRETRY B 4\n")
    assert list(dag.nodes) == ["A", "B"] and dag.children("A") == ["B"]
    assert (dag.nodes["A"].retry, dag.nodes["B"].retry) == (1, 4)
    b = dag.nodes["B"]
    assert b.dir == str(tmp_path) and b.source.file == str(tmp_path / "inc" / "part.dag")


def test_a_file_that_includes_itself_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "loop.dag", "INCLUDE top.dag\n")
    fails(tmp_path, "INCLUDE loop.dag\n", "includes itself")


def test_a_missing_include_names_the_line(tmp_path: Path) -> None:
    fails(tmp_path, "JOB A a\nINCLUDE nowhere.dag\n", "cannot read DAG file", line=2)


def test_splices_prefix_names_nest_and_scope_settings(tmp_path: Path) -> None:
    write(tmp_path, "d/inner.dag", "JOB X x.sub\nJOB Y y.sub\nPARENT X CHILD Y\n"
                                    "CATEGORY X c\nCATEGORY Y +g\nMAXJOBS c 1\nRETRY ALL_NODES 2\n")
    # a splice without DIR resolves its paths as its includer does (DAGMan: against the cwd)
    write(tmp_path, "d/mid.dag", "JOB M m.sub\nSPLICE In d/inner.dag\nPARENT M CHILD In\n")
    dag = parse(tmp_path, "JOB A a.sub\nSPLICE S d/mid.dag DIR .\nSPLICE T inner.dag DIR d\n"
                          "PARENT A CHILD S\nPARENT S CHILD T\nRETRY ALL_NODES 7\n"
                          "VARS S+In+X v=\"1\"\nMAXJOBS S+In+c 5\n")
    assert list(dag.nodes) == ["A", "S+M", "S+In+X", "S+In+Y", "T+X", "T+Y"]
    assert set(dag.graph.edges) == {("S+In+X", "S+In+Y"), ("S+M", "S+In+X"), ("A", "S+M"),
                                    ("S+In+Y", "T+X"), ("T+X", "T+Y")}
    x = dag.nodes["S+In+X"]
    assert (x.category, dag.nodes["S+In+Y"].category) == ("S+In+c", "+g")
    assert dag.maxjobs == {"S+In+c": 5, "T+c": 1}
    assert (x.retry, dag.nodes["A"].retry) == (2, 7) and x.vars == [Var("v", "1")]
    assert x.dir == str(tmp_path) and x.submit_file == str(tmp_path / "x.sub")
    assert dag.nodes["T+X"].dir == str(tmp_path / "d")


def test_a_splice_cannot_hold_a_final_node(tmp_path: Path) -> None:
    write(tmp_path, "s.dag", "FINAL F f.sub\n")
    with pytest.raises(DagError, match="is in a splice") as info:
        parse(tmp_path, "SPLICE S s.dag\n")
    assert info.value.file == str(tmp_path / "s.dag")


def test_connect_needs_matching_pins(tmp_path: Path) -> None:
    write(tmp_path, "a.dag", "JOB X x\nJOB Y y\nPIN_OUT X 1\nPIN_OUT Y 2\n")
    write(tmp_path, "b.dag", "JOB X x\nPIN_IN X 1\n")
    fails(tmp_path, "SPLICE A a.dag\nSPLICE B b.dag\nCONNECT A B\n", "2 PIN_OUT pins",
          "1 PIN_IN pins", line=3)
    write(tmp_path, "c.dag", "JOB X x\nPIN_IN X 2\n")
    fails(tmp_path, "SPLICE A a.dag\nSPLICE C c.dag\nCONNECT A C\n", "none numbered 1")
    fails(tmp_path, "SPLICE A a.dag\nCONNECT A Q\n", "Unknown splice 'Q'")


def test_extra_files_munge_node_names_by_file_number(tmp_path: Path) -> None:
    other = write(tmp_path, "sub/two.dag", "JOB A b.sub\nJOB B b.sub\nPARENT A CHILD B\n"
                                           "CATEGORY A c\nSPLICE S ../s.dag\n")
    write(tmp_path, "s.dag", "JOB X x.sub\nCATEGORY X c\n")
    one = write(tmp_path, "one.dag", "JOB A a.sub\n")
    dag = parse_dag(one, extra_files=[other])
    assert list(dag.nodes) == ["0.A", "1.A", "1.B", "1.S+X"]
    assert dag.children("1.A") == ["1.B"] and dag.nodes["1.B"].dir == str(tmp_path / "sub")
    assert (dag.nodes["1.A"].category, dag.nodes["1.S+X"].category) == ("c", "1.S+c")
    assert dag.file == str(tmp_path / "one.dag")


def test_extra_files_can_share_one_namespace(tmp_path: Path) -> None:
    other = write(tmp_path, "two.dag", "JOB B b.sub\nPARENT A CHILD B\n")
    dag = parse_dag(write(tmp_path, "one.dag", "JOB A a.sub\n"), extra_files=[other],
                    munge_node_names=False)
    assert dag.children("A") == ["B"]


def test_parse_dag_text_resolves_against_the_given_path(tmp_path: Path) -> None:
    dag = parse_dag_text("JOB A a.sub\n", tmp_path / "x.dag")
    assert dag.nodes["A"].submit_file == str(tmp_path / "a.sub")
    assert parse_dag_text("JOB A a.sub\n").nodes["A"].dir == os.getcwd()


def test_a_splice_service_node_is_not_an_edge_end(tmp_path: Path) -> None:
    write(tmp_path, "s.dag", "SERVICE Watch w.sub\nJOB X x.sub\n")
    dag = parse(tmp_path, "JOB A a.sub\nSPLICE S s.dag\nPARENT A CHILD S\n")
    assert dag.children("A") == ["S+X"] and dag.nodes["S+Watch"].kind is NodeKind.SERVICE


def test_a_missing_dag_file_says_which(tmp_path: Path) -> None:
    with pytest.raises(DagError, match=f"cannot read DAG file {tmp_path}/none.dag"):
        parse_dag(tmp_path / "none.dag")


def test_a_lexing_error_in_the_first_word_names_the_line(tmp_path: Path) -> None:
    fails(tmp_path, 'JOB A a\n"JOB B b\n', "no ending quote", line=2)


def test_a_var_given_again_keeps_its_place_and_takes_the_new_value(tmp_path: Path) -> None:
    dag = parse(tmp_path, 'JOB A a\nVARS A PREPEND x="1" y="2"\nVARS A APPEND x="3" X="4"\n')
    assert dag.nodes["A"].vars == [Var("x", "3", prepend=True), Var("y", "2", prepend=True),
                                   Var("X", "4", append=True)]
    assert "VARS x is already defined in node A" in dag.warnings[0]


def test_service_and_final_nodes_refuse_what_dagman_refuses(tmp_path: Path) -> None:
    fails(tmp_path, "SERVICE S s\nPRIORITY S 3\n", "SERVICE node 'S' cannot have a priority")
    fails(tmp_path, "SERVICE S s\nCATEGORY S c\n", "cannot have a category")
    fails(tmp_path, "FINAL F f\nDONE F\n", "FINAL node 'F' cannot have DONE")
    fails(tmp_path, "PROVISIONER P p\nSAVE_POINT_FILE P\n", "cannot have a save point file")
    dag = parse(tmp_path, "SERVICE S s\nRETRY ALL_NODES 2\nABORT-DAG-ON S 1\n")
    assert (dag.nodes["S"].retry, dag.nodes["S"].abort_status) == (0, 1)


def test_the_first_submit_description_of_a_name_is_kept(tmp_path: Path) -> None:
    dag = parse(tmp_path, "SUBMIT-DESCRIPTION d {\nexecutable = /a\n}\n"
                          "SUBMIT-DESCRIPTION d {\nexecutable = /b\n}\nJOB A d\n")
    assert dag.nodes["A"].submit_text == "executable = /a\n" and len(dag.warnings) == 1


def test_only_job_nodes_take_retries_priorities_and_categories(tmp_path: Path) -> None:
    fails(tmp_path, "PROVISIONER P p\nRETRY P 1\n", "PROVISIONER node 'P' cannot have retries")
    dag = parse(tmp_path, "SUBDAG EXTERNAL D d.dag\nRETRY D 2\nPRIORITY D 4\nCATEGORY D c\n")
    assert (dag.nodes["D"].retry, dag.nodes["D"].priority, dag.nodes["D"].category) == (2, 4, "c")


def test_pre_skip_codes_are_exit_codes(tmp_path: Path) -> None:
    fails(tmp_path, "JOB A a\nPRE_SKIP A 256\n", "Invalid exit code '256'", line=2)


def test_job_cannot_run_a_nested_dag_submit_file(tmp_path: Path) -> None:
    fails(tmp_path, "JOB A inner.dag.condor.sub\n", "JOB keyword for nested DAGs is prohibited")
    assert parse(tmp_path, "FINAL F inner.dag.condor.sub\n").final.name == "F"


def test_a_second_script_of_a_kind_replaces_the_first_with_a_warning(tmp_path: Path) -> None:
    dag = parse(tmp_path, "JOB A a\nSCRIPT PRE ALL_NODES one.sh\nSCRIPT PRE A two.sh\n")
    assert dag.nodes["A"].scripts["PRE"].executable == "two.sh"
    assert "already has PRE script <one.sh>" in dag.warnings[0]


def test_all_nodes_settings_for_jobs_skip_the_provisioner(tmp_path: Path) -> None:
    dag = parse(tmp_path, "PROVISIONER P p\nJOB A a\nRETRY ALL_NODES 2\nVARS ALL_NODES x=\"1\"\n")
    assert (dag.nodes["P"].retry, dag.nodes["A"].retry) == (0, 2)
    assert dag.nodes["P"].vars == dag.nodes["A"].vars == [Var("x", "1")]


def test_only_job_nodes_can_be_defined_done(tmp_path: Path) -> None:
    fails(tmp_path, "FINAL F f.sub DONE\n", "FINAL node 'F' can not be marked as DONE", line=1)
    assert parse(tmp_path, "SUBDAG EXTERNAL D d.dag DONE\n").nodes["D"].done


RESCUE = """# Rescue DAG file, created after running
#   the top.dag DAG file
# Created 1/2/2024 03:04:05 UTC
# Rescue DAG version: 2.1.0
#
# Total number of Nodes: 3
# Nodes premarked DONE: 1
# Nodes that failed: 1
#   B,<ENDLIST>

DONE A
# 1 of 3 retries already performed; 2 remaining
RETRY B 2 UNLESS-EXIT 9
DONE S+X
"""


def test_a_rescue_dag_is_read_after_the_dag(tmp_path: Path) -> None:
    write(tmp_path, "s.dag", "JOB X x.sub\n")
    top = write(tmp_path, "top.dag", "JOB A a\nJOB B b\nRETRY B 3\nSPLICE S s.dag\n"
                                     "PARENT A CHILD B\n")
    rescue = write(tmp_path, "top.dag.rescue001", RESCUE)
    dag = parse_dag(top, rescue_file=rescue)
    assert [n for n, node in dag.nodes.items() if node.done] == ["A", "S+X"]
    assert (dag.nodes["B"].retry, dag.nodes["B"].retry_unless_exit) == (2, 9)


def test_apply_dag_file_changes_a_parsed_dag(tmp_path: Path) -> None:
    from htc.dag.parser import apply_dag_file
    dag = parse(tmp_path, "JOB A a\nJOB B b\n")
    assert apply_dag_file(dag, tmp_path / "x.save", text="DONE B\n") is dag
    assert dag.nodes["B"].done and not dag.nodes["A"].done
    with pytest.raises(DagError, match="Unknown node 'C'") as info:
        apply_dag_file(dag, tmp_path / "bad.rescue001", text="# c\nDONE C\n")
    assert (info.value.file, info.value.line) == (str(tmp_path / "bad.rescue001"), 2)
