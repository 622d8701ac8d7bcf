"""A reused expansion (htc.submit.reuse) is exactly a fresh one, for nodes of varied values."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htc.client import submission
from htc.submit import Submit
from htc.submit.errors import SubmitError
from htc.submit.reuse import Reusable, varying_name

QDATE = 1_700_000_000
CLUSTER = 987654321

#: description lines: each may use the nodes' varying macros in its own way
LINES = [
    "executable = /bin/true",
    "executable = $(exe:/bin/true)",
    "arguments = $(JOB) $(RETRY) --x=$(x)",
    "arguments = fixed words",
    "output = $(JOB).out",
    "error = err.$(Cluster).$(Process)",
    "request_memory = $(mem:16MB)",
    "request_memory = 16MB",
    "request_cpus = $INT(cpus)",
    "+Foo = \"$(JOB)\"",
    "+Bar = $(x)",
    "My.Baz = strcat(\"$(JOB)\", \"-\", $(RETRY))",
    "requirements = (Memory > 10) && ($(x:1) > 0)",
    "environment = \"A=$(x) B=$(JOB)\"",
    "initialdir = $(dir:.)",
    "priority = $(prio:0)",
    "description = node $SUBSTR(JOB, 1)",
    "log = $(JOB).log",
    "batch_name = $(DAG_PARENT_NAMES:none)",
    "universe = $(uni:vanilla)",
    "transfer_input_files = in.txt",
    "notification = $(note:never)",
]
names = st.text(alphabet="abcdefgh0123_-. :\"'$\\", min_size=0, max_size=8)
node_values = st.fixed_dictionaries({
    "JOB": st.text(alphabet="abcxyz0123_.", min_size=1, max_size=6),
    "RETRY": st.integers(0, 3).map(str),
    "x": st.one_of(st.sampled_from(["1", "0", "-2", "abc", "", "3.5", "true", "$(JOB)", "$(Process)"]), names),
    "mem": st.sampled_from(["16MB", "1G", "", "abc", "2048", "$(x)"]),
    "cpus": st.sampled_from(["1", "2", "x", "$(RETRY)"]),
    "prio": st.sampled_from(["0", "5", "-3", "high", "$(RETRY)"]),
    "dir": st.sampled_from([".", "sub", "missing", "$(JOB)"]),
    "uni": st.sampled_from(["vanilla", "local"]),
    "note": st.sampled_from(["never", "always", "bogus"]),
    "exe": st.sampled_from(["/bin/true", "run.sh", "missing.sh"]),
    "+DAGNodeName": names.map(lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'),
    "submit_event_notes": names.map(lambda s: "DAG Node: " + s),
    "dagman_log": st.sampled_from(["/tmp/x.nodes.log", "rel.nodes.log"]),
    "priority": st.integers(-5, 5).map(str),
})


@pytest.fixture(scope="module")
def submit_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("reuse")
    (d / "sub").mkdir()
    (d / "in.txt").write_text("input\n")
    (d / "run.sh").write_text("#!/bin/sh\nexit 0\n")
    os.chmod(d / "run.sh", 0o755)
    return str(d)


def _expand(sub: Submit):
    """cluster ad, proc ads and warnings, or the error text."""
    try:
        c = sub.cluster(CLUSTER, qdate=QDATE)
        return c.cluster_ad, list(c.proc_ads()), list(c.warnings)
    except SubmitError as exc:
        return str(exc)


def _outcome(reusable: Reusable, sub: Submit):
    try:
        c = reusable.cluster(sub)
    except SubmitError as exc:
        return str(exc)
    if c is None:
        return None
    return c.cluster_ad, list(c.proc_ads()), list(c.warnings)


def _sub(text: str, cwd: str, values: dict[str, str]) -> Submit:
    sub = Submit(text, cwd=cwd, filename="node.sub")
    sub.check_file = lambda role, path, transfer: submission.check_submit_file(cwd, role, path, transfer)
    for k, v in values.items():
        sub[k] = v
    return sub


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.sampled_from(LINES), min_size=1, max_size=7, unique=True),
       queue=st.sampled_from(["queue", "queue 1", "queue 2"]),
       nodes=st.lists(node_values, min_size=2, max_size=4))
def test_reused_expansion_is_a_fresh_one(submit_dir, lines, queue, nodes):
    text = "\n".join(lines) + "\n" + queue + "\n"
    varying = frozenset(varying_name(k) for k in nodes[0])
    first = _sub(text, submit_dir, nodes[0])
    try:
        cluster, reusable = Reusable.analyse(first, CLUSTER, QDATE, varying)
    except SubmitError:
        return  # the first node does not expand: nothing to reuse
    assert (cluster.cluster_ad, list(cluster.proc_ads()), list(cluster.warnings)) == _expand(
        _sub(text, submit_dir, nodes[0]))
    if reusable is None:
        assert queue == "queue 2" or any("universe" in line for line in lines)
        return
    for values in nodes[1:]:
        got = _outcome(reusable, _sub(text, submit_dir, values))
        if got is not None:
            assert got == _expand(_sub(text, submit_dir, values))


def test_a_dag_node_description_is_reused(submit_dir):
    """The usual node (a fixed description, DAGMan's appends) runs only its node commands."""
    text = "executable = /bin/true\nrequest_memory = 16MB\noutput = $(JOB).out\nqueue\n"
    nodes = [{"JOB": f"n{i}", "+DAGNodeName": f'"n{i}"', "submit_event_notes": f"DAG Node: n{i}",
              "dagman_log": "/tmp/x.nodes.log"} for i in range(3)]
    varying = frozenset(varying_name(k) for k in nodes[0])
    _, reusable = Reusable.analyse(_sub(text, submit_dir, nodes[0]), CLUSTER, QDATE, varying)
    assert reusable is not None and len(reusable.dyn) <= 4
    for values in nodes[1:]:
        got = _outcome(reusable, _sub(text, submit_dir, values))
        assert got is not None and got == _expand(_sub(text, submit_dir, values))
        assert got[0]["Out"] == f'"{values["JOB"]}.out"'


def test_a_changed_host_is_looked_at_again(submit_dir, tmp_path):
    """A skipped command's host lookups are redone: a vanished executable or directory fails
    as a fresh expansion fails."""
    exe = tmp_path / "job.sh"
    exe.write_text("#!/bin/sh\n")
    (tmp_path / "work").mkdir()
    text = f"executable = {exe}\ninitialdir = work\nqueue\n"
    node = {"JOB": "a", "submit_event_notes": "DAG Node: a"}
    varying = frozenset(varying_name(k) for k in node)
    _, reusable = Reusable.analyse(_sub(text, str(tmp_path), node), CLUSTER, QDATE, varying)
    assert reusable is not None
    exe.unlink()
    later = _sub(text, str(tmp_path), {"JOB": "b", "submit_event_notes": "DAG Node: b"})
    fresh = _expand(_sub(text, str(tmp_path), {"JOB": "b", "submit_event_notes": "DAG Node: b"}))
    assert "Can't access executable" in fresh
    assert _outcome(reusable, later) in (None, fresh)  # None: the caller expands afresh
    exe.write_text("#!/bin/sh\n")
    (tmp_path / "work").rmdir()
    assert reusable.cluster(_sub(text, str(tmp_path), {"JOB": "c", "submit_event_notes": "DAG Node: c"})) is None


def test_submit_message_reuses_per_description(submit_dir, monkeypatch):
    """htc.client.submission analyses once per description and reuses the analysis for the
    next node; the messages are what a fresh expansion sends."""
    text = "executable = /bin/true\narguments = $(JOB)\nqueue\n"
    submission._REUSE.clear()
    monkeypatch.setattr("time.time", lambda: QDATE + 0.5)
    calls = []
    real = Reusable.analyse
    monkeypatch.setattr(Reusable, "analyse", classmethod(
        lambda cls, *a, **kw: calls.append(1) or real.__func__(cls, *a, **kw)))
    msgs = []
    for i in range(3):
        append = [f"JOB = n{i}", f"+DAGNodeName = \"n{i}\"", f"submit_event_notes = DAG Node: n{i}"]
        msgs.append(submission.submit_message(text, cwd=submit_dir, append=append)[0])
        fresh = submission._prepare(text, cwd=submit_dir, filename=None, append=append, queue=None)
        c = fresh.cluster(CLUSTER, qdate=QDATE)
        assert msgs[-1].proc_ads == tuple(submission._ad_text(p) for p in c.proc_ads())
        cluster_ad = {k: v for k, v in c.cluster_ad.items() if k.lower() != "clusterid"}
        assert msgs[-1].cluster_ad == submission._ad_text(cluster_ad)
    assert len(calls) == 1


def test_the_managers_node_clusters_are_fresh_expansions(tmp_path, monkeypatch):
    """benchmarks/dag_expand_bench.py's nodes through the manager's ``_cluster`` (reused after
    the first) carry the ads a fresh expansion gives (run small; no timing here)."""
    import importlib.util
    from pathlib import Path

    from htc.dag.manager.batches import _cluster
    from htc.dag.manager.submitter import describe

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "dag_expand_bench.py"
    spec = importlib.util.spec_from_file_location("dag_expand_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr("time.time", lambda: QDATE + 0.25)
    submission._REUSE.clear()
    for i in range(4):
        node = bench.node(i, str(tmp_path))
        item = _cluster(node)
        text, append, filename = describe(node)
        fresh = submission._prepare(text, cwd=node.cwd, filename=filename, append=append, queue=None)
        c = fresh.cluster(CLUSTER, qdate=QDATE)
        ad = {k: v for k, v in c.cluster_ad.items() if k.lower() != "clusterid"}
        assert item.cluster_ad == submission._ad_text(ad)
        assert item.proc_ads == tuple(submission._ad_text(p) for p in c.proc_ads())
        assert f'DAGNodeName = "n{i}"' in item.cluster_ad and f'Out = "n{i}.out"' in item.cluster_ad
    assert len(submission._REUSE) == 1


def test_a_measured_directory_or_a_changed_input_is_not_reused(tmp_path):
    """A directory's size (its contents) has no stat signature: such a description is not
    reused; a measured input file that changed size makes the reuse give way to a fresh run."""
    (tmp_path / "indir").mkdir()
    (tmp_path / "indir" / "a").write_text("x" * 5000)
    (tmp_path / "in.txt").write_text("small")
    node = {"JOB": "a", "submit_event_notes": "DAG Node: a"}
    varying = frozenset(varying_name(k) for k in node)
    text = "executable = /bin/true\ntransfer_input_files = indir\nqueue\n"
    assert Reusable.analyse(_sub(text, str(tmp_path), node), CLUSTER, QDATE, varying)[1] is None
    text = "executable = /bin/true\ntransfer_input_files = in.txt\nqueue\n"
    _, reusable = Reusable.analyse(_sub(text, str(tmp_path), node), CLUSTER, QDATE, varying)
    assert reusable is not None
    (tmp_path / "in.txt").write_text("x" * 50000)
    assert reusable.cluster(_sub(text, str(tmp_path), {"JOB": "b", "submit_event_notes": "DAG Node: b"})) is None
