"""Property-based differential tests: random arguments, htc vs HTCondor's classad2.

Examples are bounded so the suite stays fast; each family draws from an alphabet chosen
to hit the interesting cases (separators, digits, case, whitespace, quotes).
"""

from __future__ import annotations

from classad_builtins_oracle import call
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htc.classad.values import Undefined

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

ascii_text = st.text(alphabet="abcAB xyz019,;.-_+'\"\\\t\n", max_size=12)
any_text = st.text(alphabet="abcAB 019,;.-_é'\"\t", max_size=12)
int64 = st.integers(min_value=-(1 << 63) + 1, max_value=(1 << 63) - 1)
small_int = st.integers(min_value=-50, max_value=50)
reals = st.floats(allow_nan=True, allow_infinity=True, width=64)
scalars = st.one_of(any_text, small_int, int64, reals, st.booleans(), st.just(Undefined))


def same(name: str, args: list) -> None:
    mine, theirs = call(name, args)
    assert mine == theirs, (name, args)


@SETTINGS
@given(st.lists(scalars, max_size=4))
def test_strcat(args):
    same("strcat", args)


@SETTINGS
@given(st.one_of(any_text, small_int, reals), st.lists(scalars, max_size=4))
def test_join(sep, items):
    same("join", [sep, items])
    same("join", [sep, *items])


@SETTINGS
@given(st.text(alphabet="abcdef", max_size=8), small_int, st.one_of(small_int, st.none()))
def test_substr(text, offset, length):
    same("substr", [text, offset] + ([] if length is None else [length]))


@SETTINGS
@given(scalars)
def test_case_and_size(value):
    for name in ("toupper", "tolower", "size", "string"):
        same(name, [value])


@SETTINGS
@given(scalars, scalars)
def test_strcmp(a, b):
    same("strcmp", [a, b])
    same("stricmp", [a, b])


@SETTINGS
@given(ascii_text, st.one_of(st.none(), st.text(alphabet=",; .-", max_size=3)))
def test_split(text, seps):
    same("split", [text] + ([] if seps is None else [seps]))


@SETTINGS
@given(st.one_of(reals, int64, st.text(alphabet="0123456789.-+eEx kKabc", max_size=8)))
def test_conversions_and_rounding(value):
    for name in ("int", "real", "bool", "floor", "ceiling", "round"):
        same(name, [value])


@SETTINGS
@given(st.one_of(small_int, reals), st.one_of(st.integers(0, 70), st.integers(-5, 5), reals))
def test_pow(base, exponent):
    mine, theirs = call("pow", [base, exponent])
    if mine[0] == "int" and base < 0 and exponent % 2 == 1:
        # HTCondor truncates pow(-2, 3) + 0.5 to -7; we return -8 (see the corpus note).
        assert mine[1] == theirs[1] - 1 or mine == theirs
    else:
        assert mine == theirs


@SETTINGS
@given(st.one_of(small_int, reals), st.one_of(small_int, reals, st.lists(small_int, max_size=4)))
def test_quantize(value, step):
    same("quantize", [value, step])


version_text = st.text(alphabet="0123.ab-", max_size=8)


@SETTINGS
@given(version_text, version_text, version_text)
def test_versions(a, b, c):
    mine, theirs = call("versioncmp", [a, b])
    assert (mine[1] > 0) - (mine[1] < 0) == (theirs[1] > 0) - (theirs[1] < 0)
    for name in ("versionlt", "versionle", "versiongt", "versionge", "versioneq"):
        same(name, [a, b])
    same("version_in_range", [a, b, c])


list_text = st.text(alphabet="abAB12 ,;\t.-", max_size=14)
delims = st.one_of(st.none(), st.sampled_from(["", ",", ";", " ", ", ", ";,"]))


def with_delims(args: list, d) -> list:
    return args + ([] if d is None else [d])


@SETTINGS
@given(list_text, list_text, delims)
def test_string_lists(items, listed, d):
    same("stringlistsize", with_delims([listed], d))
    for name in ("stringlistsum", "stringlistavg", "stringlistmin", "stringlistmax"):
        same(name, with_delims([listed], d))
    for name in ("stringlistmember", "stringlistimember", "stringlistsubsetmatch",
                 "stringlistisubsetmatch", "stringlistsintersect"):
        same(name, with_delims([items, listed], d))


@SETTINGS
@given(st.text(alphabet="0123456789.,+- e", max_size=12))
def test_string_list_numbers(listed):
    for name in ("stringlistsum", "stringlistavg", "stringlistmin", "stringlistmax"):
        same(name, [listed])


patterns = st.sampled_from(["a", "^a", "a$", "[ab]+", "(a)(b)?", "b*", "x|y", "[^a ]", "\\d",
                            "(?i)A", "a.b", "\\s+", "[[:alpha:]]+", "(a|ab)(c|bcd)", "\\w+$"])
options = st.sampled_from(["", "i", "f", "g", "fg", "ifg", "m", "s"])


@SETTINGS
@given(patterns, st.text(alphabet="abAB cd\n1x", max_size=10), options,
       st.sampled_from(["-", "[\\0]", "\\1", "<\\1>", ""]))
def test_regex_family(pattern, target, opts, replacement):
    same("regexp", [pattern, target, opts])
    same("regexps", [pattern, target, replacement, opts])
    same("replaceall", [pattern, target, replacement])
    same("stringlist_regexpmember", [pattern, target.replace("\n", ","), ", ", opts])
