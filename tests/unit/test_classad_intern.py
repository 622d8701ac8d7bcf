"""Shared syntax trees (htc.classad.parser, "Shared trees"): the same expression text gives the
same node, through ``ExprTree``, ``ClassAd(text)`` and ``ClassAd({...})``; different texts never
share one; the cache stays within its bounds; an ad that replaces a shared tree leaves the other
ads alone; and evaluation, and the negotiator's per-tree caches, answer as with trees of their own.
"""

from __future__ import annotations

import classad_fuzz as F
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from htc.classad import ClassAd, ClassAdParseError, ExprTree, lexer, parser
from htc.classad.ad import external_refs
from htc.classad.ast import Literal
from htc.daemons.autocluster import SignificantCache, negotiator_significant_attributes
from htc.daemons.tree_reads import tree_refs

START = "(KeyboardIdle > 15 * 60) && (LoadAvg < 0.3)"


class _NoCache(dict):
    """A tree cache that keeps nothing: every text is parsed afresh (as before interning)."""

    def get(self, key, default=None):
        return default

    def __setitem__(self, key, value):
        return None  # kept nowhere: that is the point of this stand-in


@pytest.fixture
def empty_cache():
    """An empty tree cache for the test, and again after it (its count of characters kept true)."""
    parser._TREES.clear()
    parser._trees_chars = 0
    yield
    parser._TREES.clear()
    parser._trees_chars = 0


def _fresh(text: str):
    """The tree of ``text`` parsed now, shared with nothing."""
    p = parser.Parser(text)
    node = p.expr()
    assert p.tok.kind == lexer.EOF
    return node


def test_same_text_same_node_across_exprtree_and_ads():
    node = ExprTree(START).node
    assert ExprTree(START).node is node
    assert parser.parse_expr(START) is node
    assert ClassAd(f"[ Start = {START}; Requirements = START ]").table["start"] is node
    assert ClassAd({"Start": ExprTree(START)}).table["start"] is node
    ad = ClassAd()
    ad["Start"] = ExprTree(START)
    assert ad.table["start"] is node
    # two ads read from text share every expression, whichever came first
    a = ClassAd("[ Requirements = START; Rank = Memory / 1024 ]")
    b = ClassAd("[Rank = Memory / 1024;Requirements=START]")
    assert a.table["requirements"] is b.table["requirements"] is ExprTree("START").node
    assert a.table["rank"] is b.table["rank"] is ExprTree("Memory / 1024").node


def test_a_value_is_its_text_from_first_to_last_token():
    # the white space and comments around a value are not part of its text
    a = ClassAd("[ x = a + 1 ; y =  /* note */ a + 1 // more\n ]")
    assert a.table["x"] is a.table["y"] is ExprTree("a + 1").node


@pytest.mark.parametrize("one, other", [
    ('strcmp(x, "Abc")', 'strcmp(x, "abc")'),     # case inside a string literal
    ("x + 1", "x + 1.0"),                           # an int and a real
    ('x == "a b"', 'x == "a  b"'),                  # spacing inside a string literal
    ("x + 1", "x+1"),                               # spacing outside: a missed saving only
    ("X > 1", "x > 1"),                             # the case of a name (kept for printing)
])
def test_different_texts_different_nodes(one, other):
    a, b = ExprTree(one).node, ExprTree(other).node
    assert a is not b
    assert ClassAd(f"[ v = {one} ]").table["v"] is a
    assert ClassAd(f"[ v = {other} ]").table["v"] is b


def test_texts_that_differ_only_inside_a_string_evaluate_apart():
    ad = ClassAd('[ x = "abc" ]')
    assert ExprTree('strcmp(x, "Abc")').eval(ad) != 0
    assert ExprTree('strcmp(x, "abc")').eval(ad) == 0
    assert ExprTree("x + 1").eval(ClassAd("[ x = 1 ]")) == 2
    assert isinstance(ExprTree("x + 1.0").eval(ClassAd("[ x = 1 ]")), float)


def test_literals_are_not_kept(empty_cache):
    ad = ClassAd('[ a = 5; b = "slot1@node7"; c = -1; d = true; e = 2.5; '
                 'f = absTime("2024-01-01T00:00:00Z"); g = undefined ]')
    assert all(n.__class__ is Literal for n in ad.table.values())
    assert ExprTree("5").node.__class__ is Literal
    assert len(parser._TREES) == 0
    # two ads' literals are equal, and each ad has its own
    again = ClassAd('[ a = 5; b = "slot1@node7" ]')
    assert again.table["a"] == ad.table["a"] and again.table["a"] is not ad.table["a"]
    assert again.eval("b") == "slot1@node7"


def test_a_failed_parse_is_not_kept():
    for _ in range(2):
        with pytest.raises(ClassAdParseError):
            ExprTree("a +")
        with pytest.raises(ClassAdParseError):
            ClassAd("[ v = a + ; w = 1 ]")
    assert "a +" not in parser._TREES


def test_the_cache_holds_its_bound_of_texts(monkeypatch, empty_cache):
    monkeypatch.setattr(parser, "_TREES_MAX", 50)
    for i in range(300):
        text = f"a + {i}"
        node = ExprTree(text).node
        assert len(parser._TREES) <= 50
        assert ExprTree(text).node is node  # kept until the cache is next emptied
        assert ClassAd(f"[ v = b * {i} ]").eval("v") is not None
        assert len(parser._TREES) <= 50
    assert len(parser._TREES) > 0


