"""The DAG manager submits together what the engine lets go together: the first round of ready
nodes, and the nodes that several job ends of one read of the nodes log make ready."""

from __future__ import annotations

import os

from htc.dag.engine import DagRun
from htc.dag.manager import runner as runner_module
from htc.dag.manager.outputs import DagmanOut
from htc.dag.manager.runner import Runner
from htc.dag.manager.settings import load_settings
from htc.dag.manager.submitter import Submitted
from htc.dag.parser import parse_dag
from htc.eventlog import EventLogWriter
from htc.eventlog import events as ev


def test_nodes_made_ready_by_one_read_of_the_log_are_submitted_together(tmp_path, monkeypatch):
    (tmp_path / "a.sub").write_text("executable = /bin/true\nqueue\n")
    dag_file = tmp_path / "fan.dag"
    dag_file.write_text("JOB A a.sub\nJOB B a.sub\nJOB C a.sub\nJOB D a.sub\nJOB E a.sub\n"
                        "PARENT A CHILD C\nPARENT B CHILD D E\n")
    node_log = str(dag_file) + ".nodes.log"
    env = {"HTC_CONFIG": "ONLY_ENV", "HTC_HOME": str(tmp_path / "home"), "PATH": os.environ.get("PATH", "")}
    settings = load_settings(env=env)
    dag = parse_dag(str(dag_file))
    sent: list[list[str]] = []
    clusters = iter(range(1, 100))

    def fake(subs, **kw):
        sent.append([s.node for s in subs])
        return [Submitted(cluster=next(clusters), procs=1) for _ in subs]

    monkeypatch.setattr(runner_module, "submit_batch", fake)
    monkeypatch.setattr(runner_module, "submit_many", fake)
    out = DagmanOut(str(dag_file) + ".dagman.out")
    runner = Runner(dag, DagRun(dag, settings.engine_options(dag_id=0, node_log=node_log)), settings,
                    dag_id=0, node_log=node_log, out=out)
    try:
        runner.start(recovering=False)
        assert sent == [["A", "B"]]
        with EventLogWriter(node_log) as writer:   # both parents end; the manager reads it all at once
            for cluster, node in ((1, "A"), (2, "B")):
                writer.write(ev.SubmitEvent(cluster=cluster, log_notes=f"DAG Node: {node}"))
            for cluster in (1, 2):
                writer.write(ev.ExecuteEvent(cluster=cluster),
                             ev.JobTerminatedEvent(cluster=cluster, terminated_normally=True, return_value=0))
        runner._step(0.0)
        assert sent == [["A", "B"], ["C", "D", "E"]]
        assert "Submitting 3 nodes together" in (tmp_path / "fan.dag.dagman.out").read_text()
    finally:
        runner._restore(*runner._sig)
        out.close()
