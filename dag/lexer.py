"""Lines and words of a DAG file, as HTCondor's DAG parser splits them.

Theory of operation
-------------------
A DAG file is read line by line (HTCondor ``src/condor_utils/dag_parser.cpp``):

* each line is trimmed; empty lines and lines starting with ``#`` or ``//`` are skipped;
* a line ending in ``\\`` is joined with the next one (a space in between): a command may span
  lines, and keeps the number of its first line;
* a command's first word is its keyword; the parser pulls the other words one at a time with
  :meth:`Words.next`, or takes the rest of the line raw with :meth:`Words.remain` (SCRIPT,
  SET_JOB_ATTR and ENV do);
* an inline submit description (``JOB A {`` ... ``}`` or ``@=TAG`` ... ``@TAG``) is a block of
  raw lines read by :meth:`LineReader.read_block`; its closing line may carry more words
  (``} DIR d NOOP``).

Words (``DagLexer::next``): spaces and tabs separate words; ``"`` or ``'`` quote a part of a word
(a backslash inside quotes takes the next character literally, so ``\\"`` is ``"`` and ``\\\\``
is ``\\``); the quote characters stay in the word unless the caller asks to trim them (file names
do, VARS values don't: :func:`unquote` strips them later). ``key = "value"`` with spaces around
the first ``=`` is one word, ``key="value"``. An unclosed quote, or a ``key =`` with no value, is
an error of the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LexError", "Line", "LineReader", "Words", "unquote"]

_DELIMS = " \t"
_PLAIN_WORD = re.compile(r"[ \t]*([^ \t]+)")


class LexError(ValueError):
    """A line cannot be split into words (an unclosed quote, a ``key =`` without a value)."""


@dataclass(frozen=True)
class Line:
    """One command: its text (trimmed, continuations joined) and the number of its first line."""

    text: str
    number: int


def _skip(line: str) -> bool:
    return not line or line[0] == "#" or line.startswith("//")


class LineReader:
    """The commands of one file's text, in order, with inline blocks read on request."""

    def __init__(self, text: str):
        self._lines = text.splitlines()
        self._i = 0

    def next_line(self) -> Line | None:
        """The next command line (comments and blank lines skipped), or None at the end."""
        lines, n = self._lines, len(self._lines)
        while self._i < n:
            number = self._i + 1
            text = lines[self._i].strip()
            self._i += 1
            if _skip(text):
                continue
            while text.endswith("\\") and self._i < n:
                text = text[:-1].rstrip() + " " + lines[self._i].strip()
                self._i += 1
            if text.endswith("\\"):     # a continuation at the end of the file continues nothing
                text = text[:-1].rstrip()
            return Line(text, number)
        return None

    def read_block(self, end: str) -> tuple[str, str] | None:
        """Read an inline submit description up to its closing line.

        Args:
            end: the closing token (``}`` or ``@TAG``).
        Returns:
            ``(text, rest)``: the description (its lines trimmed, comments and blank lines left
            out, each ending in a newline, as DAGMan keeps it) and what followed the closing
            token on its line; None if the file ended first.
        """
        lines, n = self._lines, len(self._lines)
        body: list[str] = []
        while self._i < n:
            text = lines[self._i].strip()
            self._i += 1
            if _skip(text):
                continue
            if text == end or text.startswith(end + " ") or text.startswith(end + "\t"):
                return "".join(line + "\n" for line in body), text[len(end):].strip()
            body.append(text)
        return None


class Words:
    """A cursor over the words of one command line (``DagLexer``)."""

    __slots__ = ("_s", "_n", "_pos", "_plain")

    def __init__(self, text: str):
        self._s = text
        self._n = len(text)
        self._pos = 0
        # Most lines (JOB, PARENT ... CHILD) have neither quotes nor '=': split them fast.
        self._plain = not ('"' in text or "'" in text or "=" in text)

    def next(self, trim_quotes: bool = False) -> str:
        """The next word ("" at the end of the line); quote characters kept unless trimmed.

        Raises:
            LexError: a quote is not closed, or ``key =`` has no value.
        """
        if self._plain:
            m = _PLAIN_WORD.match(self._s, self._pos)
            if m is None:
                self._pos = self._n
                return ""
            self._pos = m.end()
            return m.group(1)
        return self._next_quoted(trim_quotes)

    def _next_quoted(self, trim_quotes: bool) -> str:
        s, n, pos = self._s, self._n, self._pos
        token: list[str] = []
        escaped = in_quotes = is_pair = pair_complete = False
        quote = ""
        while pos < n:
            c = s[pos]
            if escaped:
                token.append(c)
                escaped = False
            elif in_quotes:
                if c == "\\":
                    escaped = True
                elif c == quote:
                    if not trim_quotes:
                        token.append(c)
                    in_quotes = False
                else:
                    token.append(c)
            elif c in _DELIMS:
                next_is_equals = False
                while pos + 1 < n:
                    if s[pos + 1] in _DELIMS:
                        pos += 1
                    else:
                        next_is_equals = s[pos + 1] == "="
                        break
                if token and ((not is_pair and not next_is_equals) or pair_complete):
                    break
            elif not is_pair and c == "=":
                is_pair = True
                token.append(c)
            else:
                if c in "\"'":
                    quote = c
                    if not trim_quotes:
                        token.append(c)
                    in_quotes = True
                else:
                    token.append(c)
                if is_pair:
                    pair_complete = True
            pos += 1
        self._pos = pos
        if in_quotes:
            raise LexError("Invalid quoting: no ending quote found")
        if is_pair and not pair_complete:
            raise LexError("Invalid key value pair: no value discovered")
        return "".join(token)

    def peek(self, trim_quotes: bool = False) -> str:
        """The next word, without moving past it."""
        pos = self._pos
        try:
            return self.next(trim_quotes)
        finally:
            self._pos = pos

    def remain(self) -> str:
        """The rest of the line, raw and trimmed (the cursor moves to the end)."""
        rest = self._s[self._pos:].strip()
        self._pos = self._n
        return rest

    def rest_words(self, trim_quotes: bool = False) -> list[str]:
        """All the remaining words."""
        out = []
        while True:
            w = self.next(trim_quotes)
            if not w:
                return out
            out.append(w)


def unquote(value: str) -> str:
    """``"text"`` or ``'text'`` without its quotes (escapes were already taken by the lexer)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
