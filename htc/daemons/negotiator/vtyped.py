"""The fast form of :mod:`.vexpr`: expressions whose types are the same on every slot.

Theory of operation
-------------------
:mod:`.vexpr` carries a type tag per row through every operator, which costs a dozen numpy
passes per node. In a real pool a column is almost always of one type on every slot
(``Memory`` is an integer everywhere, ``KFlops`` too, ``RemoteOwner`` is missing on every
unclaimed slot), so the type of each node is known when the expression is compiled.
:func:`compile_typed` infers it and returns ``(tag, function)``: the function computes only
the values, one numpy operation per node.

The semantics are :mod:`.vexpr`'s (and so ClassAd's) for the cases it accepts, and it takes
two calls :mod:`.vexpr` does not, those of HTCondor's default post-job rank: ``isUndefined``,
which a type decides, and ``ifThenElse``, ClassAd's ``?:`` (:func:`_call`); a case whose
outcome differs from row to row -- an integer division by zero, a real overflow, an integer
beyond 2**53, ``&&`` of a boolean with UNDEFINED -- raises :class:`~.vexpr.Unsupported` at
compile time or :class:`~.vexpr.Inexact` at run time, and the caller uses the tagged form
(or the scalar search). The table keeps, per column, whether its type is uniform
(:meth:`~.columns.SlotTable.uniform`); a carve that changes a carved column's type bumps the
table's epoch, and the search compiles again.

**Templates.** The compile reads of the job only the *types* of the values it references
(``RequestMemory`` is an integer), never the values themselves: those are parameters. So
:func:`compile_template` returns a :class:`Template` whose function takes ``(rows, p)``, ``p``
the job's values of :attr:`Template.params`, and one template serves every job whose values
have the same types (:func:`signature`): 5,000 autoclusters that differ only in
``RequestMemory`` and ``RequestDisk`` share one compile of ``TARGET.Memory >= RequestMemory``
and bind their values (:meth:`Template.bind`). A template that does no arithmetic cannot raise
at run time (:attr:`Template.safe`).
"""

from __future__ import annotations

import numpy as np

from htc.classad.ast import AttrRef, Binary, Call, Conditional, Literal, Paren, Select, Unary
from htc.daemons.negotiator.slots import CARVED
from htc.daemons.negotiator.vexpr import (_CMP, _NOT_PLAIN, BOOL, ERROR, INT, MISSING, REAL,
                                          UNDEF, Inexact, Unsupported, _job_value, scalar)

_EXACT = float(2 ** 53)
_CARVED = frozenset({"cpus", "memory", "disk"})
_NUMERIC = (BOOL, INT, REAL)
_MAX = np.maximum.reduce  # (an array's maximum without ndarray.max's Python wrapper)


class Template:
    """A typed compilation of one expression for the jobs of one :func:`signature`.

    Attributes:
        tag: the value's type on every row.
        fn: ``(rows, p) -> values``, ``p`` the job's values of ``params`` (see :meth:`values`).
        params: the job attribute names whose values the function takes, in ``p``'s order.
        safe: True when the function cannot raise (no arithmetic: no division by zero, no
            overflow), so a caller need not try it before relying on it.
    """

    __slots__ = ("tag", "fn", "params", "safe", "read", "test", "fixed")

    def __init__(self, tag, fn, params, safe, read, test=None, fixed=False):
        self.tag, self.fn, self.params, self.safe = tag, fn, params, safe
        #: True when the expression reads no carved resource: its values over the table's rows
        #: are the same all epoch, for given parameters (computed once, then indexed)
        self.fixed = fixed
        #: every job attribute name whose type the compile looked at (its signature's names)
        self.read = read
        #: for a comparison of numbers: ``(rows, p) -> bool array``, ``fn(rows, p) != 0``
        #: without the round trip through floats (what a ``Requirements`` clause asks)
        self.test = test

    def values(self, job) -> tuple:
        """``p`` for ``job`` (a job of the template's signature)."""
        exprs = job._exprs
        return tuple(scalar(exprs[n].value)[1] for n in self.params)

    def bind(self, p: tuple):
        """``rows -> values`` with the parameters ``p``."""
        fn = self.fn
        return lambda rows: fn(rows, p)


def signature(job, names) -> tuple:
    """What a compile of an expression reading ``names`` reads of ``job``: per name, the type
    of the job's literal value (None: the job lacks it; "v": a value outside the subset;
    "e": an expression). Jobs of one signature share a :class:`Template`."""
    exprs = job._exprs
    out = []
    for name in names:
        node = exprs.get(name)
        if node is None:
            out.append(None)
        elif node.__class__ is Literal:
            try:
                out.append(scalar(node.value)[0])
            except Unsupported:
                out.append("v")
        else:
            out.append("e")
    return tuple(out)


