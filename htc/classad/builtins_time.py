"""Time builtins: time, absTime, relTime, splitTime, formatTime, getYear ..., interval.

Theory of operation
-------------------
HTCondor keeps an absolute time as seconds since the epoch plus the zone offset it was
written in, and a relative time as a double.  Local time means the process's ``TZ``
(tests run with ``TZ=UTC``), read through :mod:`time` just as C's ``localtime`` does.
Several C++ code paths read values into 32-bit ``int`` variables; :func:`c_int32` and
:func:`wrap_int32` reproduce that, which is why ``absTime(1e12)`` lands in 1901.

``absTime("2020-01-01T00:00:00Z")`` and ``relTime("1+02:00:00")`` with a string
*literal* are converted by HTCondor's parser, not at run time (a bad literal is a parse
error).  :func:`parse_abstime_literal` and :func:`parse_reltime_literal` implement that
conversion for the parser.  At run time a computed string reaches the builtin, where
HTCondor returns the string itself from ``absTime`` and a zero relative time from
``relTime``; that behaviour is kept.

``formatTime`` hands a ``struct tm`` to the C library's ``strftime`` (through
:mod:`ctypes`) because HTCondor does, and glibc's treatment of out-of-range fields
(``formatTime([Month = 13])`` prints ``?``) is part of the observable result.
"""

from __future__ import annotations

import ctypes
import math
import time

from htc.classad.builtins_common import (
    ad_eval,
    ad_names,
    c_div,
    c_int32,
    c_mod,
    civil_from_epoch,
    is_int,
    make_classad,
    strtod_prefix,
    to_int,
    wrap_int32,
)
from htc.classad.clock import now_seconds
from htc.classad.values import AbsTime, Error, RelTime, Undefined, is_classad


def local_offset(secs: int, no_dst: bool = False) -> int:
    """``timezone_offset``: seconds east of UTC of local time at ``secs``."""
    try:
        tm = time.localtime(secs)
    except (OverflowError, OSError, ValueError):
        return 0
    offset = tm.tm_gmtoff
    if no_dst and tm.tm_isdst > 0:
        offset -= 3600
    return offset


def local_fields(secs: int) -> tuple[int, int, int, int, int, int, int, int]:
    """``localtime``: (year, month, day, hour, minute, second, wday, yday)."""
    try:
        tm = time.localtime(secs)
    except (OverflowError, OSError, ValueError):
        return civil_from_epoch(secs)
    return (tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
            (tm.tm_wday + 1) % 7, tm.tm_yday - 1)


def current_abstime() -> AbsTime:
    now = int(now_seconds())
    return AbsTime(now, local_offset(now))


# ---------------------------------------------------------------------------
# Literal conversion, for the parser (classad literals.cpp MakeAbsTime / MakeRelTime).

def _atoi(text: str) -> int:
    digits = ""
    for ch in text:
        if not "0" <= ch <= "9":
            break
        digits += ch
    return int(digits) if digits else 0


