"""A small evaluator for the literal ClassAd expressions the configuration language evaluates.

Theory of operation
-------------------
HTCondor's configuration code evaluates ClassAd expressions *without an ad* in a few places:

* typed reads: ``param_integer`` turns ``60 * 2`` into 120, ``3.7`` into 3 and ``true`` into 1;
  ``param_boolean`` turns ``1 == 1`` into true; ``param_double`` likewise;
* the macro functions ``$INT()``, ``$REAL()``, ``$STRING()``, ``$CHOICE()`` (its index) and
  ``$EVAL()``, whose result is the *unparsed* value (``2.500000000000000E+00``, ``{ 1,2 }``).

With no ad in scope every attribute reference is ``undefined``, so a tiny evaluator is enough:
literals, arithmetic, comparison, logic, ``?:``, lists and a handful of pure functions. The
semantics follow HTCondor's "old ClassAd compatibility" mode as the wheel shows it: booleans
take part in arithmetic as 0/1 (``true + 1`` is 2), integer division truncates toward zero,
strings compare case-insensitively with ``==`` and case-sensitively with ``=?=``, and a string
literal's only escape is ``\\"``.

The full ClassAd engine lives in :mod:`htc.classad`; this module exists so that reading
configuration never depends on it (configuration is read before anything else starts).
"""

from __future__ import annotations

import math
import re

__all__ = ["EvalSyntaxError", "UNDEFINED", "ERROR", "evaluate", "unparse",
           "to_int", "to_float", "to_bool", "eval_to_text"]

_INT64 = 1 << 64


class EvalSyntaxError(ValueError):
    """The text is not a ClassAd expression this evaluator understands."""


class _Special:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


