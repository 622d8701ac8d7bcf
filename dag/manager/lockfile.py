"""``<dag>.lock``: which DAG manager runs a DAG.

The manager writes the lock file when it starts and removes it when it exits on its own. A lock
file still there at start-up means the previous manager of this DAG did not finish (it was
killed, or the schedd restarted it): the new one runs in *recovery mode* (reference 3.7). A lock
file naming a manager process that is still alive means another manager runs the DAG now:
condor_submit_dag refuses to submit, and a manager started anyway exits
(``DAGMAN_ABORT_DUPLICATES``).

The file is one line: ``<DAGMan ClusterId> <pid> <host> <start time>``.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

__all__ = ["Lock", "lock_path", "read_lock", "remove_lock", "write_lock"]


@dataclass(frozen=True)
class Lock:
    """What a lock file says: the manager's job (ClusterId), process and host."""

    cluster: int
    pid: int
    host: str
    started: float

    def alive(self) -> bool:
        """True if the manager process the lock names runs on this host now."""
        if self.host != socket.gethostname() or self.pid <= 0:
            return False
        try:
            with open(f"/proc/{self.pid}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        return b"htc.dag.manager" in cmdline


def lock_path(dag_file: str) -> str:
    """The lock file of a DAG: ``<dag file>.lock``."""
    return os.path.abspath(dag_file) + ".lock"


def read_lock(path: str) -> Lock | None:
    """The lock at ``path``, or None if there is none (an unreadable or garbled one counts as a
    lock of a dead manager, so that the DAG recovers)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            words = fh.read().split()
    except FileNotFoundError:
        return None
    except OSError:
        return Lock(cluster=-1, pid=-1, host="", started=0.0)
    try:
        return Lock(cluster=int(words[0]), pid=int(words[1]), host=words[2], started=float(words[3]))
    except (IndexError, ValueError):
        return Lock(cluster=-1, pid=-1, host="", started=0.0)


def write_lock(path: str, cluster: int) -> Lock:
    """Write this process's lock (atomically: a reader never sees half a line)."""
    lock = Lock(cluster=cluster, pid=os.getpid(), host=socket.gethostname(), started=round(time.time(), 3))
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(f"{lock.cluster} {lock.pid} {lock.host} {lock.started:.3f}\n")
    os.replace(tmp, path)
    return lock


def remove_lock(path: str) -> None:
    """Remove the lock file if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return  # already gone: nothing to release
