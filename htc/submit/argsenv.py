"""Arguments and environment in HTCondor's two syntaxes (condor_utils/condor_arglist.cpp, env.cpp).

Arguments:

* V1 ("old"): ``arguments = a b c`` -- words split on whitespace, no quoting; a double
  quote must be written ``\\"``.  Stored raw in ``Args``.
* V2 ("new"): ``arguments = "a 'b c' d"`` -- the whole value in double quotes (a literal
  ``"`` doubled), words split on whitespace, single quotes group (a literal ``'`` doubled).
  Stored in ``Arguments`` in V2 raw form, where every run of spaces, tabs or quotes inside a
  word is wrapped in single quotes: ``b c`` -> ``b' 'c``.

Environment: V1 is ``A=1;B=2`` (``;``-separated, stored in ``Env`` with ``EnvDelim``); V2 is
``"A=1 B='x y'"`` (stored in ``Environment``, entries sorted by name, quoted like V2 args).

This is the one copy of the splitting rule: the starter splits a job ad's ``Arguments``/``Args``
and ``Environment`` with :func:`split_v2_raw` and :func:`parse_args_v1raw` too
(:mod:`htc.daemons.starter.env`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

from htc.classad.arglist import UnbalancedQuote, join_v2, split_v2
from htc.submit.errors import SubmitError


def is_v2_quoted(s: str) -> bool:
    """True when the value is in V2 syntax: its first non-space character is '"'."""
    return s.lstrip().startswith('"')


def v2_quoted_to_raw(s: str) -> str:
    """Strip the V2 outer double quotes; ``""`` inside stands for one '"'.

    Raises:
        SubmitError: no terminating quote, or text after it.
    """
    s = s.lstrip()
    if not s.startswith('"'):
        raise SubmitError("Expecting double-quoted input string (V2 format).")
    out = []
    i = 1
    while i < len(s):
        c = s[i]
        if c == '"':
            if i + 1 < len(s) and s[i + 1] == '"':
                out.append('"')
                i += 2
                continue
            rest = s[i + 1:]
            if rest.strip():
                raise SubmitError("Unexpected characters following double-quote.  Did you forget "
                                  "to escape the double-quote by repeating it?  Here is the quote "
                                  f"and trailing characters: {s[i:]}")
            return "".join(out)
        out.append(c)
        i += 1
    raise SubmitError("Failed to find terminating double-quote.")


def split_v2_raw(s: str) -> list[str]:
    """Split V2 raw text into words (``split_args``; the rule is :mod:`htc.classad.arglist`)."""
    try:
        return split_v2(s)
    except UnbalancedQuote as exc:
        raise SubmitError(str(exc)) from None


def parse_args_v1raw(s: str) -> list[str]:
    """Split V1 raw arguments on whitespace."""
    return s.split()


def v1_wacked_to_raw(s: str) -> str:
    """Undo V1 ``\\"`` escapes; an unescaped '"' is an error."""
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == '"':
            raise SubmitError(f"Found illegal unescaped double-quote: {s[i:]}")
        if c == "\\" and i + 1 < len(s) and s[i + 1] == '"':
            out.append('"')
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


#: the V2 raw text of a word list (``join_args``; the rule is :mod:`htc.classad.arglist`)
join_v2_raw = join_v2


def parse_arguments(value: str | None, v2_value: str | None, allow_v1: bool = False
                    ) -> tuple[str, str]:
    """Parse ``arguments``/``arguments2`` into the job attribute and its raw text.

    Returns:
        ``("Args", v1 raw)`` for V1 input, ``("Arguments", v2 raw)`` otherwise.
    Raises:
        SubmitError: with HTCondor's message and the arguments as given.
    """
    if value is not None and v2_value is not None and not allow_v1:
        raise SubmitError("If you wish to specify both 'arguments' and\n'arguments2' for maximal "
                          "compatibility with different\nversions of Condor, then you must also "
                          "specify\nallow_arguments_v1=true.")
    try:
        if v2_value is not None:
            return "Arguments", join_v2_raw(split_v2_raw(v2_quoted_to_raw(v2_value)))
        if value is None:
            return "Arguments", ""
        if is_v2_quoted(value):
            return "Arguments", join_v2_raw(split_v2_raw(v2_quoted_to_raw(value)))
        return "Args", " ".join(parse_args_v1raw(v1_wacked_to_raw(value)))
    except SubmitError as e:
        given = v2_value if v2_value is not None else value
        raise SubmitError(f"{e.reason}\nThe full arguments you specified were: {given}") from None


