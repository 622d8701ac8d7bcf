"""Builtin functions that need unevaluated arguments or the evaluation context.

The strict builtins live in :mod:`htc.classad.builtins` and receive evaluated arguments.  The
ones here are compiled like operators: each entry of :data:`SPECIAL_FORMS` takes the
:class:`~htc.classad.ast.Call` node and returns a closure ``fn(ctx)``.

Behaviour follows HTCondor 25.14.1 (compat mode):

* ``ifThenElse(c, a, b)`` evaluates only the branch it picks; a non-boolean, non-numeric
  condition is ERROR, an UNDEFINED one gives UNDEFINED.
* ``eval(s)`` parses the string ``s`` and evaluates it where the call stands; a parse error is
  ERROR; a non-string argument is returned as is, except UNDEFINED which is ERROR.
* ``unparse(attr)`` gives the pretty text of the attribute's expression, ``""`` when the
  attribute is missing or the reference is qualified (``MY.x``), ERROR for any other argument.
* ``evalInEachContext(e, list)`` evaluates ``e`` inside each ad of the list (ERROR for
  elements that are not ads); ``countMatches(e, list)`` counts the ads where ``e`` is true.
* ``unresolved(attr [, regex])`` lists (or tests by regex) the attribute references of an
  attribute's expression that the ads do not define.
"""

from __future__ import annotations

import re
from functools import lru_cache

from htc.classad.ast import AdExpr, AttrRef, Call, Literal, Node, Paren, Select, Subscript
from htc.classad.compiler import compile_node
from htc.classad.context import Ctx, root_of
from htc.classad.errors import ClassAdParseError
from htc.classad.operators import is_true_for_match, truth
from htc.classad.values import Error, Undefined, is_classad

#: deepest nesting of eval() calls inside one evaluation
MAX_EVAL_DEPTH = 64


def _ifthenelse(node: Call):
    if len(node.args) != 3:
        return lambda ctx: Error
    cf, tf, of = (compile_node(a) for a in node.args)

    def ifthenelse(ctx):
        c = truth(cf(ctx))
        if c is True:
            return tf(ctx)
        if c is False:
            return of(ctx)
        return c
    return ifthenelse


@lru_cache(maxsize=4096)
def _parse_for_eval(text: str) -> Node | None:
    try:
        return __import__("htc.classad.parser", fromlist=["parse_expr"]).parse_expr(text)
    except ClassAdParseError:
        return None


def _eval(node: Call):
    if len(node.args) != 1:
        return lambda ctx: Error
    af = compile_node(node.args[0])

    def eval_(ctx):
        v = af(ctx)
        if v.__class__ is not str:
            return Error if v is Undefined else v
        tree = _parse_for_eval(v)
        if tree is None or ctx.depth >= MAX_EVAL_DEPTH:
            return Error
        ctx.depth += 1
        r = (tree.fn or compile_node(tree))(ctx)
        ctx.depth -= 1
        return r
    return eval_


def _find(ctx: Ctx, lname: str):
    """(ad, node) where an unqualified name resolves, or (None, None)."""
    ad = ctx.ad
    while ad is not None:
        n = ad._exprs.get(lname)
        if n is not None:
            return ad, n
        ad = ad._parent
    return None, None


def _unparse(node: Call):
    from htc.classad.printing import unparse
    if len(node.args) != 1:
        return lambda ctx: Error
    arg = node.args[0]
    if arg.__class__ is Select:
        return lambda ctx: ""
    if arg.__class__ is not AttrRef:
        return lambda ctx: Error
    lname = arg.lname

    def unparse_(ctx):
        _, n = _find(ctx, lname)
        return "" if n is None else unparse(n, pretty=True)
    return unparse_


def _in_each(ctx: Ctx, ad, fn):
    saved = ctx.ad, ctx.my, ctx.target
    root = root_of(ad)
    if root is not ctx.my:
        if root is ctx.target:
            ctx.my, ctx.target = ctx.target, ctx.my
        else:
            ctx.my, ctx.target = root, None
    ctx.ad = ad
    v = fn(ctx)
    ctx.ad, ctx.my, ctx.target = saved
    return v


def _eval_in_each_context(node: Call):
    if len(node.args) != 2:
        return lambda ctx: Error
    ef, lf = (compile_node(a) for a in node.args)

    def each(ctx):
        lst = lf(ctx)
        if lst is Undefined:
            return Undefined
        if not isinstance(lst, list):
            return Error
        return [_in_each(ctx, x, ef) if is_classad(x) else Error for x in lst]
    return each


