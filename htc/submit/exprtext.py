"""ClassAd expression *text* as submit needs it: quoting, checking, evaluating, scanning.

Job ads are held as expression text (attribute -> text) until a caller wants ClassAd
objects; this module is the one place that turns submit values into that text and asks
``htc.classad`` to parse, canonicalise or evaluate it.  The small lexer here only finds
attribute references and top-level operators (for Requirements and for the parentheses
HTCondor adds when it joins expressions with ``||``); it never decides what an
expression means.
"""

from __future__ import annotations

import functools
import re

from htc.submit.errors import SubmitError

_INT_RE = re.compile(r"\s*[+-]?\d+\s*\Z")
_REAL_RE = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*\Z")
_KEYWORDS = frozenset({"true", "false", "undefined", "error", "is", "isnt"})
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:[^"\\]|\\.)*"?)
  | (?P<qname>'(?:[^'\\]|\\.)*'?)
  | (?P<num>\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>=\?=|=!=|==|!=|<=|>=|&&|\|\||>>>|<<|>>|[-+*/%<>!~^&|?:.,;()\[\]{}=])
  | (?P<other>.)
""", re.X | re.S)


def quote(s: str) -> str:
    """A string literal in old ClassAd syntax, as HTCondor writes job ads: only '"' is escaped."""
    return '"' + s.replace('"', '\\"') + '"'


def _classad():
    from htc import classad

    return classad


def _syntax_ok(text: str) -> bool:
    """Whether ``text`` is one whole expression (the old-syntax ad reader skips junk).

    String literals are blanked first, so the strict expression parser judges only the
    syntax; old syntax lets a backslash escape nothing but a double quote.
    """
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != '"':
            out.append(c)
            i += 1
            continue
        j = i + 1
        while j < n and text[j] != '"':
            j += 2 if text[j] == "\\" and j + 2 < n and text[j + 1] == '"' else 1
        if j >= n:
            return False
        out.append('""')
        i = j + 1
    ca = _classad()
    try:
        ca.ExprTree("".join(out))
    except (ca.ClassAdParseError, ValueError, TypeError, RecursionError):
        return False
    return True


def _parse(text: str):
    """Parse ``text`` as one old-syntax expression (as condor_submit does); the ad or None.

    Old ClassAd syntax matters for strings: a backslash escapes only a double quote.
    """
    if "\n" in text or not text.strip() or not _syntax_ok(text):
        return None
    ca = _classad()
    try:
        ad = ca.parseOne("X = " + text, ca.ParserType.Old)
    except (ca.ClassAdParseError, ValueError, TypeError, RecursionError):  # too deep: refused, not a crash
        return None
    if ad is None or len(ad) != 1 or "X" not in ad:
        return None
    return ad


#: expressions that are their own canonical text: a string literal of plain characters, a
#: non-negative integer of up to 18 digits (a DAG's ``+DAGNodeName = "n17"``, one per node)
_SELF_CANONICAL = re.compile(r'(?:"[A-Za-z0-9_.:+/@, -]*"|0|[1-9][0-9]{0,17})\Z')


def canonical(text: str) -> str | None:
    """The canonical old-syntax text of an expression, or None if it does not parse."""
    if _SELF_CANONICAL.match(text):
        return text  # what parsing and printing it would give, without either
    return _canonical_parsed(text)


@functools.lru_cache(maxsize=4096)
def _canonical_parsed(text: str) -> str | None:
    ad = _parse(text)
    if ad is None:
        return None
    try:
        return ad.printOld()[4:].rstrip("\n")
    except RecursionError:  # an operator chain too long for the printer (1+1+...+1): a parse error
        return None


def check(attr: str, text: str) -> str:
    """Validate an expression for ``attr`` and return its canonical text.

    Raises:
        SubmitError: "Parse error in expression", as condor_submit reports it.
    """
    out = canonical(text)
    if out is None:
        raise SubmitError(f"Parse error in expression: {attr} = {text}")
    return out


def _eval(text: str):
    ad = _parse(text)
    if ad is None:
        return None
    try:
        return ad.eval("X")
    except Exception:  # evaluation of arbitrary user text must never crash submit
        return None


def eval_int(text: str) -> int | None:
    """Evaluate like HTCondor's ``string_is_long_param``: an int (reals truncate) or None."""
    if _INT_RE.match(text):
        return int(text)
    v = _eval(text)
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v and abs(v) < 2**63:
        return int(v)
    return None


