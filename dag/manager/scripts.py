"""PRE, POST and HOLD scripts: started as processes in the node's directory, reaped later.

A script runs on the submit machine with the manager's rights, in the node's directory
(``DIR``), with its arguments already expanded by the engine. Its standard output and error go
to the ``DEBUG`` file when the SCRIPT command names one (``STDOUT``, ``STDERR`` or ``ALL``,
appended, each run headed by a line naming the node and the script), else nowhere. The manager
never waits for a script: :meth:`Scripts.reap` returns those that ended since the last call,
with their exit code (or ``-signal``), and the manager's loop calls it whenever SIGCHLD wakes it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from dataclasses import dataclass

__all__ = ["Finished", "Scripts"]


@dataclass(frozen=True)
class Finished:
    """A script that ended: its node, kind (``PRE``/``POST``/``HOLD``) and exit status
    (the exit code, ``-N`` for signal N, or ``-1`` when it could not be started)."""

    node: str
    kind: str
    status: int
    error: str | None = None


class Scripts:
    """The scripts running now."""

    def __init__(self) -> None:
        self._running: dict[int, tuple[str, str, subprocess.Popen]] = {}
        self._failed: list[Finished] = []

    def __len__(self) -> int:
        return len(self._running)

    def start(self, node: str, kind: str, executable: str, args: list[str], cwd: str,
              debug_file: str | None = None, debug_stream: str | None = None) -> int | None:
        """Start one script; returns its pid, or None if it could not start (it is then reported
        by the next :meth:`reap` as failed with status -1, as DAGMan fails such a node)."""
        exe = executable if os.path.isabs(executable) or os.sep not in executable \
            else os.path.join(cwd, executable)
        if not os.path.isabs(exe) and os.path.exists(os.path.join(cwd, exe)):
            exe = os.path.join(cwd, exe)
        out = err = subprocess.DEVNULL
        fh = None
        try:
            if debug_file:
                fh = open(os.path.join(cwd, debug_file), "ab")
                fh.write(f"*** {kind} script of node {node} started {time.strftime('%m/%d/%y %H:%M:%S')}: "
                         f"{shlex.join([executable, *args])}\n".encode())
                fh.flush()
                stream = (debug_stream or "ALL").upper()
                out = fh if stream in ("STDOUT", "ALL") else subprocess.DEVNULL
                err = fh if stream in ("STDERR", "ALL") else subprocess.DEVNULL
            # in the manager's process group: a manager killed with its group takes its scripts
            proc = subprocess.Popen([exe, *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        except OSError as exc:
            self._failed.append(Finished(node, kind, -1, f"cannot run the {kind} script {executable} of node "
                                         f"{node} in {cwd}: {exc.strerror}"))
            return None
        finally:
            if fh is not None:
                fh.close()
        self._running[proc.pid] = (node, kind, proc)
        return proc.pid

    def reap(self) -> list[Finished]:
        """The scripts that ended since the last call (never blocks)."""
        done, self._failed = self._failed, []
        for pid, (node, kind, proc) in list(self._running.items()):
            status = proc.poll()
            if status is not None:
                del self._running[pid]
                done.append(Finished(node, kind, status))
        return done

    def kill_all(self) -> None:
        """Kill every running script (the manager is going away) and reap them."""
        for _node, _kind, proc in self._running.values():
            try:
                proc.kill()
            except OSError:
                continue  # it ended by itself meanwhile
        for _node, _kind, proc in self._running.values():
            proc.wait()
        self._running.clear()