def _count_matches(node: Call):
    if len(node.args) != 2:
        return lambda ctx: Error
    ef, lf = (compile_node(a) for a in node.args)

    def count(ctx):
        lst = lf(ctx)
        if lst is Undefined:
            return 0
        if not isinstance(lst, list):
            return Error
        return sum(1 for x in lst if is_classad(x) and is_true_for_match(_in_each(ctx, x, ef)))
    return count


# -- unresolved() --------------------------------------------------------------------------

def _ci_add(refs: dict[str, str], name: str) -> None:
    refs.setdefault(name.lower(), name)


def _resolves(ctx: Ctx, scopes: list, lname: str) -> bool:
    for ad in scopes:
        a = ad
        while a is not None:
            if lname in a._exprs:
                return True
            a = a._parent
    return False


def _unresolved_refs(ctx: Ctx, home, expr: Node) -> tuple[dict, dict]:
    """Unresolved (my-side, target-side) references of ``expr`` living in ``home``."""
    from htc.classad.printing import unparse
    mine: dict[str, str] = {}
    theirs: dict[str, str] = {}
    target = ctx.target if root_of(home) is ctx.my else (ctx.my if root_of(home) is ctx.target
                                                          else None)

    todo: list[tuple[Node, list]] = [(expr, [])]

    def visit(n: Node, locals_: list) -> None:
        t = n.__class__
        if t is AttrRef:
            if n.lname in ("my", "target", "parent"):
                return
            if not _resolves(ctx, locals_ + [home], n.lname):
                _ci_add(mine, n.name)
            return
        if t is Select:
            base = n.base
            if base.__class__ is Paren:
                base = base.inner
            if base.__class__ is AttrRef and base.lname == "target":
                if target is None or n.lname not in target._exprs:
                    _ci_add(theirs, n.name)
                return
            if base.__class__ is AttrRef and base.lname == "my":
                if n.lname not in root_of(home)._exprs:
                    _ci_add(mine, n.name)
                return
            if base.__class__ is AttrRef and base.lname == "parent":
                if not _resolves(ctx, [home._parent] if home._parent else [], n.lname):
                    _ci_add(mine, n.name)
                return
            if base.__class__ is AttrRef:
                ad_node = None
                for scope in locals_ + [home]:
                    a = scope
                    while a is not None and ad_node is None:
                        ad_node = a._exprs.get(base.lname)
                        a = a._parent
                    if ad_node is not None:
                        break
                if ad_node is not None:
                    if ad_node.__class__ is AdExpr and n.lname not in ad_node.table:
                        _ci_add(mine, n.name)
                    return
            _ci_add(mine, unparse(n))
            return
        if t is Subscript and n.base.__class__ is not AttrRef and not isinstance(
                n.base, (Literal, AdExpr)):
            _ci_add(mine, unparse(n))
            return
        if t is AdExpr:
            from htc.classad.ad import ClassAd
            inner = ClassAd._from_node(n, home)
            for _, child in reversed(n.pairs):
                todo.append((child, [inner] + locals_))
            return
        # (a stack, not recursion: a chain of thousands of terms is as deep as it is long)
        todo.extend((child, locals_) for child in reversed(n.children()))

    while todo:
        visit(*todo.pop())
    return mine, theirs


def _unresolved(node: Call):
    args = node.args
    if not 1 <= len(args) <= 2:
        return lambda ctx: Error
    arg = args[0]
    if arg.__class__ is AttrRef:
        lname, qualified = arg.lname, False
    elif (arg.__class__ is Select and arg.base.__class__ is AttrRef
          and arg.base.lname == "my"):
        lname, qualified = arg.lname, True
    else:
        return lambda ctx: Error
    rf = compile_node(args[1]) if len(args) == 2 else None

    def unresolved(ctx):
        if qualified:
            home = ctx.my
            n = home._exprs.get(lname) if home is not None else None
        else:
            home, n = _find(ctx, lname)
        if n is None:
            return Undefined
        mine, theirs = _unresolved_refs(ctx, home, n)
        if ctx.target is None or root_of(home) is not ctx.my and root_of(home) is not ctx.target:
            names = sorted(mine.values(), key=str.lower) + sorted(theirs.values(), key=str.lower)
        else:
            merged = dict(mine)
            for k, v in theirs.items():
                merged.setdefault(k, v)
            names = sorted(merged.values(), key=str.lower)
        if rf is None:
            return ",".join(names)
        pattern = rf(ctx)
        if pattern.__class__ is not str:
            return Error
        try:
            rx = re.compile(pattern)
        except re.error:
            return Error
        return any(rx.search(name) for name in names)
    return unresolved


SPECIAL_FORMS = {
    "ifthenelse": _ifthenelse,
    "eval": _eval,
    "unparse": _unparse,
    "evalineachcontext": _eval_in_each_context,
    "countmatches": _count_matches,
    "unresolved": _unresolved,
}

__all__ = ["SPECIAL_FORMS"]
