"""A real personal pool for the executor tests, and a Python its jobs can run.

When the tests run as root the startd runs jobs as ``nobody``, who may not reach the
interpreter that runs the tests (under ``/root``, say). :func:`execute_python` then uses
:func:`htc.executors.shared_python`, which prepares what an administrator prepares for execute
nodes; the executor's ``python=`` and ``environment=`` options point jobs at it.

:func:`pool` is the module-scoped fixture of the executor test modules that run on one such
pool (``from executor_pool import pool``).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from htc.errors import HTCError
from htc.executors import shared_python
from poolutil import Pool

HTC_SOURCE = Path(__file__).resolve().parent.parent


def execute_python(root: Path) -> tuple[str, dict[str, str]]:
    """The interpreter and environment function jobs should use (``python=``, ``environment=``).

    Not root: this interpreter, nothing extra. Root: what :func:`htc.executors.shared_python`
    prepares for the slot user ``nobody`` (this interpreter when ``nobody`` can already reach
    it, else a world-readable copy under ``root``), plus the tests' own folder on PYTHONPATH.
    """
    if os.geteuid() != 0:
        return sys.executable, {}
    try:
        python, environment = shared_python(root)
    except HTCError as exc:
        pytest.fail(f"tests run as root, so jobs run as nobody, and no Python for nobody could be prepared: {exc}")
    paths = [p for p in (environment.get("PYTHONPATH"), str(HTC_SOURCE / "tests")) if p]
    return python, {"PYTHONPATH": ":".join(paths)}


class ExecutorPool:
    """A whole personal pool (master, collector, negotiator, startd, schedd) plus job Python."""

    def __init__(self, **knobs: str):
        self.pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", **knobs)
        self.root = Path(tempfile.mkdtemp(prefix="htc-exec-py-"))
        self.root.chmod(0o755)
        self.python, self.environment = execute_python(self.root)

    def start(self) -> ExecutorPool:
        self.pool.start()
        return self

    def executor_args(self) -> dict:
        """Keyword arguments for HTCExecutor to use this pool."""
        return {"pool": self.pool.home, "python": self.python, "environment": self.environment, "progress": False}

    def stop(self) -> None:
        try:
            self.pool.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def pool():
    """One real personal pool (2 cpus) for every pool-backed test of the module that imports this."""
    started = ExecutorPool().start()
    try:
        yield started
    finally:
        started.stop()
