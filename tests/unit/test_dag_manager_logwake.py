"""The DAG manager wakes when the schedd writes the nodes log (dag.manager.logwatch.LogWake),
not a poll interval later; writes to other files of the folder are told apart."""

from __future__ import annotations

import os
import select
import sys
import threading
import time

import pytest

from htc.dag.engine import DagRun
from htc.dag.manager import runner as runner_module
from htc.dag.manager.logwatch import AdaptivePoll, LogWake
from htc.dag.manager.outputs import DagmanOut
from htc.dag.manager.runner import Runner
from htc.dag.manager.settings import load_settings
from htc.dag.manager.submitter import Submitted
from htc.dag.parser import parse_dag
from htc.eventlog import EventLogWriter
from htc.eventlog import events as ev

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def _readable(fd: int, timeout: float) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


def test_log_wake_tells_writes_of_its_file_from_others(tmp_path):
    log = tmp_path / "d.dag.nodes.log"
    wake = LogWake(str(log))
    try:
        assert wake.fileno() >= 0
        assert not _readable(wake.fileno(), 0.0)
        (tmp_path / "d.dag.dagman.out").write_text("a line\n")   # another file of the folder
        assert _readable(wake.fileno(), 30.0) and wake.drain() is False
        log.write_text("")                                         # the log appears
        assert _readable(wake.fileno(), 30.0) and wake.drain() is True
        with open(log, "a") as fh:                                 # and grows
            fh.write("000 (001.000.000) 11/28 00:00:00 Job submitted from host: <x>\n...\n")
        assert _readable(wake.fileno(), 30.0) and wake.drain() is True
        assert wake.drain() is False and not _readable(wake.fileno(), 0.0)   # all read
    finally:
        wake.close()
    assert wake.fileno() == -1 and wake.drain() is False
    wake.close()   # twice is fine


def test_log_wake_on_a_folder_that_is_not_there_only_polls(tmp_path):
    wake = LogWake(str(tmp_path / "missing" / "d.dag.nodes.log"))
    assert wake.fileno() == -1 and wake.drain() is False
    wake.close()


def test_the_manager_loop_wakes_on_the_log_write_not_the_poll(tmp_path, monkeypatch):
    """The poll is set to a minute: the node's end is seen at the schedd's write all the same."""
    (tmp_path / "a.sub").write_text("executable = /bin/true\nqueue\n")
    dag_file = tmp_path / "one.dag"
    dag_file.write_text("JOB A a.sub\n")
    node_log = str(dag_file) + ".nodes.log"
    env = {"HTC_CONFIG": "ONLY_ENV", "HTC_HOME": str(tmp_path / "home"), "PATH": os.environ.get("PATH", "")}
    settings = load_settings(env=env)
    dag = parse_dag(str(dag_file))
    monkeypatch.setattr(runner_module, "submit_many", lambda subs, **kw: [Submitted(cluster=7, procs=1) for _ in subs])
    out = DagmanOut(str(dag_file) + ".dagman.out")
    runner = Runner(dag, DagRun(dag, settings.engine_options(dag_id=0, node_log=node_log)), settings,
                    dag_id=0, node_log=node_log, out=out)
    runner.poll = AdaptivePoll(floor=60.0, ceiling=60.0)
    submitted = threading.Event()

    def schedd():   # the job's events, written while the manager sleeps
        submitted.wait(30)
        time.sleep(0.3)
        with EventLogWriter(node_log) as writer:
            writer.write(ev.SubmitEvent(cluster=7, log_notes="DAG Node: A"), ev.ExecuteEvent(cluster=7),
                         ev.JobTerminatedEvent(cluster=7, terminated_normally=True, return_value=0))

    writer = threading.Thread(target=schedd, daemon=True)
    writer.start()
    try:
        runner.start(recovering=False)
        submitted.set()
        t0 = time.monotonic()
        code = runner.loop()
        elapsed = time.monotonic() - t0
    finally:
        out.close()
        writer.join(30)
    assert code == 0
    assert elapsed < 30, f"the manager saw the node's end only after {elapsed:.1f} s (its poll, not the write)"
