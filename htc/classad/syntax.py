"""Reading whole ads: new syntax, old syntax (``condor_q -long``) and JSON; ``parseAds`` & co.

Theory of operation
-------------------
* New syntax: a stream of ``[ ... ]`` ads; each is tokenized only up to its closing bracket
  so that the rest of the stream is never touched before it is needed.
* Old syntax: one ``Name = expr`` per line, ads separated by blank lines, ``#`` lines are
  comments.  As in HTCondor, the name is everything before the first ``=`` (so ``a.b`` or
  ``a b`` are names), the expression is read as a prefix of the rest of the line (trailing
  text is ignored), and the first line that is not ``Name = expr`` ends the input: what was
  read so far is the result.  Strings use the old escaping: a backslash escapes only ``"``,
  except that a backslash before the quote that ends the line is a literal backslash.
* JSON: objects become ads, arrays lists, ``null`` UNDEFINED, and strings of the form
  ``"\\/Expr(text)\\/"`` expressions: as in HTCondor, only when the string's source text
  starts and ends with the escaped slash ``\\/`` (``"/Expr(a+b)/"`` is a plain string), the
  converted string starts with ``/Expr(`` in any case and ends with ``)/``; ``text`` must be
  a whole expression.  Numbers are read by the ClassAd lexer's rules (``L.read_number``), and
  ``\\u`` escapes of U+0080 and up store the bytes HTCondor's converter really produces.
  A top-level array of objects is a stream of ads.  Like HTCondor, a JSON error at the very
  end of the input ends the stream quietly (its lexer has then consumed everything), an
  error with text after it raises.
"""

from __future__ import annotations

import enum
import re

from htc.classad import lexer as L
from htc.classad.ad import ClassAd
from htc.classad.ast import AdExpr, ListExpr, Literal, Node
from htc.classad.errors import ClassAdParseError
from htc.classad.parser import MAX_DEPTH, Parser, parse_ad_prefix, parse_expr
from htc.classad.values import Undefined


class ParserType(enum.IntEnum):
    """Which syntax to read, numbered as classad2 numbers them."""

    Auto = -1
    Old = 0
    XML = 1
    JSON = 2
    New = 3
    FileAuto = 4


def _text_of(source) -> str:
    if isinstance(source, str):
        return source
    if hasattr(source, "read"):
        data = source.read()
        return data.decode("utf-8") if isinstance(data, bytes) else data
    raise TypeError(f"expected text or a file object, not {type(source).__name__}")


def _detect(text: str) -> ParserType:
    i = L.skip_space(text, 0, len(text)) if text.strip() else 0
    s = text[i:i + 1]
    if s == "{":
        return ParserType.JSON
    if s == "[":
        rest = text[i + 1:].lstrip()
        return ParserType.JSON if rest[:1] == "{" else ParserType.New
    return ParserType.Old


# ---------------------------------------------------------------------------------------
# old syntax

def _old_to_new(expr: str) -> str | None:
    """Rewrite old-syntax string literals in ``expr`` as new-syntax ones (None: unterminated)."""
    from htc.classad.printing import quote_string
    out = []
    i, n = 0, len(expr)
    while i < n:
        c = expr[i]
        if c == "'":
            # quoted attribute names keep the new-syntax escapes: copy through the close
            j = i + 1
            while j < n and expr[j] != "'":
                j += 2 if expr[j] == "\\" else 1
            out.append(expr[i:j + 1])
            i = j + 1
            continue
        if c == "/" and expr.startswith("/*", i):
            j = expr.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(expr[i:j])
            i = j
            continue
        if c == "/" and expr.startswith("//", i):
            out.append(expr[i:])
            break
        if c != '"':
            out.append(c)
            i += 1
            continue
        j = i + 1
        buf = []
        while True:
            if j >= n:
                # an unterminated string is junk the parser may never need to reach
                out.append("\x00")
                return "".join(out)
            c = expr[j]
            # backslash-quote is an escaped quote, unless that quote ends the line
            if c == "\\" and j + 1 < n and expr[j + 1] == '"' and j + 2 < n:
                buf.append('"')
                j += 2
                continue
            if c == '"':
                break
            buf.append(c)
            j += 1
        # the empty comment stops the new-syntax lexer from joining adjacent strings, which
        # old syntax does not do
        out.append(quote_string("".join(buf)) + "/**/")
        i = j + 1
    return "".join(out)


