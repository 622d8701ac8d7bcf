"""The one error type a bad DAG file (or a DAG built wrong in Python) raises.

Messages follow DAGMan's own where it has them, so that a user who searches for the text finds
HTCondor's documentation: ``file:line '<X>' is not a valid DAG command`` and
``file:line Failed to parse <CMD> command: <problem>``. Each message then says what to do: the
DAG is checked as a whole before anything is submitted, so nothing ran.
"""

from __future__ import annotations

from htc.errors import UsageError

__all__ = ["DagError"]

#: appended to every message: the error is raised before anything runs
NOTHING_RAN = "fix the DAG file and submit it again (nothing was submitted)"


class DagError(UsageError):
    """A DAG file (or a DAG model) is invalid; the message names the file, line and problem."""

    def __init__(self, reason: str, *, file: str | None = None, line: int | None = None,
                 command: str | None = None, hint: str | None = NOTHING_RAN):
        self.reason = reason
        self.file = file
        self.line = line
        self.command = command
        where = ""
        if file is not None and line is not None:
            where = f"{file}:{line} "
        elif file is not None:
            where = f"{file}: "
        text = f"Failed to parse {command} command: {reason}" if command else reason
        super().__init__(f"{where}{text}" + (f"; {hint}" if hint else ""))
