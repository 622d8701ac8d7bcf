"""Lines and words of a DAG file, as HTCondor's DAG parser splits them.

Theory of operation
-------------------
A DAG file is read line by line (HTCondor ``src/condor_utils/dag_parser.cpp``):

* each line is trimmed; empty lines and lines starting with ``#`` or ``//`` are skipped;
* a line ending in ``\\`` is joined with the next one (a space in between): a command may span
  lines, and keeps the number of its first line; a comment line inside such a command is left
  out, and a comment line's own ``\\`` continues nothing (HTCondor's getline options
  ``COMMENT_DOESNT_CONTINUE | CONTINUE_MAY_BE_COMMENTED_OUT``);
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
from typing import NamedTuple

__all__ = ["LexError", "Line", "LineReader", "Words", "unquote"]



class LexError(ValueError):
    """A line cannot be split into words (an unclosed quote, a ``key =`` without a value)."""


class Line(NamedTuple):
    """One command: its text (trimmed, continuations joined) and the number of its first line."""

    text: str
    number: int


def _skip(line: str) -> bool:
    """Blank lines and comments (``#`` or ``//``) are skipped."""
    return not line or line[0] == "#" or line.startswith("//")


class LineReader:
    """The commands of one file's text, in order, with inline blocks read on request."""

    def __init__(self, text: str):
        # lines end at '\n' only, as DAGMan reads them: str.splitlines() would also end one at a
        # form feed, U+2028 or U+0085 inside a VARS value (the file's '\r\n' went with reading it)
        self._lines = [line.strip() for line in text.split("\n")]
        self._i = 0

    def next_line(self) -> Line | None:
        """The next command line (comments and blank lines skipped), or None at the end."""
        lines, n, i = self._lines, len(self._lines), self._i
        while i < n:
            text = lines[i]
            i += 1
            if not text or text[0] == "#" or text.startswith("//"):
                continue
            number = i
            while text.endswith("\\") and i < n:
                if lines[i].startswith("#"):    # a comment inside a continuation is skipped
                    i += 1
                    continue
                text = text[:-1].rstrip() + " " + lines[i]
                i += 1
            if text.endswith("\\"):     # a continuation at the end of the file continues nothing
                text = text[:-1].rstrip()
            self._i = i
            return Line(text, number)
        self._i = i
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
            text = lines[self._i]
            self._i += 1
            if _skip(text):
                continue
            if text == end or text.startswith(end + " ") or text.startswith(end + "\t"):
                return "".join(line + "\n" for line in body), text[len(end):].strip()
            body.append(text)
        return None


class Words:
    """A cursor over the words of one command line (``DagLexer``).

    The line is cut into words once, when the first word is asked for; a lexing error (an
    unclosed quote ...) is raised only when the cursor reaches it, as DAGMan's lexer does (a
    SCRIPT's raw remainder is never lexed).
    """

    __slots__ = ("_s", "_words", "_ends", "_i", "_error", "_plain")

    def __init__(self, text: str):
        self._s = text
        self._i = 0
        self._error: str | None = None
        # Most lines (JOB, PARENT ... CHILD) have neither quotes nor '=': split them fast.
        self._plain = not ('"' in text or "'" in text or "=" in text)
        if self._plain:
            self._words = text.split()
            self._ends: list[int] | None = None
        else:
            self._words, self._ends = self._cut(text)

    def _cut(self, s: str) -> tuple[list[str], list[int]]:
        """Words (quotes and escapes as written) and where each ends in the line.

        ``DagLexer`` joins ``key = value`` into one word ``key=value`` (spaces around the first
        ``=`` of a word dropped); the ``=`` of a value is just a character.
        """
        words: list[str] = []
        ends: list[int] = []
        n = len(s)
        equals = "=" in s
        for m in _WORD.finditer(s):
            key, value = m.groups()
            end = m.end()
            if not key and value is None:
                rest = s[m.start():].lstrip(" \t")
                if rest:        # a quote that never closes, or an '=' with no key or value
                    self._error = ("Invalid quoting: no ending quote found" if rest[0] in "\"'"
                                   else "Invalid key value pair: no value discovered")
                break
            if end < n and s[end] not in " \t":     # cut short by a quote that never closes
                self._error = "Invalid quoting: no ending quote found"
                break
            if value is None and equals and _EQUALS_NEXT.match(s, end):   # "key =", no value
                self._error = "Invalid key value pair: no value discovered"
                break
            words.append(key if value is None else f"{key}={value}")
            ends.append(end)
        return words, ends

    def next(self, trim_quotes: bool = False) -> str:
        """The next word ("" at the end of the line); quote characters kept unless trimmed.

        Raises:
            LexError: a quote is not closed, or ``key =`` has no value.
        """
        i = self._i
        words = self._words
        if i < len(words):
            self._i = i + 1
            word = words[i]
            if self._plain or ("\\" not in word and not (trim_quotes and ('"' in word
                                                                         or "'" in word))):
                return word         # nothing to take out of it: the common case, fast
            return _cook(word, trim_quotes)
        if self._error is not None:
            raise LexError(self._error)
        return ""

    def peek(self, trim_quotes: bool = False) -> str:
        """The next word, without moving past it."""
        i = self._i
        try:
            return self.next(trim_quotes)
        finally:
            self._i = i

    def remain(self) -> str:
        """The rest of the line, raw and trimmed (the cursor moves to the end)."""
        i, self._i = self._i, len(self._words)
        self._error = None
        if self._plain:
            return " ".join(self._words[i:])
        start = self._ends[i - 1] if i else 0
        return self._s[start:].strip()

    def rest_words(self, trim_quotes: bool = False) -> list[str]:
        """All the remaining words."""
        out = []
        while True:
            w = self.next(trim_quotes)
            if not w:
                return out
            out.append(w)


_Q = r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
#: one word: a key (quoted parts, or characters other than space, tab, quote and '=') and, if
#: an '=' follows (spaces around it allowed), a value (quoted parts, or any non-space)
_WORD = re.compile(r"[ \t]*(?P<k>(?:" + _Q + r"""|[^ \t"'=])*)"""
                   r"(?:[ \t]*=[ \t]*(?P<v>(?:" + _Q + r"""|[^ \t"'])+))?""")
#: a quoted part of a word: the quote, the text between (escapes included), the same quote
_QUOTED = re.compile(r"""(["'])((?:(?!\1)[^\\]|\\.)*)\1""")
_ESCAPE = re.compile(r"\\(.)")
_EQUALS_NEXT = re.compile(r"[ \t]*=")


def _escaped(m: re.Match) -> str:
    return m.group(1)


def _cook(word: str, trim_quotes: bool) -> str:
    """A raw word as the parser sees it: escapes inside quotes taken, quotes kept or trimmed."""
    if ('"' not in word and "'" not in word) or (not trim_quotes and "\\" not in word):
        return word                   # nothing to take out: the common case, fast

    def quoted(m: re.Match) -> str:
        inner = m.group(2)
        if "\\" in inner:
            inner = _ESCAPE.sub(_escaped, inner)
        return inner if trim_quotes else m.group(1) + inner + m.group(1)

    return _QUOTED.sub(quoted, word)


def unquote(value: str) -> str:
    """``"text"`` or ``'text'`` without its quotes (escapes were already taken by the lexer)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
