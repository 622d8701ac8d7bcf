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
