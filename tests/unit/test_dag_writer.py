"""The DAG writer: files DAGMan reads (HTCondor's own condor_submit_dag front end is the oracle)
and that read back into the same model; a hypothesis round trip on generated DAGs."""

from __future__ import annotations

import os
from pathlib import Path

import htcondor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htc.dag.errors import DagError
from htc.dag.model import Dag, Node, NodeKind, Script, Var
from htc.dag.parser import parse_dag, parse_dag_text
from htc.dag.writer import dag_text, write_dag

from test_dag_conformance import WHOLE, facts


def python_dag(base: Path) -> Dag:
    dag = Dag()
    dag.add_node(Node("A", submit_file=str(base / "a.sub"), dir=str(base), retry=2,
                      vars=[Var("x", 'say "hi" \\ bye'), Var("p", "1", prepend=True)],
                      scripts={"PRE": Script("PRE", "/bin/pre", ["$JOB", "$RETRY"],
                                             defer_status=3, defer_time=10)}))
    dag.add_node(Node("B", submit_text="executable = /bin/true\nqueue\n", dir=str(base / "b"),
                      priority=5, category="big", done=True))
    dag.add_node(Node("C", submit_text="executable = /bin/echo\n", description_name="echo",
                      dir=str(base)))
    dag.add_node(Node("F", kind=NodeKind.FINAL, submit_file="/elsewhere/f.sub", dir=str(base)))
    dag.add_edge("A", "B")
    dag.add_edge("A", "C", weak=True)
    dag.maxjobs["big"] = 1
    return dag


def test_a_dag_built_in_python_writes_and_reads_back(tmp_path: Path) -> None:
    dag = python_dag(tmp_path)
    path = write_dag(dag, tmp_path / "w.dag")
    text = Path(path).read_text()
    assert "JOB A a.sub\n" in text and "JOB B {\n\texecutable = /bin/true\n\tqueue\n} DIR b DONE" \
        in text
    assert "SUBMIT-DESCRIPTION echo {" in text and "JOB C echo\n" in text
    assert "FINAL F /elsewhere/f.sub" in text and "WEAK PARENT A CHILD C" in text
    assert 'VARS A x="say \\"hi\\" \\\\ bye"' in text and 'VARS A PREPEND p="1"' in text
    assert "SCRIPT DEFER 3 10 PRE A /bin/pre $JOB $RETRY" in text
    again = parse_dag(path)
    dag.submit_descriptions["echo"] = "executable = /bin/echo\n"   # the writer added the block
    assert facts(again) == facts(dag)


def test_a_line_starting_with_a_brace_is_written_in_a_tagged_block(tmp_path: Path) -> None:
    dag = Dag()
    dag.add_node(Node("A", submit_text="executable = x\n}odd = 1\n", dir=str(tmp_path)))
    text = dag_text(dag, base_dir=str(tmp_path))
    assert "JOB A @=desc\n" in text
    assert parse_dag_text(text, tmp_path / "x.dag").nodes["A"].submit_text == \
        "executable = x\n}odd = 1\n"


def test_files_with_spaces_are_quoted(tmp_path: Path) -> None:
    dag = Dag()
    dag.add_node(Node("A", submit_file=str(tmp_path / "my job.sub"), dir=str(tmp_path / "a b")))
    text = dag_text(dag, base_dir=str(tmp_path))
    assert f'JOB A "{tmp_path}/my job.sub" DIR "a b"' in text   # outside its DIR: absolute
    node = parse_dag_text(text, tmp_path / "x.dag").nodes["A"]
    assert (node.submit_file, node.dir) == (str(tmp_path / "my job.sub"), str(tmp_path / "a b"))


