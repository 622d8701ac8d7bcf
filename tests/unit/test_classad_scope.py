"""LazyAd: a ClassAd read on demand behaves exactly like the ClassAd it lists, and reads only
what an expression needs; compile_evaluator equals evaluate_internal."""

from __future__ import annotations

import pytest

from htc.classad import ClassAd, Error, ExprTree, Undefined
from htc.classad.scope import LazyAd, LazyAttributes, compile_evaluator

SHARED = ClassAd('[ A = 1; B = A + 10; Name = "shared"; Self = Self + 1; Nested = [ x = A ] ]')


class Overlay(LazyAttributes):
    """SHARED with some attributes replaced, recording what was resolved."""

    __slots__ = ("own", "resolved")

    def __init__(self, own: dict[str, str]):
        super().__init__()
        self.own = {name.lower(): (name, ExprTree(text).node) for name, text in own.items()}
        self.resolved: list[str] = []

    def resolve(self, lname):
        self.resolved.append(lname)
        if lname in self.own:
            return self.own[lname][1]
        return SHARED.table.get(lname)

    def listing(self):
        for low, node in SHARED.table.items():
            yield SHARED.spellings[low], self.get(low)
        for low, (name, node) in self.own.items():
            yield name, node


def whole(own: dict[str, str]) -> ClassAd:
    ad = SHARED.copy()
    for name, text in own.items():
        ad[name] = ExprTree(text)
    return ad


def test_reads_only_what_the_expression_needs_and_shared_expressions_see_the_overlay():
    table = Overlay({"A": "5", "Unused": "error"})
    ad = LazyAd(table)
    assert compile_evaluator(ExprTree("B * 2"))(ad) == 30     # B = A + 10 with this ad's A
    assert table.resolved == ["b", "a"]
    assert compile_evaluator(ExprTree("B * 2"))(ad) == 30
    assert table.resolved == ["b", "a"]                       # remembered
    assert table._full is None                                # nothing listed the ad


@pytest.mark.parametrize("text", [
    "B", "MY.B", "TARGET.B", "Missing", "isUndefined(Missing)", 'Name == "SHARED"',
    "Self", "size(MY)", 'MY["b"]', 'eval("B + 1")', "unparse(B)", "Nested.x",
    'strcat(Name, "-", A)', "[ y = B ].y", "A =?= 5",
])
def test_evaluates_like_the_whole_ad(text):
    own = {"A": "5", "Extra": '"e"'}
    expr = ExprTree(text)
    assert expr.eval(LazyAd(Overlay(own))) == expr.eval(whole(own))
    assert compile_evaluator(expr)(LazyAd(Overlay(own))) == expr.evaluate_internal(whole(own))


def test_is_a_classad_for_everything_that_lists_it():
    own = {"A": "5", "Extra": '"e"'}
    ad, plain = LazyAd(Overlay(own)), whole(own)
    assert "a" in ad and "Missing" not in ad and ad._exprs._full is None
    assert list(ad) == list(plain) == ["A", "B", "Name", "Self", "Nested", "Extra"]
    assert len(ad) == 6 and ad == plain and plain == ad
    assert str(ad) == str(plain) and ad.printOld() == plain.printOld()
    assert ad.lookup("b") == plain.lookup("b") and ad.eval("B") == 15
    copy = ad.copy()
    assert type(copy) is ClassAd and copy == plain
    with pytest.raises(KeyError):
        ad.lookup("Missing")


def test_assigning_turns_it_into_an_ordinary_ad():
    ad = LazyAd(Overlay({"A": "5"}))
    ad["C"] = 3
    ad["a"] = 7
    del ad["Name"]
    assert ExprTree("B + C").eval(ad) == 20
    assert list(ad) == ["A", "B", "Self", "Nested", "C"]
    assert ExprTree("Name").eval(ad) is Undefined


def test_one_evaluator_serves_many_ads_and_recovers_from_deep_recursion():
    run = compile_evaluator(ExprTree("A * 2"))
    assert [run(LazyAd(Overlay({"A": str(i)}))) for i in range(4)] == [0, 2, 4, 6]
    chain = {f"C{i}": f"C{i + 1} + 1" for i in range(3000)}
    deep = compile_evaluator(ExprTree("C0"))
    assert deep(LazyAd(Overlay({**chain, "C3000": "0"}))) is Error  # too deep: ERROR
    assert deep(LazyAd(Overlay({"C0": "C1 + 1", "C1": "3"}))) == 4   # and usable afterwards
    cyclic = compile_evaluator(ExprTree("Self"))
    assert cyclic(LazyAd(Overlay({}))) is Undefined        # a cycle is UNDEFINED, as in HTCondor
    assert cyclic(LazyAd(Overlay({"Self": "4"}))) == 4     # no state left behind
    assert compile_evaluator(ExprTree("1 / 0"))(LazyAd(Overlay({}))) is Error