def _old_line(line: str) -> tuple[str, Node] | None:
    eq = line.find("=")
    if eq < 0:
        return None
    name = line[:eq].lstrip().rstrip(" ")
    if not name:
        return None
    expr = _old_to_new(line[eq + 1:])
    if expr is None:
        return None
    try:
        node = Parser(expr, L.tokenize(expr, lenient=True)).expr()
    except (ClassAdParseError, RecursionError):
        return None
    return name, node


def _old_ads(text: str):
    lines = text.splitlines()
    n = len(lines)
    i = 0
    while True:
        while i < n and not lines[i].strip():
            i += 1
        if i >= n:
            return
        start = i
        pairs: list = []
        failed = False
        while i < n and lines[i].strip():
            line = lines[i]
            i += 1
            if failed or line.strip().startswith("#"):
                continue
            got = _old_line(line)
            if got is None:
                # HTCondor keeps what the ad had so far and skips the rest of it
                failed = True
            else:
                pairs.append(got)
        if pairs:
            yield ClassAd._from_pairs(pairs)
            continue
        # An ad with nothing in it is an error; HTCondor reports it only when more input
        # follows the blank line that ends it, otherwise the stream just ends.
        if i + 1 < n:
            raise ClassAdParseError(text, sum(len(x) + 1 for x in lines[:start]),
                                    "an ad of 'Name = expression' lines")
        return


# ---------------------------------------------------------------------------------------
# JSON

_JSON_TOKEN = re.compile(r"""
    \s*(?:
      (?P<punct>[{}\[\]:,])
    | (?P<string>"(?:[^"\\]|\\.)*"(?:\s*"(?:[^"\\]|\\.)*")*)
    )""", re.VERBOSE | re.DOTALL)
_JSON_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_JSON_ESC = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
             "t": "\t"}


class _JsonError(Exception):
    """Internal: a JSON syntax error at offset ``pos``."""

    def __init__(self, pos: int, end: int, expected: str, kind: str = "punct", hard=False):
        super().__init__(expected)
        self.pos = pos
        self.end = end
        self.expected = expected
        self.kind = kind
        self.hard = hard


