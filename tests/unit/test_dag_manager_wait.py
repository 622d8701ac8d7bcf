"""The manager's loop sleeps through writes to the DAG folder's other files (its own
``dagman.out`` lines), and wakes for a write to the nodes log or a change of the halt file."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from htc.dag.engine import DagRun
from htc.dag.manager.outputs import DagmanOut
from htc.dag.manager.runner import Runner
from htc.dag.manager.settings import load_settings
from htc.dag.parser import parse_dag

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the DAG manager waits on inotify, which only Linux has: run the tests on Linux, as CI does")


@pytest.fixture
def runner(tmp_path):
    (tmp_path / "a.sub").write_text("executable = /bin/true\nqueue\n")
    dag_file = tmp_path / "w.dag"
    dag_file.write_text("JOB A a.sub\n")
    node_log = str(dag_file) + ".nodes.log"
    env = {"HTC_CONFIG": "ONLY_ENV", "HTC_HOME": str(tmp_path / "home"), "PATH": os.environ.get("PATH", "")}
    settings = load_settings(env=env)
    dag = parse_dag(str(dag_file))
    out = DagmanOut(str(dag_file) + ".dagman.out")
    r = Runner(dag, DagRun(dag, settings.engine_options(dag_id=0, node_log=node_log)), settings,
               dag_id=0, node_log=node_log, out=out, halt_file=str(dag_file) + ".halt")
    r._sig = r._signals()
    yield r
    r._restore(*r._sig)
    out.close()


def _wait_while(runner, timeout: float, action) -> float:
    """Seconds ``runner._wait`` slept with ``action`` run from another thread meanwhile."""
    timer = threading.Timer(0.05, action)
    timer.start()
    t = time.monotonic()
    runner._wait(runner._sig[0], timeout)
    timer.join()
    return time.monotonic() - t


def test_writes_to_other_files_of_the_folder_do_not_end_the_wait(runner, tmp_path):
    def write_out():
        for i in range(5):
            runner.out.line(f"line {i}")   # the manager's own dagman.out, in the same folder

    assert _wait_while(runner, 1.0, write_out) >= 1.0


def test_a_write_to_the_nodes_log_ends_the_wait(runner):
    def write_log():
        with open(runner.node_log_path, "a") as fh:
            fh.write("000 (1.000.000) 11/28 00:00:00 Job submitted\n")

    assert _wait_while(runner, 60.0, write_log) < 30.0


def test_a_halt_file_ends_the_wait(runner):
    def halt():
        runner.out.line("a line first")     # an unrelated change, then the halt file
        open(runner.halt_file, "w").close()

    assert _wait_while(runner, 60.0, halt) < 30.0
