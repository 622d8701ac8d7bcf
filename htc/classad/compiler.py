"""Compile expression trees into Python closures, and evaluate them.

Theory of operation
-------------------
Each node is compiled once into a closure ``fn(ctx) -> value`` that is cached on the node
(``node.fn``); ads share nodes, so an ad parsed once and evaluated a million times is
compiled once.  Closures are specialised by node type and, for the hot matchmaking shapes
(``Attr >= 1024``, ``OpSys == "LINUX"``, ``TARGET.Memory``), by operand kind, so that the
common int/int and str/str cases take no generic call.

Long chains (``a || b || c ...`` with hundreds of terms, ``a.b.c...``, ``x ?: y ?: ...``) are
trees as deep as they are long.  A left spine of at least :data:`CHAIN_MIN` links compiles to
one closure that evaluates the innermost operand and then applies each link in a loop
(:func:`_c_chain`), with the same semantics link by link as the nested closures (every
operator is left associative, so the left operand is always a finished value when the
right one is looked at; ``||`` and ``&&`` still skip their right operand).  Shorter chains
keep the nested closures, the fastest form for the short expressions of matchmaking.  The
rest of a tree nests at most :data:`htc.classad.parser.MAX_DEPTH` levels, so compiling and
evaluating never recurse deeper than that; what still can (a reference cycle through
thousands of attributes) evaluates to ERROR.

The evaluation context and the lookup of names (HTCondor's scoping) are in
:mod:`htc.classad.context`.
"""

from __future__ import annotations

import operator

from htc.classad.ast import (AbsRef, AdExpr, AttrRef, Binary, Call, Conditional, ListExpr, Literal,
                             Node, Paren, Select, Subscript, Unary, left_link)
from htc.classad.context import (Ctx, EvalFailed, eval_in, lookup, lookup_absolute, root_of,
                                 select_in, select_value, special_name, subscript_value)
from htc.classad.operators import (arith, bitwise, compare, fold, identical, not_identical,
                                   truth, unary)
from htc.classad.values import INT64_MAX, INT64_MIN, Error, ExprList, Undefined, wrap_int


# ---------------------------------------------------------------------------------------
# node compilers

#: a left spine at least this long compiles to a loop (see the module docstring)
CHAIN_MIN = 16


def compile_node(node: Node):
    """Return (and cache on the node) the closure that evaluates ``node``."""
    fn = node.fn
    if fn is None:
        if _long_chain(node):
            fn = _c_chain(node)
        else:
            fn = _COMPILERS[node.__class__](node)
        node.fn = fn
    return fn


def _chain_link(node: Node) -> Node | None:
    """Where ``node``'s chain continues (``MY.x``/``TARGET.x`` keep their own closure)."""
    nxt = left_link(node)
    if nxt is not None and node.__class__ is Select and nxt.__class__ is AttrRef:
        return None
    return nxt


def _long_chain(node: Node) -> bool:
    n = 0
    while n < CHAIN_MIN:
        node = _chain_link(node)
        if node is None:
            return False
        n += 1
    return True


def _c_chain(node: Node):
    links = []
    while True:
        nxt = _chain_link(node)
        if nxt is None:
            break
        links.append(node)
        node = nxt
    first = compile_node(node)
    steps = tuple(_STEPS[link.__class__](link) for link in reversed(links))

    def chain(ctx):
        v = first(ctx)
        for step in steps:
            v = step(v, ctx)
        return v
    return chain


# Each link of a chain as ``step(value of the left operand, ctx) -> value``.

def _s_binary(node: Binary):
    op = node.op
    rf = compile_node(node.right)
    if op == "&&":
        def and_step(a, ctx):
            if a is True:
                b = rf(ctx)
                return b if b.__class__ is bool else truth(b)
            if a is False:
                return False
            ta = truth(a)
            if ta is False or ta is Error:
                return ta
            tb = truth(rf(ctx))
            if ta is True:
                return tb
            if tb is False or tb is Error:
                return tb
            return Undefined
        return and_step
    if op == "||":
        def or_step(a, ctx):
            if a is False:
                b = rf(ctx)
                return b if b.__class__ is bool else truth(b)
            if a is True:
                return True
            ta = truth(a)
            if ta is True or ta is Error:
                return ta
            tb = truth(rf(ctx))
            if ta is False:
                return tb
            if tb is True or tb is Error:
                return tb
            return Undefined
        return or_step
    if op in _PYCMP:
        pyop = _PYCMP[op]

        def cmp_step(a, ctx):
            b = rf(ctx)
            if a.__class__ is int and b.__class__ is int:
                return pyop(a, b)
            return compare(op, a, b)
        return cmp_step
    if op in _PYARITH:
        pyop = _PYARITH[op]

        def arith_step(a, ctx):
            b = rf(ctx)
            if a.__class__ is int and b.__class__ is int:
                r = pyop(a, b)
                return r if INT64_MIN <= r <= INT64_MAX else wrap_int(r)
            return arith(op, a, b)
        return arith_step
    if op in ("/", "%"):
        return lambda a, ctx: arith(op, a, rf(ctx))
    if op == "is":
        return lambda a, ctx: identical(a, rf(ctx))
    if op == "isnt":
        return lambda a, ctx: not_identical(a, rf(ctx))
    return lambda a, ctx: bitwise(op, a, rf(ctx))