class _Json:
    def __init__(self, text: str):
        self.text = text
        self.i = 0
        self.depth = 0  # arrays and objects open: at most the expression parser's MAX_DEPTH

    def peek(self):
        text = self.text
        j = len(text) - len(text[self.i:].lstrip())
        c = text[j:j + 1]
        if c and c in "-.0123456789":
            return self.number(j)
        w = _JSON_WORD.match(text, j)
        if w is not None:
            return ("word", w.group(), j, w.end())
        m = _JSON_TOKEN.match(self.text, self.i)
        if m is None:
            j = len(self.text) - len(self.text[self.i:].lstrip())
            if j >= len(self.text):
                return ("eof", None, j, j)
            return ("bad", None, j, j + 1)
        kind = m.lastgroup
        return (kind, m.group(kind), m.start(kind), m.end())

    def number(self, j: int):
        """A number token read as HTCondor's lexer reads it (``L.read_number``); a bad one is
        kind ``badnumber`` and ends where that lexer stopped."""
        text, n = self.text, len(self.text)
        k = j + 1 if text[j] == "-" else j
        if k >= n or not ("0" <= text[k] <= "9" or text[k] == "." and k + 1 < n
                          and "0" <= text[k + 1] <= "9"):
            return ("bad", None, j, k if k > j else j + 1)  # a minus or a dot alone
        try:
            tok, end = L.read_number(text, k, n, signed=k > j)
        except ClassAdParseError as ex:
            return ("badnumber", None, j, getattr(ex, "stop", ex.pos + 1))
        value = tok.value
        if k > j:
            value = -value if tok.kind == L.REAL else L.negative_int(text[k:end])
        return ("number", value, j, end)

    def take(self, expected: str, *kinds_values):
        tok = self.peek()
        for kv in kinds_values:
            if tok[0] == kv[0] and (len(kv) == 1 or tok[1] == kv[1]):
                self.i = tok[3]
                return tok
        raise _JsonError(tok[2], tok[3], expected, tok[0])

    def string(self, raw: str, pos: int) -> tuple[str, bool]:
        """The value of a string token (adjacent literals are one string, as in the ClassAd
        lexer) and whether it is a quoted expression: its text, escapes not yet converted,
        starts and ends with ``\\/`` (HTCondor's ``convert_escapes_json``)."""
        text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', raw))
        quoted = len(text) >= 4 and text.startswith("\\/") and text.endswith("\\/")
        out = bytearray()
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if c == "\\" and i < n - 1:  # a backslash ending the text stays
                e = text[i + 1]
                i += 2
                if e == "u":
                    digits = text[i:i + 4]
                    if len(digits) < 4 or i + 3 >= n or not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                        raise _JsonError(pos, pos + len(raw), "four hex digits after \\u", "string")
                    code = int(digits, 16)
                    i += 4
                    if code == 0:
                        raise _JsonError(pos, pos + len(raw), "no NUL character in a string",
                                         "string")
                    # HTCondor's conversion to UTF-8 masks with 0x..111111 where 0x..3F was
                    # meant: these are the bytes it really stores
                    if code >= 0x800:
                        out += bytes(((code >> 12) & 0xFF, ((code >> 6) | 0x11) & 0xFF,
                                      (code | 0x11) & 0xFF))
                    elif code >= 0x80:
                        out += bytes(((code >> 6) & 0xFF, code & 0x11))
                    else:
                        out.append(code)
                    continue
                out += _JSON_ESC.get(e, e).encode("utf-8", "surrogatepass")
                continue
            out += c.encode("utf-8", "surrogatepass")
            i += 1
        try:
            return out.decode("utf-8"), quoted
        except UnicodeDecodeError:
            raise _JsonError(pos, pos + len(raw), "a string that is valid UTF-8", "string") from None

    def value(self) -> Node:
        kind, val, pos, end = self.peek()
        if kind == "punct" and val in "{[":
            if self.depth >= MAX_DEPTH:
                raise _JsonError(pos, end, f"arrays and objects nested at most {MAX_DEPTH} deep",
                                 hard=True)
            self.depth += 1
            node = self.obj() if val == "{" else self.array(end)
            self.depth -= 1
            return node
        return self.scalar(kind, val, pos, end)

    def array(self, end: int) -> ListExpr:
        self.i = end
        items: list[Node] = []
        if self.peek()[1] == "]":
            self.i = self.peek()[3]
            return ListExpr(items)
        while True:
            items.append(self.value())
            k, v, p, e = self.take("',' or ']' in the array", ("punct", ","), ("punct", "]"))
            if v == "]":
                return ListExpr(items)

    def scalar(self, kind: str, val, pos: int, end: int) -> Node:
        if kind == "string":
            self.i = end
            s, quoted = self.string(val, pos)
            if quoted and s[:6].lower() == "/expr(" and s.endswith(")/") and len(s) >= 8:
                try:
                    return parse_expr(s[6:-2])
                except ClassAdParseError:
                    raise _JsonError(pos, end, "a valid expression inside /Expr(...)/",
                                     "string") from None
            return Literal(s)
        if kind == "number":
            self.i = end
            return Literal(val)
        if kind == "badnumber":
            raise _JsonError(pos, end, "a number (decimal integers, reals)", "number")
        if kind == "word":
            low = val.lower()
            if low in ("true", "false", "null"):
                self.i = end
                return Literal({"true": True, "false": False, "null": Undefined}[low])
        raise _JsonError(pos, end, "a JSON value", kind)

    def obj(self) -> AdExpr:
        self.take("'{'", ("punct", "{"))
        pairs: list[tuple[str, Node]] = []
        while True:
            kind, val, pos, end = self.peek()
            if kind == "punct" and val == ",":
                self.i = end
                continue
            if kind == "punct" and val == "}":
                self.i = end
                return AdExpr(pairs)
            if kind != "string":
                raise _JsonError(pos, end, "a quoted attribute name", kind)
            self.i = end
            name = self.string(val, pos)[0]
            self.take("':'", ("punct", ":"))
            pairs.append((name, self.value()))
            kind, val, pos, end = self.peek()
            if not (kind == "punct" and val in ",}"):
                raise _JsonError(pos, end, "',' or '}' in the object", kind)
            if not name:
                # HTCondor notices the empty name only when it inserts the attribute
                raise _JsonError(pos, end, "a non-empty attribute name", kind)