UNDEFINED = _Special("undefined")
ERROR = _Special("error")

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<real>(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)
     |(?P<int>\d+)
     |(?P<str>"(?:\\"|[^"])*")
     |(?P<name>[A-Za-z_][A-Za-z_0-9]*)
     |(?P<op>=\?=|=!=|==|!=|<=|>=|&&|\|\||\?:|[-+*/%<>!?:(){},.])
    )""", re.VERBOSE)


def _tokenize(text: str) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise EvalSyntaxError(f"unexpected {text[pos:].strip()[:20]!r}")
        pos = m.end()
        kind = m.lastgroup
        tok = m.group(kind)
        if kind == "int":
            out.append(("num", int(tok)))
        elif kind == "real":
            out.append(("num", float(tok)))
        elif kind == "str":
            out.append(("str", tok[1:-1].replace('\\"', '"')))
        elif kind == "name":
            out.append(("name", tok))
        else:
            out.append(("op", tok))
    out.append(("end", None))
    return out


# binary operators: token -> (left binding power, function name)
_BINARY = {
    "||": 10, "&&": 20,
    "==": 40, "!=": 40, "=?=": 40, "=!=": 40, "is": 40, "isnt": 40,
    "<": 50, "<=": 50, ">": 50, ">=": 50,
    "+": 60, "-": 60, "*": 70, "/": 70, "%": 70,
}


#: parentheses, unary operators, ``?:`` and function calls nested deeper than this are refused
#: (chains of binary operators, ``1+1+...+1``, are not nesting: they parse and evaluate in loops)
MAX_NESTING = 100


class _Parser:
    """Pratt parser producing nested tuples: ('lit', v) | ('attr', n) | (op, a, b) | ('call', n, args).

    A chain of left-associative operators becomes a left-deep tree built in a loop; everything
    that recurses (a parenthesis, a unary operator, the right side of ``?:``, an argument) counts
    towards :data:`MAX_NESTING`, so no text can exhaust the Python stack.
    """

    def __init__(self, text: str):
        self.toks = _tokenize(text)
        self.i = 0
        self.depth = 0

    def _nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise EvalSyntaxError(f"the expression nests more than {MAX_NESTING} levels deep")

    def peek(self) -> tuple[str, object]:
        return self.toks[self.i]

    def take(self) -> tuple[str, object]:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, op: str) -> None:
        kind, val = self.take()
        if kind != "op" or val != op:
            raise EvalSyntaxError(f"expected {op!r}")

    def parse(self):
        node = self.expr(0)
        if self.peek()[0] != "end":
            raise EvalSyntaxError(f"unexpected {self.peek()[1]!r}")
        return node

    def _binop(self):
        kind, val = self.peek()
        if kind == "op" and val in _BINARY:
            return val
        if kind == "name" and str(val).lower() in ("is", "isnt"):
            return str(val).lower()
        return None

    def expr(self, rbp: int):
        self._nest()
        try:
            return self._expr(rbp)
        finally:
            self.depth -= 1

    def _expr(self, rbp: int):
        left = self.unary()
        while True:
            kind, val = self.peek()
            if kind == "op" and val == "?" and rbp < 5:
                self.take()
                yes = self.expr(0)
                self.expect(":")
                left = ("?", left, yes, self.expr(4))
                continue
            if kind == "op" and val == "?:" and rbp < 5:
                self.take()
                left = ("?:", left, self.expr(4))
                continue
            op = self._binop()
            if op is None or _BINARY[op] <= rbp:
                return left
            self.take()
            left = (op, left, self.expr(_BINARY[op]))

    def unary(self):
        kind, val = self.peek()
        ops = []
        while kind == "op" and val in ("-", "+", "!"):  # a run of unary operators, in a loop
            self.take()
            ops.append("u" + str(val))
            if len(ops) > MAX_NESTING:
                raise EvalSyntaxError(f"more than {MAX_NESTING} unary operators in a row")
            kind, val = self.peek()
        node = self.primary()
        for op in reversed(ops):
            node = (op, node)
        return node

    def primary(self):
        kind, val = self.take()
        if kind in ("num", "str"):
            return ("lit", val)
        if kind == "op" and val == "(":
            node = self.expr(0)
            self.expect(")")
            return node
        if kind == "op" and val == "{":
            items = []
            if self.peek() != ("op", "}"):
                items.append(self.expr(0))
                while self.peek() == ("op", ","):
                    self.take()
                    items.append(self.expr(0))
            self.expect("}")
            return ("list", items)
        if kind == "name":
            low = str(val).lower()
            if low in ("true", "false"):
                return ("lit", low == "true")
            if low == "undefined":
                return ("lit", UNDEFINED)
            if low == "error":
                return ("lit", ERROR)
            if self.peek() == ("op", "("):
                self.take()
                args = []
                if self.peek() != ("op", ")"):
                    args.append(self.expr(0))
                    while self.peek() == ("op", ","):
                        self.take()
                        args.append(self.expr(0))
                self.expect(")")
                return ("call", low, args)
            name = str(val)
            while self.peek() == ("op", "."):  # MY.Attr, TARGET.Attr: no ad, so undefined
                self.take()
                k, v = self.take()
                if k != "name":
                    raise EvalSyntaxError("expected an attribute name after '.'")
                name += "." + str(v)
            return ("attr", name)
        raise EvalSyntaxError(f"unexpected {val!r}")


def _wrap(n: int) -> int:
    n %= _INT64
    return n - _INT64 if n >= (1 << 63) else n


def _num(v):
    """A number for arithmetic (booleans count as 0/1), or None."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return v
    return None


def _truth(v):
    """True/False for logic, or the special value itself."""
    if v is UNDEFINED or v is ERROR:
        return v
    n = _num(v)
    if n is None:
        return ERROR
    return n != 0


def _arith(op: str, a, b):
    if a is ERROR or b is ERROR:
        return ERROR
    if a is UNDEFINED or b is UNDEFINED:
        return UNDEFINED
    x, y = _num(a), _num(b)
    if x is None or y is None:
        return ERROR
    if isinstance(x, int) and isinstance(y, int):
        if op == "+":
            return _wrap(x + y)
        if op == "-":
            return _wrap(x - y)
        if op == "*":
            return _wrap(x * y)
        if y == 0:
            return ERROR
        q = abs(x) // abs(y)
        q = q if (x >= 0) == (y >= 0) else -q
        return _wrap(q) if op == "/" else _wrap(x - y * q)
    x, y = float(x), float(y)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if y == 0:
        return ERROR
    return x / y if op == "/" else math.fmod(x, y)