def compile_typed(node, job, slot_is_my: bool, table):
    """``(tag, rows -> values)`` of ``node`` for ``job`` (see the module docstring)."""
    template = compile_template(node, job, slot_is_my, table)
    return template.tag, template.bind(template.values(job))


def compile_template(node, job, slot_is_my: bool, table) -> Template:
    """The :class:`Template` of ``node`` for the jobs of ``job``'s signature; raises
    :class:`~.vexpr.Unsupported` outside the typed subset. A part that reads no carved
    resource is computed once over every row (per parameter values) and then only indexed."""
    ctx = _Context(job, slot_is_my, table)
    tag, fn = _compile(node, ctx)
    top = node
    while top.__class__ is Paren:
        top = top.inner
    test = None
    if tag == BOOL and top.__class__ is Binary and top.op in _CMP and _reads_carved(top):
        # (a BOOL comparison compares two numbers, see _compare; not memoised: it reads a
        # carved resource)
        (_lt, lf), (_rt, rf) = _compile(top.left, ctx), _compile(top.right, ctx)
        compare = _CMP[top.op]

        def test(rows, p):
            return compare(lf(rows, p), rf(rows, p))
        if not ctx.safe:
            test = _quiet(test)
    if not ctx.safe:
        fn = _quiet(fn)
    return Template(tag, fn, tuple(ctx.params), ctx.safe, frozenset(ctx.read), test,
                    top.__class__ is not Literal and not _reads_carved(top))


def _quiet(fn):
    """``fn`` under one ``np.errstate(over="ignore", invalid="ignore")`` a call: the real
    arithmetic of its nodes runs there (see :func:`_arith`), not under one context per node."""
    def quiet(rows, p):
        with np.errstate(over="ignore", invalid="ignore"):
            return fn(rows, p)
    return quiet


class _Context:
    """One template's compile: the job (for its types), the parameters met, arithmetic met."""

    __slots__ = ("job", "slot_is_my", "table", "params", "safe", "reads", "read")

    def __init__(self, job, slot_is_my, table):
        self.job, self.slot_is_my, self.table = job, slot_is_my, table
        self.params: dict[str, int] = {}  # job attribute name -> its index in p
        self.safe = True
        self.reads = 0  # parameter references compiled so far
        self.read: set[str] = set()  # job names looked at

    def job_value(self, lname: str):
        """``(tag, value)`` of the job's literal ``lname`` (None: the job lacks it)."""
        self.read.add(lname)
        return _job_value(self.job, lname)

    def param(self, lname: str, tag: int):
        """A reference to the job's value of ``lname`` (of type ``tag``)."""
        i = self.params.setdefault(lname, len(self.params))
        self.reads += 1
        return tag, lambda rows, p: p[i]


def _compile(node, ctx):
    """``(tag, (rows, p) -> values)``, memoised when ``node`` reads no carved resource."""
    reads = ctx.reads
    tag, fn = _typed(node, ctx)
    if node.__class__ is Literal or _reads_carved(node):
        return tag, fn
    table = ctx.table
    if ctx.reads == reads:  # no parameter: one memo for every binding
        memo = []

        def once(rows, p):
            if not memo:
                memo.append(np.asarray(fn(table.rows(), p), dtype=float))
            values = memo[0]
            if values.ndim == 0 or rows.index is None:
                return values
            return values[rows.index]
        return tag, once
    memos: dict[tuple, np.ndarray] = {}

    def once_per_p(rows, p):
        values = memos.get(p)
        if values is None:
            values = memos[p] = np.asarray(fn(table.rows(), p), dtype=float)
        if values.ndim == 0 or rows.index is None:
            return values
        return values[rows.index]
    return tag, once_per_p


def _reads_carved(node) -> bool:
    from htc.classad import ExprTree

    refs = ExprTree(node).attributes()
    return any((r[7:] if r.startswith("target.") else r) in _CARVED for r in refs)


def _typed(node, ctx):
    cls = node.__class__
    if cls is Paren:
        return _typed(node.inner, ctx)
    if cls is Literal:
        tag, value = scalar(node.value)
        return tag, lambda rows, p: value
    if cls is AttrRef:
        return _reference(node.lname, ctx, False, ctx.slot_is_my)
    if cls is Select:
        base = node.base
        if base.__class__ is not AttrRef or base.lname not in ("my", "target"):
            raise Unsupported("a selection from an expression")
        return _reference(node.lname, ctx, True, ctx.slot_is_my == (base.lname == "my"))
    if cls is Unary:
        return _unary(node.op, _compile(node.operand, ctx))
    if cls is Binary:
        left = _compile(node.left, ctx)
        right = _compile(node.right, ctx)
        op = node.op
        if op in ("+", "-", "*", "/"):
            ctx.safe = False  # may raise Inexact at run time
            return _arith(op, left, right)
        if op in _CMP:
            return _compare(_CMP[op], left, right)
        if op in ("is", "isnt"):
            return _same(left, right, op == "isnt")
        if op in ("&&", "||"):
            return _logic(op, left, right)
        raise Unsupported(f"operator {op}")
    if cls is Conditional:
        if node.then is None:
            raise Unsupported("?: without a then-part")
        return _choice(*(_compile(n, ctx) for n in (node.cond, node.then, node.other)))
    if cls is Call:
        return _call(node, ctx)
    raise Unsupported(cls.__name__)