def _consumed(text: str, ex: _JsonError) -> int:
    """How far HTCondor's lexer has read when it reports ``ex``: it reads one character past
    a name, number or string (and a string's trailing white space) before giving up."""
    if ex.kind in ("number", "badnumber", "word"):
        return ex.end + 1
    if ex.kind == "string":
        j = ex.end
        while j < len(text) and text[j].isspace():
            j += 1
        return j + 1
    if ex.kind == "bad" and text[ex.pos:ex.pos + 1] == "'":
        j = text.find("'", ex.pos + 1)
        return len(text) if j < 0 else j + 2
    if ex.kind == "eof":
        return len(text)
    return ex.end


def _json_ads(text: str):
    p = _Json(text)
    try:
        kind, val, pos, end = p.peek()
        if kind == "punct" and val == "[":
            p.i = end
            seen = False
            while True:
                k, v, ps, e = p.peek()
                if k == "punct" and v == "]":
                    p.i = e
                    break
                if k == "punct" and v == ",":
                    p.i = e
                    continue
                if not (k == "punct" and v == "{"):
                    raise _JsonError(ps, e, "a JSON object in the array of ads", k, hard=seen)
                yield ClassAd._from_node(p.obj())
                seen = True
            t = p.peek()
            if t[0] != "eof":
                raise _JsonError(t[2], t[3], "end of input after the array of ads", hard=True)
            return
        while True:
            kind, val, pos, end = p.peek()
            if kind == "eof":
                return
            if not (kind == "punct" and val == "{"):
                raise _JsonError(pos, end, "'{' starting a JSON object", kind)
            yield ClassAd._from_node(p.obj())
    except _JsonError as ex:
        if not ex.hard and _consumed(text, ex) >= len(text):
            return
        raise ClassAdParseError(text, ex.pos, ex.expected) from None


# ---------------------------------------------------------------------------------------
# public API

def _new_ads(text: str):
    i = 0
    while True:
        got = parse_ad_prefix(text, i)
        if got is None:
            return
        node, i = got
        yield ClassAd._from_node(node)


def parseAds(source, parser: ParserType = ParserType.Auto):  # noqa: N802 (classad2 name)
    """Iterate over the ads in text or a file.

    Args:
        source: a string or a file object opened for reading.
        parser: the syntax (``ParserType.New``, ``Old``, ``JSON``; ``Auto`` guesses).
    Returns:
        An iterator of :class:`ClassAd`.
    Raises:
        ClassAdParseError: malformed new-syntax or JSON input (old syntax stops quietly at
            the first line that is not ``Name = expr``).
    """
    text = _text_of(source)
    if parser in (ParserType.Auto, ParserType.FileAuto):
        parser = _detect(text)
    if parser == ParserType.New:
        return _new_ads(text)
    if parser == ParserType.Old:
        return _old_ads(text)
    if parser == ParserType.JSON:
        return _json_ads(text)
    raise ClassAdParseError(text, 0, "new, old or JSON syntax (XML is not supported)")


def parseOne(source, parser: ParserType = ParserType.Auto) -> ClassAd:  # noqa: N802
    """Read every ad in the input and merge them into one (later attributes win).

    Raises:
        ClassAdParseError: as :func:`parseAds`.
    """
    merged = ClassAd()
    for ad in parseAds(source, parser):
        for low, node in ad._exprs.items():
            if low not in merged._names:
                merged._names[low] = ad._names[low]
            merged._exprs[low] = node
    return merged


def parseNext(source, parser: ParserType = ParserType.Auto) -> ClassAd | None:  # noqa: N802
    """The first ad of the input, or None if there is none.

    Raises:
        ClassAdParseError: as :func:`parseAds`.
    """
    return next(iter(parseAds(source, parser)), None)
