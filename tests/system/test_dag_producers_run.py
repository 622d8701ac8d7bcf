"""DAGs written by real producers run on a real pool: ``htcondor2.dags`` (HTCondor's own Python
DAG writer) and ``ezdag`` (a workflow library on top of it), as their users write them.

The unit tests (tests/unit/test_dag_producers.py) check that their files parse into the right
graph; these run them with ``htc dag submit`` and check what the jobs did: every node ran once,
children after their parents, files passed from layer to layer by file transfer.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import htcondor2
import pytest
from htcondor2 import dags

from dag_pool import DagDir, dag_pool
from htc.eventlog import events as ev

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import ezdag

pytestmark = pytest.mark.slow

#: writes its last argument as a file: the other arguments that are files, then "made by $1"
MKOUT = """#!/bin/sh
last=""; for a; do last="$a"; done
tmp="$last.tmp"; : > "$tmp"
for a; do if [ "$a" != "$last" ] && [ -f "$a" ]; then cat "$a" >> "$tmp"; fi; done
echo "made by $1" >> "$tmp"
mv "$tmp" "$last"
"""


@pytest.fixture
def d(monkeypatch):
    with dag_pool() as pool:
        yield DagDir(pool, monkeypatch)


def _finished_in_order(d: DagDir, dag: str) -> tuple[list[str], list[str]]:
    """(nodes in order of their job's start, nodes in order of their job's end)."""
    return d.order(dag, ev.ExecuteEvent), d.order(dag, ev.JobTerminatedEvent)


def test_an_htcondor2_dags_workflow_runs(d: DagDir):
    sub = htcondor2.Submit({"executable": "/bin/echo", "arguments": "$(word)",
                            "output": "$(JOB).out", "request_memory": "32MB"})
    dag = dags.DAG()
    first = dag.layer(name="A", submit_description=sub, vars=[{"word": "alpha"}], retries=1)
    middle = first.child_layer(name="B", submit_description=sub,
                               vars=[{"word": f"b{i}"} for i in range(3)])
    middle.child_layer(name="C", submit_description=sub, vars=[{"word": "c0"}, {"word": "c1"}],
                       edge=dags.ManyToMany())
    path = dags.write_dag(dag, d.work, dag_file_name="producer.dag")
    assert Path(path).name == "producer.dag"

    d.wait("producer.dag", d.submit("producer.dag"))

    assert d.exit_status("producer.dag") == 0, d.dagman_out("producer.dag")
    for node, word in [("A:0", "alpha"), ("B:0", "b0"), ("B:2", "b2"), ("C:1", "c1")]:
        assert (d.work / f"{node}.out").read_text() == f"{word}\n"
    started, ended = _finished_in_order(d, "producer.dag")
    real = [n for n in started if not n.startswith("__JOIN__")]
    assert sorted(real) == ["A:0", "B:0", "B:1", "B:2", "C:0", "C:1"]  # each job ran once
    assert ended.index("A:0") < min(started.index(f"B:{i}") for i in range(3))
    assert max(ended.index(f"B:{i}") for i in range(3)) < min(started.index(f"C:{i}") for i in range(2))


def test_an_ezdag_workflow_with_file_transfer_runs(d: DagDir, monkeypatch):
    d.script("mkout", MKOUT)
    monkeypatch.setenv("PATH", f"{d.work}{os.pathsep}{os.environ['PATH']}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dag = ezdag.DAG("wf")
        make = ezdag.Layer("mkout", name="make", submit_description={"request_memory": "32MB"},
                           retries=1)
        outputs = [f"out_{i}.txt" for i in range(3)]
        for i, out in enumerate(outputs):
            make += ezdag.Node(arguments=ezdag.Argument("index", i),
                               outputs=ezdag.Argument("output", out))
        dag.attach(make)
        combine = ezdag.Layer("mkout", name="combine", submit_description={"request_memory": "32MB"})
        combine += ezdag.Node(arguments=ezdag.Option("verbose"),
                              inputs=ezdag.Argument("inputs", outputs),
                              outputs=ezdag.Argument("output", "all.txt"))
        dag.attach(combine)
        dag.write(d.work)
    (d.work / "logs").mkdir(exist_ok=True)
    (d.work / "logs").chmod(0o777)

    d.wait("wf.dag", d.submit("wf.dag"))

    assert d.exit_status("wf.dag") == 0, d.dagman_out("wf.dag")
    # the combine node got the three files the make nodes sent back, in its sandbox
    assert (d.work / "all.txt").read_text() == "made by 0\nmade by 1\nmade by 2\nmade by --verbose\n"
    started, ended = _finished_in_order(d, "wf.dag")
    assert sorted(started) == ["combine:00000", "make:00000", "make:00001", "make:00002"]
    assert max(ended.index(f"make:0000{i}") for i in range(3)) < started.index("combine:00000")
