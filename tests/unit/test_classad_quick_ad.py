"""The quick reading of a top-level ad (htc.classad.parser, "The quick reading"): whatever the
text, it either declines or reads exactly what the full reading reads -- the same names as
spelled, the same trees (a literal of the same type and value, an expression the same shared
tree), the same end offset; the full reading still words every error.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import classad_fuzz as F
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from htc.classad import ClassAd, ClassAdParseError, parser
from htc.classad.ast import Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import negotiator_bench as nb  # noqa: E402 (the benchmark's ads: the ads the reading is for)

NAMES = ["a", "Name", "KFlops", "_x9", "MY", "target", "true", "TRUE", "is", "isnt", "error",
         "Undefined", "is_x", "true1", "'quoted name'", "b"]
VALUES = (F.LITERALS + [
    "-5", "-0", "-0.0", "0.0", "1e5", "1E-02", "8.000000000000000E-02", "01", "00.5", ".5", "1.",
    "-.5", "- 5", "--5", "5 5", "a = b", "a == b", "x // c\n", "x /* c; */ + 1", "x/*c*/", "a / 2",
    "a/b", "TRUE", "False", "True_x", "isnt", "is", "trueish", '"a\\"b"', '"é"', '"a" "b"',
    '"a;b]"', '"tab\there"', "9223372036854775807", "99999999999999999999", "999999999999999999",
    "1" * 19, "(KeyboardIdle > 15 * 60) && (LoadAvg < 0.3)", "START", "TARGET.Memory >= 1024",
    "x ?: 3", "a ? b : c", "{ 1, 2 }", "[ a = 1 ]", "c[0]", "strcat(a, \"b\")", "f(a, b)", "(a",
    "a)", "", " ", "x +", "1 + ", ".a", "a..b", "a.b.c", "x @ y", "$x", "'q'", "-017", "0x10",
    "undefined", "error", "ERROR", 'strcat("a;b", x)', 'x == "]"', '"a" + "b;"', 'x == "http://y"',
    '"a" "b" + x', 'x /"*y"', '"/*" + x', 'a == "x" && b == "y;z"', '"a"b', 'x == "it\'s"',
    '"é" + x', 'x + "\\"', '"" == x', 'x == "a\nb"', 'member(x, {"a", "b"})',
])
SEPARATORS = [";", "; ", " ;", ";;", "\n;", ";\t", ";\n", " ; ;", "", "\f;\v"]
ENDS = ["]", " ]", ";]", "; ]", ";;]", "\n]", "", "] trailing", "]]", "; /* c */ ]", "// c\n]"]


def _full(text: str):
    """The full reading of ``text``: (names as spelled, trees, end) or the error's text."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parser, "_quick_ad", lambda text, i: None)
        return _read(text)


def _read(text: str):
    try:
        got = parser.parse_ad_prefix(text)
    except ClassAdParseError as exc:
        return f"ClassAdParseError: {exc}"
    if got is None:
        return None
    node, end = got
    return [name for name, _ in node.pairs], [n for _, n in node.pairs], end


def _random_ad(rng: random.Random) -> str:
    parts = []
    for k in range(rng.randrange(5)):
        value = rng.choice(VALUES) if rng.random() < 0.8 else F.expression(rng)
        space = rng.choice(["", " ", "  ", "\n", "\t"])
        parts.append(f"{rng.choice(NAMES)}{space}={space}{value}")
        if k:
            parts[-2] += rng.choice(SEPARATORS)
    return rng.choice(["[", "[ ", "[\n", " [", "[;"]) + "".join(parts) + rng.choice(ENDS)


def _same(text: str) -> None:
    quick, full = _read(text), _full(text)
    if isinstance(quick, str) or isinstance(full, str) or quick is None or full is None:
        assert quick == full, text  # the same error, word for word
        return
    assert quick[0] == full[0] and quick[2] == full[2], text
    for q, f in zip(quick[1], full[1]):
        assert q == f, text  # (a literal's type and repr: 1 is not 1.0, -0.0 is not 0.0)
        assert q is f or q.__class__ is Literal, text
    assert len(quick[1]) == len(full[1])


@settings(max_examples=600, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.randoms(use_true_random=False))
def test_the_quick_reading_reads_what_the_full_reading_reads(rng):
    _same(_random_ad(rng))


@pytest.mark.parametrize("value", VALUES)
def test_each_value_alone_in_an_ad(value):
    for text in (f"[ v = {value} ]", f"[v={value};]", f"[ a = 1; v = {value}; b = 2 ]"):
        _same(text)


def test_slot_and_job_ads_are_read_quickly_and_alike():
    rng = random.Random(7)
    ads = nb.make_pool(300, rng)
    _, requests, _ = nb.make_requests(20, random.Random(8), users=20, jobs=100)
    ads += [r.job for reqs in requests.values() for r in reqs]
    for ad in ads:
        text = repr(ad)
        assert parser._quick_ad(text, 0) is not None, text
        _same(text)
        assert ClassAd(text) == ad


def test_the_quick_reading_declines_what_it_does_not_read():
    for text in ("[ 'odd name' = 1 ]", "[ true = 1 ]", "[ a = 1;; b = 2 ]", "[ a = x // c\n ]",
                 "[ a = { 1 } ]", "[ a = \"\\n\" ]", "[ a = 1 + ]", "[]", "[ a = 1 ] "[:-2]):
        assert parser._quick_ad(text, 0) is None, text
    assert parser._quick_ad("[ a = 1; b = x + 1 ]", 0) is not None
    assert parser._quick_ad("[a=-0.0;]", 0)[0].table["a"][1].value.hex() == "-0x0.0p+0"


def test_errors_are_worded_by_the_full_reading():
    for text in ("[ a = 1; b = x + ; c = 2 ]", "[ a = 1; true = 2 ]", "[ a = 1 b = 2 ]"):
        with pytest.raises(ClassAdParseError) as got:
            ClassAd(text)
        assert f"ClassAdParseError: {got.value}" == _full(text)


@pytest.mark.parametrize("text", ["a ?:", "f(a ?:", "a ?: ", "x + 1 ?:"])
def test_an_elvis_with_nothing_after_it_is_a_parse_error(text):
    # (it read past the end of the tokens: an IndexError, not an error that says what is missing)
    with pytest.raises(ClassAdParseError, match="an operand"):
        parser.parse_expr(text)
    _same(f"[ v = {text}; w = 1 ]")
    _same(f"[ v = {text} ]")