def test_the_cache_holds_its_bound_of_characters(monkeypatch, empty_cache):
    monkeypatch.setattr(parser, "_TREES_MAX_CHARS", 10_000)
    for i in range(200):
        text = " || ".join(f"(Name == \"slot{k}@node{i}\")" for k in range(10))  # ~270 chars
        ExprTree(text)
        assert sum(map(len, parser._TREES)) <= 10_000
        assert parser._trees_chars == sum(map(len, parser._TREES))
    assert len(parser._TREES) > 10


def test_setting_an_attribute_leaves_ads_sharing_the_old_tree_alone():
    text = "[ a = 1; x = a + 1; y = x * 2 ]"
    ads = [ClassAd(text) for _ in range(3)]
    shared = ads[0].table["x"]
    assert all(ad.table["x"] is shared for ad in ads)
    ads[0]["x"] = ExprTree("a + 100")
    ads[1]["x"] = 7
    ads[1]["a"] = 50
    del ads[2]["y"]
    assert ads[0].eval("y") == 202
    assert ads[1].eval("y") == 14
    assert ads[2].table["x"] is shared and ads[2].eval("x") == 2
    assert repr(ExprTree(shared)) == "a + 1"
    fresh = ClassAd(text)
    assert fresh.table["x"] is shared and fresh.eval("y") == 4
    copy = fresh.copy()
    copy["x"] = ExprTree("a - 1")
    assert fresh.eval("x") == 2 and copy.eval("x") == 0


def test_a_shared_tree_evaluates_in_each_ad_it_is_in():
    low, high = ClassAd(f"[ KeyboardIdle = 10; LoadAvg = 0.1; Start = {START} ]"), \
        ClassAd(f"[ KeyboardIdle = 5000; LoadAvg = 0.1; Start = {START} ]")
    assert low.table["start"] is high.table["start"]
    for _ in range(2):  # compiled once, then run in both ads in turn
        assert low.eval("Start") is False
        assert high.eval("Start") is True
    job = ClassAd("[ Requirements = TARGET.Start; KeyboardIdle = 99999 ]")
    assert not low.matches(job) and high.matches(job)
    # a self-reference cycle is found per ad, not per tree
    text = "[ v = isUndefined(v) ? 1 : v + 1 ]"
    a, b = ClassAd(text), ClassAd(text)
    assert a.table["v"] is b.table["v"]
    assert a.eval("v") == b.eval("v") == 2


def test_tree_refs_of_a_shared_tree_is_that_of_its_text():
    node = ClassAd(f"[ Start = {START} ]").table["start"]
    assert tree_refs(node) == frozenset(external_refs(_fresh(START))) == {"keyboardidle", "loadavg"}
    assert tree_refs(ExprTree(START).node) is tree_refs(node)


def test_significant_attributes_of_a_shared_tree_follow_each_ads_names():
    # one tree, two ads: Foo is the slot's own in the first, the job's in the second
    text = "(KeyboardIdle > 900) && (Foo < 3) && (TARGET.RequestCpus > 0)"
    own = ClassAd(f"[ Foo = 1; KeyboardIdle = 1000; Start = {text} ]")
    other = ClassAd(f"[ KeyboardIdle = 1000; Start = {text} ]")
    assert own.table["start"] is other.table["start"]
    cache = SignificantCache()
    assert "foo" not in negotiator_significant_attributes([own], cache=cache)
    assert "foo" in negotiator_significant_attributes([other], cache=cache)
    assert "foo" not in negotiator_significant_attributes([own], cache=cache)
    assert negotiator_significant_attributes([own, other], cache=cache) == \
        negotiator_significant_attributes([own, other])


def test_significant_attributes_with_shared_trees_as_with_trees_of_their_own(monkeypatch):
    texts = [f"[ Name = \"slot{i}\"; KeyboardIdle = {i}; {'Foo = 1;' if i % 3 else ''} "
             f"Start = {START if i % 2 else '(Foo > 1) || (TARGET.Bar == MY.Name)'}; "
             "Requirements = START; Rank = TARGET.Baz ]" for i in range(30)]
    shared = [ClassAd(t) for t in texts]
    monkeypatch.setattr(parser, "_TREES", _NoCache())
    monkeypatch.setattr(parser, "_trees_chars", parser._trees_chars)  # (given back after)
    own = [ClassAd(t) for t in texts]
    assert own[1].table["start"] is not own[3].table["start"]
    assert shared[1].table["start"] is shared[3].table["start"]
    cache = SignificantCache()
    expected = negotiator_significant_attributes(own)
    assert negotiator_significant_attributes(shared, cache=cache) == expected
    assert negotiator_significant_attributes(own, cache=cache) == expected


def _outcome(node, scope, target):
    """What evaluating ``node`` gives, as a comparable text (NaN, ERROR and raises included)."""
    try:
        return repr(ExprTree(node).eval(scope, target))
    except Exception as exc:  # the same failure is the same outcome
        return type(exc).__name__


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.randoms(use_true_random=False))
def test_shared_trees_evaluate_as_fresh_ones(rng):
    text = F.expression(rng)
    lowered = text.lower()
    assume("random" not in lowered and "time" not in lowered)  # (values of the moment)
    try:
        fresh = _fresh(text)
    except ClassAdParseError:
        assume(False)
    node = parser.parse_expr(text)
    assert node == fresh
    assert parser.parse_expr(text) is node or node.__class__ is Literal
    in_ad = ClassAd(f"[ v = {text}\n ]").table["v"]
    assert in_ad == fresh
    assert in_ad is node or node.__class__ is Literal
    scope, target = ClassAd(F.SCOPE_TEXT), ClassAd(F.TARGET_TEXT)
    other = ClassAd(F.SCOPE_TEXT.replace("a = 1", "a = 7"))
    for s, t in ((None, None), (scope, None), (scope, target), (other, target), (target, scope)):
        assert _outcome(node, s, t) == _outcome(fresh, s, t)