def parse_abstime_literal(text: str) -> AbsTime | None:
    """Convert the string of ``absTime("...")`` like HTCondor's parser.

    The accepted shape is ``D* dddd [D* dd [D* dd [D* dd [D* dd [D* dd D*]]]]]`` followed
    by an optional ``Z``, ``+hhmm`` or ``+hh:mm`` zone (D: non-digit, d: digit).  Fields
    overflow into the next one as ``mktime`` normalises them (February 30 is March 1).

    Returns:
        The absolute time, or None when HTCondor reports a parse error.
    """
    s = text
    tzhr = tzmin = 0
    has_offset = False
    i = len(s) - 1
    while i >= 0 and s[i] in " \t\n\v\f\r":
        i -= 1
    n = len(s)
    if i > 0 and s[i] in "zZ":
        s = s[:i] + s[i + 1:]
        has_offset = True
    elif n > 5 and s[n - 5] in "+-":
        has_offset, s, tzhr, tzmin = _extract_zone(s)
    elif n > 6 and s[n - 6] in "+-" and s[n - 3] == ":":
        s = s[:n - 3] + s[n - 2:]
        has_offset, s, tzhr, tzmin = _extract_zone(s)
    # year, month (1-based, as time.mktime wants it), day, hour, minute, second; a missing
    # field is zero in the C struct tm, which is month 1 here.
    fields = [0, 1, 0, 0, 0, 0]
    i, n = 0, len(s)

    def next_digit(k: int) -> int:
        while k < n and not ("0" <= s[k] <= "9"):
            k += 1
        return k

    i = next_digit(i)
    if i > n - 4:
        return None
    fields[0] = _atoi(s[i:i + 4])
    i = next_digit(i + 4)
    for slot in range(1, 6):
        if i <= n - 2:
            fields[slot] = _atoi(s[i:i + 2])
            i += 2
        i = next_digit(i)
    if i <= n - 1 and "0" <= s[i] <= "9":
        return None
    year, month, day, hour, minute, second = fields
    try:
        secs = int(time.mktime((year, month, day, hour, minute, second, 0, 0, 0)))
    except (OverflowError, ValueError):
        return None
    if secs == -1:
        return None
    offset = tzhr * 3600 + tzmin * 60 if has_offset else local_offset(secs)
    secs += local_offset(secs, no_dst=True)
    secs -= offset
    return AbsTime(secs, offset)


def _extract_zone(s: str) -> tuple[bool, str, int, int]:
    zone = s[-5:]
    if zone[0] in "+-" and zone[1:].isdigit() and zone[1:].isascii():
        sign = 1 if zone[0] == "+" else -1
        return True, s[:-5], sign * int(zone[1:3]), sign * int(zone[3:5])
    return False, s, 0, 0


def parse_reltime_literal(text: str) -> RelTime | None:
    """Convert the string of ``relTime("...")``: ``[-][[[days+]hh:]mm:]ss[.sss]``.

    Unit letters work too (``"1d2h3m4s"``).  Returns None for a parse error.

    Note that HTCondor 25 *evaluates* such a literal to a real number
    (``isReal(relTime("1:30"))`` is true, ``relTime(90)`` is a relative time) while still
    printing it as ``relTime("01:30")``; a parser keeping that behaviour stores the
    returned RelTime for printing and yields ``float(secs)`` when evaluating it.
    """
    s = text
    i = len(s) - 1
    space = " \t\n\v\f\r"

    def skip_space(k: int) -> int:
        while k >= 0 and s[k] in space:
            k -= 1
        return k

    def digits_back(k: int) -> tuple[str, int]:
        start = k
        while k >= 0 and "0" <= s[k] <= "9":
            k -= 1
        return s[k + 1:start + 1], k

    secs = 0.0
    mins = hrs = days = 0
    i = skip_space(i)
    if i >= 0 and (s[i] in "sS" or "0" <= s[i] <= "9"):
        if s[i] in "sS":
            i -= 1
        i = skip_space(i)
        number, i = digits_back(i)
        if i >= 0 and s[i] == ".":
            whole, i = digits_back(i - 1)
            number = whole + "." + number
        parsed = strtod_prefix(number)
        secs = parsed[0] if parsed else 0.0
    for letters, slot in (("mM:", "mins"), ("hH:", "hrs"), ("dD+", "days")):
        i = skip_space(i)
        if i >= 0 and s[i] in letters:
            i = skip_space(i - 1)
            number, i = digits_back(i)
            value = int(number) if number else 0
            if value > 2147483647:
                value = 0  # std::from_chars leaves the target untouched on overflow
            if slot == "mins":
                mins = value
            elif slot == "hrs":
                hrs = value
            else:
                days = value
    i = skip_space(i)
    negative = False
    if i >= 0 and s[i] == "-":
        negative = True
        i -= 1
    i = skip_space(i)
    if i >= 0:
        return None
    whole = wrap_int32(wrap_int32(wrap_int32(days * 86400) + wrap_int32(hrs * 3600)) + mins * 60)
    total = whole + secs
    return RelTime(-total if negative else total)


