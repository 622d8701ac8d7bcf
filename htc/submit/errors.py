"""The one error type an invalid submit description raises."""

from __future__ import annotations

from htc.errors import UsageError


class SubmitError(UsageError):
    """A submit description is invalid; the message names the file, line and command."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 command: str | None = None):
        self.reason = message
        self.file = file
        self.line = line
        self.command = command
        where = "ERROR"
        if line is not None:
            where = f"ERROR: on Line {line} of submit file {file or '<string>'}"
        elif file:
            where = f"ERROR: in submit file {file}"
        text = f"{where}: {command}: {message}" if command else f"{where}: {message}"
        super().__init__(text + "\nNo jobs were queued; fix the description and submit again.")

    def located(self, *, file: str | None, line: int | None, command: str | None) -> SubmitError:
        """Return this error with a location filled in where it had none.

        Args:
            file, line, command: where the error happened, as far as the caller knows.
        Returns:
            ``self`` when it already names a line, otherwise a new, located error.
        """
        if self.line is not None:
            return self
        return SubmitError(self.reason, file=file or self.file, line=line,
                           command=self.command or command)


#: The commands a DAG file's lines begin with (HTCondor's ``SubmitHash::is_dag_command``,
#: matched without regard to case).
DAG_COMMANDS = frozenset(c.lower() for c in (
    "JOB", "PROVISIONER", "FINAL", "SERVICE", "SPLICE", "SUBDAG", "PARENT", "SUBMIT-DESCRIPTION",
    "DONE", "PRE_SKIP", "SCRIPT", "PRIORITY", "VARS", "CATEGORY", "MAXJOBS", "ABORT-DAG-ON",
    "CONFIG", "ENV", "SET_JOB_ATTR", "DOT", "JOBSTATE_LOG", "NODE_STATUS_FILE", "SAVE_POINT_FILE",
    "REJECT"))


class DagFileError(SubmitError):
    """A DAG file was given where a submit description belongs (condor_submit says so when a
    line that is neither ``name = value`` nor a queue statement begins with a DAG command)."""

    def __init__(self, *, file: str | None, line: int | None, text: str):
        self.reason = "A DAG file was provided"
        self.file, self.line, self.command = file, line, text.split(None, 1)[0] if text.split() else None
        where = f"line {line} of {file or 'the description'}" if line is not None else (file or "the description")
        name = file or "FILE"
        UsageError.__init__(self, (
            "ERROR: A DAG file was provided. Please provide a submit file or use htc dag submit.\n"
            f"({where} is the DAG command '{text.strip()}'.) A DAG is submitted with "
            f"'htc dag submit {name}' (or 'htc submit_dag {name}').\nNo jobs were queued."))

    def located(self, *, file: str | None, line: int | None, command: str | None) -> SubmitError:
        """Already located where the DAG command was read."""
        return self


class FileCheckError(SubmitError):
    """condor_submit refused a file the job names (its executable): the message is
    condor_submit's own (``ERROR: Can't access executable file ...``), without a line."""

    def __init__(self, message: str):
        self.reason, self.file, self.line, self.command = message, None, None, None
        UsageError.__init__(self, message + "\nNo jobs were queued.")

    def located(self, *, file: str | None, line: int | None, command: str | None) -> SubmitError:
        """condor_submit names no line for a file check."""
        return self