def test_an_invalid_dag_is_not_written(tmp_path: Path) -> None:
    dag = python_dag(tmp_path)
    dag.add_edge("B", "A")
    with pytest.raises(DagError, match="cycle: "):
        write_dag(dag, tmp_path / "w.dag")
    assert not (tmp_path / "w.dag").exists()
    dag = Dag()
    dag.add_node(Node("has space", submit_file="/x"))
    with pytest.raises(DagError, match="cannot be written"):
        dag_text(dag)


def test_spliced_nodes_are_written_flat_and_say_so(tmp_path: Path) -> None:
    (tmp_path / "s.dag").write_text("JOB X x.sub\nCATEGORY X c\n")
    dag = parse_dag_text("SPLICE S s.dag\nMAXJOBS S+c 2\n", tmp_path / "top.dag")
    text = dag_text(dag)
    assert "DAGMAN_ALLOW_ANY_NODE_NAME_CHARACTERS" in text.splitlines()[1]
    assert "JOB S+X x.sub" in text and "CATEGORY S+X S+c" in text and "MAXJOBS S+c 2" in text
    with pytest.raises(DagError, match="illegal"):
        parse_dag_text(text, tmp_path / "top.dag")
    assert facts(parse_dag_text(text, tmp_path / "top.dag",
                                allow_any_node_name_characters=True)) == facts(dag)


