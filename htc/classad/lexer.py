"""Tokenizer for the ClassAd expression language (HTCondor compat-mode rules).

Theory of operation
-------------------
:func:`tokenize` turns text into a list of :class:`Token` ending with an ``EOF`` token; the
parser walks the list by index.  Tokens remember their start offset so that the parser can
report positions and can tell ``-1`` (a negative literal, written without a space) from
``- 1`` (unary minus applied to ``1``); HTCondor unparses the two differently.

Daemons parse ads all day (every slot update, every job ad on the wire), so the common tokens
-- names, plain numbers, strings without escapes, operators, with the white space before
them -- are read by one regular expression (``_FAST``); everything else goes through
:func:`_next_token`, character by character, which also raises every error.
``tests/unit/test_classad_lexer.py`` checks the two paths agree token for token.

Rules that are easy to get wrong, all checked against HTCondor 25.14.1 in compat mode:

* Integers are decimal only: ``017`` and ``0x10`` are errors, ``0`` is fine, ``00.5`` is a
  real.  A literal beyond the 64-bit range is read as ``0`` (HTCondor does the same).
  Numbers are read as ``Lexer::tokenizeNumber`` reads them: a point after hex digits makes
  a real through ``strtod`` (``0x1.8`` is 1.5), and a minus that does not follow a value is
  part of the number, whose integer text is then converted in base 10 without the octal
  check (``-017`` is -17, ``-0x10`` is 0, ``-019`` is an error).
* Reals need digits after the point (``1.`` and ``1.e5`` are errors); ``.5`` and ``1e5``
  are reals.  Overflow gives ``inf``, underflow ``0.0``.
* Strings take C escapes plus octal ``\\ooo`` (three digits only when the first is 0-3);
  any other escaped character stands for itself (``\\q`` is ``q``).  The octal escapes
  build UTF-8 bytes: a NUL byte or bytes that are not valid UTF-8 are an error.
* Two string literals separated only by white space are one string (``"a" "b"`` is
  ``"ab"``); a comment between them ends the first string.
* ``'name'`` is a quoted attribute name, with the same escapes.
"""

from __future__ import annotations

import re

from htc.classad.errors import ClassAdParseError

# token kinds
INT, REAL, STRING, NAME, QNAME, KEYWORD, OP, EOF = (
    "INT", "REAL", "STRING", "NAME", "QNAME", "KEYWORD", "OP", "EOF")

#: words that are never attribute names (compared case-insensitively)
KEYWORDS = frozenset({"true", "false", "undefined", "error", "is", "isnt"})

_SIMPLE_ESCAPES = {
    "n": b"\n", "t": b"\t", "b": b"\b", "f": b"\f", "r": b"\r", "a": b"\a", "v": b"\v",
    "\\": b"\\", '"': b'"', "'": b"'",
}

# Longest operators first so that ``>>>`` wins over ``>>`` and ``=?=`` over ``=``.
_OPERATORS = (
    ">>>", "=?=", "=!=", "==", "!=", "<=", ">=", "<<", ">>", "&&", "||",
    "+", "-", "*", "/", "%", "<", ">", "=", "!", "~", "&", "|", "^", "?", ":",
    "(", ")", "[", "]", "{", "}", ",", ";", ".",
)

_WS = " \t\n\r\f\v"
_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)


class Token:
    """One lexical token: its kind, value, source offset and the exact source text."""

    __slots__ = ("kind", "value", "pos", "end")

    def __init__(self, kind: str, value, pos: int, end: int):
        self.kind = kind
        self.value = value
        self.pos = pos
        self.end = end

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.value!r}, {self.pos})"


# The common tokens in one regular expression: an ASCII name, a plain number, a string without
# escapes, an operator (longest first). :func:`tokenize` takes a match only where it means what
# :func:`_next_token` would read; anything else (escapes, adjacent strings, '1.', '017', names
# running on into non-ASCII letters) goes the careful way, which also raises the errors.
# White space before the token is part of the match (comments are not: see tokenize).
_FAST = re.compile(
    r'[ \t\n\r\f\v]*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)'
    r'|(?P<num>(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)'
    r'|(?P<str>"[^"\\]*")'
    r'|(?P<op>' + "|".join(re.escape(op) for op in _OPERATORS) + "))")
