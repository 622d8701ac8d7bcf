"""Running DAGs on a real personal pool, for the tests/system/test_dag_*.py files.

:func:`dag_pool` starts a pool that can run jobs (collector, schedd, negotiator, startd);
:class:`DagDir` writes a DAG's files into the pool's work directory, submits it with
``htc dag submit`` (in-process, through ``htc.cli.main``; the schedd then runs the manager as a
scheduler-universe job), waits for it with :func:`htc.client.wait_for_jobs` on
``<dag>.dagman.log``, and reads the nodes log back: each node's runs, in order.

Node jobs are small shell scripts; ``node.sh NAME`` leaves one file per run under ``runs/``,
so a test counts how often each node ran.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from htc.cli.main import main
from htc.eventlog import events as ev
from htc.eventlog import read_events
from poolutil import Pool, wait_for

#: the node job: record a run, optionally fail with the exit code in $2 (VARS code="N"; default 0)
NODE_SH = """#!/bin/sh
touch "{runs}/$1.$(date +%s%N).$$"
echo "node $1 ran"
exit ${{2:-0}}
"""

NODE_SUB = """executable = {work}/node.sh
arguments = $(JOB) $(code)
output = {work}/out/$(JOB).out
error = {work}/out/$(JOB).err
queue
"""


@contextlib.contextmanager
def dag_pool(**knobs: str):
    """A started pool with a startd (2 slots), stopped after."""
    pool = Pool("COLLECTOR, SCHEDD, NEGOTIATOR, STARTD", SCHEDD_LOCAL_JOB_KILL_TIMEOUT="20", **knobs)
    try:
        yield pool.start()
    finally:
        pool.stop()


class DagDir:
    """A DAG's files in the pool's work directory, and the DAG's life from there."""

    def __init__(self, pool: Pool, monkeypatch):
        self.pool = pool
        self.work: Path = pool.work
        monkeypatch.setenv("HTC_HOME", str(pool.home))
        monkeypatch.chdir(self.work)
        for sub in ("runs", "out"):
            (self.work / sub).mkdir(exist_ok=True)
            (self.work / sub).chmod(0o777)
        self.script("node.sh", NODE_SH.format(runs=self.work / "runs"))
        self.write("node.sub", NODE_SUB.format(work=self.work))

    def write(self, name: str, text: str) -> Path:
        """Write a file of the DAG (relative to the work directory)."""
        path = self.work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def script(self, name: str, text: str) -> Path:
        """Write an executable script."""
        path = self.write(name, text)
        path.chmod(0o755)
        return path

    def htc(self, *argv: str) -> tuple[int, str, str]:
        """Run ``htc ARGV`` in-process; return (status, stdout, stderr)."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(list(argv))
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else 1
        return status, out.getvalue(), err.getvalue()

    def submit(self, dag: str, *flags: str) -> int:
        """``htc dag submit DAG FLAGS``; returns the manager job's cluster."""
        status, out, err = self.htc("dag", "submit", *flags, dag)
        assert status == 0, f"htc dag submit failed ({status}):\n{out}\n{err}"
        line = next(l for l in out.splitlines() if "submitted to cluster" in l)
        return int(line.rstrip(".").split()[-1])

    def wait(self, dag: str, cluster: int | None = None, timeout: float = 180.0) -> None:
        """Wait until the manager job of ``dag`` (its job ``cluster``; default: every job its log
        names) has left the queue: ``htc wait <dag>.dagman.log [CLUSTER]``."""
        wait_until(lambda: (self.work / f"{dag}.dagman.log").exists(), what=f"{dag}.dagman.log")
        job = [] if cluster is None else [str(cluster)]
        status, out, err = self.htc("wait", "-wait", str(timeout), f"{dag}.dagman.log", *job)
        assert status == 0, f"the DAG did not finish in {timeout} s: {out}{err}\n{self.dagman_out(dag)}"

    def dagman_out(self, dag: str) -> str:
        """The manager's ``dagman.out``."""
        path = self.work / f"{dag}.dagman.out"
        return path.read_text() if path.exists() else "(no dagman.out)"

    def exit_status(self, dag: str) -> int:
        """The status in the last ``EXITING WITH STATUS`` line of ``dagman.out``."""
        last = [l for l in self.dagman_out(dag).splitlines() if "EXITING WITH STATUS" in l][-1]
        return int(last.split()[-1])

    def runs(self, node: str | None = None) -> dict[str, int] | int:
        """How many times each node's job ran (from the files its runs left)."""
        counts: dict[str, int] = {}
        for path in (self.work / "runs").iterdir():
            name = path.name.split(".")[0]
            counts[name] = counts.get(name, 0) + 1
        return counts if node is None else counts.get(node, 0)

    def node_events(self, dag: str) -> list[tuple[str, ev.Event]]:
        """The nodes log's job events as (node, event), the node found from the submit notes."""
        node_of: dict[int, str] = {}
        out = []
        for event in read_events(self.work / f"{dag}.nodes.log"):
            notes = getattr(event, "log_notes", None) or ""
            if isinstance(event, ev.SubmitEvent) and notes.startswith("DAG Node: "):
                node_of[event.cluster] = notes[len("DAG Node: "):].strip()
            if event.cluster in node_of:
                out.append((node_of[event.cluster], event))
        return out

    def order(self, dag: str, kind: type) -> list[str]:
        """The nodes in the order their events of ``kind`` appear in the nodes log."""
        return [node for node, event in self.node_events(dag) if isinstance(event, kind)]


def wait_until(condition, timeout: float = 60.0, what: str = "condition"):
    """:func:`poolutil.wait_for` with a DAG-sized default deadline."""
    return wait_for(condition, timeout=timeout, what=what, interval=0.1)


def in_queue(pool: Pool, cluster: int) -> bool:
    """True while ``cluster`` has a job in the queue."""
    return bool(pool.jobs(f"ClusterId == {cluster}", "JobStatus"))



@contextlib.contextmanager
def function_node_python(prefix: str = "htc-dag-py-"):
    """``python=`` and ``environment=`` for function nodes: as root, jobs run as another account,
    which needs a Python it can reach (what an administrator prepares for execute nodes)."""
    import shutil
    import tempfile

    from executor_pool import execute_python

    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    try:
        python, environment = execute_python(root)
        yield {"python": python, "environment": environment or None}
    finally:
        shutil.rmtree(root, ignore_errors=True)
