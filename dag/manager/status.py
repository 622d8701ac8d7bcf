"""What a DAG's run has done so far, read from its files (for ``htc dag status``).

The nodes log holds every node job's events, so replaying it through a fresh engine (as a
recovering manager does, without starting anything) gives each node's state; the lock file
says whether a manager runs the DAG now, and the last line of ``dagman.out`` how the last one
ended.
"""

from __future__ import annotations

import os
import re

from htc.dag.manager.condor_sub import dag_file_names
from htc.dag.manager.lockfile import read_lock
from htc.dag.manager.rescue_files import rescue_to_use
from htc.dag.manager.settings import load_settings, node_log_path

__all__ = ["STATE_NAMES", "dag_status_report"]

#: NodeStatus numbers (reference 3.4) -> the names htc dag status prints
STATE_NAMES = {0: "NOT_READY", 1: "READY", 2: "PRERUN", 3: "SUBMITTED", 4: "POSTRUN", 5: "DONE", 6: "ERROR",
               7: "FUTILE"}
_EXITED = re.compile(r"EXITING WITH STATUS (-?\d+)")


def _last_exit(out_path: str) -> int | None:
    try:
        with open(out_path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4096))
            tail = fh.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return None
    match = _EXITED.search(tail[-1]) if tail else None
    return int(match.group(1)) if match else None


def dag_status_report(dag_file: str) -> dict:
    """``{"dag", "state", "nodes": {state name: [node, ...]}, "counts"}`` for ``dag_file``."""
    from htc.dag.engine import DagRun
    from htc.dag.engine import events as e
    from htc.dag.manager.launch import load_dag
    from htc.eventlog import read_events

    settings = load_settings()
    rescue = rescue_to_use(dag_file, auto=settings.auto_rescue, max_num=settings.max_rescue_num)
    names = dag_file_names(dag_file)
    lock = read_lock(names["lock"])
    last = _last_exit(names["out"])
    if lock is not None and lock.alive():
        state = f"running (manager job {lock.cluster}, pid {lock.pid})"
    elif lock is not None:
        state = "interrupted (its manager died; the schedd restarts it, and it recovers)"
    elif last is not None:
        state = f"finished with status {last}" + (" (success)" if last == 0 else "")
    else:
        state = "not started"
    # the newest rescue DAG: the one this run applied, or (after a failure) the one it wrote
    dag = load_dag(dag_file, rescue=rescue, settings=settings)
    settings = load_settings(dag_config=dag.config)
    node_log = node_log_path(settings, dag_file)
    run = DagRun(dag, settings.engine_options(dag_id=lock.cluster if lock else 0, node_log=node_log))
    run.handle(e.Recover(read_events(node_log)), 0.0)
    nodes: dict[str, list[str]] = {name: [] for name in STATE_NAMES.values()}
    for name in dag.nodes:
        nodes[STATE_NAMES.get(int(run.node_status(name)), str(run.node_status(name)))].append(name)
    return {"dag": dag_file, "state": state, "nodes": nodes, "counts": {k: len(v) for k, v in nodes.items()}}