def _choice(cond, then, other):
    """``cond ? then : other`` of typed operands: a boolean or numeric condition, both
    branches of one type (both computed: one that raises makes the caller take the tagged
    form, as where the branch is picked)."""
    ctag, cf = _truth(cond)
    if ctag != BOOL or then[0] != other[0]:
        raise Unsupported("a conditional of mixed types")
    tf, of = then[1], other[1]
    return then[0], lambda rows, p: np.where(cf(rows, p) != 0, tf(rows, p), of(rows, p))


def _call(node, ctx):
    """The calls of HTCondor's default ``NEGOTIATOR_POST_JOB_RANK``: ``isUndefined(x)``, whose
    value the type of ``x`` decides (one type on every row; ``x`` still computed, so that a
    row where it is ERROR raises as it would alone), and ``ifThenElse(c, a, b)``, which
    ClassAd evaluates as ``c ? a : b`` (:func:`~htc.classad.specials._ifthenelse`). Any other
    call, or one of another number of arguments (ClassAd's ERROR), is outside the subset."""
    name, args = node.lname, node.args
    if name == "isundefined" and len(args) == 1:
        operand = _compile(args[0], ctx)
        value = 1.0 if operand[0] == UNDEF else 0.0
        _tag, check = _decided(BOOL, operand)
        return BOOL, lambda rows, p: check(rows, p) + value
    if name == "ifthenelse" and len(args) == 3:
        return _choice(*(_compile(a, ctx) for a in args))
    raise Unsupported(f"function {node.name}")


def _const(tag):
    return tag, lambda rows, p: 0.0


def _decided(tag, *operands):
    """A node whose type decides its value (UNDEFINED, ERROR, a mismatch): the operands are
    still computed, so that one that would be ERROR on some row (an integer division by zero)
    raises :class:`Inexact` as it would alone (ERROR wins over UNDEFINED)."""
    fns = [f for _t, f in operands]

    def decided(rows, p):
        for f in fns:
            f(rows, p)
        return 0.0
    return tag, decided


def _reference(lname, ctx, scoped, slot_side):
    if lname in _NOT_PLAIN:
        raise Unsupported(f"special name {lname}")
    slot_is_my = ctx.slot_is_my
    if not slot_side:
        const = ctx.job_value(lname)
        if const is not None:
            return ctx.param(lname, const[0])
        if scoped or slot_is_my:
            return _const(UNDEF)
        return _column(lname, ctx, None)
    if scoped or not slot_is_my:
        return _column(lname, ctx, None)
    # a plain name of a slot expression: the slot's own, else the job's (read now: a job
    # expression there is outside the subset even where every slot defines the name)
    return _column(lname, ctx, lname if ctx.job_value(lname) is not None else None)


def _column(lname, ctx, fallback):
    """A slot column; where no slot defines it, the job's value of ``fallback`` (a name, or
    None: UNDEFINED), as ClassAd scoping falls back."""
    tag = ctx.table.uniform(lname)
    if tag is None:
        raise Unsupported(f"column {lname} is of mixed types")
    if tag == MISSING:
        other = None if fallback is None else ctx.job_value(fallback)
        if other is None:
            return _const(UNDEF)
        return ctx.param(fallback, other[0])
    return tag, lambda rows, p: _values(rows, lname)


def _values(rows, lname: str):
    """``rows.column(lname)[1]``: the values alone (the type is known), one gather of the
    rows, not two (:meth:`~.columns.Rows.column` takes the tags' too)."""
    carved = rows.carved
    if carved is not None and lname in CARVED:
        return carved[lname][1]
    values = rows.table.column(lname)[1]
    index = rows.index
    return values if index is None else values[index]


def _unary(op, operand):
    tag, f = operand
    if op == "!":
        ttag, tf = _truth(operand)
        if ttag != BOOL:
            return _decided(ttag, operand)
        return BOOL, lambda rows, p: 1.0 - tf(rows, p)
    if op not in ("-", "+"):
        raise Unsupported(f"unary {op}")
    if tag == BOOL:
        return _decided(ERROR, operand)
    if tag not in (INT, REAL):
        return _decided(tag, operand)
    if op == "+":
        return tag, f
    return tag, lambda rows, p: -f(rows, p)


