"""The manager reads a node's submit file again only when it changed (stat), never stale."""

from __future__ import annotations

import os

import pytest

from htc.dag.manager import submitter
from htc.dag.manager.submitter import NodeSubmission, describe
from htc.errors import UsageError


def node(path: str, name: str = "A") -> NodeSubmission:
    return NodeSubmission(node=name, submit_file=path, submit_text=None, cwd=os.path.dirname(path), macros={},
                          prepend={}, attrs={}, notes=f"DAG Node: {name}", priority=0, retry=0,
                          node_log="/tmp/n.log", dag_id=1)


def test_a_shared_submit_file_is_read_once_and_again_when_it_changes(tmp_path, monkeypatch):
    f = tmp_path / "job.sub"
    f.write_text("executable = /bin/true\nqueue\n")
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **kw: opened.append(p) or real_open(p, *a, **kw))
    assert describe(node(str(f)))[0] == describe(node(str(f), "B"))[0] == "executable = /bin/true\nqueue\n"
    assert opened.count(str(f)) == 1
    f.write_text("executable = /bin/echo\nqueue 2\n")
    assert describe(node(str(f), "C"))[0] == "executable = /bin/echo\nqueue 2\n"
    f.unlink()
    with pytest.raises(UsageError, match="cannot read the submit file"):
        describe(node(str(f), "D"))
    submitter._FILES.clear()