def _compare(op: str, a, b):
    if op in ("=?=", "is", "=!=", "isnt"):
        if isinstance(a, _Special) or isinstance(b, _Special):
            same = a is b
        else:
            same = type(a) is type(b) and a == b
        return same if op in ("=?=", "is") else not same
    if a is ERROR or b is ERROR:
        return ERROR
    if a is UNDEFINED or b is UNDEFINED:
        return UNDEFINED
    if isinstance(a, str) and isinstance(b, str):
        x, y = a.lower(), b.lower()
    else:
        x, y = _num(a), _num(b)
        if x is None or y is None:
            return ERROR
    return {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def _string_of(v) -> str:
    return v if isinstance(v, str) else unparse(v)


def _call(name: str, args: list):
    """Pure builtins; ``ifThenElse`` is lazy and handled by the caller."""
    def need(n):
        if len(args) != n:
            raise EvalSyntaxError(f"{name}() takes {n} argument(s)")
    if name in ("isundefined", "iserror", "isstring", "isinteger", "isreal", "isboolean", "islist"):
        need(1)
        v = args[0]
        return {"isundefined": v is UNDEFINED, "iserror": v is ERROR,
                "isstring": isinstance(v, str),
                "isinteger": isinstance(v, int) and not isinstance(v, bool),
                "isreal": isinstance(v, float), "isboolean": isinstance(v, bool),
                "islist": isinstance(v, list)}[name]
    if any(a is ERROR for a in args):
        return ERROR
    if name == "strcat":
        if any(a is UNDEFINED for a in args):
            return UNDEFINED
        return "".join(_string_of(a) for a in args)
    if name in ("toupper", "tolower", "size", "int", "real", "string", "floor", "ceiling", "round"):
        need(1)
        v = args[0]
        if v is UNDEFINED:
            return UNDEFINED
        if name == "string":
            return _string_of(v)
        if name in ("toupper", "tolower"):
            return _string_of(v).upper() if name == "toupper" else _string_of(v).lower()
        if name == "size":
            return len(v) if isinstance(v, (str, list)) else ERROR
        if isinstance(v, str):
            n = to_float(v) if name == "real" else to_int(v)
            return ERROR if n is None else n
        n = _num(v)
        if n is None:
            return ERROR
        if name == "int":
            return int(n)
        if name == "real":
            return float(n)
        return int({"floor": math.floor, "ceiling": math.ceil, "round": round}[name](n))
    if name in ("min", "max"):
        items = args[0] if len(args) == 1 and isinstance(args[0], list) else args
        nums = [_num(a) for a in items]
        if not nums or any(n is None for n in nums):
            return ERROR
        return (min if name == "min" else max)(nums)
    raise EvalSyntaxError(f"unknown function {name}()")


#: node kinds whose first operand may be a long left-deep chain (``1+1+...``, ``a ?: b ?: c``)
_CHAINED = frozenset(_BINARY) | {"&&", "||", "?", "?:"}


def _eval(node):
    """The value of a parsed expression.

    The left spine of a chain is walked in a loop and folded from its innermost node outwards,
    so a 10,000-term sum costs no Python stack; only the nesting the parser bounds recurses.
    """
    if node[0] not in _CHAINED:
        return _eval_one(node)
    spine = []
    while node[0] in _CHAINED:
        spine.append(node)
        node = node[1]
    value = _eval_one(node)
    for outer in reversed(spine):
        value = _apply(outer, value)
    return value


def _apply(node, a):
    """Finish ``node`` whose first operand has the value ``a``."""
    kind = node[0]
    if kind == "?":
        cond = _truth(a)
        if cond is UNDEFINED or cond is ERROR:
            return cond
        return _eval(node[2] if cond else node[3])
    if kind == "?:":
        return _eval(node[2]) if a is UNDEFINED else a
    if kind in ("&&", "||"):
        a = _truth(a)
        if a is ERROR:
            return ERROR
        if a is (kind == "||"):  # short circuit: false && x, true || x
            return a
        b = _truth(_eval(node[2]))
        if b is ERROR:
            return ERROR
        if a is UNDEFINED:
            return b if b is (kind == "||") else UNDEFINED
        return b
    if kind in ("+", "-", "*", "/", "%"):
        return _arith(kind, a, _eval(node[2]))
    return _compare(kind, a, _eval(node[2]))


def _eval_one(node):
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "attr":
        return UNDEFINED
    if kind == "list":
        return [_eval(n) for n in node[1]]
    if kind == "call":
        if node[1] == "ifthenelse":
            if len(node[2]) != 3:
                raise EvalSyntaxError("ifThenElse() takes 3 arguments")
            cond = _truth(_eval(node[2][0]))
            if cond is UNDEFINED or cond is ERROR:
                return cond
            return _eval(node[2][1] if cond else node[2][2])
        return _call(node[1], [_eval(a) for a in node[2]])
    if kind in ("u-", "u+"):
        v = _eval(node[1])
        return _arith("-", 0, v) if kind == "u-" else _arith("+", 0, v)
    if kind == "u!":
        t = _truth(_eval(node[1]))
        return t if isinstance(t, _Special) else not t
    raise AssertionError(f"unknown node {kind!r}")  # chained kinds are folded by _eval


def evaluate(text: str):
    """Evaluate a ClassAd expression with no ad in scope.

    Args:
        text: the expression source, e.g. ``"60 * 2"`` or ``"ifThenElse(1 > 0, 4, 5)"``.

    Returns:
        ``int``, ``float``, ``bool``, ``str``, ``list``, :data:`UNDEFINED` or :data:`ERROR`.

    Raises:
        EvalSyntaxError: the text does not parse; callers fall back to treating it as text.
    """
    return _eval(_Parser(text).parse())


def unparse(value) -> str:
    """Render a value the way HTCondor's ClassAd unparser does (``2.500000000000000E+00``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "real(\"NaN\")"
        if math.isinf(value):
            return "real(\"INF\")" if value > 0 else "real(\"-INF\")"
        return "%.15E" % value
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "{ " + ",".join(unparse(v) for v in value) + " }"
    return repr(value)


_PLAIN_INT = re.compile(r"\s*[-+]?\d+\s*\Z")


def to_int(text: str) -> int | None:
    """HTCondor's ``string_is_long_param``: an integer, or an expression that evaluates to a number.

    Returns ``None`` when the text is neither (the caller then uses the knob's default).
    """
    if _PLAIN_INT.match(text):
        return int(text)
    try:
        v = evaluate(text)
    except EvalSyntaxError:
        return None
    n = _num(v)
    if n is None:
        return None
    return int(n) if not isinstance(n, float) or math.isfinite(n) else None


def to_float(text: str) -> float | None:
    """HTCondor's ``string_is_double_param``: a number or an expression evaluating to one."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        v = evaluate(text)
    except EvalSyntaxError:
        return None
    n = _num(v)
    return None if n is None else float(n)


def to_bool(text: str) -> tuple[bool | None, bool]:
    """HTCondor's ``param_boolean`` parse.

    Returns:
        ``(value, clean)``: ``value`` is None when the text is no boolean at all; ``clean`` is
        False when HTCondor would complain (it still uses a ``true``/``false`` prefix, so
        ``truex`` reads as true with a warning).
    """
    s = text.strip()
    low = s.lower()
    if low in ("true", "false"):
        return low == "true", True
    try:
        v = evaluate(s)
    except EvalSyntaxError:
        v = ERROR
    if isinstance(v, bool):
        return v, True
    n = _num(v)
    if n is not None:
        return n != 0, True
    if low.startswith("true"):
        return True, False
    if low.startswith("false"):
        return False, False
    return None, False


def eval_to_text(text: str) -> str | None:
    """``$EVAL()`` semantics: the value as text (strings unquoted), or None if it does not parse."""
    try:
        v = evaluate(text)
    except EvalSyntaxError:
        return None
    return v if isinstance(v, str) else unparse(v)
