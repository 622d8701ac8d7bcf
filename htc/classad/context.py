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
from htc.classad.clock import now_seconds
from htc.classad.values import Error, Undefined, is_classad


class EvalFailed(Exception):
    """Internal: the evaluation cannot be done (HTCondor's ``EVAL_FAIL``), e.g. ``.x`` with no
    ad to start from."""


#: ``root`` of an evaluation with a target: the match ad, built on demand
MATCH = object()

#: names answered where the first ad lacks them (HTCondor's special attribute names)
SPECIAL_NAMES = frozenset({"self", "my", "root", "toplevel", "parent", "currenttime"})

#: names the match ad and its two context ads define
_CTX_NAMES = frozenset({"other", "target", "my", "ad"})
_MATCH_NAMES = frozenset({"lctx", "rctx", "left", "right", "symmetricmatch", "leftmatchesright",
                          "rightmatchesleft", "leftrankvalue", "rightrankvalue"})
_VIRTUAL_NAMES = _CTX_NAMES | _MATCH_NAMES

_MATCH_TEXT = ("[symmetricMatch = RIGHT.requirements && LEFT.requirements; "
               "leftMatchesRight = RIGHT.requirements; rightMatchesLeft = LEFT.requirements; "
               "leftRankValue = LEFT.rank; rightRankValue = RIGHT.rank]")
_LCTX_TEXT = "[other = .RIGHT; target = .RIGHT; my = .LEFT; ad = .LEFT]"
_RCTX_TEXT = "[other = .LEFT; target = .LEFT; my = .RIGHT; ad = .RIGHT]"


class Ctx:
    """Evaluation state of one top-level evaluation (see the module docstring).

    ``left``/``right`` are the two ads of a match (None without a target); ``root`` is the
    evaluation's root ad, :data:`MATCH` with a target, None with no scope.
    """

    __slots__ = ("ad", "my", "target", "busy", "depth", "fallback", "left", "right", "root",
                 "_match")

    def __init__(self, ad, my, target):
        self.fallback = True
        self.ad = ad
        self.my = my
        self.target = target
        self.busy: set = set()
        self.depth = 0
        self.set_scopes(my, target)

    def set_scopes(self, my, target) -> None:
        """Start an evaluation with MY = ``my`` and TARGET = ``target`` (either may be None)."""
        self._match = None
        if target is not None and target is not my and my is not None:
            self.left, self.right, self.root = my, target, MATCH
        else:
            self.left = self.right = None
            self.root = root_of(my) if my is not None else None


def match_ads(ctx: Ctx):
    """(match, lctx, rctx): the ads HTCondor's MatchClassAd puts around the two ads."""
    if ctx._match is None:
        from htc.classad.ad import ClassAd
        match = ClassAd(_MATCH_TEXT)
        lctx, rctx = ClassAd(_LCTX_TEXT), ClassAd(_RCTX_TEXT)
        lctx._parent = rctx._parent = match
        for name, value in (("lCtx", lctx), ("rCtx", rctx), ("LEFT", ctx.left),
                            ("RIGHT", ctx.right)):
            match._names[name.lower()] = name
            match._exprs[name.lower()] = Literal(value)
        ctx._match = (match, lctx, rctx)
    return ctx._match


def root_ad(ctx: Ctx):
    """The evaluation's root ad (building the match ad if need be); EvalFailed if none."""
    root = ctx.root
    if root is MATCH:
        return match_ads(ctx)[0]
    if root is None:
        raise EvalFailed("no root ad")
    return root


def parent_of(ctx: Ctx, ad):
    """The ad enclosing ``ad`` for lookups: none above the root; in a match, the context ad
    above each of the two ads."""
    if ctx.left is not None:
        if ad is ctx.left:
            return match_ads(ctx)[1]
        if ad is ctx.right:
            return match_ads(ctx)[2]
    if ad is ctx.root:
        return None
    return ad._parent


def special(ctx: Ctx, ad, lname: str):
    """The value of a special name seen from ``ad`` (which lacks an attribute of that name)."""
    if lname == "self" or lname == "my":
        return ad
    if lname == "root" or lname == "toplevel":
        return root_ad(ctx)
    if lname == "parent":
        p = parent_of(ctx, ad)
        return p if p is not None else Undefined
    return int(now_seconds())  # currenttime


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
        if ctx.left is not None and (root is ctx.left or root is ctx.right):
            ctx.my, ctx.target = root, ctx.right if root is ctx.left else ctx.left
        elif root is target:
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
    if lname == "target":
        if ad is None:
            return ctx.target if ctx.target is not None else Undefined
        return _other_side(ctx, ad)
    if lname in SPECIAL_NAMES:
        return Undefined if ad is None else special(ctx, ad, lname)
    return None


