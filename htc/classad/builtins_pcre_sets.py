"""Byte sets for the PCRE2 translator: POSIX classes, escapes and Unicode properties.

PCRE2 in 8-bit non-UTF mode treats a subject as bytes and reads bytes 128-255 as Latin-1
code points for ``\\p`` properties; ASCII rules everywhere else (``\\w``, ``[:alpha:]``).
Every class is expanded here to an explicit set of byte values.
"""

from __future__ import annotations

import unicodedata


class PatternError(Exception):
    """A regular expression that cannot be compiled (PCRE2 would reject it, or ``re`` can't express it)."""


SPACE = set(b" \t\n\x0b\x0c\r")
_DIGIT = set(range(0x30, 0x3A))
_UPPER = set(range(0x41, 0x5B))
_LOWER = set(range(0x61, 0x7B))
_ALPHA = _UPPER | _LOWER
_WORD = _ALPHA | _DIGIT | {0x5F}
_XDIGIT = _DIGIT | set(b"abcdefABCDEF")
_PUNCT = set(range(0x21, 0x7F)) - _ALPHA - _DIGIT
_HSPACE = {0x09, 0x20, 0xA0}
_VSPACE = {0x0A, 0x0B, 0x0C, 0x0D, 0x85}
ALL = set(range(256))

POSIX_CLASSES = {
    b"alpha": _ALPHA, b"digit": _DIGIT, b"alnum": _ALPHA | _DIGIT, b"upper": _UPPER,
    b"lower": _LOWER, b"space": SPACE, b"blank": {0x20, 0x09}, b"punct": _PUNCT,
    b"xdigit": _XDIGIT, b"word": _WORD, b"cntrl": set(range(0x20)) | {0x7F},
    b"graph": set(range(0x21, 0x7F)), b"print": set(range(0x20, 0x7F)),
    b"ascii": set(range(0x80)),
}

CLASS_ESCAPES = {
    ord("d"): _DIGIT, ord("D"): ALL - _DIGIT, ord("w"): _WORD, ord("W"): ALL - _WORD,
    ord("s"): SPACE, ord("S"): ALL - SPACE, ord("h"): _HSPACE, ord("H"): ALL - _HSPACE,
    ord("v"): _VSPACE, ord("V"): ALL - _VSPACE,
}

SIMPLE_ESCAPES = {
    ord("a"): 0x07, ord("e"): 0x1B, ord("f"): 0x0C, ord("n"): 0x0A, ord("r"): 0x0D,
    ord("t"): 0x09,
}



def unicode_property(name: bytes, negate: bool) -> set[int]:
    """Bytes (read as Latin-1 code points, as non-UTF PCRE2 does) with a general category."""
    text = name.decode("ascii", "replace")
    if text.startswith("^"):
        negate, text = not negate, text[1:]
    if text == "Any":
        members = set(ALL)
    elif text == "L&":
        members = {b for b in ALL if unicodedata.category(chr(b)) in ("Lu", "Ll", "Lt")}
    elif len(text) in (1, 2) and text[0].isupper():
        members = {b for b in ALL if unicodedata.category(chr(b)).startswith(text)}
        if not members and len(text) == 2 and text not in _KNOWN_CATEGORIES:
            raise PatternError(f"unknown property \\p{{{text}}}")
    else:
        raise PatternError(f"unsupported property \\p{{{text}}}")
    return ALL - members if negate else members


_KNOWN_CATEGORIES = {
    "Cc", "Cf", "Cn", "Co", "Cs", "Ll", "Lm", "Lo", "Lt", "Lu", "Mc", "Me", "Mn", "Nd",
    "Nl", "No", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "Sc", "Sk", "Sm", "So", "Zl",
    "Zp", "Zs",
}


def byte_class(members: set[int], negate: bool = False) -> bytes:
    # A negated class stays negated ("[^a]"), because under caseless matching "not a"
    # must also reject "A", which the complement set {everything but a} would accept.
    body = b"".join(b"\\x%02x" % m for m in sorted(members))
    if negate:
        return b"[^" + body + b"]" if members else rb"[\x00-\xff]"
    return b"[" + body + b"]" if members else rb"(?!)"