def _s_select(node: Select):
    lname = node.lname
    return lambda v, ctx: select_value(ctx, v, lname)


def _s_subscript(node: Subscript):
    xf = compile_node(node.index)
    return lambda v, ctx: subscript_value(ctx, v, xf(ctx))


def _s_elvis(node: Conditional):
    of = compile_node(node.other)
    return lambda v, ctx: of(ctx) if v is Undefined else v


_STEPS = {Binary: _s_binary, Select: _s_select, Subscript: _s_subscript, Conditional: _s_elvis}


def _c_literal(node: Literal):
    v = node.value
    return lambda ctx: v


def _c_paren(node: Paren):
    return compile_node(node.inner)


def _c_attr(node: AttrRef):
    lname = node.lname

    def attr(ctx):
        ad = ctx.ad
        if ad is not None:
            n = ad._exprs.get(lname)
            if n is not None:
                if n.__class__ is Literal:
                    return n.value
                return eval_in(ctx, ad, lname, n)
        return lookup(ctx, lname)
    return attr


def _c_absref(node: AbsRef):
    lname = node.lname
    return lambda ctx: lookup_absolute(ctx, lname)


def _c_select(node: Select):
    lname = node.lname
    base = node.base
    if base.__class__ is AttrRef and base.lname == "my":
        # MY is the ad the reference stands in (HTCondor: MY is an alias of self)
        def my_(ctx):
            ad = ctx.ad
            if ad is None:
                return Undefined
            if "my" in ad._exprs:
                return select_value(ctx, lookup(ctx, "my"), lname)
            n = ad._exprs.get(lname)
            if n is not None:
                if n.__class__ is Literal:
                    return n.value
                return eval_in(ctx, ad, lname, n)
            return select_in(ctx, ad, lname)
        return my_
    if base.__class__ is AttrRef and base.lname == "target":
        def target_(ctx):
            ad = ctx.target
            if ad is None:
                if ctx.ad is None:
                    return Undefined
                # evaluation started inside a nested ad: resolve TARGET from it
                ad = special_name(ctx, ctx.ad, "target")
                if ad is Undefined:
                    return Undefined
            n = ad._exprs.get(lname)
            if n is not None:
                if n.__class__ is Literal:
                    return n.value
                return eval_in(ctx, ad, lname, n)
            return select_in(ctx, ad, lname)
        return target_
    bf = compile_node(base)
    return lambda ctx: select_value(ctx, bf(ctx), lname)


def _c_subscript(node: Subscript):
    bf = compile_node(node.base)
    xf = compile_node(node.index)
    return lambda ctx: subscript_value(ctx, bf(ctx), xf(ctx))


def _c_unary(node: Unary):
    f = compile_node(node.operand)
    op = node.op
    if op == "-":
        def neg(ctx):
            v = f(ctx)
            if v.__class__ is int:
                return -v if v != INT64_MIN else v
            return unary("-", v)
        return neg
    if op == "!":
        def not_(ctx):
            v = f(ctx)
            if v.__class__ is bool:
                return not v
            return unary("!", v)
        return not_
    return lambda ctx: unary(op, f(ctx))


_PYCMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
          "==": operator.eq, "!=": operator.ne}
_PYARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def _c_binary(node: Binary):
    op = node.op
    if op == "&&":
        return _c_and(node)
    if op == "||":
        return _c_or(node)
    lf = compile_node(node.left)
    rf = compile_node(node.right)
    right = node.right
    if op in _PYCMP:
        pyop = _PYCMP[op]
        if right.__class__ is Literal and right.value.__class__ is int:
            c = right.value

            def cmp_int_const(ctx):
                a = lf(ctx)
                if a.__class__ is int:
                    return pyop(a, c)
                return compare(op, a, c)
            return cmp_int_const
        if right.__class__ is Literal and right.value.__class__ is str and op in ("==", "!="):
            c = right.value
            cf = fold(c)
            want = op == "=="

            def cmp_str_const(ctx):
                a = lf(ctx)
                if a.__class__ is str:
                    if a.isascii():
                        return (a.lower() == cf) is want
                    return (fold(a) == cf) is want
                return compare(op, a, c)
            return cmp_str_const

        def cmp(ctx):
            a = lf(ctx)
            b = rf(ctx)
            if a.__class__ is int and b.__class__ is int:
                return pyop(a, b)
            return compare(op, a, b)
        return cmp
    if op in _PYARITH:
        pyop = _PYARITH[op]

        def arith_fast(ctx):
            a = lf(ctx)
            b = rf(ctx)
            if a.__class__ is int and b.__class__ is int:
                r = pyop(a, b)
                return r if INT64_MIN <= r <= INT64_MAX else wrap_int(r)
            if a.__class__ is float and b.__class__ is float:
                return arith(op, a, b)
            return arith(op, a, b)
        return arith_fast
    if op in ("/", "%"):
        return lambda ctx: arith(op, lf(ctx), rf(ctx))
    if op == "is":
        return lambda ctx: identical(lf(ctx), rf(ctx))
    if op == "isnt":
        return lambda ctx: not_identical(lf(ctx), rf(ctx))
    return lambda ctx: bitwise(op, lf(ctx), rf(ctx))


