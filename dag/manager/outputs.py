"""The manager's files: ``<dag>.dagman.out`` and the files the engine asks for.

``dagman.out`` is DAGMan's debug log: one line per happening, each prefixed with the date and
time as DAGMan writes them (``11/27/26 21:34:06 ``), starting with a banner and ending with
``(condor_DAGMAN) pid NNN EXITING WITH STATUS N``. Whole files (rescue DAG, node status file,
DOT, metrics) are written to a temporary name and renamed, so a reader never sees half of one;
the jobstate log is appended to line by line.
"""

from __future__ import annotations

import os
import time

__all__ = ["DagmanOut", "append_line", "write_whole"]


def _stamp(now: float | None = None) -> str:
    return time.strftime("%m/%d/%y %H:%M:%S", time.localtime(time.time() if now is None else now))


class DagmanOut:
    """``<dag>.dagman.out``, appended to (a restarted manager continues the same file)."""

    def __init__(self, path: str, *, verbosity: int = 3):
        """Open ``path`` for appending; lines above ``verbosity`` are left out."""
        self.path = path
        self.verbosity = verbosity
        self._fh = open(path, "a", encoding="utf-8", buffering=1)
        self._second = -1  # the second self._prefix was formatted for
        self._prefix = ""

    def _stamp(self) -> str:
        """The time prefix of a line written now, formatted once per second (a wide DAG writes
        several lines per node, thousands in a second)."""
        second = int(time.time())
        if second != self._second:
            self._second, self._prefix = second, _stamp(second)
        return self._prefix

    def line(self, text: str, *, level: int = 3) -> None:
        """Write one line (several if ``text`` has newlines), each with the time prefix."""
        if level > self.verbosity or self._fh.closed:
            return
        stamp = self._stamp()
        self._fh.write("".join(f"{stamp} {part}\n" for part in text.splitlines() or [""]))

    def banner(self, job_name: str, argv: list[str]) -> None:
        """The start-up lines DAGMan writes."""
        self.line("******************************************************")
        self.line(f"** {job_name} (CONDOR_DAGMAN) STARTING UP")
        self.line(f"** {' '.join(argv)}")
        self.line("** SubsystemInfo: name=DAGMAN type=DAGMAN(9) class=CLIENT(2)")
        self.line(f"** PID = {os.getpid()}")
        self.line("******************************************************")

    def exiting(self, job_name: str, status: int) -> None:
        """The last line: ``**** condor_scheduniv_exec.6.0 (condor_DAGMAN) pid N EXITING WITH STATUS S``."""
        self.line(f"**** {job_name} (condor_DAGMAN) pid {os.getpid()} EXITING WITH STATUS {status}", level=0)

    def close(self) -> None:
        """Close the file."""
        self._fh.close()


def write_whole(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (temporary file + rename)."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def append_line(path: str, line: str) -> None:
    """Append one line to ``path`` (the JOBSTATE_LOG)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line if line.endswith("\n") else line + "\n")
