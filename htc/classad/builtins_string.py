"""String, version and splitting builtins (classad fnCall.cpp, condor_utils compat_classad.cpp).

Strings are handled as UTF-8 byte arrays where HTCondor does so: ``size("é")`` is 2,
``substr`` counts bytes and ``toUpper`` changes ASCII letters only (C locale).  Arguments
that are not strings are usually converted with the compact unparser first, which is why
``strcat({1, 2})`` is ``"{ 1,2 }"`` and ``strcmp(1, 1.0)`` is -1.
"""

from __future__ import annotations

from htc.classad.builtins_common import (
    ad_names,
    from_bytes,
    is_int,
    to_bytes,
    to_string,
    wrap_int32,
)
from htc.classad.values import Error, Undefined, is_classad


def fn_strcat(args: list) -> object:
    """``strcat(a, ...)``: concatenate the string forms; the first UNDEFINED or ERROR wins."""
    parts = []
    for arg in args:
        text = to_string(arg)
        if text is Undefined or text is Error:
            return text
        parts.append(text)
    return "".join(parts)


def fn_join(args: list) -> object:
    """``join(sep, a, b, ...)``, ``join(sep, list)`` or ``join(list)``.

    UNDEFINED items are skipped; the result is UNDEFINED only when something was
    UNDEFINED and nothing was joined.
    """
    items = list(args)
    if 0 < len(items) <= 2 and isinstance(items[-1], list):
        items = ([items[0]] if len(items) == 2 else [""]) + list(items[-1])
    sep = ""
    joined: list[str] = []
    saw_undefined = False
    saw_defined = False
    for index, item in enumerate(items):
        text = to_string(item)
        if text is Undefined:
            saw_undefined = True
            continue
        if text is Error:
            return Error
        if index == 0:
            sep = text
            continue
        joined.append(text)
        saw_defined = True
    if saw_undefined and not saw_defined:
        return Undefined
    # C++ inserts the separator only once the buffer is non-empty, so empty leading items
    # do not produce leading separators.
    out = ""
    for text in joined:
        if out:
            out += sep
        out += text
    return out


def _change_case(args: list, lower: bool) -> object:
    if len(args) != 1:
        return Error
    text = to_string(args[0])
    if text is Undefined or text is Error:
        return text
    data = to_bytes(text)
    return from_bytes(data.lower() if lower else data.upper())


def fn_toupper(args: list) -> object:
    return _change_case(args, lower=False)


def fn_tolower(args: list) -> object:
    return _change_case(args, lower=True)


def fn_size(args: list) -> object:
    """``size(x)``: bytes of a string, elements of a list, attributes of a ClassAd."""
    if len(args) != 1:
        return Error
    arg = args[0]
    if arg is Undefined:
        return Undefined
    if isinstance(arg, list):
        return len(arg)
    if is_classad(arg):
        return len(ad_names(arg))
    if isinstance(arg, str):
        return len(to_bytes(arg))
    return Error


def fn_substr(args: list) -> object:
    """``substr(s, offset [, length])`` with Perl-like negative offsets and lengths."""
    if not 2 <= len(args) <= 3:
        return Error
    if any(a is Undefined for a in args):
        return Undefined
    text, offset = args[0], args[1]
    length = args[2] if len(args) == 3 else 0
    if not isinstance(text, str) or not is_int(offset) or not is_int(length):
        return Error
    # The C++ code reads the integers into ``int`` variables.
    offset = wrap_int32(offset)
    length = wrap_int32(length)
    data = to_bytes(text)
    alen = len(data)
    if offset < 0:
        offset = max(alen + offset, 0)
    elif offset >= alen:
        offset = alen
    if length <= 0:
        length = max(alen - offset + length, 0)
    elif length > alen - offset:
        length = alen - offset
    if len(args) == 3 and wrap_int32(args[2]) == 0:
        length = 0
    return from_bytes(data[offset:offset + length])


def _compare_strings(args: list, fold: bool) -> object:
    if len(args) != 2:
        return Error
    a, b = args
    if a is Undefined or b is Undefined:
        return Undefined
    a, b = to_string(a), to_string(b)
    if not isinstance(a, str) or not isinstance(b, str):
        return Error
    x, y = to_bytes(a), to_bytes(b)
    if fold:
        x, y = x.lower(), y.lower()
    return (x > y) - (x < y)


def fn_strcmp(args: list) -> object:
    return _compare_strings(args, fold=False)


def fn_stricmp(args: list) -> object:
    return _compare_strings(args, fold=True)


# ---------------------------------------------------------------------------
# Version comparison: natural_cmp (strverscmp-like), over bytes read as signed chars.

def _signed(byte: int) -> int:
    return byte - 256 if byte >= 128 else byte


def _isdigit(data: bytes, i: int) -> bool:
    return i < len(data) and 0x30 <= data[i] <= 0x39


