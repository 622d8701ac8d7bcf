"""SignificantCache: negotiator_significant_attributes kept from cycle to cycle gives the
same answer as a fresh computation, and sees slot-ad and policy-text changes."""

from __future__ import annotations

import random

from htc.classad import ClassAd, ExprTree
from htc.daemons.autocluster import (NEVER_SIGNIFICANT, SignificantCache, _slow_refs,
                                     negotiator_significant_attributes)


def walked(ads) -> tuple[str, ...]:
    """The uncached walk over every value of every ad (what each cycle used to do)."""
    refs: set[str] = set()
    for ad in ads:
        _slow_refs(ad, refs)
    return tuple(sorted(refs - NEVER_SIGNIFICANT))


def slot(i: int, start: str = "TARGET.Owner != \"mallory\" && ImageSize < Memory") -> ClassAd:
    ad = ClassAd({"Name": f"slot1@n{i}", "Memory": 4096, "Cpus": 1, "ChildCpus": [1, 2]})
    ad["Start"] = ExprTree(start)
    ad["Requirements"] = ExprTree("START")
    ad["Rank"] = ExprTree("TARGET.Department == \"physics\"")
    ad["Listy"] = ExprTree("{ TARGET.Ignored }[0]")  # text starts with "{": skipped
    return ad


def test_cached_answer_matches_a_fresh_one_over_many_cycles():
    rnd = random.Random(7)
    texts = ["KeyboardIdle > 900", "TARGET.Group == Dept", "Foo + Bar > Memory", "True"]
    ads = [slot(i, rnd.choice(texts)) for i in range(30)]
    cache = SignificantCache()
    policy = ["RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2 && JobFoo"]
    for _ in range(5):
        for ad in rnd.sample(ads, 5):  # updates between cycles: literals and expressions
            ad["Memory"] = rnd.randint(1, 9)
            if rnd.random() < 0.5:
                ad["Start"] = ExprTree(rnd.choice(texts))
            if rnd.random() < 0.3:
                ad["KeyboardIdle"] = 5  # now resolved in the slot ad
            elif "KeyboardIdle" in ad:
                del ad["KeyboardIdle"]
        assert (negotiator_significant_attributes(ads, policy, cache=cache)
                == negotiator_significant_attributes(ads, policy))
        assert negotiator_significant_attributes(ads, cache=cache) == walked(ads)
        assert "ignored" not in walked(ads)


def test_a_changed_slot_expression_is_seen():
    cache = SignificantCache()
    ad = slot(1)
    assert "imagesize" in negotiator_significant_attributes([ad], cache=cache)
    ad["Start"] = ExprTree("TARGET.NewThing > 3")
    attrs = negotiator_significant_attributes([ad], cache=cache)
    assert "newthing" in attrs and "imagesize" not in attrs


def test_a_name_added_to_the_slot_ad_resolves_the_reference_there():
    cache = SignificantCache()
    ad = slot(1)
    assert "imagesize" in negotiator_significant_attributes([ad], cache=cache)
    ad["ImageSize"] = 10  # the slot now defines it: the job's is no longer read
    assert "imagesize" not in negotiator_significant_attributes([ad], cache=cache)
    del ad["ImageSize"]
    assert "imagesize" in negotiator_significant_attributes([ad], cache=cache)


def test_a_changed_policy_text_is_seen():
    cache = SignificantCache()
    ads = [slot(1)]
    assert "jobfoo" in negotiator_significant_attributes(ads, ["JobFoo > 1"], cache=cache)
    attrs = negotiator_significant_attributes(ads, ["TARGET.JobBar > 1"], cache=cache)
    assert "jobbar" in attrs and "jobfoo" not in attrs


def test_the_cache_forgets_when_full_without_wrong_answers():
    cache = SignificantCache()
    cache.MAX_TREES = 2
    ads = [slot(i, f"TARGET.A{i} > 0") for i in range(5)]
    assert negotiator_significant_attributes(ads, cache=cache) == \
        negotiator_significant_attributes(ads)
    assert len(cache._trees) <= 2


def test_the_list_text_check_agrees_with_the_printed_text():
    """A tree whose text starts with ``{`` is skipped; the check reads the tree, not the text."""
    from htc.classad.ast import ListExpr, Literal
    from htc.classad.printing import unparse
    from htc.daemons.autocluster import _text_starts_a_list

    texts = ["{ TARGET.Ignored }[0]", "{1, 2}[TARGET.I] + 1", "{ 1 } == TARGET.L", "({1})[0]",
             "-{1}[0]", "!{TARGET.X}[0]", "{1}.a", "{1} ?: TARGET.Y", "TARGET.Y ?: {1}",
             "{TARGET.A} ? 1 : 2", "TARGET.A ? {1} : {2}", "[a = {1}].a", "size({TARGET.X})",
             "{}[0] || TARGET.Z", "{ [b = 1] }[0].b", "TARGET.Owner != \"{x}\"", "'{x}' > 1",
             "START", "KeyboardIdle > 15 * 60 && LoadAvg < 0.3", "{1}[0] * {2}[0] - x",
             "(TARGET.A ? {1} : 2) + 3", "{1}[0] ? TARGET.B : 3", "x.y.z", "{1}[0][1]"]
    trees = [ExprTree(text).node for text in texts] + [
        Literal([1, 2]), Literal("{"), ListExpr([Literal(1)])]
    assert sum(_text_starts_a_list(node) for node in trees) >= 10
    for node in trees:
        assert _text_starts_a_list(node) == unparse(node).lstrip().startswith("{"), unparse(node)


def test_a_bare_name_reads_itself_remembered_by_its_name_not_its_tree():
    """``Requirements = START`` in every slot ad, each with a tree of its own (ads built in
    Python): :func:`~htc.daemons.tree_reads.tree_refs` answers as the walk does, for a name
    and for MY, TARGET and PARENT, without keeping one entry per tree."""
    from htc.classad.ad import external_refs
    from htc.daemons import tree_reads

    names = ["START", "Start", "KeyboardIdle", "MY", "target", "Parent", "x_1"]
    before = len(tree_reads._TREE_REFS)
    for _ in range(3):
        for name in names:
            node = ExprTree(name)._node
            assert tree_reads.tree_refs(node) == frozenset(external_refs(node)), name
    assert len(tree_reads._TREE_REFS) == before
    ads = [slot(i, "KeyboardIdle > 900" if i % 2 else "True") for i in range(20)]
    for ad in ads[::3]:
        ad["Requirements"] = ExprTree("MissingOnTheSlot")  # falls back to the job
    for ad in ads[1::4]:
        del ad["Start"]  # Requirements = START reads the job's START there
    cache = SignificantCache()
    for _ in range(2):  # (the second time from what the cache keeps)
        attrs = negotiator_significant_attributes(ads, cache=cache)
        assert attrs == walked(ads) and {"missingontheslot", "start"} <= set(attrs)
    from htc.classad.ast import AttrRef
    kept = [entry[0].__class__ for entry in cache._trees.values()]
    assert kept and AttrRef not in kept  # a bare name is kept by its name, not its 20 trees
