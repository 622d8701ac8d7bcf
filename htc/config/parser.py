"""The lexical layer of configuration files: logical lines and statements.

Theory of operation
-------------------
A file becomes *logical lines* the way HTCondor's ``getline_implementation`` builds them:
every physical line is trimmed of surrounding white space; a line ending in ``\\`` continues
on the next one (the backslash is dropped, the next line's leading space too, so
``first \\`` + ``second`` gives ``first second``). A line starting with ``#`` is a comment and
never continues. Inside a continuation a ``#`` line does not end the statement: HTCondor
keeps only its *last character* (so ``# note \\`` keeps continuing and ``# note`` adds an
``e``) -- odd, but it is what the wheel does, so it is what we do.

Each logical line is then one :class:`Statement` (:func:`parse_statement`), HTCondor's rules:

* ``NAME = value`` and the obsolete ``NAME : value``; ``NAME += value`` appends with a space;
* ``NAME @=TAG`` starts a multi-line value ending at a line ``@TAG``;
* ``use CATEGORY : Template[(args)], ...``; ``include [ifexist] [command [into FILE]] : X``;
* ``error : text`` and ``warning : text``;
* a line with no operator starting with ``[`` is an ini-style section header and ignored.

A word between the name and ``=`` other than ``+`` is ignored, as HTCondor ignores it
(``A B = c`` sets ``A``); the loader reports it as a warning. What the statements *do*
(expansion, conditionals, includes, metaknobs) is :mod:`htc.config.loader`'s business.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Line", "Statement", "StatementError", "logical_lines", "template_lines",
           "parse_statement", "parse_include_options", "split_use"]


class StatementError(ValueError):
    """A logical line is not a statement; the message says what is wrong and what to write."""


@dataclass(frozen=True)
class Line:
    """One logical line and the physical lines it came from."""

    text: str
    first: int
    last: int


def logical_lines(text: str) -> Iterator[Line]:
    """Split file text into logical lines (continuations joined, comment lines kept as such).

    Args:
        text: the whole file.

    Yields:
        :class:`Line` objects, blank ones included (the loader skips them).
    """
    buf: list[str] = []
    first = 0
    lineno = 0
    for physical in text.splitlines():
        lineno += 1
        stripped = physical.strip()
        continuing = bool(buf)
        if not continuing:
            first = lineno
        in_comment = stripped.startswith("#")
        if in_comment and continuing:
            stripped = stripped[-1:]   # HTCondor: a commented-out continuation line keeps its last char
            in_comment = False
        if stripped.endswith("\\") and not in_comment:
            buf.append(stripped[:-1])
            continue
        buf.append(stripped)
        yield Line("".join(buf), first, lineno)
        buf = []
    if buf:
        yield Line("".join(buf), first, lineno)


def template_lines(body: str) -> Iterator[Line]:
    """Lines of a metaknob template: one statement per line, trimmed, numbered from 1."""
    for number, line in enumerate(body.split("\n"), start=1):
        yield Line(line.strip(), number, number)


@dataclass(frozen=True)
class Statement:
    """One parsed statement.

    ``kind`` is ``assign``, ``append``, ``heredoc``, ``use``, ``include``, ``error``,
    ``warning`` or ``section``. ``name`` is the macro name (unexpanded), the category for
    ``use`` or the option words for ``include``; ``value`` is the right-hand side, the
    heredoc tag, the include target or the message.
    """

    kind: str
    name: str
    value: str
    colon: bool = False          # written with the obsolete ':' operator
    ignored_word: str = ""       # a word between name and operator that HTCondor ignores


_OPS = "=:"


def parse_statement(text: str) -> Statement:
    """Parse one logical line (not blank, not a comment, not if/else) into a :class:`Statement`.

    Raises:
        StatementError: the line has no operator, or a misplaced ``+``.
    """
    n = len(text)
    i = 0
    while i < n and not text[i].isspace() and text[i] not in _OPS:
        i += 1
    if i >= n:
        if text.startswith("["):
            return Statement("section", text, "")
        raise StatementError(f"'{text}' is not a statement: expected NAME = value, "
                             "use CATEGORY : TEMPLATE, include : FILE, or if/else/endif")
    name = text[:i]
    op = text[i]
    i += 1
    word = ""
    if op not in _OPS:
        while i < n and text[i].isspace():
            i += 1
        start = i
        while i < n and text[i] not in _OPS and text[i] != "@":
            i += 1
        word = text[start:i]
        op = text[i] if i < n else ""
        i += 1
        if op == "@":
            if i < n and text[i] == "=":
                i += 1
            else:
                op = ""
    if not op:
        raise StatementError(f"'{text}' has no '=' or ':' after {name!r}; write {name} = value")
    rhs = text[i:].lstrip()
    bare = name[1:] if name.startswith("@") else name
    keyword = bare.lower()
    if op == ":" and keyword in ("use", "include", "error", "warning"):
        return Statement(keyword, word.strip(), rhs)
    if op == "@":
        return Statement("heredoc", name, rhs, ignored_word=word.strip())
    if word.startswith("+") or word.strip().startswith("+"):
        if word == "+" and op == "=":
            return Statement("append", name, rhs)
        raise StatementError(f"'{text}': only '+=' may stand between {name} and the value "
                             f"(write {name} += value)")
    return Statement("assign", name, rhs, colon=op == ":", ignored_word=word.strip())


def parse_include_options(words: str) -> tuple[bool, bool, str | None]:
    """Parse the words between ``include`` and ``:``.

    Returns:
        ``(if_exists, is_command, into_file)``.

    Raises:
        StatementError: an unknown keyword.
    """
    tokens = words.split()
    if_exists = is_command = False
    into = None
    k = 0
    if k < len(tokens) and tokens[k] in ("ifexist", "ifexists"):
        if_exists = True
        k += 1
    if k < len(tokens) and tokens[k] in ("output", "command"):
        is_command = True
        k += 1
        if k < len(tokens) and tokens[k] == "into":
            if k + 1 >= len(tokens):
                raise StatementError("expected a file name after 'into'")
            into = tokens[k + 1]
            k += 2
    if k < len(tokens):
        raise StatementError(f"unexpected keyword(s) '{words}' after include; write "
                             "include [ifexist] [command [into FILE]] : TARGET")
    return if_exists, is_command, into


def _close_paren(text: str, start: int) -> int:
    """Index of the ')' matching the '(' at ``start`` (nested () and [] allowed), or -1."""
    closers = {"(": ")", "[": "]"}
    stack = [")"]
    i = start + 1
    while i < len(text):
        c = text[i]
        if c in closers:
            stack.append(closers[c])
        elif c == stack[-1]:
            stack.pop()
            if not stack:
                return i
        i += 1
    return -1


def split_use(rhs: str) -> list[tuple[str, str | None]]:
    """Split ``use`` targets: ``Submit, Execute`` or ``Limit_Job_Runtimes(3600)``.

    Returns:
        ``[(template_name, args_or_None), ...]`` (HTCondor's ``MetaKnobAndArgs``).
    """
    out: list[tuple[str, str | None]] = []
    i, n = 0, len(rhs)
    while i < n:
        while i < n and (rhs[i].isspace() or rhs[i] == ","):
            i += 1
        start = i
        while i < n and not rhs[i].isspace() and rhs[i] not in ",(":
            i += 1
        if i == start:
            break
        knob = rhs[start:i]
        while i < n and rhs[i].isspace():
            i += 1
        args = None
        if i < n and rhs[i] == "(":
            close = _close_paren(rhs, i)
            if close >= 0:
                args = rhs[i + 1:close]
                i = close
            i += 1
        out.append((knob, args))
    return out
