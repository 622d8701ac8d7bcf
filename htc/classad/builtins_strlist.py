"""String-list builtins: ``stringListSize("a, b, c")`` and friends (compat_classad.cpp).

A string list is one string holding items separated by any of a set of delimiter
characters.  HTCondor splits it with ``StringTokenIterator``: items are the runs between
delimiters, trimmed of whitespace, and empty items are dropped.  The default delimiters
differ by function (``", "`` for most, ``", \\t\\r\\n"`` for the member tests), and
``stringListsIntersect`` uses its own older splitter that does not trim.
"""

from __future__ import annotations

import re
from functools import lru_cache

from htc.classad.builtins_common import c_int64, from_bytes, strtod_prefix, to_bytes
from htc.classad.builtins_regex import regexp_helper
from htc.classad.values import Error, Undefined

_C_SPACE = b" \t\n\v\f\r"
_FLT_MAX = 3.4028234663852886e38
_FLT_MIN = 1.1754943508222875e-38


@lru_cache(maxsize=64)
def _splitter(delims: str) -> re.Pattern | None:
    seps = to_bytes(delims)
    if not seps:
        return None
    return re.compile(b"[" + b"".join(b"\\x%02x" % b for b in sorted(set(seps))) + b"]")


def _split_bytes(text: str, delims: str) -> list[bytes]:
    splitter = _splitter(delims)
    data = to_bytes(text)
    return [data] if splitter is None else splitter.split(data)


def tokens(text: str, delims: str) -> list[str]:
    """``StringTokenIterator`` with trimming: non-empty, whitespace-trimmed items."""
    items = (item.strip(_C_SPACE) for item in _split_bytes(text, delims))
    return [from_bytes(item) for item in items if item]


def _plain_tokens(text: str, delims: str) -> list[str]:
    """The classad library's own splitter: no trimming, empty items dropped."""
    return [from_bytes(item) for item in _split_bytes(text, delims or " ,") if item]


def _list_and_delims(args: list, default: str) -> object:
    if not 1 <= len(args) <= 2:
        return Error
    if not isinstance(args[0], str):
        return Error
    if len(args) == 2 and not isinstance(args[1], str):
        return Error
    return args[0], (args[1] if len(args) == 2 else default)


def fn_stringlistsize(args: list) -> object:
    """``stringListSize(list [, delims])``: the number of items."""
    parsed = _list_and_delims(args, ", ")
    if parsed is Error:
        return Error
    return len(tokens(*parsed))


def _summarize(args: list, kind: str) -> object:
    parsed = _list_and_delims(args, ", ")
    if parsed is Error:
        return Error
    # The accumulator starts from FLT_MAX / FLT_MIN (a positive tiny number!), so
    # stringListMax("-1") is 0: this is HTCondor's arithmetic, kept on purpose.
    accumulator = {"sum": 0.0, "avg": 0.0, "min": _FLT_MAX, "max": _FLT_MIN}[kind]
    is_real = False
    count = 0
    for item in tokens(*parsed):
        count += 1
        parsed_number = strtod_prefix(item)  # sscanf("%lf") reads the same prefix
        if parsed_number is None:
            return Error
        number = parsed_number[0]
        if to_bytes(item).strip(b"+-0123456789"):
            is_real = True
        if kind in ("sum", "avg"):
            accumulator = accumulator + number
        elif kind == "min":
            accumulator = number if number < accumulator else accumulator
        else:
            accumulator = number if number > accumulator else accumulator
    if count == 0:
        return 0.0 if kind in ("sum", "avg") else Undefined
    if kind == "avg":
        accumulator = accumulator / count
    return accumulator if is_real else c_int64(accumulator)


def fn_stringlistsum(args: list) -> object:
    """``stringListSum(list [, delims])``: integer unless some item is not all digits."""
    return _summarize(args, "sum")


def fn_stringlistavg(args: list) -> object:
    return _summarize(args, "avg")


