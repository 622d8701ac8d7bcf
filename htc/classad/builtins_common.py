"""Shared machinery for the ClassAd builtin functions.

Theory of operation
-------------------
HTCondor's builtins are C++ code, and much of their observable behaviour comes from C
itself: ``int`` arguments are 32 bits wide in some places, a double is cast to ``long long``
with the x86 "integer indefinite" result (INT64_MIN) when it does not fit, strings are byte
arrays, and ``strtod`` decides what a numeric string is.  This module reproduces those rules
once so that the function modules can be written as plain Python:

* numeric casts: :func:`c_int64`, :func:`c_int32`, :func:`wrap_int32`, :func:`c_div`,
  :func:`c_mod`, :func:`strtod_prefix`;
* the value conversions every builtin uses (``convertValueTo{String,Real,Integer}Value``):
  :func:`to_string`, :func:`to_real`, :func:`to_int`;
* the compact unparser for values (what ``strcat({1})`` prints): :func:`unparse_value`;
* a narrow adapter over nested ClassAd objects (:func:`ad_names`, :func:`ad_expr_text`,
  :func:`ad_eval`, :func:`make_classad`) so the builtins touch the ClassAd API in one place.

Strings are Python ``str``; when a builtin must work on bytes (``size``, ``substr``,
regular expressions) it encodes with UTF-8 and decodes with ``surrogateescape`` so that a
string cut in the middle of a character survives a round trip, as it does in C++.
"""

from __future__ import annotations

import math
import re

from htc.classad.values import (
    AbsTime,
    Error,
    RelTime,
    Undefined,
    is_classad,
)

INT32_MIN = -(1 << 31)
INT64_MIN = -(1 << 63)


# ---------------------------------------------------------------------------
# Type tests.  ``bool`` is a subclass of ``int`` in Python, so every integer test must
# exclude it explicitly.

def is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_real(v: object) -> bool:
    return isinstance(v, float)


def is_number(v: object) -> bool:
    """``Value::IsNumber``: integer, real or boolean."""
    return isinstance(v, (int, float))


def is_list(v: object) -> bool:
    return isinstance(v, list)


# ---------------------------------------------------------------------------
# C numeric behaviour.

def c_int64(d: float) -> int:
    """``(long long) d`` on x86-64: truncation, INT64_MIN when the value does not fit."""
    if math.isnan(d) or d >= 9.223372036854775807e18 or d < -9.223372036854775807e18:
        return INT64_MIN
    return int(d)


def c_int32(d: float) -> int:
    """``(int) d`` on x86-64: truncation, INT32_MIN when the value does not fit."""
    if math.isnan(d) or d >= 2147483648.0 or d <= -2147483649.0:
        return INT32_MIN
    return int(d)


def wrap_int32(n: int) -> int:
    """Narrow a ``long long`` to ``int`` (keep the low 32 bits), as C assignment does."""
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= (1 << 31) else n


