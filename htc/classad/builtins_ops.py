"""ClassAd operators applied to two evaluated values (classad operators.cpp).

The list builtins apply operators element by element (``member`` uses ``==``, ``sum``
uses ``+``, ``anyCompare`` whichever it is given), so they need the operators' exact
rules: comparisons are strict on ERROR and UNDEFINED, strings compare without regard to
case, booleans promote to integers and integers to reals, ``is`` / ``isnt`` compare type
and value without promotion, and real addition reports +infinity (only) as ERROR.
"""

from __future__ import annotations

import math

from htc.classad.builtins_common import to_bytes
from htc.classad.values import AbsTime, Error, RelTime, Undefined, is_classad, type_name, wrap_int

COMPARISON_OPS = ("<", "<=", "!=", "==", ">=", ">", "is", "isnt")

_ORDER = {
    "<": lambda c: c < 0, "<=": lambda c: c <= 0, "==": lambda c: c == 0,
    "!=": lambda c: c != 0, ">=": lambda c: c >= 0, ">": lambda c: c > 0,
}


def promote(a: object, b: object) -> tuple[object, object]:
    """``coerceToNumber`` for two numbers: booleans become integers, then int meets real."""
    if isinstance(a, bool):
        a = int(a)
    if isinstance(b, bool):
        b = int(b)
    if isinstance(a, float) and not isinstance(b, float):
        b = float(b)
    elif isinstance(b, float) and not isinstance(a, float):
        a = float(a)
    return a, b


def _cmp_numbers(op: str, a: float, b: float) -> bool:
    # Direct comparisons, not a three-way result, so that NaN compares false everywhere
    # except '!='.
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == ">=":
        return a >= b
    return a > b


def _three_way(a, b) -> int:
    return (a > b) - (a < b)


def _same(a: object, b: object) -> object:
    """``=?=`` (``is``): true iff same type and same value; lists and ads are ERROR."""
    if type_name(a) != type_name(b):
        return False
    if a is Undefined or a is Error:
        return True
    if isinstance(a, (list,)) or is_classad(a):
        return Error
    if isinstance(a, str):
        return a == b
    if isinstance(a, AbsTime):
        return int(a.secs) == int(b.secs) and a.tz_offset == b.tz_offset
    if isinstance(a, RelTime):
        return a.secs == b.secs
    return a == b


def compare(op: str, a: object, b: object) -> object:
    """Apply a comparison operator (``<`` ... ``isnt``) with ClassAd semantics."""
    if op in ("is", "isnt"):
        same = _same(a, b)
        if same is Error:
            return Error
        return same if op == "is" else not same
    if a is Error or b is Error:
        return Error
    if a is Undefined or b is Undefined:
        return Undefined
    if is_classad(a) or is_classad(b) or isinstance(a, list) or isinstance(b, list):
        return Error
    if isinstance(a, str) or isinstance(b, str):
        if not (isinstance(a, str) and isinstance(b, str)):
            return Error
        return _ORDER[op](_three_way(to_bytes(a).lower(), to_bytes(b).lower()))
    if isinstance(a, AbsTime) or isinstance(b, AbsTime):
        if not (isinstance(a, AbsTime) and isinstance(b, AbsTime)):
            return Error
        return _ORDER[op](_three_way(int(a.secs), int(b.secs)))
    if isinstance(a, RelTime) or isinstance(b, RelTime):
        if not (isinstance(a, RelTime) and isinstance(b, RelTime)):
            return Error
        return _cmp_numbers(op, a.secs, b.secs)
    a, b = promote(a, b)
    return _cmp_numbers(op, a, b)



def add(a: object, b: object) -> object:
    """``a + b`` for numbers, as ``sum`` applies it (strict on ERROR / UNDEFINED)."""
    if a is Error or b is Error:
        return Error
    if a is Undefined or b is Undefined:
        return Undefined
    a, b = promote(a, b)
    if isinstance(a, float):
        total = a + b
        # doRealArithmetic flags only +HUGE_VAL as an error (a C quirk kept on purpose).
        return Error if total == math.inf else total
    return wrap_int(a + b)


def divide(a: object, b: float) -> object:
    """``a / b`` with a real divisor, as ``avg`` applies it."""
    if a is Error:
        return Error
    if a is Undefined:
        return Undefined
    a, b = promote(a, b)
    try:
        quotient = a / b
    except ZeroDivisionError:
        quotient = math.copysign(math.inf, a) if a else math.nan
    return Error if quotient == math.inf else quotient
