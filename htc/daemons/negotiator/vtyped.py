"""The fast form of :mod:`.vexpr`: expressions whose types are the same on every slot.

Theory of operation
-------------------
:mod:`.vexpr` carries a type tag per row through every operator, which costs a dozen numpy
passes per node. In a real pool a column is almost always of one type on every slot
(``Memory`` is an integer everywhere, ``KFlops`` too, ``RemoteOwner`` is missing on every
unclaimed slot), so the type of each node is known when the expression is compiled.
:func:`compile_typed` infers it and returns ``(tag, function)``: the function computes only
the values, one numpy operation per node.

The semantics are :mod:`.vexpr`'s (and so ClassAd's) for the cases it accepts; a case whose
outcome differs from row to row -- an integer division by zero, a real overflow, an integer
beyond 2**53, ``&&`` of a boolean with UNDEFINED -- raises :class:`~.vexpr.Unsupported` at
compile time or :class:`~.vexpr.Inexact` at run time, and the caller uses the tagged form
(or the scalar search). The table keeps, per column, whether its type is uniform
(:meth:`~.columns.SlotTable.uniform`); a carve that changes a carved column's type bumps the
table's epoch, and the search compiles again.
"""

from __future__ import annotations

import numpy as np

from htc.classad.ast import AttrRef, Binary, Conditional, Literal, Paren, Select, Unary
from htc.daemons.negotiator.vexpr import (_CMP, _NOT_PLAIN, BOOL, ERROR, INT, MISSING, REAL,
                                          UNDEF, Inexact, Unsupported, _job_value, scalar)

_EXACT = float(2 ** 53)
_CARVED = frozenset({"cpus", "memory", "disk"})
_NUMERIC = (BOOL, INT, REAL)


def compile_typed(node, job, slot_is_my: bool, table):
    """``(tag, rows -> values)`` of ``node`` (see the module docstring). A part that reads no
    carved resource is computed once over every row and then only indexed."""
    tag, fn = _typed(node, job, slot_is_my, table)
    if node.__class__ is Literal or _reads_carved(node):
        return tag, fn
    memo = []

    def once(rows):
        if not memo:
            memo.append(np.asarray(fn(table.rows()), dtype=float))
        values = memo[0]
        if values.ndim == 0 or rows.index is None:
            return values
        return values[rows.index]
    return tag, once


def _reads_carved(node) -> bool:
    from htc.classad import ExprTree

    refs = ExprTree(node).attributes()
    return any((r[7:] if r.startswith("target.") else r) in _CARVED for r in refs)


def _typed(node, job, slot_is_my: bool, table):
    cls = node.__class__
    if cls is Paren:
        return _typed(node.inner, job, slot_is_my, table)
    if cls is Literal:
        tag, value = scalar(node.value)
        return tag, lambda rows: value
    if cls is AttrRef:
        return _reference(node.lname, job, slot_is_my, False, slot_is_my, table)
    if cls is Select:
        base = node.base
        if base.__class__ is not AttrRef or base.lname not in ("my", "target"):
            raise Unsupported("a selection from an expression")
        return _reference(node.lname, job, slot_is_my, True,
                          slot_is_my == (base.lname == "my"), table)
    if cls is Unary:
        return _unary(node.op, _sub(node.operand, job, slot_is_my, table))
    if cls is Binary:
        left = _sub(node.left, job, slot_is_my, table)
        right = _sub(node.right, job, slot_is_my, table)
        op = node.op
        if op in ("+", "-", "*", "/"):
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
        cond, then, other = (_sub(n, job, slot_is_my, table)
                             for n in (node.cond, node.then, node.other))
        ctag, cf = _truth(cond)
        if ctag != BOOL or then[0] != other[0]:
            raise Unsupported("a conditional of mixed types")
        tf, of = then[1], other[1]
        return then[0], lambda rows: np.where(cf(rows) != 0, tf(rows), of(rows))
    raise Unsupported(cls.__name__)


def _sub(node, job, slot_is_my, table):
    """An operand: memoised when it reads no carved resource (see compile_typed)."""
    return compile_typed(node, job, slot_is_my, table)


def _const(tag):
    return tag, lambda rows: 0.0


def _decided(tag, *operands):
    """A node whose type decides its value (UNDEFINED, ERROR, a mismatch): the operands are
    still computed, so that one that would be ERROR on some row (an integer division by zero)
    raises :class:`Inexact` as it would alone (ERROR wins over UNDEFINED)."""
    fns = [f for _t, f in operands]

    def decided(rows):
        for f in fns:
            f(rows)
        return 0.0
    return tag, decided


