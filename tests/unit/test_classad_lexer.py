"""The tokenizer's fast path (one regular expression for the common tokens) against its careful
path (character by character): the same tokens, the same errors at the same offsets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htc.classad import lexer as L
from htc.classad.errors import ClassAdParseError


def careful_skip(text: str, i: int, n: int) -> int:
    while i < n:
        c = text[i]
        if c in L._WS:
            i += 1
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            if j < 0:
                raise ClassAdParseError(text, i, "a closing '*/' for this comment")
            i = j + 2
        else:
            break
    return i


def careful_tokenize(text: str) -> list[L.Token]:
    """What tokenize returned before it had a fast path: every token read by _next_token."""
    toks: list[L.Token] = []
    n = len(text)
    i = careful_skip(text, 0, n)
    while i < n:
        i, _ = L._next_token(text, i, n, toks.append, L._signed(toks, i))
        i = careful_skip(text, i, n)
    toks.append(L.Token(L.EOF, None, n, n))
    return toks


def outcome(tokenize, text: str):
    try:
        return [(t.kind, t.value, t.pos, t.end) for t in tokenize(text)]
    except ClassAdParseError as exc:
        return ("error", str(exc), exc.pos)


TRICKY = [
    'Requirements = (TARGET.Arch == "X86_64") && (TARGET.Memory >= RequestMemory)',
    "x = 1.5e3 + .25 - 7 * 017", "1.", "1.e5", "1e", "1e+", "1.5.3", "x.5", "a.b", "00.5", "0", "-1",
    '"a" "b"', '"a"\n"b"', '"a" // c\n"b"', r'"tab\there"', '"é"', "'quoted name'", "naïve", "x١", "1١",
    "a /* comment */ b", "a // to the end", "a /* open", "a >>> b >>= c =?= d =!= e", "[ a = 1; b = {1, 2} ]",
    "isnt is true FALSE Undefined error", "$", "a @ b", "9223372036854775808", "1e999", '"unterminated',
    "-017", "1 -017", "-00", "-019", "0x1.8", "-0x10", "0x", "..a", "..5", "...", "a..b", "09.5",
]


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_texts_tokenize_as_the_careful_path_does(text):
    assert outcome(L.tokenize, text) == outcome(careful_tokenize, text)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab_Z09.eE+-*/%<>=!~&|^?:()[]{},; \t\n"\\\'é١x')), max_size=40))
def test_any_text_tokenizes_as_the_careful_path_does(text):
    assert outcome(L.tokenize, text) == outcome(careful_tokenize, text)


def test_ads_share_the_parsed_values_of_identical_texts_and_errors_stay_errors():
    from htc.classad import ClassAd

    first = ClassAd('[ Requirements = (TARGET.Memory >= 1024) && (OpSys == "LINUX"); ProcId = 0 ]')
    second = ClassAd('[ ProcId = 1; Requirements = (TARGET.Memory >= 1024) && (OpSys == "LINUX") ]')
    assert first.table["requirements"] is second.table["requirements"]  # parsed once
    assert (first["ProcId"], second["ProcId"]) == (0, 1)
    for bad in ("[ a = 1 2 ]", "[ a = (1 ]", "[ a = ]"):
        with pytest.raises(ClassAdParseError):
            ClassAd(bad)
    assert ClassAd("[ a = 1 ]")["a"] == 1  # a value that failed before is not remembered wrongly