_SPACE = re.compile(r"[ \t\n\r\f\v]*")
_NUMBER_GOES_ON = frozenset(".eExX")  # after a plain number: the careful way reads (or refuses) more
_COMMENT_STARTS = frozenset("/*")


def int_from_text(text: str) -> int:
    """Convert decimal digits (with an optional leading ``-``) as HTCondor does: out of range is 0."""
    digits = text.lstrip("-+").lstrip("0")
    if len(digits) > 19:  # out of range whatever the digits (and no 5,000-digit conversion)
        return 0
    n = int(text)
    if _INT64_MIN <= n <= _INT64_MAX:
        return n
    return 0


def skip_space(text: str, i: int, n: int) -> int:
    """Offset of the next token after ``i``: skips white space and both kinds of comment."""
    space = _SPACE.match
    while i < n:
        i = space(text, i).end()
        if i + 1 < n and text[i] == "/" and text[i + 1] == "/":
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif i + 1 < n and text[i] == "/" and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            if j < 0:
                raise ClassAdParseError(text, i, "a closing '*/' for this comment")
            i = j + 2
        else:
            break
    return i


def _read_quoted(text: str, i: int, n: int, quote: str) -> tuple[str, int]:
    """Read a quoted string or name starting at the opening quote; return (value, end)."""
    start = i
    i += 1
    out = bytearray()
    while True:
        if i >= n:
            raise ClassAdParseError(text, start, f"a closing {quote} for this literal")
        c = text[i]
        if c == quote:
            i += 1
            break
        if c == "\\":
            if i + 1 >= n:
                raise ClassAdParseError(text, start, f"a closing {quote} for this literal")
            e = text[i + 1]
            if e in "01234567":
                maxlen = 3 if e in "0123" else 2
                j = i + 1
                while j < n and j < i + 1 + maxlen and text[j] in "01234567":
                    j += 1
                code = int(text[i + 1:j], 8)
                if code == 0:
                    raise ClassAdParseError(text, i, "no NUL character (\\0) inside a string")
                out.append(code)
                i = j
                continue
            out += _SIMPLE_ESCAPES.get(e) or e.encode("utf-8")
            i += 2
            continue
        out += c.encode("utf-8", "surrogatepass")
        i += 1
    try:
        return out.decode("utf-8"), i
    except UnicodeDecodeError:
        raise ClassAdParseError(text, start, "a literal whose octal escapes form valid UTF-8") from None


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_HEX_REAL = re.compile(r"0[xX][0-9a-fA-F]*(?:\.[0-9a-fA-F]*)?")


def _digit(c: str) -> bool:
    return "0" <= c <= "9"


def _exponent_end(text: str, i: int, n: int) -> int:
    """The end of a real's exponent starting with the ``e``/``E`` at ``i`` (sign, then digits).

    Raises:
        ClassAdParseError: no digit follows (reported at the ``e``).
    """
    j = i + 1
    if j < n and text[j] in "+-":
        j += 1
    k = j
    while k < n and _digit(text[k]):
        k += 1
    if k == j:
        raise _stop(ClassAdParseError(text, i, "digits in the exponent"), k)
    return k


def _stop(ex: ClassAdParseError, i: int) -> ClassAdParseError:
    ex.stop = i  # where HTCondor's lexer stopped reading (JSON's quiet end depends on it)
    return ex


def negative_int(lit: str) -> int:
    """The value of ``-lit`` for an integer literal read after a minus: HTCondor converts the
    whole ``-017`` with ``from_chars`` in base 10, so ``-017`` is -17 and ``-0x10`` is 0."""
    j = 0
    while j < len(lit) and _digit(lit[j]):
        j += 1
    return int_from_text("-" + lit[:j]) if j else 0


#: tokens after which '-' is an operator, not the sign of a number (HTCondor's lexer)
_VALUE_KINDS = frozenset({INT, REAL, STRING, NAME, QNAME})
_VALUE_WORDS = frozenset({"true", "false", "undefined", "error"})


