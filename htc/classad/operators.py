"""Semantics of the ClassAd operators on already evaluated values.

Theory of operation
-------------------
Every function here takes values (see :mod:`htc.classad.values`) and returns a value; none
raises for a type problem, that is what ERROR is for.  The compiler calls them from its
closures; they start with the common int/int case so that matchmaking stays fast.

Rules checked against HTCondor 25.14.1 (compat mode):

* Strict operators: ERROR wins over UNDEFINED, which wins over a type mismatch
  (``"s" / undefined`` is UNDEFINED, ``error / undefined`` is ERROR).
* Booleans act as 0/1 in binary arithmetic and comparison (``true + 7`` is 8, ``2 != true``),
  but unary ``-``/``+``/``~`` and the bitwise operators reject them.
* Integers are 64-bit and wrap; ``/`` and ``%`` truncate toward zero as C does; division by
  zero is ERROR; ``INT64_MIN / -1`` is ``INT64_MAX``.
* Real results equal to +infinity are ERROR (``1e308 * 10``), while -infinity and NaN are kept:
  HTCondor's overflow check only looks one way.  ``%`` on reals is ERROR.
* Shift counts are taken modulo 64, like the x86 instruction HTCondor compiles to (which
  makes ``-1 >>> 0`` zero).
* String comparison folds ASCII case only (``strcasecmp`` on UTF-8 bytes).
* ``is``/``isnt`` compare type and value exactly; lists and ads cannot be compared (ERROR).
"""

from __future__ import annotations

from htc.classad.values import (INT64_MAX, INT64_MIN, AbsTime, Error, RelTime, Undefined,
                                is_classad, wrap_int)

_INF = float("inf")
_MASK64 = (1 << 64) - 1


def fold(s: str) -> str:
    """Lower-case ASCII letters only, as C ``tolower`` does in the C locale."""
    if s.isascii():
        return s.lower()
    return s.encode("utf-8", "surrogatepass").lower().decode("utf-8", "surrogatepass")


def _num(v):
    """A bool/int/float as int/float, or None."""
    t = type(v)
    if t is int or t is float:
        return v
    if t is bool:
        return int(v)
    return None


def _real_result(r: float):
    return Error if r == _INF else r


def _int_div(a: int, b: int):
    if b == 0:
        return Error
    if a == INT64_MIN and b == -1:
        return INT64_MAX
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _int_mod(a: int, b: int):
    if b == 0:
        return Error
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _time_arith(op: str, a, b):
    ta, tb = type(a), type(b)
    if ta is AbsTime:
        if op == "+" and tb is RelTime:
            return AbsTime(a.secs + b.secs, a.tz_offset)
        if op == "-" and tb is RelTime:
            return AbsTime(a.secs - b.secs, a.tz_offset)
        if op == "-" and tb is AbsTime:
            return RelTime(a.secs - b.secs)
        return Error
    if ta is RelTime:
        if tb is RelTime and op in "+-":
            return RelTime(a.secs + b.secs if op == "+" else a.secs - b.secs)
        if tb is AbsTime and op == "+":
            return AbsTime(a.secs + b.secs, b.tz_offset)
        n = _num(b)
        if n is not None and op in "*/":
            if op == "*":
                return RelTime(a.secs * n)
            return Error if n == 0 else RelTime(a.secs / n)
        return Error
    if tb is RelTime and op == "*":
        n = _num(a)
        if n is not None:
            return RelTime(n * b.secs)
    return Error


def arith(op: str, a, b):
    """Apply ``+ - * / %`` to two values."""
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        if op == "+":
            r = a + b
        elif op == "-":
            r = a - b
        elif op == "*":
            r = a * b
        elif op == "/":
            return _int_div(a, b)
        else:
            return _int_mod(a, b)
        return r if INT64_MIN <= r <= INT64_MAX else wrap_int(r)
    if a is Error or b is Error:
        return Error
    if a is Undefined or b is Undefined:
        return Undefined
    x, y = _num(a), _num(b)
    if x is None or y is None:
        if ta in (AbsTime, RelTime) or tb in (AbsTime, RelTime):
            return _time_arith(op, a, b)
        return Error
    if type(x) is int and type(y) is int:
        return arith(op, x, y)
    x, y = float(x), float(y)
    if op == "+":
        return _real_result(x + y)
    if op == "-":
        return _real_result(x - y)
    if op == "*":
        return _real_result(x * y)
    if op == "/":
        if y == 0.0:
            if x == 0.0 or x != x:
                return float("nan")
            return Error if x > 0 else -_INF
        return _real_result(x / y)
    return Error