class Env:
    """An environment being built for a job: name -> value, V1 or V2 on output."""

    def __init__(self):
        self.vars: dict[str, str] = {}

    def merge_v2_raw(self, raw: str) -> None:
        """Add the entries of V2 raw text (``A=1 B='x y'``)."""
        for entry in split_v2_raw(raw):
            self._set_entry(entry)

    def merge_v1_raw(self, raw: str, delim: str = ";") -> None:
        """Add the entries of V1 text (``A=1;B=2``)."""
        for entry in raw.split(delim):
            if entry.strip():
                self._set_entry(entry)

    def _set_entry(self, entry: str) -> None:
        name, eq, value = entry.partition("=")
        if not eq or not name:
            raise SubmitError(f"ERROR: Missing '=' after environment variable '{entry}'.")
        self.vars[name] = value

    def merge_v1_raw_or_v2_quoted(self, value: str) -> None:
        """Add ``environment`` as written: V2 when double-quoted, else V1."""
        if is_v2_quoted(value):
            self.merge_v2_raw(v2_quoted_to_raw(value))
        else:
            self.merge_v1_raw(value)

    def import_environ(self, environ: Mapping[str, str], patterns: str | None,
                       v1_safe_only: bool) -> None:
        """Copy the submitter's variables not already set (``getenv``).

        Args:
            environ: the submitter's environment.
            patterns: None for all; else ``getenv``'s comma/space list of names with ``*``
                wildcards, ``!name`` excluding.
            v1_safe_only: drop values V1 syntax cannot carry (``;`` or newlines).
        """
        allow: list[str] = []
        deny: list[str] = []
        if patterns is not None:
            for p in patterns.replace(",", " ").split():
                (deny if p.startswith("!") else allow).append(p.lstrip("!").lower())
        for name, value in environ.items():
            if name in self.vars:
                continue
            low = name.lower()
            if any(fnmatch.fnmatchcase(low, p) for p in deny):
                continue
            if patterns is not None and not any(fnmatch.fnmatchcase(low, p) for p in allow):
                continue
            if v1_safe_only and (";" in value or "\n" in value):
                continue
            self.vars[name] = value

    def v2_raw(self) -> str:
        """The ``Environment`` text: entries sorted by name, V2-quoted."""
        return join_v2_raw([f"{k}={self.vars[k]}" for k in sorted(self.vars)])

    def v1_raw(self, delim: str = ";") -> str:
        """The ``Env`` text.

        Raises:
            SubmitError: a value holds the delimiter or a newline.
        """
        for k, v in self.vars.items():
            if delim in v or "\n" in v:
                raise SubmitError(f"failed to insert environment into job ad: the value of {k} "
                                  "cannot be written in V1 syntax")
        return delim.join(f"{k}={self.vars[k]}" for k in sorted(self.vars))


def environment_command(env: Mapping[str, str]) -> str:
    """The ``environment`` submit command's value for ``env`` in the V2 syntax: ``"A=1 B='x y'"``.

    The inverse of what condor_submit reads: a value with spaces, tabs or quotes is wrapped in
    single quotes (a literal ``'`` doubled), and a literal ``"`` is doubled inside the outer
    double quotes. Programs that write submit descriptions (the executor, DAG function nodes)
    use this one rule.
    """
    parts = []
    for name, value in env.items():
        if any(c in value for c in " \t'\""):
            value = "'" + value.replace("'", "''").replace('"', '""') + "'"
        parts.append(f"{name}={value}")
    return '"' + " ".join(parts) + '"'