def _signed(toks: list, i: int) -> bool:
    """Whether the number at ``i`` is the body of a negative literal (``-017``): right after
    a '-' that does not follow a value (HTCondor lexes the two as one number)."""
    if not toks:
        return False
    t = toks[-1]
    if t.kind != OP or t.value != "-" or t.end != i:
        return False
    if len(toks) < 2:
        return True
    p = toks[-2]
    return not (p.kind in _VALUE_KINDS or p.kind == KEYWORD and p.value in _VALUE_WORDS
                or p.kind == OP and p.value in ".)]}")


def read_number(text: str, i: int, n: int, signed: bool = False) -> tuple[Token, int]:
    """Read a number as HTCondor's ``Lexer::tokenizeNumber`` does (compat mode).

    ``0x`` starts hex digits; a leading ``0`` starts octal digits. Either is an error as an
    integer (compat mode reads integers in decimal only), but a point or an exponent after
    them makes a real, converted by ``strtod``: ``0x1.8`` is 1.5 and ``09.5`` is 9.5.
    """
    start = i
    c = text[i]
    real = False
    if c == "0" and i + 1 < n and text[i + 1] in "xX":
        i += 2
        if i >= n or text[i] not in _HEX_DIGITS:
            raise _stop(ClassAdParseError(text, start, "hex digits after '0x'"), i)
        while i < n and text[i] in _HEX_DIGITS:
            i += 1
    else:
        octal = True
        while i < n and _digit(text[i]):
            octal = octal and text[i] < "8"
            i += 1
        real = i < n and text[i] in ".eE"
        if c == "0" and not octal and not real:
            raise _stop(ClassAdParseError(
                text, start, "a decimal integer (octal and hex are not allowed)"), i)
    if i < n and text[i] == ".":
        j = i + 1
        while j < n and _digit(text[j]):
            j += 1
        if j == i + 1:
            raise _stop(ClassAdParseError(text, i, "digits after the decimal point"), j)
        i = j
        real = True
    if real and i < n and text[i] in "eE":
        i = _exponent_end(text, i, n)
    lit = text[start:i]
    if real:
        if lit[1:2] in ("x", "X"):
            return Token(REAL, float.fromhex(_HEX_REAL.match(lit).group()), start, i), i
        return Token(REAL, float(lit), start, i), i
    if len(lit) > 1 and lit[0] == "0" and not signed:
        raise _stop(ClassAdParseError(
            text, start, "a decimal integer (octal and hex are not allowed)"), i)
    # (after a minus the parser takes the value from the text: see negative_int)
    return Token(INT, -negative_int(lit) if signed else int_from_text(lit), start, i), i