def _c_and(node: Binary):
    lf = compile_node(node.left)
    rf = compile_node(node.right)

    def and_(ctx):
        a = lf(ctx)
        if a is True:
            b = rf(ctx)
            return b if b.__class__ is bool else truth(b)
        if a is False:
            return False
        ta = truth(a)
        if ta is False or ta is Error:
            return ta
        tb = truth(rf(ctx))
        if ta is True:
            return tb
        if tb is False or tb is Error:
            return tb
        return Undefined
    return and_


def _c_or(node: Binary):
    lf = compile_node(node.left)
    rf = compile_node(node.right)

    def or_(ctx):
        a = lf(ctx)
        if a is False:
            b = rf(ctx)
            return b if b.__class__ is bool else truth(b)
        if a is True:
            return True
        ta = truth(a)
        if ta is True or ta is Error:
            return ta
        tb = truth(rf(ctx))
        if ta is False:
            return tb
        if tb is True or tb is Error:
            return tb
        return Undefined
    return or_


def _c_conditional(node: Conditional):
    cf = compile_node(node.cond)
    of = compile_node(node.other)
    if node.then is None:
        def elvis(ctx):
            v = cf(ctx)
            return of(ctx) if v is Undefined else v
        return elvis
    tf = compile_node(node.then)

    def cond(ctx):
        c = cf(ctx)
        if c is True:
            return tf(ctx)
        if c is False:
            return of(ctx)
        c = truth(c)
        if c is True:
            return tf(ctx)
        if c is False:
            return of(ctx)
        return c
    return cond


def _c_list(node: ListExpr):
    fns = [compile_node(n) for n in node.items]

    def list_(ctx):
        r = ExprList([f(ctx) for f in fns])
        r.node = node
        return r
    return list_


def _c_ad(node: AdExpr):
    from htc.classad.ad import ClassAd
    make = ClassAd._from_node
    return lambda ctx: make(node, ctx.ad)


def _c_call(node: Call):
    from htc.classad import specials
    special = specials.SPECIAL_FORMS.get(node.lname)
    if special is not None:
        return special(node)
    from htc.classad.builtins import FUNCTIONS
    fns = [compile_node(a) for a in node.args]
    lname = node.lname
    if len(fns) == 1:
        f0 = fns[0]

        def call1(ctx):
            func = FUNCTIONS.get(lname)
            if func is None:
                return Error
            return func([f0(ctx)])
        return call1

    def call(ctx):
        func = FUNCTIONS.get(lname)
        if func is None:
            return Error
        return func([f(ctx) for f in fns])
    return call


_COMPILERS = {
    Literal: _c_literal, Paren: _c_paren, AttrRef: _c_attr, AbsRef: _c_absref, Select: _c_select,
    Subscript: _c_subscript, Unary: _c_unary, Binary: _c_binary, Conditional: _c_conditional,
    ListExpr: _c_list, AdExpr: _c_ad, Call: _c_call,
}


def evaluate(node: Node, scope=None, target=None, ctx: Ctx | None = None, strict: bool = False):
    """Evaluate ``node`` with MY = ``scope`` and TARGET = ``target`` (either may be None).

    Args:
        node: a syntax tree.
        scope: the ad unqualified names are looked up in first, or None.
        target: the other ad of a match, or None.
        ctx: a context made by the caller.
        strict: raise :class:`~htc.classad.context.EvalFailed` where HTCondor's evaluation
            fails (``.x`` or ``root`` with no scope); otherwise that is ERROR.
    Returns:
        The internal value (see :mod:`htc.classad.values`).
    """
    if ctx is None:
        ctx = Ctx(scope, root_of(scope) if scope is not None else None, target)
    try:
        fn = node.fn or compile_node(node)
        return fn(ctx)
    except RecursionError:
        return Error
    except EvalFailed:
        if strict:
            raise
        return Error
