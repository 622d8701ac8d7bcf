"""Test helper: run a builtin call through classad2 (the HTCondor oracle) and through htc.

Only tests import this module.  ``call(name, args)`` returns ``(ours, theirs)`` in one
comparable form: AbsTime and datetime both become ``("abstime", epoch seconds)``, a
relative time becomes a float (as classad2 returns it), and nested ads become dicts.
"""

from __future__ import annotations

import datetime
import math
import os
import time

os.environ["TZ"] = "UTC"
time.tzset()

import classad2  # noqa: E402  (TZ must be set before the oracle reads it)

from htc.classad.builtins import FUNCTIONS  # noqa: E402
from htc.classad.builtins import parse_abstime_literal  # noqa: E402
from htc.classad.builtins_common import (  # noqa: E402
    abstime_to_string,
    is_classad,
    quote_string,
    unparse_name,
)
from htc.classad.values import AbsTime, Error, RelTime, Undefined  # noqa: E402

# Force classad2 into HTCondor's compat mode (see shared/reference/oracles.md).
classad2.parseOne("[a=1]")


def literal(v: object) -> str:
    """ClassAd literal text for a Python test value."""
    if v is Undefined:
        return "undefined"
    if v is Error:
        return "error"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        # classad2 cannot parse -9223372036854775808 directly (it is -(2**63)).
        return f"({v + 1} - 1)" if v == -(1 << 63) else str(v)
    if isinstance(v, float):
        # Spelled as HTCondor prints them, so lists holding them print identically.
        if math.isnan(v):
            return 'real("NaN")'
        if math.isinf(v):
            return 'real("INF")' if v > 0 else 'real("-INF")'
        text = repr(v)
        return text if any(c in text for c in ".eE") else text + ".0"
    if isinstance(v, str):
        return '"' + quote_string(v) + '"'
    if isinstance(v, list):
        return "{" + ", ".join(literal(e) for e in v) + "}"
    # Times are written as time literals when the text round-trips, so that classad2 prints
    # them inside lists the way it prints evaluated times.
    if isinstance(v, AbsTime):
        text = abstime_to_string(v)
        if parse_abstime_literal(text) == AbsTime(int(v.secs), int(v.tz_offset)):
            return f'absTime("{text}")'
        return f"absTime({int(v.secs)}, {int(v.tz_offset)})"
    if isinstance(v, RelTime):
        # Not relTime("..."): classad2 evaluates that literal to a *real*.
        return f"relTime({literal(float(v.secs))})"
    if is_classad(v):
        return "[" + "; ".join(f"{unparse_name(k)} = {v.lookup(k).unparse()}" for k in v) + "]"
    raise TypeError(v)


def canon(v: object) -> object:
    """A comparable form of either implementation's result."""
    if v is Undefined or v is classad2.Value.Undefined:
        return "UNDEFINED"
    if v is Error or v is classad2.Value.Error:
        return "ERROR"
    if isinstance(v, AbsTime):
        return ("abstime", int(v.secs))
    if isinstance(v, datetime.datetime):
        return ("abstime", int(v.timestamp()))
    if isinstance(v, RelTime):
        return ("real", v.secs)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        return ("real", "nan" if math.isnan(v) else v)
    if isinstance(v, str):
        return ("string", v)
    if isinstance(v, list):
        return ("list", [canon(e) for e in v])
    if isinstance(v, classad2.ClassAd) or is_classad(v):
        return ("ad", {k.lower(): canon(v.eval(k)) for k in v})
    if isinstance(v, classad2.ExprTree):
        return canon(v.eval())
    raise TypeError(v)


def oracle(name: str, args: list) -> object:
    text = f"{name}({', '.join(literal(a) for a in args)})"
    try:
        return canon(classad2.ExprTree(text).eval())
    except Exception as exc:  # the binding raises when evaluation "fails" in C++
        if "failed to evaluate" in str(exc):
            return "ERROR"
        raise


def ours(name: str, args: list) -> object:
    return canon(FUNCTIONS[name.lower()](list(args)))


def call(name: str, args: list) -> tuple[object, object]:
    return ours(name, args), oracle(name, args)