def natural_cmp(s1: str, s2: str) -> int:
    """HTCondor's ``natural_cmp``: digit runs compare numerically, leading zeros first."""
    a, b = to_bytes(s1) + b"\0", to_bytes(s2) + b"\0"
    i = 0
    while a[i] != 0 and a[i] == b[i]:
        i += 1
    if a[i] == b[i]:
        return 0
    n_beg = i
    while n_beg > 0 and _isdigit(a, n_beg - 1):
        n_beg -= 1
    if n_beg == i and (not _isdigit(a, i) or not _isdigit(b, i)):
        return _signed(a[i]) - _signed(b[i])
    z1 = n_beg
    while a[z1] == 0x30:
        z1 += 1
    z2 = n_beg
    while b[z2] == 0x30:
        z2 += 1
    # A trailing zero is a value, not a leading zero.
    if z1 > n_beg and not _isdigit(a, z1):
        z1 -= 1
    if z2 > n_beg and not _isdigit(b, z2):
        z2 -= 1
    if z1 - n_beg != z2 - n_beg:
        return (z2 - n_beg) - (z1 - n_beg)
    if z1 > n_beg:
        return _signed(a[i]) - _signed(b[i])
    e1 = z1
    while _isdigit(a, e1):
        e1 += 1
    e2 = z2
    while _isdigit(b, e2):
        e2 += 1
    if e1 - n_beg != e2 - n_beg:
        return (e1 - n_beg) - (e2 - n_beg)
    return _signed(a[i]) - _signed(b[i])


def _version_args(args: list) -> object:
    converted = [to_string(a) for a in args]
    if not all(isinstance(c, str) for c in converted):
        return Error
    return converted


def _make_version_test(test):
    def fn(args: list) -> object:
        if len(args) != 2:
            return Error
        if args[0] is Undefined or args[1] is Undefined:
            return Undefined
        strings = _version_args(args)
        if strings is Error:
            return Error
        return test(natural_cmp(strings[0], strings[1]))
    return fn


fn_versioncmp = _make_version_test(lambda r: r)
fn_versionlt = _make_version_test(lambda r: r < 0)
fn_versionle = _make_version_test(lambda r: r <= 0)
fn_versiongt = _make_version_test(lambda r: r > 0)
fn_versionge = _make_version_test(lambda r: r >= 0)
fn_versioneq = _make_version_test(lambda r: r == 0)


def fn_version_in_range(args: list) -> object:
    """``version_in_range(v, min, max)``: ``min <= v <= max`` in version order."""
    if len(args) != 3:
        return Error
    # Only the bounds propagate UNDEFINED; an UNDEFINED version fails conversion.
    if args[1] is Undefined or args[2] is Undefined:
        return Undefined
    strings = _version_args(args)
    if strings is Error:
        return Error
    test, low, high = strings
    return natural_cmp(low, test) <= 0 and natural_cmp(test, high) <= 0


# ---------------------------------------------------------------------------
# Splitting (condor_utils compat_classad.cpp splitAt_func / splitArb_func).

def _split_at(args: list, slot_name: bool) -> object:
    if len(args) != 1 or not isinstance(args[0], str):
        return Error
    text = args[0]
    at = text.find("@")
    if at < 0:
        return ["", text] if slot_name else [text, ""]
    return [text[:at], text[at + 1:]]


def fn_splitusername(args: list) -> object:
    """``splitUserName("user@domain")`` -> ``{"user", "domain"}``."""
    return _split_at(args, slot_name=False)


def fn_splitslotname(args: list) -> object:
    """``splitSlotName("slot1@host")`` -> ``{"slot1", "host"}``."""
    return _split_at(args, slot_name=True)


_C_SPACE = " \t\n\v\f\r"


def fn_split(args: list) -> object:
    """``split(s [, separators])``: split at any separator character.

    Runs of whitespace (or whitespace around one separator) count as one separator, but a
    repeated non-space separator yields empty items: ``"a,,b"`` is three items.
    """
    if len(args) not in (1, 2):
        return Error
    text = args[0]
    seps = args[1] if len(args) == 2 else ", \t"
    if not isinstance(text, str) or not isinstance(seps, str):
        return Error
    data, sep_bytes = to_bytes(text), set(to_bytes(seps))
    items: list[str] = []
    last = 0
    previous_sep = -1
    if sep_bytes:
        for ix, byte in enumerate(data):
            if byte not in sep_bytes:
                continue
            if ix > last:
                items.append(from_bytes(data[last:ix]))
            elif previous_sep == byte:
                # previous_sep only ever holds a non-space separator byte.
                items.append("")
            if chr(byte) not in _C_SPACE:
                previous_sep = byte
            last = ix + 1
    if len(data) > last:
        items.append(from_bytes(data[last:]))
    return items


FUNCTIONS = {
    "strcat": fn_strcat,
    "join": fn_join,
    "toupper": fn_toupper,
    "tolower": fn_tolower,
    "size": fn_size,
    "substr": fn_substr,
    "strcmp": fn_strcmp,
    "stricmp": fn_stricmp,
    "versioncmp": fn_versioncmp,
    "versionlt": fn_versionlt,
    "versionle": fn_versionle,
    "versiongt": fn_versiongt,
    "versionge": fn_versionge,
    "versioneq": fn_versioneq,
    "version_in_range": fn_version_in_range,
    "splitusername": fn_splitusername,
    "splitslotname": fn_splitslotname,
    "split": fn_split,
}
