"""A submitted ad's text as ``{attribute: canonical expression text}``, its values parsed once.

Theory of operation
-------------------
Every Submit brings its cluster ad as ClassAd text (about 2 KB and a hundred attributes for a
plain job), which the schedd turns into one canonical expression text per attribute. Parsing
the whole ad with the ClassAd parser costs milliseconds per submission, most of it tokenizing
values that are the same in every ad of a client: a DAG manager submitting thousands of nodes
of one submit file sends ads that differ in a handful of attributes (``QDate``,
``DAGNodeName``, the node's macros).

:func:`split_ad_text` therefore cuts the top level of the ad into ``name = value`` pieces with
a scanner that knows only what can hide a ``;`` -- string literals, quoted attribute names,
brackets, braces and parentheses -- and parses each *value* alone with the ClassAd parser
(:func:`htc.classad.parser.parse_expr`, the grammar an ad's values are parsed with), keeping
the canonical text of the values it has seen (a bounded cache). So every value is still
checked by the real parser once, and only new values are parsed again.

Most values hold nothing but plain characters and complete string literals (``Cmd =
"/bin/true"``, ``RequestMemory = 16``, the ``Requirements`` of a submit file): an ad made of such
pairs only (:data:`_PLAIN_BODY`, one regular expression over the whole body) is cut by one
``findall`` (:data:`_PLAIN_PAIRS`), and only an ad with a nesting, a ``'`` or a ``/`` in a
value goes through the scanner. Both find the same ends: outside string literals, nothing in a
plain value can hide a ``;``, so each value runs to the first ``;`` after its ``=``.

Anything the scanner is not sure of -- a comment, a quoted or keyword or repeated attribute
name, unbalanced brackets, a value the parser refuses -- returns None, and the caller parses
the whole ad as before (with the same error messages for a malformed ad).
"""

from __future__ import annotations

import re

from htc.classad import ClassAdParseError, printing
from htc.classad.lexer import KEYWORDS
from htc.classad.parser import parse_expr

__all__ = ["split_ad_text"]

_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)")
#: what can start a string, a quoted name, a nesting or a comment, or end a value
_SPECIAL = re.compile(r"[\"'()\[\]{};/]")
_STRING = {'"': re.compile(r'"(?:[^"\\]|\\.)*"', re.S), "'": re.compile(r"'(?:[^'\\]|\\.)*'", re.S)}
_OPEN, _CLOSE = "([{", ")]}"


def _plain_value(depth: int) -> str:
    """A pattern of a value the scanner would end at its first top-level ``;``: characters that
    cannot start a string, a quoted name or a comment, complete double-quoted strings, and
    brackets, braces and parentheses each closed by its own kind, nested ``depth`` deep at most
    (a ``;`` inside them does not end the value). Possessive: nothing is tried twice."""
    string = r'"(?:[^"\\]++|\\.)*+"'
    inner = r"""(?:[^"'()\[\]{}/]++|%s)*+""" % string
    for _ in range(depth - 1):
        inner = r"""(?:[^"'()\[\]{}/]++|%s|\(%s\)|\[%s\]|\{%s\})*+""" % (string, inner, inner, inner)
    return r"""(?:[^"'()\[\]{};/]++|%s|\(%s\)|\[%s\]|\{%s\})*+""" % (string, inner, inner, inner)


_PLAIN_VALUE = _plain_value(4)
#: a ``name = value`` pair with a plain value and the ``;`` that ends it (or the body's end)
_PLAIN_PAIRS = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)\s*(%s)(?:;|\Z)" % _PLAIN_VALUE, re.S)
#: a body made of such pairs only (and blanks after the last ``;``)
_PLAIN_BODY = re.compile(r"(?:\s*[A-Za-z_][A-Za-z0-9_]*\s*=(?!=)%s(?:;|\Z))*+\s*" % _PLAIN_VALUE, re.S)
#: canonical text of the values seen (value text -> unparsed text), bounded in entries and in
#: the length of a value kept (a longer one is parsed every time: a client cannot fill memory)
_VALUES: dict[str, str] = {}
_MAX_VALUES = 8192
_MAX_KEPT_VALUE = 1024


def _value_end(body: str, start: int) -> int | None:
    """Offset of the ``;`` (or the end) that ends the value beginning at ``start``; None when
    the scanner cannot tell (a comment, an unclosed string, unbalanced nesting)."""
    depth, i = 0, start
    while True:
        m = _SPECIAL.search(body, i)
        if m is None:
            return len(body) if depth == 0 else None
        ch, j = m.group(), m.start()
        if ch in _STRING:
            s = _STRING[ch].match(body, j)
            if s is None:
                return None
            i = s.end()
            continue
        if ch == "/":
            if body.startswith(("//", "/*"), j):
                return None  # a comment: let the parser have it
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0:  # ';' at the top level: the value ends
            return j
        i = j + 1


def _canonical(value: str) -> str | None:
    text = _VALUES.get(value)
    if text is None:
        try:
            text = printing.unparse(parse_expr(value))
        except (ClassAdParseError, RecursionError):
            return None
        if len(value) <= _MAX_KEPT_VALUE:
            if len(_VALUES) >= _MAX_VALUES:
                _VALUES.pop(next(iter(_VALUES)))
            _VALUES[value] = text
    return text


def split_ad_text(text: str) -> dict[str, str] | None:
    """``{attribute: canonical expression text}`` of the new-syntax ad ``text`` as the ClassAd
    parser would read it, in the ad's order; None when the caller must parse the whole ad
    (see the module docstring)."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        return None
    body = body[1:-1]
    if _PLAIN_BODY.fullmatch(body):
        return _plain_texts(_PLAIN_PAIRS.findall(body))
    return _scanned_texts(body)


def _scanned_texts(body: str) -> dict[str, str] | None:
    """:func:`split_ad_text` of the ``body`` between the brackets, pair by pair with the scanner."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    pos, n = 0, len(body)
    while pos < n:
        m = _NAME.match(body, pos)
        if m is None:
            return None if body[pos:].strip() else out
        name = m.group(1)
        low = name.lower()
        if low in seen or low in KEYWORDS:
            return None
        seen.add(low)
        end = _value_end(body, m.end())
        if end is None:
            return None
        value = body[m.end():end].strip()
        if not value:
            return None
        canonical = _canonical(value)
        if canonical is None:
            return None
        out[name] = canonical
        pos = end + 1
    return out


def _plain_texts(pairs: list[tuple[str, str]]) -> dict[str, str] | None:
    """:func:`split_ad_text` of a body of plain pairs (:data:`_PLAIN_BODY`), given as
    ``(name, value)``: each value ends at its pair's ``;`` as the scanner would find it, so the
    same checks follow (an empty or malformed value, a repeated or keyword name: None)."""
    out: dict[str, str] = {}
    known = _VALUES.get
    for name, value in pairs:
        canonical = known(value)  # (blanks before a value are not in it; an empty value is never known)
        if canonical is None:
            value = value.strip()  # blanks after it (before the ';' or the end)
            canonical = known(value) or (_canonical(value) if value else None)
            if canonical is None:
                return None
        out[name] = canonical
    lows = set(map(str.lower, out))
    if len(lows) != len(pairs) or not lows.isdisjoint(KEYWORDS):
        return None
    return out
