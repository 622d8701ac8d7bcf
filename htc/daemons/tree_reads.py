"""What a syntax tree reads, remembered per tree for the cycle's walks that ask it again.

The negotiator asks the same question of every slot ad's trees twice a cycle: the significant
attributes walk every tree first (:class:`htc.daemons.autocluster.SignificantCache`), and the
cycle follows the same trees again (:func:`htc.daemons.negotiator.slots.closure`).
:func:`tree_refs` walks each tree once for both.

Trees are remembered by identity, and the same text is mostly the same tree: the ClassAd
parser shares the tree of a text it read before (``ClassAd(text)``'s values and
``ExprTree(text)``: "Shared trees" in :mod:`htc.classad.parser`), so the 2,446 desktop slots of
the benchmark's pool, each with the same ``START``, are one walk and one entry. A tree's answer
depends on the tree alone, so an entry is right for every ad that holds it. Trees built
otherwise (old-syntax text, a tree built node by node, a text read again after the parser's
cache was emptied) are one each: a bare name (``Requirements = START``, which nearly every
slot ad has) reads that name, so its answer is remembered by the name, not by the tree.
"""

from __future__ import annotations

from functools import cache

#: id(syntax tree) -> (the tree, the names it reads): the significant attributes walk every
#: slot tree of a cycle first, and the negotiator's cycle follows the same trees again
#: (:func:`htc.daemons.negotiator.slots.closure`): each tree is walked once for both. (Slot ads
#: come fresh each cycle, so that is the one reuse.) The entry keeps its tree alive, so an id
#: is never reused while cached; trees are immutable.
_TREE_REFS: dict[int, tuple] = {}
_TREE_REFS_MAX = 200_000
#: a bare name's lower-case name -> what it reads (itself; nothing for MY, TARGET, PARENT)
_BARE: dict[str, frozenset[str]] = {}
_BARE_MAX = 10_000


def tree_refs(node, external_refs=None) -> frozenset[str]:
    """The names syntax tree ``node`` reads from outside itself (``TARGET.x`` kept qualified),
    remembered by identity (a bare name by its name). ``external_refs``:
    :func:`htc.classad.ad.external_refs`, when the caller has it at hand."""
    hit = _TREE_REFS.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    if external_refs is None:
        from htc.classad.ad import external_refs
    if node.__class__ is _attr_ref():
        refs = _BARE.get(node.lname)
        if refs is None:
            if len(_BARE) >= _BARE_MAX:
                _BARE.clear()
            refs = _BARE[node.lname] = frozenset(external_refs(node))
        return refs
    refs = frozenset(external_refs(node))
    if len(_TREE_REFS) >= _TREE_REFS_MAX:
        _TREE_REFS.clear()
    _TREE_REFS[id(node)] = (node, refs)
    return refs


@cache
def _attr_ref() -> type:
    """:class:`htc.classad.ast.AttrRef` (imported at the first walk, not with this module)."""
    from htc.classad.ast import AttrRef
    return AttrRef
