"""docs/dagman.md and examples/dag_*/ run as written, on a real personal pool."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import re
import shutil
from pathlib import Path

import pytest

import htc.dag
from dag_pool import DagDir, dag_pool, function_node_python

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def py():
    """``python=``/``environment=`` for function nodes (as root, jobs run as another account)."""
    with function_node_python("htc-dag-ex-py-") as options:
        yield options


@pytest.fixture
def d(monkeypatch):
    with dag_pool() as pool:
        yield DagDir(pool, monkeypatch)


def test_the_diamond_example_runs_as_the_readme_says_and_htc_dag_status_and_show_report_it_done(d):
    where = d.work / "dag_diamond"
    shutil.copytree(ROOT / "examples" / "dag_diamond", where)
    where.chmod(0o777)  # as root, the jobs' outputs come back as their slot account
    d.submit("dag_diamond/diamond.dag")
    d.wait("dag_diamond/diamond.dag", timeout=300)
    assert d.exit_status("dag_diamond/diamond.dag") == 0, d.dagman_out("dag_diamond/diamond.dag")
    assert (where / "result.txt").read_text().splitlines() == [
        "B processed the left part of: the diamond's input, prepared for A",
        "C processed the right part of: the diamond's input, prepared for A"]
    status, out, err = d.htc("dag", "status", str(where / "diamond.dag"))
    assert status == 0 and re.search(r"DONE\s+4\s+A B C D", out), out + err
    status, out, err = d.htc("dag", "show", str(where / "diamond.dag"))
    assert status == 0, err
    for node in "ABCD":
        assert f'"{node}" [label="{node}\\nDONE", shape="ellipse", fillcolor="palegreen"];' in out
    status, out, err = d.htc("dag", "show", str(where / "diamond.dag"), "-o", str(where / "diamond.png"))
    assert status == 0, err
    assert "4 nodes, 4 edges (4 DONE)" in out
    assert (where / "diamond.png").read_bytes()[:4] == b"\x89PNG"


def test_the_python_built_example_runs(d, py, capsys):
    spec = importlib.util.spec_from_file_location("squares_example", ROOT / "examples" / "dag_python" / "squares.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([str(d.work / "squares")], **py) == 0
    printed = capsys.readouterr().out
    assert "the sum of 4 squares is 14" in printed
    assert re.search(r"report\s+DONE", printed) and re.search(r"prep\s+DONE", printed)


def test_the_python_blocks_of_docs_dagman_run_as_written(d, py, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "dagman.md").read_text(), re.S)
    assert len(blocks) >= 2
    monkeypatch.setattr(htc.dag, "DAG", functools.partial(htc.dag.api.DAG, **py))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for number, block in enumerate(blocks):
            exec(compile(block, f"<docs/dagman.md block {number}>", "exec"), {"__name__": "__main__"})  # noqa: S102
    assert "{'A': 'DONE', 'B': 'DONE', 'C': 'DONE', 'D': 'DONE'}" in out.getvalue()