# ---------------------------------------------------------------------------
# Builtins.

def fn_time(args: list) -> object:
    """``time()``: seconds since the epoch, an integer."""
    return Error if args else int(now_seconds())


def fn_currenttime(args: list) -> object:
    """``currentTime()``: now, as an absolute time in the local zone."""
    return Error if args else current_abstime()


def fn_timezoneoffset(args: list) -> object:
    """``timeZoneOffset()``: the local zone's offset now, as a relative time."""
    return Error if args else RelTime(float(local_offset(int(now_seconds()))))


def fn_daytime(args: list) -> object:
    """``dayTime()``: the local time of day, as a relative time."""
    if args:
        return Error
    _, _, _, hour, minute, second, _, _ = local_fields(int(now_seconds()))
    return RelTime(float(hour * 3600 + minute * 60 + second))


def _offset_argument(v: object) -> object:
    if is_int(v):
        return wrap_int32(v)
    if isinstance(v, float):
        return c_int32(v)
    if isinstance(v, RelTime):
        return c_int32(v.secs)
    return Error


def _conv_time(args: list, relative: bool) -> object:
    if not args and not relative:
        return current_abstime()
    if not 1 <= len(args) <= 2:
        return Error
    offset = None
    if len(args) == 2:
        if relative:
            return Error
        offset = _offset_argument(args[1])
        if offset is Error:
            return Error
    arg = args[0]
    if arg is Undefined:
        return Undefined
    if isinstance(arg, bool) or arg is Error or isinstance(arg, list) or is_classad(arg):
        return Error
    if is_int(arg) or isinstance(arg, float):
        if relative:
            return RelTime(float(wrap_int32(arg)) if is_int(arg) else arg)
        secs = wrap_int32(arg) if is_int(arg) else c_int32(arg)
        offset = local_offset(secs) if offset is None else offset
        if is_int(arg) and offset == -1:
            # convTime's integer branch treats an offset of -1 as "no zone found".
            return Error
        return AbsTime(secs, offset)
    if isinstance(arg, str):
        # A computed string falls through to HTCondor's absolute-time branch, which reads
        # no time from it: absTime returns the string, relTime a zero duration.
        return RelTime(0.0) if relative else arg
    if isinstance(arg, AbsTime):
        return RelTime(float(int(arg.secs))) if relative else arg
    if relative:
        return arg
    secs = c_int32(arg.secs)
    return AbsTime(secs, local_offset(secs) if offset is None else offset)


def fn_abstime(args: list) -> object:
    """``absTime([t [, offset]])``: now, or ``t`` (seconds or a time) as an absolute time."""
    return _conv_time(args, relative=False)


def fn_reltime(args: list) -> object:
    """``relTime(t)``: ``t`` (seconds or a time) as a relative time."""
    return _conv_time(args, relative=True)


_ABS_FIELDS = {"getyear": 0, "getmonth": 1, "getdayofmonth": 2, "gethours": 3,
               "getminutes": 4, "getseconds": 5, "getdayofweek": 6, "getdayofyear": 7}


def _get_field(name: str):
    def fn(args: list) -> object:
        if len(args) != 1:
            return Error
        arg = args[0]
        if isinstance(arg, AbsTime):
            if name == "getdays":
                return Error
            # HTCondor reads the fields in the *local* zone, ignoring the stored offset.
            return local_fields(int(arg.secs))[_ABS_FIELDS[name]]
        if isinstance(arg, RelTime):
            rsecs = c_int32(arg.secs)
            if name == "getdays":
                return c_div(rsecs, 86400)
            if name == "gethours":
                return c_div(c_mod(rsecs, 86400), 3600)
            if name == "getminutes":
                return c_div(c_mod(rsecs, 3600), 60)
            if name == "getseconds":
                return c_mod(rsecs, 60)
            return Error
        return Error
    return fn


