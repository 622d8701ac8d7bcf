"""The evaluation context of compiled expressions, and the lookup of names in it.

A compiled closure (:mod:`htc.classad.compiler`) runs as ``fn(ctx)``; the functions here
resolve the names it reads. The context :class:`Ctx` carries HTCondor's compat-mode scoping:

* ``ad``: the ad in which unqualified names are looked up first; the search then walks that
  ad's enclosing (parent) ads, and finally falls back to ``target`` (the other ad of a match).
* ``my`` / ``target``: what ``MY`` and ``TARGET`` mean.  When evaluation moves into an
  attribute that lives in the target ad, the two swap, so ``TARGET.x`` inside the target ad
  refers back to the first ad, as in HTCondor's MatchClassAd.
* ``fallback``: whether a missing unqualified name may fall back to the target.  HTCondor
  does that for expressions of top-level ads and for the expression being evaluated, but not
  for attributes of nested ads (``[v = w].v`` is UNDEFINED even when the target has ``w``).
* ``busy``: the (ad, attribute) pairs being evaluated.  Reaching one again is a reference
  cycle and yields UNDEFINED for that inner reference, which is what HTCondor does
  (``[a = isUndefined(a) ? 0 : a + 1].a`` is 1).

Nested ad values (``[ ... ]`` literals) evaluate to :class:`~htc.classad.ad.ClassAd` objects
whose ``_parent`` is the ad the literal was evaluated in, which gives lexical scoping.
"""

from __future__ import annotations

from htc.classad.ast import Literal, Node
from htc.classad.values import Error, Undefined, is_classad


class Ctx:
    """Evaluation state of one top-level evaluation (see the module docstring)."""

    __slots__ = ("ad", "my", "target", "busy", "depth", "fallback")

    def __init__(self, ad, my, target):
        self.fallback = True
        self.ad = ad
        self.my = my
        self.target = target
        self.busy: set = set()
        self.depth = 0


def root_of(ad):
    """The outermost ad enclosing ``ad``."""
    while ad._parent is not None:
        ad = ad._parent
    return ad


def eval_in(ctx: Ctx, ad, lname: str, node: Node):
    """Evaluate ``node``, the expression of attribute ``lname`` found in ``ad``."""
    if node.__class__ is Literal:
        return node.value
    key = (id(ad), lname)
    busy = ctx.busy
    if key in busy:
        return Undefined
    busy.add(key)
    saved_ad, my, target, fallback = ctx.ad, ctx.my, ctx.target, ctx.fallback
    if ad._parent is None:
        root = ad
        ctx.fallback = True
    else:
        root = root_of(ad)
        ctx.fallback = False
    if root is not my:
        if root is target:
            ctx.my, ctx.target = target, my
        else:
            ctx.my, ctx.target = root, None
    ctx.ad = ad
    fn = node.fn
    if fn is None:  # first evaluation of this tree (the compiler imports this module)
        from htc.classad.compiler import compile_node
        fn = compile_node(node)
    v = fn(ctx)
    ctx.ad, ctx.my, ctx.target, ctx.fallback = saved_ad, my, target, fallback
    busy.discard(key)
    return v


def special_name(ctx: Ctx, ad, lname: str):
    """Value of MY / TARGET / PARENT seen from ``ad``, or None if ``lname`` is not one."""
    if lname == "my":
        return root_of(ad) if ad is not None else Undefined
    if lname == "target":
        if ad is None:
            return ctx.target if ctx.target is not None else Undefined
        root = root_of(ad)
        if root is ctx.my:
            other = ctx.target
        elif root is ctx.target:
            other = ctx.my
        else:
            other = None
        return other if other is not None else Undefined
    if lname == "parent":
        p = ad._parent if ad is not None else None
        return p if p is not None else Undefined
    return None


def lookup(ctx: Ctx, lname: str):
    """Evaluate an unqualified attribute reference."""
    ad = ctx.ad
    while ad is not None:
        node = ad._exprs.get(lname)
        if node is not None:
            return eval_in(ctx, ad, lname, node)
        ad = ad._parent
    special = special_name(ctx, ctx.ad, lname)
    if special is not None:
        return special
    t = ctx.target
    if t is not None and ctx.fallback:
        node = t._exprs.get(lname)
        if node is not None:
            return eval_in(ctx, t, lname, node)
    return Undefined


def select_in(ctx: Ctx, ad, lname: str):
    """Evaluate ``ad.lname`` where ``ad`` is an ad value (searching its enclosing ads too)."""
    a = ad
    while a is not None:
        node = a._exprs.get(lname)
        if node is not None:
            return eval_in(ctx, a, lname, node)
        a = a._parent
    special = special_name(ctx, ad, lname)
    return Undefined if special is None else special


def select_value(ctx: Ctx, base, lname: str):
    """``base.lname`` for any value ``base``: ads select, lists map, UNDEFINED stays."""
    if is_classad(base):
        return select_in(ctx, base, lname)
    if base is Undefined:
        return Undefined
    if isinstance(base, list):
        return [select_value(ctx, x, lname) if is_classad(x) or x is Undefined else Error
                for x in base]
    return Error


def subscript_value(ctx: Ctx, base, index):
    """``base[index]``: list element by integer, ad attribute by string."""
    if index.__class__ is int and isinstance(base, list):
        if not 0 <= index < len(base):
            # HTCondor converts the index to a C int: 2**32 + 1 selects element 1
            index = ((index + 0x80000000) & 0xFFFFFFFF) - 0x80000000
        return base[index] if 0 <= index < len(base) else Error
    if base is Error or index is Error:
        return Error
    if base is Undefined or index is Undefined:
        return Undefined
    if is_classad(base) and index.__class__ is str:
        return select_in(ctx, base, index.lower())
    return Error