def _other_side(ctx: Ctx, ad):
    root = root_of(ad)
    if root is ctx.my:
        other = ctx.target
    elif root is ctx.target:
        other = ctx.my
    else:
        other = None
    return other if other is not None else Undefined


_MISSING = object()


def _find(ctx: Ctx, start, lname: str):
    """Look ``lname`` up from ``start`` as HTCondor's LookupInScope does: the value, or
    _MISSING when no ad defines it (so that a match may fall back to the other ad)."""
    node = start._exprs.get(lname)
    if node is not None:
        return eval_in(ctx, start, lname, node)
    if lname in SPECIAL_NAMES:
        return special(ctx, start, lname)
    pair = ctx.left is not None
    a = start
    while True:
        if pair and (a is ctx.left or a is ctx.right):
            # above the two ads of a match: their context ad, then the match ad
            if lname in _VIRTUAL_NAMES:
                match, lctx, rctx = match_ads(ctx)
                for v in (lctx if a is ctx.left else rctx, match):
                    node = v._exprs.get(lname)
                    if node is not None:
                        return eval_in(ctx, v, lname, node)
            break
        if a is ctx.root:
            break
        a = a._parent
        if a is None or a is start:
            break
        node = a._exprs.get(lname)
        if node is not None:
            return eval_in(ctx, a, lname, node)
    if lname == "target" and not pair:
        return _other_side(ctx, start)
    return _MISSING


def resolve(ctx: Ctx, start, lname: str):
    """``lname`` looked up from ``start`` (no fallback to the target): UNDEFINED if missing."""
    v = _find(ctx, start, lname)
    return Undefined if v is _MISSING else v


def lookup(ctx: Ctx, lname: str):
    """Evaluate an unqualified attribute reference."""
    ad = ctx.ad
    if ad is None:
        return Undefined
    v = _find(ctx, ad, lname)
    if v is not _MISSING:
        return v
    # HTCondor's alternate scope: the other ad of a match, for the two ads themselves
    t = ctx.target
    if t is not None and ctx.fallback and (ctx.left is None or ad is ctx.left or ad is ctx.right):
        node = t._exprs.get(lname)
        if node is not None:
            return eval_in(ctx, t, lname, node)
    return Undefined


def lookup_absolute(ctx: Ctx, lname: str):
    """Evaluate ``.lname``: from the root ad, with no fallback to the target."""
    return resolve(ctx, root_ad(ctx), lname)


def select_in(ctx: Ctx, ad, lname: str):
    """Evaluate ``ad.lname`` where ``ad`` is an ad value (searching its enclosing ads too)."""
    return resolve(ctx, ad, lname)


def select_value(ctx: Ctx, base, lname: str):
    """``base.lname`` for any value ``base``: ads select, lists map, UNDEFINED stays; an ad a
    string subscript gave is UNDEFINED (htc.classad.ad.SubscriptedAd)."""
    if is_classad(base):
        return Undefined if getattr(base, "_detached", False) else select_in(ctx, base, lname)
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
        # HTCondor looks the name up in that ad only: no enclosing ads, no scope names
        lname = index.lower()
        node = base._exprs.get(lname)
        if node is None:
            return Undefined
        if getattr(base, "_detached", False):
            # a copy a subscript gave: evaluated on its own, as its own root, with no target
            base, outer = _twin(base, False), ctx
            ctx = Ctx(base, base, None)
            ctx.busy, ctx.depth = outer.busy, outer.depth
        value = eval_in(ctx, base, lname, node)
        return _twin(value, True) if is_classad(value) else value
    return Error


def _twin(ad, detached: bool):
    """A copy of ``ad`` with no enclosing ad: a SubscriptedAd (``detached``) or a plain ClassAd."""
    from htc.classad.ad import ClassAd, SubscriptedAd

    twin = (SubscriptedAd if detached else ClassAd).__new__(SubscriptedAd if detached else ClassAd)
    twin._exprs, twin._names, twin._parent = dict(ad._exprs), dict(ad._names), None
    return twin