def _split(v: object) -> dict | None:
    """``doSplitTime``: the fields of an absolute or relative time (None if not a time)."""
    if is_int(v) or isinstance(v, float):
        # doSplitTime keeps a whole integer but reads a real through an (int) cast.
        secs = v if is_int(v) else c_int32(v)
        v = AbsTime(secs, local_offset(secs))
    if isinstance(v, AbsTime):
        offset = int(v.tz_offset)
        year, month, day, hour, minute, second, _, _ = civil_from_epoch(int(v.secs) + offset)
        return {"Type": "AbsoluteTime", "Year": year, "Month": month, "Day": day,
                "Hours": hour, "Minutes": minute, "Seconds": second, "Offset": offset}
    if isinstance(v, RelTime):
        rsecs = v.secs
        negative = rsecs < 0
        if negative:
            rsecs = -rsecs
        whole = c_int32(rsecs)
        hrs = c_mod(whole, 86400)
        mins = c_mod(hrs, 3600)
        fraction = rsecs - math.floor(rsecs) if math.isfinite(rsecs) else math.nan
        secs = c_mod(mins, 60) + fraction
        days, hrs, mins = c_div(whole, 86400), c_div(hrs, 3600), c_div(mins, 60)
        if negative:
            if days > 0:
                days = -days
            elif hrs > 0:
                hrs = -hrs
            elif mins > 0:
                mins = -mins
            else:
                secs = -secs
        return {"Type": "RelativeTime", "Days": days, "Hours": hrs, "Minutes": mins,
                "Seconds": float(secs)}
    return None


def fn_splittime(args: list) -> object:
    """``splitTime(t)``: a ClassAd with the fields of ``t`` (Year ... Offset, or Days ...)."""
    if len(args) != 1:
        return Error
    if args[0] is Undefined:
        return Undefined
    if is_classad(args[0]):
        return Error
    fields = _split(args[0])
    return Error if fields is None else make_classad(fields)


class _Tm(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int) for name in (
        "tm_sec", "tm_min", "tm_hour", "tm_mday", "tm_mon", "tm_year", "tm_wday",
        "tm_yday", "tm_isdst")] + [("tm_gmtoff", ctypes.c_long), ("tm_zone", ctypes.c_char_p)]


def _load_strftime():
    try:
        libc = ctypes.CDLL(None)
        func = libc.strftime
    except (OSError, AttributeError):
        return None
    func.restype = ctypes.c_size_t
    func.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(_Tm)]
    return func


_STRFTIME = _load_strftime()


def c_strftime(fmt: str, fields: dict) -> str:
    """C ``strftime`` on a ``struct tm`` built from ``fields`` (tm_* names, others zero)."""
    tm = _Tm(**{k: wrap_int32(v) for k, v in fields.items()})
    data = fmt.encode("utf-8", "surrogateescape")
    if _STRFTIME is not None:
        buf = ctypes.create_string_buffer(1024)
        size = _STRFTIME(buf, 1023, data, ctypes.byref(tm))
        # On overflow strftime returns 0 but leaves what fitted in the buffer, and
        # HTCondor returns that (the buffer has room for 1022 characters).
        text = buf.raw[:size] if size else buf.value[:1022]
        return text.decode("utf-8", "surrogateescape")
    # No C library reachable: Python's strftime, with fields clamped to what it accepts.
    clamp = (min(max(tm.tm_year + 1900, 1), 9999), min(max(tm.tm_mon + 1, 1), 12),
             min(max(tm.tm_mday, 1), 31), tm.tm_hour % 24, tm.tm_min % 60, tm.tm_sec % 62,
             (tm.tm_wday + 6) % 7, tm.tm_yday % 366 + 1, 0)
    return time.strftime(fmt, clamp)


