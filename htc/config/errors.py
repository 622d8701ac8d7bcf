"""Errors of the configuration system.

Two kinds matter:

* :class:`ConfigError` -- a configuration *file* (or environment override) is wrong. It carries
  the file and line so the message reads ``file:line: what is wrong; what to do``. It is a
  :class:`~htc.errors.UsageError`: the person who wrote the file fixes it.
* :class:`UndeclaredKnob` -- *code* asked :meth:`Config.param` for a knob that the param table
  (:mod:`htc.config.params`) does not declare. That is a programming error in htc, not a user
  mistake; a test scans the source tree so it never reaches a user.
"""

from __future__ import annotations

from htc.errors import HTCError, UsageError


class ConfigError(UsageError):
    """A configuration source is malformed or asks for something impossible; fix the file."""

    def __init__(self, what: str, *, file: str | None = None, line: int | None = None,
                 hint: str | None = None):
        self.what = what
        self.file = file
        self.line = line
        self.hint = hint
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line is not None else f"{file}: "
        text = f"{where}{what}"
        if hint:
            text += f"; {hint}"
        super().__init__(text)


class UndeclaredKnob(HTCError):
    """Code read a knob that the param table does not declare (a bug in htc, not in a config file)."""

    def __init__(self, name: str):
        self.name = name
        super().__init__(
            f"{name} is not declared in the param table (htc/config/params.py); declare it there "
            "with its type, HTCondor's default and a one-line doc, or read a user macro with "
            "Config.get()"
        )


class MacroError(Exception):
    """A macro function got bad arguments, or expansion does not terminate (Config adds file:line)."""