@pytest.fixture
def condor_submit_dag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """HTCondor's condor_submit_dag front end (``htcondor2.Submit.from_dag``), which reads a DAG
    file with HTCondor's own DAG parser; it wants a condor_dagman on PATH, never run here."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "condor_dagman"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def check(path: Path) -> None:
        htcondor2.Submit.from_dag(str(path), {})

    return check


def test_the_oracle_refuses_what_dagman_refuses(tmp_path: Path, condor_submit_dag) -> None:
    bad = tmp_path / "bad.dag"
    bad.write_text("JOB A a.sub\nFOO bar\n")
    with pytest.raises(Exception, match="'FOO' is not a valid DAG command"):
        condor_submit_dag(bad)


@pytest.mark.parametrize("path", WHOLE, ids=lambda p: p.name)
def test_htcondor_reads_every_written_conformance_file(tmp_path: Path, path: Path,
                                                       condor_submit_dag) -> None:
    dag = parse_dag(path)
    if dag.config is not None and not os.path.exists(dag.config):
        dag.config = None        # condor_submit_dag reads CONFIG; the corpus lacks some files
    out = tmp_path / path.name
    write_dag(dag, out)
    condor_submit_dag(out)
    assert (tmp_path / f"{path.name}.condor.sub").exists()


# --- hypothesis: generated DAGs survive write and read ------------------------------------
NAMES = st.text("abcXYZ019_:.-", min_size=1, max_size=6).filter(
    lambda s: s.upper() not in ("PARENT", "CHILD", "ALL_NODES"))
VALUES = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12)
WORDS = st.text("abc$/._-XYZ019", min_size=1, max_size=8)


@st.composite
def dags(draw) -> Dag:
    names = draw(st.lists(NAMES, min_size=1, max_size=8, unique=True))
    dag = Dag(file="/work/dags/g.dag")
    for i, name in enumerate(names):
        node = Node(name, dir=draw(st.sampled_from(["/work/dags", "/work/dags/sub", "/tmp/x"])),
                    noop=draw(st.booleans()), done=draw(st.booleans()),
                    priority=draw(st.integers(-5, 5)), retry=draw(st.integers(0, 3)),
                    retry_unless_exit=draw(st.none() | st.integers(-3, 300)),
                    pre_skip=draw(st.none() | st.integers(0, 255)),
                    category=draw(st.none() | NAMES | NAMES.map(lambda s: "+" + s)))
        if draw(st.booleans()):
            node.submit_file = os.path.normpath(os.path.join(node.dir, draw(WORDS)))
        else:
            node.submit_text = "".join(f"{w} = {v}\n" for w, v in draw(
                st.lists(st.tuples(NAMES, NAMES), min_size=1, max_size=3)))
        vars_ = draw(st.dictionaries(NAMES.filter(lambda s: not s.lower().startswith("queue")),
                                     VALUES, max_size=3))
        node.vars = [Var(k, v, prepend=draw(st.booleans())) for k, v in vars_.items()]
        if draw(st.booleans()):
            node.abort_status = draw(st.integers(-2, 9))
            node.abort_return = draw(st.none() | st.integers(0, 255))
        for kind in draw(st.sets(st.sampled_from(["PRE", "POST", "HOLD"]))):
            node.scripts[kind] = Script(kind, draw(WORDS), draw(st.lists(WORDS, max_size=3)))
        dag.add_node(node)
        for parent in draw(st.sets(st.sampled_from(names[:i]), max_size=3)) if i else ():
            dag.add_edge(parent, name, weak=draw(st.booleans()))
    if draw(st.booleans()):
        dag.maxjobs = draw(st.dictionaries(NAMES, st.integers(0, 9), max_size=2))
    dag.set_job_attrs = draw(st.dictionaries(st.sampled_from(["A", "B_c"]), WORDS, max_size=2))
    return dag


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags())
def test_generated_dags_read_back_the_same(dag: Dag) -> None:
    again = parse_dag_text(dag_text(dag), dag.file)
    assert facts(again) == facts(dag)


def test_a_vars_value_with_a_unicode_line_separator_reads_back_the_same(tmp_path: Path) -> None:
    # (found by the test above: a line ended at U+2028, so the value lost its closing quote)
    dag = Dag(file=str(tmp_path / "g.dag"))
    node = Node("A", submit_text="executable = /bin/true\n", dir=str(tmp_path))
    node.vars = [Var("x", "a\u2028b\x0cc\x85d")]
    dag.add_node(node)
    again = parse_dag_text(dag_text(dag), dag.file)
    assert [(v.name, v.value) for v in again.nodes["A"].vars] == [("x", "a\u2028b\x0cc\x85d")]
    crlf = parse_dag_text("JOB A a.sub\r\nVARS A x=\"1\"\r\n", str(tmp_path / "c.dag"))
    assert [(v.name, v.value) for v in crlf.nodes["A"].vars] == [("x", "1")]


def test_a_python_dag_without_directories_writes_paths_as_given(tmp_path: Path) -> None:
    dag = Dag()
    dag.add_node(Node("A", submit_file="a.sub"))
    dag.add_node(Node("B", submit_file="b.sub", dir="work"))
    dag.add_edge("A", "B")
    text = dag_text(dag, base_dir=str(tmp_path))
    assert "JOB A a.sub\n" in text and "JOB B b.sub DIR work\n" in text
    again = parse_dag_text(text, tmp_path / "x.dag")
    assert again.nodes["B"].submit_file == str(tmp_path / "work" / "b.sub")


def test_a_description_name_without_its_text_is_refused(tmp_path: Path) -> None:
    dag = Dag()
    dag.add_node(Node("A", submit_file="/x.sub", description_name="missing"))
    with pytest.raises(DagError, match="SUBMIT-DESCRIPTION 'missing'"):
        dag_text(dag, base_dir=str(tmp_path))


def test_a_value_with_a_line_break_is_refused(tmp_path: Path) -> None:
    dag = Dag()
    dag.add_node(Node("A", submit_file="/x.sub", vars=[Var("v", "two\nlines")]))
    with pytest.raises(DagError, match="VARS 'v' of node 'A'"):
        dag_text(dag, base_dir=str(tmp_path))


def test_a_script_word_with_spaces_is_refused(tmp_path: Path) -> None:
    dag = Dag()
    dag.add_node(Node("A", submit_file="/x.sub", scripts={"POST": Script("POST", "/bin/p",
                                                                        ["two words"])}))
    with pytest.raises(DagError, match="POST script of node 'A'"):
        dag_text(dag, base_dir=str(tmp_path))