def bitwise(op: str, a, b):
    """Apply ``& | ^ << >> >>>`` to two values (integers only)."""
    if type(a) is int and type(b) is int:
        if op == "&":
            return a & b
        if op == "|":
            return a | b
        if op == "^":
            return a ^ b
        s = b & 63
        if op == "<<":
            return wrap_int(a << s)
        if op == ">>":
            return a >> s
        if a >= 0:
            return a >> s
        # HTCondor clears the sign-extended bits with ``~(~0 << (64 - s))``; on x86 that shift
        # count is taken mod 64 too, so a negative value shifted by 0 gives 0.
        return (a >> s) & ~wrap_int(-1 << ((64 - s) & 63))
    if a is Error or b is Error:
        return Error
    if a is Undefined or b is Undefined:
        return Undefined
    return Error


def _cmp(op: str, x, y) -> bool:
    if op == "<":
        return x < y
    if op == "<=":
        return x <= y
    if op == ">":
        return x > y
    if op == ">=":
        return x >= y
    if op == "==":
        return x == y
    return x != y


def compare(op: str, a, b):
    """Apply ``< <= > >= == !=`` to two values."""
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        return _cmp(op, a, b)
    if ta is str and tb is str:
        return _cmp(op, fold(a), fold(b))
    if a is Error or b is Error:
        return Error
    if a is Undefined or b is Undefined:
        return Undefined
    x, y = _num(a), _num(b)
    if x is not None and y is not None:
        if type(x) is int and type(y) is int:
            return _cmp(op, x, y)
        return _cmp(op, float(x), float(y))
    if ta is tb and (ta is AbsTime or ta is RelTime):
        return _cmp(op, a.secs, b.secs)
    return Error


def same(a, b) -> bool:
    """``=?=``: identical type and value (strings case-sensitive)."""
    if isinstance(a, list) or is_classad(a):
        # Two lists, or two ads, cannot be compared (error); a list and an ad differ in type.
        if isinstance(a, list) and isinstance(b, list):
            return Error
        if is_classad(a) and is_classad(b):
            # a copy a subscript gave (SCLASSAD_VALUE in HTCondor) and an ad are different types
            same_kind = getattr(a, "_detached", False) == getattr(b, "_detached", False)
            return Error if same_kind else False
        return False
    if type(a) is not type(b):
        return False
    return a == b


def identical(a, b):
    """``is`` / ``=?=`` on two values."""
    return same(a, b)


def not_identical(a, b):
    """``isnt`` / ``=!=`` on two values."""
    r = identical(a, b)
    return r if r is Error else not r


def truth(v):
    """Convert a value for ``&&``/``||``/``!``/``?:``: True, False, Undefined or Error."""
    t = type(v)
    if t is bool:
        return v
    if t is int or t is float:
        return v != 0
    if v is Undefined:
        return Undefined
    return Error


def unary(op: str, v):
    """Apply a prefix operator ``- + ~ !`` to a value."""
    t = type(v)
    if op == "!":
        r = truth(v)
        return r if r is Undefined or r is Error else not r
    if v is Undefined or v is Error:
        return v
    if op == "-":
        if t is int:
            return wrap_int(-v)
        if t is float:
            return -v
        if t is RelTime:
            return RelTime(-v.secs)
        return Error
    if op == "+":
        return v if t is int or t is float or t is RelTime else Error
    if t is int:  # ~
        return ~v
    return Error


def is_true_for_match(v) -> bool:
    """HTCondor's test of a Requirements value: true, or a non-zero number."""
    t = type(v)
    if t is bool:
        return v
    if t is int or t is float:
        return v != 0
    return False


__all__ = ["arith", "bitwise", "compare", "identical", "not_identical", "truth", "unary",
           "fold", "is_true_for_match", "RelTime", "AbsTime", "INT64_MIN"]
