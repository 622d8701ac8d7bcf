"""Reading the job ads of ActivateClaim: each attribute's text parsed once per startd.

Theory of operation
-------------------
A schedd running jobs on a kept claim sends the startd one whole job ad per job, and the ads
of one user's jobs repeat each other: of a job ad's seventy-odd ``name = value`` definitions a
handful differ from the last job's (``ProcId``, ``GlobalJobId``, a DAG node's ``ClusterId``,
``DAGNodeName`` and ``SubmitEventNotes``). Parsing the whole text again for each job
(:func:`htc.daemons.startd.ads.parse_job`) spends most of its time cutting the text into
tokens; the ClassAd parser's value cache spares only the parsing of the values it has seen.

:class:`JobAdReader` cuts the ad's text at its top-level semicolons instead -- a scan for
strings, quoted names, brackets and semicolons, not a tokenization -- and looks each
definition's text up in a table of the definitions it parsed before; only new ones are parsed
(as a one-attribute ad, with the ClassAd parser). The job ad it returns is what
:func:`~htc.daemons.startd.ads.parse_job` returns for the same text, because it is built
from the same parser's answer for each definition, in the text's order, and the ``Request*``
resources are evaluated the same way. Wherever that cannot be shown the whole text is parsed
as before: a text that is not one bracketed ad, that holds a comment, an unterminated literal
or unbalanced brackets, an empty definition, a definition that is not exactly one attribute
(the whole parse then reports the error), or a name defined twice.

Only immutable values are remembered (expressions, strings, numbers, booleans, undefined and
error): a list or a nested ad is parsed for every job that has it, so that no two job ads
share a mutable value. Nor is a definition longer than :data:`MAX_KEPT` characters (a peer
cannot fill the startd's memory with them). The schedd reads submitted ads the same way
(:mod:`htc.daemons.schedd.adtexts`, which keeps canonical texts rather than values).
"""

from __future__ import annotations

import re
from typing import Any

from htc.classad import ClassAd, ExprTree, Value
from htc.classad.errors import ClassAdParseError
from htc.daemons.startd.ads import REQUEST_ATTRS, parse_job

__all__ = ["JobAdReader"]

#: what decides where a definition ends: a string or quoted name (escapes and all, as the
#: lexer's _read_quoted reads them), a comment opener, a bracket, a semicolon, or a quote
#: that no closing quote follows (unterminated: the whole parse reports it)
_SPLIT = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|/[/*]|[][{}();"\']', re.S)
_OPEN, _CLOSE = frozenset("[{("), frozenset("]})")
#: the longest definition text remembered (longer ones are parsed for every job)
MAX_KEPT = 1024
_IMMUTABLE = (ExprTree, str, int, float, bool, Value, type(None))


def _definitions(text: str) -> list[str] | None:
    """The texts between the top-level semicolons of a bracketed ad, stripped; None when the
    text is not plainly one (see the module docstring)."""
    start = text.find("[")
    end = text.rfind("]")
    if start < 0 or end < start or text[:start].strip() or text[end + 1:].strip():
        return None
    out: list[str] = []
    depth, last = 0, start + 1
    for match in _SPLIT.finditer(text, start + 1, end):
        token = match.group()
        first = token[0]
        if first in "\"'":
            if len(token) == 1:
                return None  # unterminated
        elif first == "/":
            return None  # a comment: the parser knows where it ends
        elif first in _OPEN:
            depth += 1
        elif first in _CLOSE:
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0:  # a top-level ';'
            out.append(text[last:match.start()].strip())
            last = match.end()
    if depth:
        return None
    tail = text[last:end].strip()
    if tail:  # (a ';' just before the ']' ends no definition)
        out.append(tail)
    if not out or not all(out):
        return None  # an empty ad or an empty definition: the whole parse knows what it means
    return out


class JobAdReader:
    """:func:`~htc.daemons.startd.ads.parse_job` with a memory of the definitions it parsed
    (see the module docstring)."""

    def __init__(self, max_definitions: int = 8192):
        """Remember up to ``max_definitions`` definition texts (forgotten all at once past it)."""
        self._known: dict[str, tuple[str, Any, ExprTree]] = {}
        self._max = max_definitions
        self._last: tuple[str, dict[str, Any]] | None = None

    def read(self, text: str) -> dict[str, Any]:
        """The job ad of ``text`` for the core, as :func:`~htc.daemons.startd.ads.parse_job`
        returns it (a new dict each call: the caller may change it).

        Raises:
            ClassAdParseError: the text is not a ClassAd.
        """
        # A schedd sends the same job ad in RequestClaim and then in ActivateClaim: once is enough.
        if self._last is None or self._last[0] != text:
            job = self._read_by_definitions(text)
            self._last = (text, job if job is not None else parse_job(text))
        return dict(self._last[1])

    def _read_by_definitions(self, text: str) -> dict[str, Any] | None:
        parts = _definitions(text)
        if parts is None:
            return None
        known = self._known
        job: dict[str, Any] = {}
        trees: dict[str, ExprTree] = {}
        lower: set[str] = set()
        for part in parts:
            pair = known.get(part)
            if pair is None:
                pair = self._parse_definition(part)
                if pair is None:
                    return None
            name = pair[0].lower()
            if name in lower:
                return None  # defined twice: the whole parse decides which spelling and value
            lower.add(name)
            job[pair[0]] = pair[1]
            trees[pair[0]] = pair[2]
        if any(isinstance(job.get(name), ExprTree) for name in REQUEST_ATTRS):
            scope = ClassAd(trees)  # (from the trees: no value is made into a tree again)
            for name in REQUEST_ATTRS:
                if isinstance(job.get(name), ExprTree):
                    value = scope.eval(name)
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        job[name] = value
        return job

    def _parse_definition(self, part: str) -> tuple[str, Any, ExprTree] | None:
        """``(name, value, its tree)`` of one definition's text, remembered when the value is
        immutable; None when it is not exactly one attribute."""
        try:
            ad = ClassAd(f"[ {part} ]")
        except ClassAdParseError:
            return None
        names = list(ad)
        if len(names) != 1:
            return None
        pair = (names[0], ad[names[0]], ad.lookup(names[0]))
        if isinstance(pair[1], _IMMUTABLE) and len(part) <= MAX_KEPT:
            if len(self._known) >= self._max:
                self._known.clear()
            self._known[part] = pair
        return pair