def _reference(lname, job, slot_is_my, scoped, slot_side, table):
    if lname in _NOT_PLAIN:
        raise Unsupported(f"special name {lname}")
    if not slot_side:
        const = _job_value(job, lname)
        if const is not None:
            tag, value = const
            return tag, lambda rows: value
        if scoped or slot_is_my:
            return _const(UNDEF)
        return _column(lname, table, (UNDEF, 0.0))
    if scoped or not slot_is_my:
        return _column(lname, table, (UNDEF, 0.0))
    return _column(lname, table, _job_value(job, lname) or (UNDEF, 0.0))


def _column(lname, table, other):
    tag = table.uniform(lname)
    if tag is None:
        raise Unsupported(f"column {lname} is of mixed types")
    if tag == MISSING:
        tag, value = other
        return tag, lambda rows: value
    return tag, lambda rows: rows.column(lname)[1]


def _unary(op, operand):
    tag, f = operand
    if op == "!":
        ttag, tf = _truth(operand)
        if ttag != BOOL:
            return _decided(ttag, operand)
        return BOOL, lambda rows: 1.0 - tf(rows)
    if op not in ("-", "+"):
        raise Unsupported(f"unary {op}")
    if tag == BOOL:
        return _decided(ERROR, operand)
    if tag not in (INT, REAL):
        return _decided(tag, operand)
    if op == "+":
        return tag, f
    return tag, lambda rows: -f(rows)


def _truth(operand):
    tag, f = operand
    if tag == BOOL:
        return BOOL, f
    if tag in (INT, REAL):
        return BOOL, lambda rows: (np.asarray(f(rows)) != 0).astype(float)
    return tag, f


def _arith(op, left, right):
    (lt, lf), (rt, rf) = left, right
    if lt == ERROR or rt == ERROR:
        return _decided(ERROR, left, right)
    if lt == UNDEF or rt == UNDEF:
        return _decided(UNDEF, left, right)
    if lt not in _NUMERIC or rt not in _NUMERIC:
        return _decided(ERROR, left, right)
    ints = lt != REAL and rt != REAL
    if op == "/":
        def divide(rows):
            a, b = np.asarray(lf(rows), float), np.asarray(rf(rows), float)
            if (b == 0).any():
                raise Inexact("division by zero")
            if ints:
                q = np.abs(a) // np.abs(b)
                return np.where((a < 0) == (b < 0), q, -q)
            r = a / b
            if (r == np.inf).any():
                raise Inexact("real overflow")
            return r
        return (INT if ints else REAL), divide
    fn = {"+": np.add, "-": np.subtract, "*": np.multiply}[op]

    def arith(rows):
        r = fn(lf(rows), rf(rows))
        if ints:
            if (np.abs(r) > _EXACT).any():
                raise Inexact("an integer beyond 2**53")
        elif (np.asarray(r) == np.inf).any():
            raise Inexact("real overflow")
        return r
    return (INT if ints else REAL), arith


def _compare(fn, left, right):
    (lt, lf), (rt, rf) = left, right
    if lt == ERROR or rt == ERROR:
        return _decided(ERROR, left, right)
    if lt == UNDEF or rt == UNDEF:
        return _decided(UNDEF, left, right)
    if lt not in _NUMERIC or rt not in _NUMERIC:
        return _decided(ERROR, left, right)
    return BOOL, lambda rows: fn(lf(rows), rf(rows)).astype(float)


def _same(left, right, negate):
    (lt, lf), (rt, rf) = left, right
    if lt != rt or lt in (UNDEF, ERROR):
        value = (1.0 if negate else 0.0) if lt != rt else (0.0 if negate else 1.0)
        _tag, check = _decided(BOOL, left, right)
        return BOOL, lambda rows: check(rows) + value
    if negate:
        return BOOL, lambda rows: (np.asarray(lf(rows)) != np.asarray(rf(rows))).astype(float)
    return BOOL, lambda rows: (np.asarray(lf(rows)) == np.asarray(rf(rows))).astype(float)


def _logic(op, left, right):
    (at, af), (bt, bf) = _truth(left), _truth(right)
    if at == ERROR:
        return _const(ERROR)
    if at != BOOL or bt != BOOL:
        raise Unsupported("&& or || beside UNDEFINED or ERROR")
    if op == "&&":
        return BOOL, lambda rows: np.minimum(af(rows), bf(rows))
    return BOOL, lambda rows: np.maximum(af(rows), bf(rows))