def tokenize(text: str, start: int = 0, one_group: bool = False,
             lenient: bool = False) -> list[Token]:
    """Split ``text`` into tokens.

    Args:
        text: ClassAd expression (or new-syntax ad) source.
        start: offset to start at.
        one_group: stop after the token that closes the first bracket group (used to read
            one ad out of a stream of ads without touching the text after it).
    Returns:
        The tokens, ending with one ``EOF`` token.
    Raises:
        ClassAdParseError: on a character or literal the language does not allow.
    """
    if lenient:
        try:
            return tokenize(text, start, one_group)
        except ClassAdParseError as ex:
            pos = getattr(ex, "token_pos", ex.pos)
            good = tokenize(text[:pos], start, one_group, True) if pos > start else [
                Token(EOF, None, start, start)]
            return good[:-1] + [Token("BAD", None, pos, len(text)),
                                Token(EOF, None, len(text), len(text))]
    toks: list[Token] = []
    append = toks.append
    n = len(text)
    depth = 0
    i = skip_space(text, start, n)
    fast, space = _FAST.match, _SPACE.match
    while i < n:
        m = fast(text, i)
        if m is not None:
            kind = m.lastgroup
            i = m.start(kind)  # the token, past the white space before it
            j = m.end()
        else:
            kind = None
            i = j = space(text, i).end()
            if i >= n:
                break  # only white space was left
        nxt = text[j] if j < n else ""
        op = None
        if kind == "op" and text[i] == "/" and nxt in _COMMENT_STARTS:
            i = skip_space(text, i, n)  # a comment, not a division
            continue
        if kind == "name" and (nxt.isascii() or not nxt.isalnum()):
            word = m.group(kind)
            low = word.lower()
            append(Token(KEYWORD, low, i, j) if low in KEYWORDS else Token(NAME, word, i, j))
            i = j
        elif kind == "num" and nxt not in _NUMBER_GOES_ON and (nxt.isascii() or not nxt.isdigit()):
            lit = m.group(kind)
            if "." in lit or "e" in lit or "E" in lit:
                append(Token(REAL, float(lit), i, j))
            elif len(lit) > 1 and lit[0] == "0":  # octal: refused, or the body of -017
                i, op = _next_token(text, i, n, append, _signed(toks, i))
                continue
            else:
                append(Token(INT, int_from_text(lit), i, j))
            i = j
        elif kind == "str" and m.group(kind).isascii() and not text.startswith('"', space(text, j).end()):
            append(Token(STRING, text[i + 1:j - 1], i, j))
            i = j
        elif kind == "op" and not (text[i] == "." and (nxt.isdigit() or nxt == ".")):
            op = m.group(kind)
            append(Token(OP, op, i, j))
            i = j
        else:
            try:
                i, op = _next_token(text, i, n, append, _signed(toks, i))
            except ClassAdParseError as ex:
                raise _at(ex, i)
        if one_group and op is not None:
            if op in "[{(":
                depth += 1
            elif op in "]})":
                depth -= 1
                if depth <= 0:
                    append(Token(EOF, None, i, i))
                    return toks
    append(Token(EOF, None, n, n))
    return toks


def _at(ex: ClassAdParseError, i: int) -> ClassAdParseError:
    ex.token_pos = i  # where the bad token starts (lenient callers cut there)
    return ex


def _next_token(text: str, i: int, n: int, append,
                signed: bool = False) -> tuple[int, str | None]:
    """Read one token at ``i``; return the offset after it and the operator text (if any)."""
    op = None
    c = text[i]
    if c.isalpha() or c == "_":
        j = i + 1
        while j < n and (text[j].isalnum() or text[j] == "_"):
            j += 1
        word = text[i:j]
        if not word.isascii():
            raise ClassAdParseError(text, i, "an ASCII attribute name")
        low = word.lower()
        if low in KEYWORDS:
            append(Token(KEYWORD, low, i, j))
        else:
            append(Token(NAME, word, i, j))
        i = j
    elif c == "." and text.startswith("..", i):
        # HTCondor's tokenizeNumber reads a second point as part of the selection (``..a`` is
        # ``.a``), or, before a digit, as a real that strtod reads as 0.0 (``..5``)
        j = i + 2
        if j < n and _digit(text[j]):
            while j < n and _digit(text[j]):
                j += 1
            if j < n and text[j] in "eE":
                j = _exponent_end(text, j, n)
            append(Token(REAL, 0.0, i, j))
        else:
            append(Token(OP, ".", i, j))
            op = "."
        i = j
    elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
        if not c.isascii():
            raise ClassAdParseError(text, i, "an ASCII digit")
        tok, i = read_number(text, i, n, signed)
        append(tok)
    elif c == '"':
        start = i
        value, i = _read_quoted(text, i, n, '"')
        # adjacent literals separated by white space only are one string
        while True:
            j = i
            while j < n and text[j] in _WS:
                j += 1
            if j < n and text[j] == '"':
                more, i = _read_quoted(text, j, n, '"')
                value += more
            else:
                break
        append(Token(STRING, value, start, i))
    elif c == "'":
        start = i
        value, i = _read_quoted(text, i, n, "'")
        append(Token(QNAME, value, start, i))
    else:
        for op in _OPERATORS:
            if text.startswith(op, i):
                append(Token(OP, op, i, i + len(op)))
                i += len(op)
                break
        else:
            raise ClassAdParseError(text, i, "an operator, literal or attribute name")
    return i, op