def fn_stringlistmin(args: list) -> object:
    return _summarize(args, "min")


def fn_stringlistmax(args: list) -> object:
    return _summarize(args, "max")


def _member_like(args: list, case_sensitive: bool, subset: bool) -> object:
    if not 2 <= len(args) <= 3:
        return Error
    for arg in args:
        if arg is not Undefined and not isinstance(arg, str):
            return Error
    if args[0] is Undefined and args[1] is Undefined:
        return Undefined
    # Otherwise UNDEFINED behaves like the empty string (and the default delimiters).
    item = args[0] if isinstance(args[0], str) else ""
    text = args[1] if isinstance(args[1], str) else ""
    delims = args[2] if len(args) == 3 and isinstance(args[2], str) else ", \t\r\n"

    def fold(s: str) -> bytes:
        data = to_bytes(s)
        return data if case_sensitive else data.lower()

    listed = {fold(t) for t in tokens(text, delims)}
    if not subset:
        return fold(item) in listed
    if item == "":
        return True  # the empty string is a subset of anything
    wanted = tokens(item, delims)
    # HTCondor reports "no items" as not a subset, even though it vacuously is.
    return bool(wanted) and all(fold(t) in listed for t in wanted)


def fn_stringlistmember(args: list) -> object:
    """``stringListMember(item, list [, delims])``: exact, case-sensitive membership."""
    return _member_like(args, case_sensitive=True, subset=False)


def fn_stringlistimember(args: list) -> object:
    return _member_like(args, case_sensitive=False, subset=False)


def fn_stringlistsubsetmatch(args: list) -> object:
    """``stringListSubsetMatch(items, list [, delims])``: every item of ``items`` is listed."""
    return _member_like(args, case_sensitive=True, subset=True)


def fn_stringlistisubsetmatch(args: list) -> object:
    return _member_like(args, case_sensitive=False, subset=True)


def fn_stringlistsintersect(args: list) -> object:
    """``stringListsIntersect(a, b [, delims])``: do the two lists share an item."""
    if len(args) not in (2, 3):
        return Error
    if any(a is Error for a in args):
        return Error
    if any(a is Undefined for a in args):
        return Undefined
    if not all(isinstance(a, str) for a in args):
        return Error
    delims = args[2] if len(args) == 3 else ""
    right = set(_plain_tokens(args[1], delims))
    return any(item in right for item in _plain_tokens(args[0], delims))


def fn_stringlist_regexpmember(args: list) -> object:
    """``stringList_regexpMember(pattern, list [, delims [, options]])``.

    UNDEFINED for an empty list; option letters may be upper or lower case here.
    """
    if not 2 <= len(args) <= 4:
        return Error
    if not all(isinstance(a, str) for a in args):
        return Error
    pattern, text = args[0], args[1]
    delims = args[2] if len(args) >= 3 else ", "
    options = "".join(
        letter for letter in "imsx" if letter in (args[3].lower() if len(args) == 4 else "")
    )
    if regexp_helper(pattern, "", None, options) is Error:
        return Error
    items = tokens(text, delims)
    if not items:
        return Undefined
    return any(regexp_helper(pattern, item, None, options) is True for item in items)


FUNCTIONS = {
    "stringlistsize": fn_stringlistsize,
    "stringlistsum": fn_stringlistsum,
    "stringlistavg": fn_stringlistavg,
    "stringlistmin": fn_stringlistmin,
    "stringlistmax": fn_stringlistmax,
    "stringlistmember": fn_stringlistmember,
    "stringlistimember": fn_stringlistimember,
    "stringlistsubsetmatch": fn_stringlistsubsetmatch,
    "stringlistisubsetmatch": fn_stringlistisubsetmatch,
    "stringlistsintersect": fn_stringlistsintersect,
    "stringlist_regexpmember": fn_stringlist_regexpmember,
}
