"""Turning expressions and ads back into text: new syntax (compact and pretty), old, JSON.

Theory of operation
-------------------
One :class:`Unparser` walks a tree and writes text; three knobs give HTCondor's forms:

* ``compact`` new syntax (what classad2's ``repr`` shows, used by ``printOld`` for nested
  expressions): binary operators spaced (``a + b``), prefix operators preceded by one space
  (`` -x``, so ``a ||  !b``), lists ``{ 1,2 }``, ads ``[ a = 1; b = 2 ]``;
* ``pretty`` new syntax (classad2's ``str`` and the ``unparse()`` builtin): lists and ads
  broken over lines with HTCondor's PrettyPrint indentation (3 per list level, 4 per ad);
* ``old`` mode: reals as ``%.16G`` (``0.1``) instead of ``%.15E`` (``1.000000000000000E-01``),
  and strings with only ``"`` escaped, as old-syntax ads (``condor_q -long``) carry them.

Parentheses are kept as written (the parser records them), so text round-trips.  A chain
(``a || b || ...``, ``a.b.c``) is written with a loop along its left spine
(:func:`htc.classad.ast.spine`), so a chain of any length prints without deep recursion.
"""

from __future__ import annotations

import math
import re

from htc.classad.ast import (AbsRef, AdExpr, AttrRef, Binary, Call, Conditional, ListExpr, Literal,
                             Node, Paren, Select, Subscript, Unary, left_link, spine)
from htc.classad.lexer import KEYWORDS
from htc.classad.values import AbsTime, Error, RelTime, Undefined, is_classad

_INF = float("inf")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NAMED_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b",
                  "\f": "\\f", "\a": "\\a", "\v": "\\v"}


def format_real(r: float, old: bool = False) -> str:
    """A real literal as HTCondor writes it (``old`` selects the old-syntax ``%.16G`` form)."""
    if r != r:
        return 'real("NaN")'
    if math.isinf(r):
        return 'real("INF")' if r > 0 else 'real("-INF")'
    if r == 0.0:
        return "-0.0" if math.copysign(1.0, r) < 0 else "0.0"
    if not old:
        return "%.15E" % r
    s = "%.16G" % r
    if "." not in s and "E" not in s:
        s += ".0"
    return s


def quote_string(s: str, old: bool = False) -> str:
    """A string literal in double quotes with HTCondor's escapes (old syntax escapes ``"`` only)."""
    if old:
        return '"' + s.replace('"', '\\"') + '"'
    if s.isascii() and s.isprintable() and "\\" not in s and '"' not in s:
        return '"' + s + '"'
    return '"' + _escape(s, '"') + '"'


def _escape(s: str, quote: str) -> str:
    out = []
    for ch in s:
        if ch == quote:
            out.append("\\" + ch)
        elif ch in _NAMED_ESCAPES:
            out.append(_NAMED_ESCAPES[ch])
        elif " " <= ch < "\x7f":
            out.append(ch)
        else:
            out.extend("\\%03o" % b for b in ch.encode("utf-8", "surrogatepass"))
    return "".join(out)


def quote_name(name: str) -> str:
    """An attribute name, in single quotes when it is not a plain identifier."""
    if _IDENT.match(name) and name.lower() not in KEYWORDS and name.lower() != "parent":
        return name
    return "'" + _escape(name, "'") + "'"


def value_to_node(v) -> Node:
    """A syntax tree that evaluates to the internal value ``v``."""
    if isinstance(v, list):
        return ListExpr([value_to_node(x) for x in v])
    if is_classad(v):
        return AdExpr([(v._names[k], n) for k, n in v._exprs.items()])
    return Literal(v)