def _truth(operand):
    tag, f = operand
    if tag == BOOL:
        return BOOL, f
    if tag in (INT, REAL):
        return BOOL, lambda rows, p: (np.asarray(f(rows, p)) != 0).astype(float)
    return tag, f


def _arith(op, left, right):
    """``+ - * /`` of two typed operands.

    Real arithmetic runs under ``np.errstate(over="ignore", invalid="ignore")``, one context
    for the whole template's call (:func:`_quiet`: a template with arithmetic is not ``safe``):
    an overflow to +infinity is the expected path to ClassAd's ERROR (the result is tested
    right after and raises :class:`~.vexpr.Inexact`, and the caller takes the tagged form,
    which gives ERROR), and -infinity or a NaN (``-inf - -inf``, ``-inf * 0``) is ClassAd's
    value itself: numpy's RuntimeWarning would only repeat what the test finds. The test is
    :func:`_overflowed`. Integer arithmetic needs no such guard: its operands stay within
    2**53, so their sum, difference or product is finite."""
    (lt, lf), (rt, rf) = left, right
    if lt == ERROR or rt == ERROR:
        return _decided(ERROR, left, right)
    if lt == UNDEF or rt == UNDEF:
        return _decided(UNDEF, left, right)
    if lt not in _NUMERIC or rt not in _NUMERIC:
        return _decided(ERROR, left, right)
    ints = lt != REAL and rt != REAL
    if op == "/":
        def divide(rows, p):
            a, b = np.asarray(lf(rows, p), float), np.asarray(rf(rows, p), float)
            if (b == 0).any():
                raise Inexact("division by zero")
            if ints:
                q = np.abs(a) // np.abs(b)
                return np.where((a < 0) == (b < 0), q, -q)
            r = a / b  # (under _quiet's errstate: see _arith)
            if _overflowed(r):
                raise Inexact("real overflow")
            return r
        return (INT if ints else REAL), divide
    fn = {"+": np.add, "-": np.subtract, "*": np.multiply}[op]

    if ints:  # (operands within 2**53: their sum, difference or product is finite)
        def arith(rows, p):
            r = fn(lf(rows, p), rf(rows, p))
            if _beyond(r):
                raise Inexact("an integer beyond 2**53")
            return r
        return INT, arith

    def real_arith(rows, p):
        r = fn(lf(rows, p), rf(rows, p))  # (under _quiet's errstate: see _arith)
        if _overflowed(r):
            raise Inexact("real overflow")
        return r
    return REAL, real_arith


def _overflowed(r) -> bool:
    """Does the real result ``r`` (an array or a number) hold +infinity? One reduction, its
    maximum, when that is below +infinity (the usual case); else (+infinity, or a NaN, which
    the maximum propagates and which may hide one) the elements are compared."""
    if r.__class__ is np.ndarray:
        if not r.size:
            return False
        if _MAX(r, axis=None) < np.inf:
            return False
    return bool((np.asarray(r) == np.inf).any())


def _beyond(r) -> bool:
    """Is a magnitude of the integer result ``r`` (an array or a number) beyond 2**53? The
    largest magnitude (one reduction: no NaN here, the operands are whole numbers within
    2**53) against it."""
    if r.__class__ is np.ndarray:
        return bool(r.size and _MAX(np.abs(r), axis=None) > _EXACT)
    return bool(abs(r) > _EXACT)


def _compare(fn, left, right):
    (lt, lf), (rt, rf) = left, right
    if lt == ERROR or rt == ERROR:
        return _decided(ERROR, left, right)
    if lt == UNDEF or rt == UNDEF:
        return _decided(UNDEF, left, right)
    if lt not in _NUMERIC or rt not in _NUMERIC:
        return _decided(ERROR, left, right)
    return BOOL, lambda rows, p: fn(lf(rows, p), rf(rows, p)).astype(float)


def _same(left, right, negate):
    (lt, lf), (rt, rf) = left, right
    if lt != rt or lt in (UNDEF, ERROR):
        value = (1.0 if negate else 0.0) if lt != rt else (0.0 if negate else 1.0)
        _tag, check = _decided(BOOL, left, right)
        return BOOL, lambda rows, p: check(rows, p) + value
    test = np.not_equal if negate else np.equal
    return BOOL, lambda rows, p: test(np.asarray(lf(rows, p)),
                                      np.asarray(rf(rows, p))).astype(float)


def _logic(op, left, right):
    (at, af), (bt, bf) = _truth(left), _truth(right)
    if at == ERROR:
        return _const(ERROR)
    if at != BOOL or bt != BOOL:
        raise Unsupported("&& or || beside UNDEFINED or ERROR")
    if op == "&&":
        return BOOL, lambda rows, p: np.minimum(af(rows, p), bf(rows, p))
    return BOOL, lambda rows, p: np.maximum(af(rows, p), bf(rows, p))
