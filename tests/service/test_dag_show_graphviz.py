"""htc dag show draws pictures with graphviz's `dot` program when there is one (a stand-in here:
a script that records how it was called)."""

from __future__ import annotations

import stat

import pytest

from htc.dag.model import Dag, Node
from htc.dag.show import render
from htc.errors import UsageError


def diamond(tmp_path) -> Dag:
    dag = Dag(file=str(tmp_path / "diamond.dag"))
    for name in "ABCD":
        dag.add_node(Node(name=name))
    for parent, child in (("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")):
        dag.add_edge(parent, child)
    return dag


def test_render_uses_graphviz_dot_when_present(tmp_path):
    fake = tmp_path / "dot"
    fake.write_text('#!/bin/sh\n# a stand-in for graphviz: record the arguments and the DOT text\n'
                    f'echo "$@" > {tmp_path}/args\ncat > {tmp_path}/input\necho PNG > "$3"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert render(diamond(tmp_path), tmp_path / "g.png", dot_program=str(fake)) == "graphviz"
    assert (tmp_path / "args").read_text().split() == ["-Tpng", "-o", str(tmp_path / "g.png")]
    assert '"A" -> "B";' in (tmp_path / "input").read_text()
    assert (tmp_path / "g.png").read_text() == "PNG\n"


def test_render_reports_a_failing_dot_and_an_unknown_file_type(tmp_path):
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\necho 'syntax error in line 1' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(UsageError, match="could not draw .*syntax error in line 1"):
        render(diamond(tmp_path), tmp_path / "g.svg", dot_program=str(fake))
    with pytest.raises(UsageError, match=r"give a file ending in \.dot"):
        render(diamond(tmp_path), tmp_path / "g.jpeg")