class Unparser:
    """Writes one tree as text; see the module docstring for the three forms."""

    def __init__(self, pretty: bool = False, old: bool = False, exact: bool = False):
        self.pretty = pretty
        self.old = old
        self.exact = exact
        self.indent = 0

    def literal(self, v) -> str:
        t = v.__class__
        if t is bool:
            return "true" if v else "false"
        if t is int:
            return str(v)
        if t is float:
            if self.exact and v == v and v not in (_INF, -_INF):
                return repr(v)
            return format_real(v, self.old)
        if t is str:
            return quote_string(v, self.old)
        if v is Undefined:
            return "undefined"
        if v is Error:
            return "error"
        if t is AbsTime or t is RelTime:
            from htc.classad.builtins_common import abstime_to_string, reltime_to_string
            if t is AbsTime:
                return f'absTime("{abstime_to_string(v)}")'
            return f'relTime("{reltime_to_string(v.secs)}")'
        if isinstance(v, list):
            return self.node(value_to_node(v))
        if is_classad(v):
            return self.node(value_to_node(v))
        raise TypeError(f"cannot unparse {v!r}")

    def node(self, n: Node) -> str:
        if left_link(n) is not None:
            return self.chain(n)
        t = n.__class__
        if t is Literal:
            return self.literal(n.value)
        if t is AttrRef:
            return quote_name(n.name)
        if t is AbsRef:
            return "." + quote_name(n.name)
        if t is Unary:
            return f" {n.op}{self.node(n.operand)}"
        if t is Paren:
            return f"({self.node(n.inner)})"
        if t is Conditional:
            return f"{self.node(n.cond)} ? {self.node(n.then)} : {self.node(n.other)}"
        if t is Call:
            return n.name + "(" + ",".join(self.node(a) for a in n.args) + ")"
        if t is ListExpr:
            return self.list(n)
        if t is AdExpr:
            return self.ad(n.pairs)
        raise TypeError(f"cannot unparse node {n!r}")

    def chain(self, n: Node) -> str:
        """A binary operator, selection, subscript or ``?:`` and the chain below it, in a loop."""
        first, links = spine(n)
        out = [self.node(first)]
        for link in links:
            t = link.__class__
            if t is Binary:
                out.append(f" {link.op} {self.node(link.right)}")
            elif t is Select:
                # HTCondor prints the selected name as it is (``a.parent``); we quote only
                # what would not read back (``a.'x y'``, which it prints ``a.x y``)
                name = link.name
                out.append("." + (name if _IDENT.match(name) and name.lower() not in KEYWORDS
                                  else quote_name(name)))
            elif t is Subscript:
                out.append(f"[{self.node(link.index)}]")
            else:
                out.append(f" ?: {self.node(link.other)}")
        return "".join(out)

    def list(self, n: ListExpr) -> str:
        if not self.pretty:
            return "{ " + ",".join(self.node(x) for x in n.items) + " }"
        self.indent += 3
        head = "\n" + " " * self.indent + "{"
        self.indent += 3
        pad = "\n" + " " * self.indent
        body = ",".join(pad + self.node(x) for x in n.items)
        self.indent -= 3
        tail = "\n" + " " * self.indent + "}"
        self.indent -= 3
        return head + body + tail

    def ad(self, pairs) -> str:
        if not self.pretty:
            return "[ " + "; ".join(f"{quote_name(k)} = {self.node(v)}" for k, v in pairs) + " ]"
        self.indent += 4
        head = "\n" + " " * self.indent + "["
        self.indent += 4
        pad = "\n" + " " * self.indent
        body = "; ".join(f"{pad}{quote_name(k)} = {self.node(v)}" for k, v in pairs)
        self.indent -= 4
        tail = "\n" + " " * self.indent + "]"
        self.indent -= 4
        return head + body + tail


def unparse(node: Node, pretty: bool = False, old: bool = False, exact: bool = False) -> str:
    """Text of an expression.

    Args:
        node: the syntax tree.
        pretty: multi-line lists and ads (classad2's ``str``); default compact.
        old: old-syntax literals (``%.16G`` reals, strings escaping only ``"``).
        exact: write reals with all their digits (HTCondor's own forms round to 15 or 16
            significant digits); the text still parses as new syntax.
    Returns:
        The text.
    """
    return Unparser(pretty, old, exact).node(node)


def print_new(pairs, pretty: bool = True, exact: bool = False) -> str:
    """A whole ad in new syntax from (name, node) pairs (pretty like classad2's ``str(ad)``)."""
    return Unparser(pretty, exact=exact).ad(pairs)


def print_old(pairs) -> str:
    """A whole ad in old syntax: one ``Name = expr`` line each (classad2's ``printOld``)."""
    u = Unparser(old=True)
    lines = [f"{quote_name(k)} = {u.node(v)}\n" for k, v in pairs]
    return "".join(lines) if lines else "\n"


# ---------------------------------------------------------------------------------------
# JSON

def _json_string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch < " ":
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(
                ch) or "\\u%04X" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _json_value(node: Node, indent: int) -> str:
    t = node.__class__
    if t is Literal:
        v = node.value
        vt = v.__class__
        if vt is bool:
            return "true" if v else "false"
        if vt is int:
            return str(v)
        if vt is float and math.isfinite(v):
            return format_real(v, old=True)
        if vt is str:
            return _json_string(v)
        if v is Undefined:
            return "null"
    elif t is ListExpr:
        pad = " " * (indent + 2)
        items = [pad + _json_value(x, indent + 2) for x in node.items]
        return "[\n" + "".join(i + ",\n" for i in items[:-1]) + (
            items[-1] + "\n" if items else "") + " " * indent + "]"
    elif t is AdExpr:
        return json_object(node.pairs, indent)
    return '"\\/Expr(' + _json_string(unparse(node))[1:-1] + ')\\/"'


def json_object(pairs, indent: int = 0) -> str:
    """An ad as a JSON object (classad2's ``printJson``): literals as JSON, others ``/Expr(..)/``."""
    pad = " " * (indent + 2)
    items = [f"{pad}{_json_string(k)}: {_json_value(v, indent + 2)}" for k, v in pairs]
    return "{\n" + ",\n".join(items) + ("\n" if items else "") + " " * indent + "}"
