"""A submitted DAG, followed from Python: :class:`DagHandle` (what ``DAG.submit()`` returns).

The handle knows the DAG file and the DAG manager job's cluster; everything else it reads from
the files the run leaves beside the DAG file, as a user at a shell would:

* ``status()``: the nodes' states (:func:`htc.dag.show.node_states`: the node status file, the
  nodes log ``FILE.dag.nodes.log``, the rescue DAG);
* ``wait()``: follows the manager job's own log ``FILE.dag.dagman.log`` until the job leaves the
  queue (``htc wait FILE.dag.dagman.log`` does the same) and returns its exit code, the DAG's;
* ``result(node)``: a function node's return value (``NODE.result``);
* ``remove()``: ``htc rm`` of the manager job (it removes the nodes' jobs and writes a rescue DAG).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
from pathlib import Path
from typing import Any

from htc.dag import function_nodes as fnodes
from htc.errors import HTCError, UsageError

__all__ = ["DagHandle", "DagTimeout", "submit_dag_file"]

#: the DAG's exit code when its manager job was removed (DAGMan's EXIT_ABORT)
EXIT_ABORT = 2


class DagTimeout(HTCError, TimeoutError):
    """``DagHandle.wait(timeout=)`` ran out of time before the DAG finished."""


class DagHandle:
    """A DAG submitted to the pool: its manager job ``cluster`` runs ``dag_file``."""

    def __init__(self, dag_file: str | os.PathLike, cluster: int, *, function_nodes: set[str] | None = None):
        self.dag_file = Path(dag_file).absolute()
        self.cluster = cluster
        self.function_nodes = set(function_nodes or ())

    @property
    def manager_log(self) -> Path:
        """The manager job's event log, ``FILE.dag.dagman.log``."""
        return Path(f"{self.dag_file}.dagman.log")

    def status(self) -> dict[str, str]:
        """Node name -> state (DAGMan's names: NOT_READY, READY, PRERUN, SUBMITTED, POSTRUN, DONE,
        ERROR, FUTILE), in the DAG file's order."""
        from htc.dag.parser import parse_dag
        from htc.dag.show import node_states

        return node_states(parse_dag(self.dag_file))

    def exit_code(self) -> int | None:
        """The DAG's exit code if its manager job has left the queue, else None (0: success, 1:
        a node failed, 2: removed or aborted, or an ABORT-DAG-ON return value)."""
        from htc.eventlog import JobAbortedEvent, JobTerminatedEvent, read_events

        if not self.manager_log.exists():
            return None
        for event in read_events(self.manager_log, cluster=self.cluster):
            if isinstance(event, JobTerminatedEvent):
                if event.terminated_normally:
                    return int(event.return_value or 0)
                return 128 + int(event.signal or 0)
            if isinstance(event, JobAbortedEvent):
                return EXIT_ABORT
        return None

    def done(self) -> bool:
        """True once the manager job has left the queue."""
        return self.exit_code() is not None

    def wait(self, timeout: float | None = None) -> int:
        """Wait until the DAG has finished and return its exit code (see :meth:`exit_code`).

        Raises:
            DagTimeout: ``timeout`` seconds passed first (the DAG goes on running).
        """
        from htc.client import wait_for_jobs

        deadline = None if timeout is None else time.monotonic() + timeout
        # the schedd writes the manager job's submit event just after it answers the submit
        while not self.manager_log.exists() and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.02)
        done = False
        if self.manager_log.exists():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done = wait_for_jobs(self.manager_log, str(self.cluster), timeout=left, poll=0.05).done
        code = self.exit_code()
        if not done or code is None:
            raise DagTimeout(f"DAG {self.dag_file.name} (manager job {self.cluster}) has not finished after "
                             f"{timeout} s; wait longer, or see its nodes with handle.status()")
        return code

    def result(self, node: str | Any) -> Any:
        """The return value of function node ``node`` (re-raising its exception if it raised).

        Raises:
            UsageError: ``node`` is not a function node of this DAG.
            CallFileError: the node has not finished (no result yet) or could not run.
        """
        name = getattr(node, "name", node)
        if name not in self.function_nodes:
            raise UsageError(f"{name!r} is not a function node of {self.dag_file.name}; only function nodes "
                             f"(dag.function(...)) have results")
        return fnodes.read_result(self.dag_file.parent, name)

    def remove(self, reason: str = "removed by DagHandle.remove()") -> None:
        """Remove the DAG's manager job (it removes its nodes' jobs and writes a rescue DAG)."""
        from htc.client import act, parse_selection

        act("Remove", parse_selection([str(self.cluster)]), reason=reason)

    def __repr__(self) -> str:
        return f"<DagHandle {self.dag_file.name} cluster {self.cluster}>"


def _argv(path: str | os.PathLike, options: dict[str, Any]) -> list[str]:
    argv = ["dag", "submit"]
    for key, value in options.items():
        flag = f"-{key}"
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            for one in value:
                argv += [flag, str(one)]
        else:
            argv += [flag, str(value)]
    return [*argv, os.fspath(path)]


def submit_dag_file(path: str | os.PathLike, options: dict[str, Any] | None = None, *,
                    function_nodes: set[str] | None = None) -> DagHandle:
    """Submit DAG file ``path`` exactly as ``htc dag submit`` does, its options given by name
    (``maxjobs=4`` is ``-maxjobs 4``, ``force=True`` is ``-force``), quietly, and return its
    :class:`DagHandle`.

    Raises:
        UsageError: an unknown option, or the DAG was refused (the message says why: a parse
            error with its file and line, a REJECT, another manager running it...).
    """
    from htc.cli.main import build_parser

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = build_parser().parse_args(_argv(path, options or {}))
        except SystemExit:
            raise UsageError(f"DAG.submit() options {sorted(options or {})} are not htc dag submit's: "
                             f"{err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else ''}") from None
        status = args.func(args)
    submitted = re.search(r"submitted to cluster (\d+)", out.getvalue())
    if status != 0 or not submitted:
        raise UsageError(f"htc dag submit {path} did not submit the DAG (exit {status}):\n"
                         f"{(out.getvalue() + err.getvalue()).strip()}")
    return DagHandle(path, int(submitted.group(1)), function_nodes=function_nodes)