def _day_numbers(year: int, month: int, day: int) -> tuple[int, int]:
    def fixed_from_gregorian(y: int, m: int, d: int) -> int:
        leap = y % 4 == 0 and y % 400 not in (100, 200, 300)
        adjust = 0 if m <= 2 else (-1 if leap else -2)
        y1 = y - 1
        return (365 * y1 + c_div(y1, 4) - c_div(y1, 100) + c_div(y1, 400)
                + c_div(367 * m - 362, 12) + adjust + d)
    fixed = fixed_from_gregorian(year, month, day)
    return c_mod(fixed, 7), fixed - fixed_from_gregorian(year, 1, 1)


def fn_formattime(args: list) -> object:
    """``formatTime([t [, format]])``: ``strftime`` of ``t`` (default now, ``"%c"``)."""
    if not args:
        year, month, day, hour, minute, second, wday, yday = local_fields(int(now_seconds()))
        return c_strftime("%c", {"tm_year": year - 1900, "tm_mon": month - 1, "tm_mday": day,
                                 "tm_hour": hour, "tm_min": minute, "tm_sec": second,
                                 "tm_wday": wday, "tm_yday": yday})
    if len(args) > 2:
        return Error
    arg = args[0]
    if isinstance(arg, RelTime):
        return Error
    if is_classad(arg):
        fields = {name: ad_eval(arg, name) for name in ad_names(arg)}
    else:
        fields = _split(arg)
        if fields is None:
            return Error

    def component(name: str) -> int | None:
        # EvaluateAttrInt: only an integer counts; anything else leaves the field unset.
        for key, value in fields.items():
            if key.lower() == name.lower():
                return wrap_int32(value) if is_int(value) else None
        return None

    year, month = component("Year"), component("Month")
    tm = {"tm_sec": component("Seconds") or 0, "tm_min": component("Minutes") or 0,
          "tm_hour": component("Hours") or 0, "tm_mday": component("Day") or 0,
          "tm_mon": 0 if month is None else wrap_int32(month - 1),
          "tm_year": 0 if year is None else wrap_int32(year - 1900)}
    tm["tm_wday"], tm["tm_yday"] = _day_numbers(tm["tm_year"] + 1900, tm["tm_mon"] + 1,
                                                tm["tm_mday"])
    if len(args) == 1:
        return c_strftime("%c", tm)
    if not isinstance(args[1], str):
        return Error
    return c_strftime(args[1], tm)


def fn_interval(args: list) -> object:
    """``interval(seconds)``: ``"[-]d+hh:mm:ss"`` with leading zero fields dropped."""
    if len(args) != 1:
        return Error
    total = to_int(args[0])
    if not isinstance(total, int):
        return Error
    total = wrap_int32(total)
    days = c_div(total, 86400)
    total = c_mod(total, 86400)
    hours = c_div(total, 3600)
    total = c_mod(total, 3600)
    minutes = c_div(total, 60)
    seconds = c_mod(total, 60)
    if days:
        return "%d+%02d:%02d:%02d" % (days, abs(hours), abs(minutes), abs(seconds))
    if hours:
        return "%d:%02d:%02d" % (hours, abs(minutes), abs(seconds))
    if minutes:
        return "%d:%02d" % (minutes, abs(seconds))
    return "%d" % seconds


FUNCTIONS = {
    "time": fn_time,
    "currenttime": fn_currenttime,
    "timezoneoffset": fn_timezoneoffset,
    "daytime": fn_daytime,
    "abstime": fn_abstime,
    "reltime": fn_reltime,
    "splittime": fn_splittime,
    "formattime": fn_formattime,
    "interval": fn_interval,
    **{name: _get_field(name) for name in (
        "getyear", "getmonth", "getdayofyear", "getdayofmonth", "getdayofweek", "getdays",
        "gethours", "getminutes", "getseconds")},
}
