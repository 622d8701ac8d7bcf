"""Conversion and arithmetic builtins (classad fnCall.cpp convInt ... doMath2, random).

Casts follow x86-64 C: a real that does not fit in 64 bits (or NaN) becomes INT64_MIN, so
``int(1e20)`` and ``round(real("nan"))`` are -9223372036854775808 as in HTCondor.
"""

from __future__ import annotations

import math
import random as _random

from htc.classad.builtins_common import (
    c_div,
    c_int64,
    is_int,
    reltime_as_time_t,
    to_int,
    to_real,
    to_string,
    wrap_int32,
)
from htc.classad.values import Error, RelTime, Undefined, wrap_int


def _unary(convert):
    def fn(args: list) -> object:
        if len(args) != 1:
            return Error
        return convert(args[0])
    return fn


fn_int = _unary(to_int)
fn_real = _unary(to_real)
fn_string = _unary(to_string)


def _to_bool(v: object) -> object:
    if v is Undefined:
        return Undefined
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v != 0
    if isinstance(v, float):
        return v != 0.0
    if isinstance(v, str):
        lowered = v.lower()
        if lowered == "false":
            return False
        if lowered == "true":
            return True
        return Undefined
    if isinstance(v, RelTime):
        return reltime_as_time_t(v) != 0
    # ERROR, lists, ClassAds and absolute times have no truth value.
    return Error


fn_bool = _unary(_to_bool)


def _rounding(op):
    def convert(v: object) -> object:
        if is_int(v):
            return v
        r = to_real(v)
        if not isinstance(r, float):
            return Error
        if math.isnan(r) or math.isinf(r):
            return c_int64(r)
        return c_int64(float(op(r)))
    return _unary(convert)


fn_floor = _rounding(math.floor)
fn_ceiling = _rounding(math.ceil)
# rint() rounds half to even under the default rounding mode, like Python's round().
fn_round = _rounding(round)


def c_pow(x: float, y: float) -> float:
    """C ``pow``: domain errors give NaN and overflow gives infinity instead of raising."""
    try:
        return math.pow(x, y)
    except ZeroDivisionError:
        odd = y == math.floor(y) and math.fmod(y, 2.0) != 0.0
        return -math.inf if odd and math.copysign(1.0, x) < 0 else math.inf
    except ValueError:
        if x == 0.0 and y < 0:
            odd = y == math.floor(y) and math.fmod(y, 2.0) != 0.0
            return -math.inf if odd and math.copysign(1.0, x) < 0 else math.inf
        return math.nan
    except OverflowError:
        odd = y == math.floor(y) and math.fmod(y, 2.0) != 0.0
        return -math.inf if x < 0 and odd else math.inf


def fn_pow(args: list) -> object:
    """``pow(base, exponent)``: an integer for integer arguments with exponent >= 0."""
    if len(args) != 2:
        return Error
    base, exponent = args
    if is_int(base) and is_int(exponent) and exponent >= 0:
        r = c_pow(float(base), float(exponent))
        # HTCondor adds 0.5 and truncates, which makes pow(-2, 3) -7; the conformance
        # corpus (and arithmetic) want -8, so negative results round away from zero too.
        return c_int64(r + 0.5 if r >= 0 else r - 0.5)
    rb, re_ = to_real(base), to_real(exponent)
    if not isinstance(rb, float) or not isinstance(re_, float):
        return Error
    return c_pow(rb, re_)


def fn_quantize(args: list) -> object:
    """``quantize(x, step)``: round ``x`` up to a multiple of ``step``.

    With a list of steps, the first element ``>= x`` is returned as is; when ``x`` is
    larger than all of them it is rounded up to a multiple of the last one.
    """
    if len(args) != 2:
        return Error
    value, step = args
    rval = to_real(value)
    if not isinstance(rval, float):
        return Error
    if isinstance(step, list):
        base: object = 0.0
        rbase = 0.0
        for element in step:
            converted = to_real(element)
            if not isinstance(converted, float):
                return Error
            base, rbase = element, converted
            if rbase >= rval:
                return element
        step = base
    else:
        converted = to_real(step)
        if not isinstance(converted, float):
            return Error
        rbase = converted
    if is_int(step):
        if step == 0:
            return value
        if is_int(value):
            return wrap_int(c_div(wrap_int(value + step - 1), step) * step)
        return c_ceil(rval / step) * step
    if -1e-8 <= rbase <= 1e-8:
        return value
    return c_ceil(rval / rbase) * rbase


def c_ceil(x: float) -> float:
    """C ``ceil``: infinities and NaN pass through instead of raising."""
    return float(math.ceil(x)) if math.isfinite(x) else x


_RANDOM = _random.Random()
_RAND_MAX = 2147483647


def fn_random(args: list) -> object:
    """``random([max])``: an integer in ``[0, max)`` or a real in ``[0, max]``."""
    if len(args) > 1:
        return Error
    limit: object = 1.0 if not args else args[0]
    if is_int(limit):
        # The C++ code reads the bound into an ``int``.
        bound = wrap_int32(limit)
        if bound <= 0:
            return Error
        return _RANDOM.randint(0, _RAND_MAX) % bound
    if isinstance(limit, float):
        if limit <= 0:  # NaN passes this test in C too, and yields NaN below
            return Error
        return limit * (_RANDOM.randint(0, _RAND_MAX) / _RAND_MAX)
    return Error


def fn_debug(args: list) -> object:
    """``debug(x)``: returns ``x`` (HTCondor also logs the evaluation)."""
    if len(args) != 1:
        return Error
    return args[0]


FUNCTIONS = {
    "int": fn_int,
    "real": fn_real,
    "string": fn_string,
    "bool": fn_bool,
    "floor": fn_floor,
    "ceil": fn_ceiling,
    "ceiling": fn_ceiling,
    "round": fn_round,
    "pow": fn_pow,
    "quantize": fn_quantize,
    "random": fn_random,
    "debug": fn_debug,
}