def c_div(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    """C remainder (takes the sign of the dividend)."""
    return a - b * c_div(a, b)


_STRTOD = re.compile(
    rb"""[ \t\n\v\f\r]*
    (?P<num>[+-]?
      (?:0[xX](?:[0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?
        |(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?
        |(?i:inf(?:inity)?|nan(?:\([0-9a-zA-Z_]*\))?)
      ))""",
    re.VERBOSE,
)
# A hexadecimal mantissa whose ``0x`` is not followed by a digit is read by strtod as the
# number 0 followed by junk ("0x" -> 0, rest "x").
_HEX_PREFIX_ONLY = re.compile(rb"[ \t\n\v\f\r]*[+-]?0[xX]")


def strtod_prefix(text: str) -> tuple[float, int] | None:
    """Parse the longest numeric prefix of ``text`` like C ``strtod``.

    Returns:
        ``(value, end)`` with ``end`` the byte offset just past the number, or ``None``
        when no conversion could be performed.
    """
    data = text.encode("utf-8", "surrogateescape")
    m = _STRTOD.match(data)
    if m is None:
        return None
    num = m.group("num")
    body = num.lstrip(b"+-")
    neg = num.startswith(b"-")
    low = body.lower()
    if low.startswith(b"0x"):
        try:
            value = float.fromhex(body.decode("ascii"))
        except (ValueError, OverflowError):
            value = math.inf
        value = -value if neg else value
    elif low.startswith(b"inf"):
        value = -math.inf if neg else math.inf
    elif low.startswith(b"nan"):
        value = math.nan
    else:
        value = float(num)
    return value, m.end()


# ---------------------------------------------------------------------------
# Byte-level string helpers.

def to_bytes(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def from_bytes(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


# ---------------------------------------------------------------------------
# Times as text (classad util.cpp absTimeToString / relTimeToString).

def civil_from_epoch(secs: int) -> tuple[int, int, int, int, int, int, int, int]:
    """Split seconds since the epoch (UTC) into (year, month, day, hour, min, sec, wday, yday).

    Works for any integer, unlike ``time.gmtime``; ``wday`` counts from Sunday = 0 and
    ``yday`` from January 1 = 0, as in ``struct tm``.
    """
    days, rem = divmod(secs, 86400)
    hour, rem = divmod(rem, 3600)
    minute, sec = divmod(rem, 60)
    wday = (days + 4) % 7  # 1970-01-01 was a Thursday
    # Howard Hinnant's days_from_civil inverse.
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    year = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    if month <= 2:
        year += 1
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    cumulative = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)
    yday = cumulative[month - 1] + day - 1 + (1 if leap and month > 2 else 0)
    return year, month, day, hour, minute, sec, wday, yday


def abstime_to_string(t: AbsTime) -> str:
    """``absTimeToString``: local wall time of the stored zone plus a ``+hh:mm`` suffix."""
    offset = int(t.tz_offset)
    year, month, day, hour, minute, sec, _, _ = civil_from_epoch(int(t.secs) + offset)
    # The sign is '+' only for a strictly positive offset, so UTC prints as "-00:00".
    sign = "+" if offset > 0 else "-"
    tz = abs(offset)
    return (f"{year}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{sec:02d}"
            f"{sign}{tz // 3600:02d}:{(tz // 60) % 60:02d}")


def reltime_to_string(rsecs: float) -> str:
    """``relTimeToString``: ``[-][d+]hh:mm:ss`` with leading zero fields dropped."""
    out = ""
    if rsecs < 0:
        out = "-"
        rsecs = -rsecs
    fraction = rsecs - math.floor(rsecs)
    days = c_int32(rsecs)
    hrs = c_mod(days, 86400)
    mins = c_mod(hrs, 3600)
    secs = c_mod(mins, 60) + fraction
    days = c_div(days, 86400)
    hrs = c_div(hrs, 3600)
    mins = c_div(mins, 60)
    if fraction == 0:
        sec_text = "%02d" % int(secs)
    else:
        sec_text = "%02g" % secs
    if days:
        return out + "%d+%02d:%02d:%s" % (days, hrs, mins, sec_text)
    if hrs:
        return out + "%02d:%02d:%s" % (hrs, mins, sec_text)
    if mins:
        return out + "%02d:%s" % (mins, sec_text)
    return out + sec_text


def reltime_as_time_t(t: RelTime) -> int:
    """The whole seconds of a relative time, as ``Value::IsRelativeTimeValue(time_t&)`` sees them."""
    return c_int32(t.secs)


# ---------------------------------------------------------------------------
# The compact unparser for values (sink.cpp ClassAdUnParser::Unparse(Value)).

def format_real(r: float) -> str:
    if r == 0.0:
        return "-0.0" if math.copysign(1.0, r) < 0 else "0.0"
    if math.isnan(r):
        return 'real("NaN")'
    if math.isinf(r):
        return 'real("-INF")' if r < 0 else 'real("INF")'
    return "%1.15E" % r


_STRING_ESCAPES = {
    0x07: b"\\a", 0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n", 0x0D: b"\\r",
    0x09: b"\\t", 0x0B: b"\\v", 0x5C: b"\\\\",
}


def quote_string(s: str, delimiter: int = 0x22) -> str:
    """A string literal body with C escapes; non-printable bytes become ``\\ooo``."""
    out = bytearray()
    for byte in to_bytes(s):
        if byte == delimiter:
            out += b"\\" + bytes([byte])
        elif byte in _STRING_ESCAPES:
            out += _STRING_ESCAPES[byte]
        elif byte < 0x20 or byte >= 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return from_bytes(bytes(out))


_RESERVED = {"error", "false", "is", "isnt", "parent", "true", "undefined"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def unparse_name(name: str) -> str:
    """An attribute name, single-quoted when it is not a plain identifier."""
    body = quote_string(name, delimiter=0x27)
    if _IDENTIFIER.match(body) and body.lower() not in _RESERVED:
        return body
    return "'" + body + "'"


def unparse_value(v: object) -> str:
    """The text HTCondor's compact unparser prints for an evaluated value."""
    if v is Undefined:
        return "undefined"
    if v is Error:
        return "error"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return format_real(v)
    if isinstance(v, str):
        return '"' + quote_string(v) + '"'
    if isinstance(v, AbsTime):
        return 'absTime("' + abstime_to_string(v) + '")'
    if isinstance(v, RelTime):
        return 'relTime("' + reltime_to_string(v.secs) + '")'
    if isinstance(v, list):
        # HTCondor prints a list value from its element *expressions* ("{ 1 + 1 }"); a
        # list type that remembers them offers unparse(), plain lists print their values.
        source = getattr(v, "unparse", None)
        if callable(source):
            return source()
        return "{ " + ",".join(unparse_value(e) for e in v) + " }"
    if is_classad(v):
        return "[ " + "; ".join(
            unparse_name(name) + " = " + ad_expr_text(v, name) for name in ad_names(v)
        ) + " ]"
    # An unevaluated expression inside a list (only at the API boundary) prints itself.
    return str(v)


# ---------------------------------------------------------------------------
# Nested ClassAd adapter.  The ClassAd class mirrors classad2's API: iterating yields the
# attribute names, ``lookup(name)`` gives the expression, ``eval(name)`` its value.

def ad_names(ad: object) -> list[str]:
    return list(ad)


def ad_expr_text(ad: object, name: str) -> str:
    lookup = getattr(ad, "lookup", None)
    if lookup is not None:
        expr = lookup(name)
        text = getattr(expr, "unparse", None)
        return text() if callable(text) else str(expr)
    return unparse_value(ad_eval(ad, name))


def ad_eval(ad: object, name: str) -> object:
    """The internal value of an attribute (AbsTime/RelTime kept, not datetime/float)."""
    internal = getattr(ad, "evaluate_internal", None)
    return internal(name) if internal is not None else ad.eval(name)


def make_classad(attrs: dict[str, object]) -> object:
    """Build a ClassAd value holding ``attrs`` (insertion order kept)."""
    from htc.classad import ClassAd  # the evaluator module imports this package

    ad = ClassAd()
    for name, value in attrs.items():
        ad[name] = value
    return ad


# ---------------------------------------------------------------------------
# Value conversions (classad value.cpp convertValueTo*Value).

def to_string(v: object) -> object:
    """``convertValueToStringValue``: a ``str``, or UNDEFINED / ERROR."""
    if v is Undefined or v is Error:
        return v
    if isinstance(v, str):
        return v
    if isinstance(v, AbsTime):
        return abstime_to_string(v)
    if isinstance(v, RelTime):
        return reltime_to_string(float(reltime_as_time_t(v)))
    return unparse_value(v)


def to_real(v: object) -> object:
    """``convertValueToRealValue``: a ``float``, or UNDEFINED / ERROR."""
    if v is Undefined:
        return Undefined
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, int):
        return float(v)
    if isinstance(v, float):
        return v
    if isinstance(v, str):
        parsed = strtod_prefix(v)
        if parsed is None:
            return Error
        return parsed[0]
    if isinstance(v, AbsTime):
        return float(int(v.secs))
    if isinstance(v, RelTime):
        return float(reltime_as_time_t(v))
    return Error


def to_int(v: object) -> object:
    """``convertValueToIntegerValue``: an ``int``, or UNDEFINED / ERROR."""
    if v is Undefined:
        return Undefined
    if isinstance(v, bool):
        return 1 if v else 0
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return c_int64(v)
    if isinstance(v, str):
        parsed = strtod_prefix(v)
        if parsed is None:
            return Error
        return c_int64(parsed[0])
    if isinstance(v, AbsTime):
        return int(v.secs)
    if isinstance(v, RelTime):
        return reltime_as_time_t(v)
    return Error
