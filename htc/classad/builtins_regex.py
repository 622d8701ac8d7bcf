"""Regular-expression builtins: regexp, regexpMember, regexps, replace, replaceAll.

Options are HTCondor's letters: ``i`` caseless, ``m`` multi-line, ``s`` dot matches
newline, ``x`` extended; for substitution also ``f`` (return the full target with the
match replaced) and ``g`` (replace every match).  ``replace`` is ``regexps`` with ``f``,
``replaceAll`` adds ``g``.  Other letters are ignored, so patterns stay forward compatible.

The substitution loop reproduces fnCall.cpp's ``regexp_helper`` step by step, including
its corner cases: ``\\N`` in the replacement is group N, and naming a group beyond the
last one that took part in the match is ERROR; after an empty match the next byte is
copied and the search moves on, and an empty match at the very end of the target makes
the next search start past the end, which PCRE2 rejects, so the result is ERROR.
"""

from __future__ import annotations

import re
from functools import lru_cache

from htc.classad.builtins_common import from_bytes, to_bytes
from htc.classad.builtins_pcre import PatternError, compile_pcre
from htc.classad.values import Error, Undefined


@lru_cache(maxsize=512)
def _compiled(pattern: str, options: str) -> re.Pattern | None:
    try:
        return compile_pcre(pattern, options)
    except PatternError:
        return None


def _group_count(m: re.Match) -> int:
    """PCRE2's match return code: one more than the highest group that took part."""
    count = 1
    for index in range(1, (m.re.groups or 0) + 1):
        if m.start(index) != -1:
            count = index + 1
    return count


def _expand(replacement: bytes, m: re.Match) -> bytes | None:
    groups = _group_count(m)
    out = bytearray()
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == 0x5C and i + 1 < len(replacement) and 0x30 <= replacement[i + 1] <= 0x39:
            index = replacement[i + 1] - 0x30
            if index >= groups:
                return None
            out += m.group(index) or b""
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out)


def regexp_helper(pattern: str, target: str, replacement: str | None, options: str | None) -> object:
    """Match (``replacement is None``) or substitute, as HTCondor's regexp_helper does.

    Returns:
        A bool for a match test, a str for a substitution, or ERROR.
    """
    opts = options or ""
    compile_opts = "".join(letter for letter in "imsx" if letter in opts)
    full_target = replacement is not None and "f" in opts
    find_all = replacement is not None and "g" in opts
    compiled = _compiled(pattern, compile_opts)
    if compiled is None:
        return Error
    data = to_bytes(target).split(b"\0", 1)[0]
    repl = None if replacement is None else to_bytes(replacement).split(b"\0", 1)[0]
    output = bytearray()
    index = 0
    empty_match = False
    matched = False
    while True:
        if index > len(data):
            # PCRE2_ERROR_BADOFFSET: the search was asked to start past the end.
            return Error
        if empty_match:
            # PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED: a non-empty match right here.
            m = compiled.match(data, index)
            if m is not None and m.end() == m.start():
                m = None
            if m is None:
                output.append(data[index] if index < len(data) else 0)
                index += 1
                empty_match = False
                matched = True
                if find_all:
                    continue
                break
        else:
            m = compiled.search(data, index)
        matched = m is not None
        if m is not None and repl is not None:
            if full_target:
                output += data[index:m.start()]
            expanded = _expand(repl, m)
            if expanded is None:
                return Error
            output += expanded
            index = m.end()
            if m.start() == m.end():
                empty_match = True
        if not (matched and find_all):
            break
    if repl is None:
        return matched
    if full_target:
        output += data[index:]
    return from_bytes(bytes(output))


def _strict_strings(values: list) -> object:
    """ERROR if any value is ERROR, else UNDEFINED if any is UNDEFINED, else None."""
    if any(v is Error for v in values):
        return Error
    if any(v is Undefined for v in values):
        return Undefined
    return None


def fn_regexp(args: list) -> object:
    """``regexp(pattern, target [, options])``: does ``pattern`` match anywhere in ``target``."""
    if len(args) not in (2, 3):
        return Error
    exceptional = _strict_strings(args)
    if exceptional is not None:
        return exceptional
    if len(args) == 3 and not isinstance(args[2], str):
        return Error
    if not isinstance(args[0], str) or not isinstance(args[1], str):
        return Error
    return regexp_helper(args[0], args[1], None, args[2] if len(args) == 3 else None)


def fn_regexpmember(args: list) -> object:
    """``regexpMember(pattern, list [, options])``: does ``pattern`` match some list string.

    UNDEFINED elements make the result UNDEFINED unless another element matches; any
    other non-string element is ERROR.
    """
    if len(args) not in (2, 3):
        return Error
    exceptional = _strict_strings(args)
    if exceptional is not None:
        return exceptional
    if len(args) == 3 and not isinstance(args[2], str):
        return Error
    pattern, items = args[0], args[1]
    if not isinstance(pattern, str) or not isinstance(items, list):
        return Error
    options = args[2] if len(args) == 3 else None
    could_be_undefined = False
    for item in items:
        if isinstance(item, str):
            # A bad pattern makes each test ERROR, which simply is not a match here.
            if regexp_helper(pattern, item, None, options) is True:
                return True
        elif item is Undefined:
            could_be_undefined = True
        else:
            return Error
    return Undefined if could_be_undefined else False


def _substitute(args: list, forced: str) -> object:
    if len(args) not in (3, 4):
        return Error
    exceptional = _strict_strings(args)
    if exceptional is not None:
        return exceptional
    if len(args) == 4 and not isinstance(args[3], str):
        return Error
    options = args[3] if len(args) == 4 else None
    if forced:
        options = (options or "") + forced
    if not all(isinstance(a, str) for a in args[:3]):
        return Error
    return regexp_helper(args[0], args[1], args[2], options)


def fn_regexps(args: list) -> object:
    """``regexps(pattern, target, replacement [, options])``."""
    return _substitute(args, "")


def fn_replace(args: list) -> object:
    """``replace(pattern, target, replacement [, options])``: first match, full target."""
    return _substitute(args, "f")


def fn_replaceall(args: list) -> object:
    """``replaceAll(pattern, target, replacement [, options])``: every match, full target."""
    return _substitute(args, "fg")


FUNCTIONS = {
    "regexp": fn_regexp,
    "regexpmember": fn_regexpmember,
    "regexps": fn_regexps,
    "replace": fn_replace,
    "replaceall": fn_replaceall,
}