def eval_real(text: str) -> float | None:
    """Evaluate like ``string_is_double_param``: a number as float, or None."""
    if _REAL_RE.match(text):
        return float(text)
    v = _eval(text)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return None


def eval_bool(text: str) -> bool | None:
    """Evaluate like ``string_is_boolean_param``: true/false/1/0 or an expression."""
    t = text.strip()
    low = t.lower()
    for word, value in (("true", True), ("1", True), ("false", False), ("0", False)):
        if low.startswith(word) and not low[len(word):].strip():
            return value
    v = _eval(text)
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return v != 0
    return None


def eval_string(text: str) -> str | None:
    """The string value of an expression, or None if it is not a string."""
    v = _eval(text)
    return v if isinstance(v, str) else None


def eval_to_text(text: str) -> str | None:
    """$EVAL(): a string result as itself, another value as ClassAd text, None if unparsable."""
    if _parse(text) is None:
        return None
    v = _eval(text)
    if isinstance(v, str):
        return v
    ca = _classad()
    ad = ca.ClassAd()
    try:
        ad["X"] = v
        return ad.printOld()[4:].rstrip("\n")
    except Exception:  # a value the ad cannot hold prints as Python would
        return str(v)


def literal_number(text: str) -> float | None:
    """The value of a bare numeric literal (what ``ExprTreeIsLiteralNumber`` accepts)."""
    t = text.strip()
    if _INT_RE.match(t) or _REAL_RE.match(t):
        return float(t)
    return None


def tokens(text: str) -> list[tuple[str, str]]:
    """Split expression text into (kind, text) tokens, whitespace dropped."""
    out = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind != "ws":
            out.append((kind, m.group()))
    return out


def references(text: str, internal: frozenset[str] = frozenset()) -> tuple[set[str], set[str]]:
    """Attribute references of an expression, split like HTCondor's GetExprReferences.

    Args:
        text: the expression.
        internal: lower-case names that count as the job's own when unqualified.
    Returns:
        ``(job_refs, machine_refs)`` as lower-case names: ``MY.x`` and unqualified names in
        ``internal`` are job references; ``TARGET.x`` and other unqualified names are
        machine references.
    """
    toks = tokens(text)
    job: set[str] = set()
    machine: set[str] = set()
    for i, (kind, t) in enumerate(toks):
        if kind != "ident":
            continue
        if i > 0 and toks[i - 1][1] == ".":
            continue
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if nxt == "(":
            continue
        low = t.lower()
        if low in _KEYWORDS:
            continue
        if nxt == "." and i + 2 < len(toks) and toks[i + 2][0] == "ident":
            attr = toks[i + 2][1].lower()
            if low == "target":
                machine.add(attr)
                continue
            if low == "my":
                job.add(attr)
                continue
        (job if low in internal else machine).add(low)
    return job, machine


_PREC = {"?": 0, "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "=?=": 6,
         "=!=": 6, "is": 6, "isnt": 6, "<": 7, "<=": 7, ">": 7, ">=": 7, "<<": 8, ">>": 8,
         ">>>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}


def wrap_for_op(text: str, op: str) -> str:
    """Parenthesise ``text`` if its top-level operator binds looser than ``op``.

    This is ``WrapExprTreeInParensForOp``: HTCondor wraps user expressions this way before
    joining them with ``||`` (retry policy) or ``&&``.
    """
    limit = _PREC[op]
    depth = 0
    prev = None
    for kind, t in tokens(text):
        if t in "([{" and kind == "op":
            depth += 1
        elif t in ")]}" and kind == "op":
            depth -= 1
        elif depth == 0:
            name = t.lower() if kind == "ident" else t
            binary = prev is not None and (prev[0] in ("ident", "num", "str") or prev[1] in ")]}")
            if name in _PREC and (binary or name == "?") and _PREC[name] < limit:
                return "(" + text + ")"
        prev = (kind, t)
    return text
