"""ClassAd expressions compiled to numpy functions over the slot table's columns.

Theory of operation
-------------------
The vector search (:mod:`.vsearch`) evaluates a request's ``Requirements`` clauses and ranks
over every free slot at once. :func:`compile_vector` turns a syntax tree into a function of an
environment (:class:`~.columns.Rows`: the slots' columns for some rows) that returns a pair
``(tag, value)`` of arrays, one entry per row, with EXACT ClassAd semantics
(:mod:`htc.classad.operators`) for the subset it accepts:

* tags: :data:`UNDEF`, :data:`ERROR`, :data:`BOOL`, :data:`INT`, :data:`REAL`; the value is a
  float64 (booleans 0/1; integers exactly, as long as they stay within 2**53 -- a result
  outside raises :class:`Inexact` at run time and the caller falls back);
* literals (numbers, booleans, ``undefined``, ``error``), references that resolve to a literal
  of the job (one value) or to a literal slot attribute (a column; a name the slot lacks falls
  back to the other ad, as ClassAd scoping does), ``MY.x`` and ``TARGET.x``;
* ``+ - * /`` (int/int truncates toward zero, division by zero is ERROR, a real +infinity is
  ERROR, 0/0 is NaN), ``< <= > >= == !=`` (int/int as integers, otherwise as reals), ``=?=``
  and ``=!=`` (type and value), ``&&``/``||`` (three-valued, ERROR and UNDEFINED as the
  compiler's chains treat them), ``!``, unary ``-``/``+``, ``?:``.

Anything else -- strings, function calls, lists, an attribute whose value is an expression, a
slot column that holds a string -- raises :class:`Unsupported` at compile time: the search then
decides that request the scalar way (:mod:`.search`), which is always exact.
``tests/unit/test_negotiator_vexpr.py`` compares every compiled function with the ClassAd
evaluator on random ads.
"""

from __future__ import annotations

import numpy as np

from htc.classad.ast import AttrRef, Binary, Conditional, Literal, Paren, Select, Unary
from htc.classad.context import _VIRTUAL_NAMES, SPECIAL_NAMES
from htc.classad.values import Error, Undefined

UNDEF, ERROR, BOOL, INT, REAL = 0, 1, 2, 3, 4
#: a column's tag for a slot that does not define the attribute (scoping falls back)
MISSING = 5
_EXACT = float(2 ** 53)
_NOT_PLAIN = SPECIAL_NAMES | _VIRTUAL_NAMES | {"target", "my"}


class Unsupported(Exception):
    """The expression is outside the compiled subset (the caller evaluates it the scalar way)."""


class Inexact(Exception):
    """An integer result left the range float64 holds exactly (the caller falls back)."""


def scalar(value) -> tuple[int, float]:
    """``(tag, value)`` of a ClassAd literal value; :class:`Unsupported` for other types."""
    cls = value.__class__
    if cls is bool:
        return BOOL, float(value)
    if cls is int:
        if abs(value) > _EXACT:
            raise Unsupported("integer beyond 2**53")
        return INT, float(value)
    if cls is float:
        return REAL, value
    if value is Undefined:
        return UNDEF, 0.0
    if value is Error:
        return ERROR, 0.0
    raise Unsupported(f"a {cls.__name__} value")


def compile_vector(node, job, slot_is_my: bool):
    """A function ``rows -> (tags, values)`` of ``node`` with MY = the slot when
    ``slot_is_my`` (else MY = ``job``) and TARGET = the other; :class:`Unsupported` when the
    tree is outside the subset (see the module docstring)."""
    cls = node.__class__
    if cls is Paren:
        return compile_vector(node.inner, job, slot_is_my)
    if cls is Literal:
        const = scalar(node.value)
        return lambda rows: const
    if cls is AttrRef:
        return _reference(node.lname, job, slot_is_my, scoped=False, slot_side=slot_is_my)
    if cls is Select:
        base = node.base
        if base.__class__ is not AttrRef or base.lname not in ("my", "target"):
            raise Unsupported("a selection from an expression")
        return _reference(node.lname, job, slot_is_my, scoped=True,
                          slot_side=slot_is_my == (base.lname == "my"))
    if cls is Unary:
        return _unary(node.op, compile_vector(node.operand, job, slot_is_my))
    if cls is Binary:
        left = compile_vector(node.left, job, slot_is_my)
        right = compile_vector(node.right, job, slot_is_my)
        op = node.op
        if op in ("+", "-", "*", "/"):
            return _arith(op, left, right)
        if op in _CMP:
            return _compare(_CMP[op], left, right)
        if op in ("is", "isnt"):
            return _same(left, right, op == "isnt")
        if op == "&&":
            return _and(left, right)
        if op == "||":
            return _or(left, right)
        raise Unsupported(f"operator {op}")
    if cls is Conditional:
        if node.then is None:
            raise Unsupported("?: without a then-part")
        return _cond(*(compile_vector(n, job, slot_is_my)
                       for n in (node.cond, node.then, node.other)))
    raise Unsupported(cls.__name__)


def _job_value(job, lname: str):
    node = job._exprs.get(lname)
    if node is None:
        return None
    if node.__class__ is not Literal:
        raise Unsupported(f"job attribute {lname} is an expression")
    return scalar(node.value)


def _reference(lname: str, job, slot_is_my: bool, scoped: bool, slot_side: bool):
    if lname in _NOT_PLAIN:
        raise Unsupported(f"special name {lname}")
    if not slot_side:
        const = _job_value(job, lname)
        if const is not None:
            return lambda rows: const
        if scoped or slot_is_my:
            # TARGET.x / MY.x the job lacks: UNDEFINED (no fallback for a scoped name; a plain
            # name of a slot expression was looked up in the slot first, see below)
            return lambda rows: (UNDEF, 0.0)
        # a plain name the job (MY) lacks falls back to the slot (TARGET)
        return lambda rows: _fallback(rows.column(lname), (UNDEF, 0.0))
    if scoped or not slot_is_my:
        return lambda rows: _fallback(rows.column(lname), (UNDEF, 0.0))
    # a plain name in a slot expression: the slot's own, else the job's
    other = _job_value(job, lname) or (UNDEF, 0.0)
    return lambda rows: _fallback(rows.column(lname), other)


def _fallback(column, other):
    tag, value = column
    missing = tag == MISSING
    if not missing.any():
        return column
    return np.where(missing, other[0], tag), np.where(missing, other[1], value)


def _unary(op: str, f):
    if op == "!":
        def not_(rows):
            tag, value = _truth(*f(rows))
            return tag, np.where(tag == BOOL, 1.0 - value, value)
        return not_
    if op not in ("-", "+"):
        raise Unsupported(f"unary {op}")

    def sign(rows):
        tag, value = f(rows)
        tag = np.where(tag == BOOL, ERROR, tag)  # - and + reject booleans
        return tag, (-value if op == "-" else value)
    return sign


def _truth(tag, value):
    """ClassAd ``truth``: BOOL for numbers and booleans, UNDEFINED and ERROR kept."""
    tag = np.asarray(tag)
    number = (tag == INT) | (tag == REAL)
    out_value = np.where(number, np.asarray(value) != 0, value).astype(float)
    out_tag = np.where(number | (tag == BOOL), BOOL, np.where(tag == UNDEF, UNDEF, ERROR))
    return out_tag, out_value


def _arith(op: str, left, right):
    def arith(rows):
        lt, lv = left(rows)
        rt, rv = right(rows)
        lt, lv, rt, rv = np.broadcast_arrays(np.asarray(lt), np.asarray(lv, float),
                                             np.asarray(rt), np.asarray(rv, float))
        lnum = (lt == INT) | (lt == BOOL)
        rnum = (rt == INT) | (rt == BOOL)
        ints = lnum & rnum
        reals = (lnum | (lt == REAL)) & (rnum | (rt == REAL)) & ~ints
        with np.errstate(all="ignore"):
            if op == "+":
                result = lv + rv
            elif op == "-":
                result = lv - rv
            elif op == "*":
                result = lv * rv
            else:
                result = lv / rv
        tag = np.where(ints, INT, np.where(reals, REAL, ERROR))
        if op == "/":
            zero = rv == 0
            with np.errstate(all="ignore"):
                q = np.trunc(np.abs(lv) // np.where(zero, 1.0, np.abs(rv)))
            result = np.where(ints, np.where((lv < 0) == (rv < 0), q, -q), result)
            tag = np.where(ints & zero, ERROR, tag)
            # x / 0.0: 0 and NaN give NaN, a positive x ERROR, a negative one -infinity
            realzero = reals & zero
            result = np.where(realzero & ((lv == 0) | np.isnan(lv)), np.nan, result)
            # (numpy's sign follows a -0.0 divisor, ClassAd's only x: 0 * -1 is -0.0 here)
            result = np.where(realzero & (lv < 0), -np.inf, result)
            tag = np.where(realzero & (lv > 0), ERROR, tag)
        if (ints & (np.abs(result) > _EXACT)).any():
            raise Inexact(op)
        tag = np.where(reals & (result == np.inf), ERROR, tag)
        # ERROR wins over UNDEFINED, which wins over a type mismatch
        tag = np.where((lt == UNDEF) | (rt == UNDEF), UNDEF, tag)
        tag = np.where((lt == ERROR) | (rt == ERROR), ERROR, tag)
        return tag, result
    return arith


_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
        "==": np.equal, "!=": np.not_equal}


def _compare(fn, left, right):
    def compare(rows):
        lt, lv = left(rows)
        rt, rv = right(rows)
        lt, rt = np.asarray(lt), np.asarray(rt)
        numeric = ((lt >= BOOL) & (lt <= REAL)) & ((rt >= BOOL) & (rt <= REAL))
        value = fn(lv, rv).astype(float)
        tag = np.where(numeric, BOOL, ERROR)
        tag = np.where((lt == UNDEF) | (rt == UNDEF), UNDEF, tag)
        tag = np.where((lt == ERROR) | (rt == ERROR), ERROR, tag)
        return tag, value
    return compare


def _same(left, right, negate: bool):
    def same(rows):
        lt, lv = left(rows)
        rt, rv = right(rows)
        lt, rt = np.asarray(lt), np.asarray(rt)
        valued = lt >= BOOL
        equal = (lt == rt) & (~valued | (np.asarray(lv) == np.asarray(rv)))
        return np.full(np.broadcast(lt, rt).shape, BOOL), (equal != negate).astype(float)
    return same


def _and(left, right):
    def and_(rows):
        at, av = _truth(*left(rows))
        bt, bv = _truth(*right(rows))
        at, av, bt, bv = np.broadcast_arrays(at, av, bt, bv)
        a_true, a_false = (at == BOOL) & (av != 0), (at == BOOL) & (av == 0)
        b_false = (bt == BOOL) & (bv == 0)
        tag = np.where(a_true, bt, np.where(a_false, BOOL, np.where(
            at == ERROR, ERROR, np.where(b_false, BOOL, np.where(bt == ERROR, ERROR, UNDEF)))))
        value = np.where(a_true, bv, 0.0)
        return tag, value
    return and_


def _or(left, right):
    def or_(rows):
        at, av = _truth(*left(rows))
        bt, bv = _truth(*right(rows))
        at, av, bt, bv = np.broadcast_arrays(at, av, bt, bv)
        a_true, a_false = (at == BOOL) & (av != 0), (at == BOOL) & (av == 0)
        b_true = (bt == BOOL) & (bv != 0)
        tag = np.where(a_false, bt, np.where(a_true, BOOL, np.where(
            at == ERROR, ERROR, np.where(b_true, BOOL, np.where(bt == ERROR, ERROR, UNDEF)))))
        value = np.where(a_false, bv, np.where(a_true | b_true, 1.0, 0.0))
        return tag, value
    return or_


def _cond(cond, then, other):
    def conditional(rows):
        ct, cv = _truth(*cond(rows))
        tt, tv = then(rows)
        ot, ov = other(rows)
        yes, no = (ct == BOOL) & (cv != 0), (ct == BOOL) & (cv == 0)
        tag = np.where(yes, tt, np.where(no, ot, ct))
        value = np.where(yes, tv, np.where(no, ov, 0.0))
        return tag, value
    return conditional


def holds(result) -> np.ndarray:
    """Rows where a ``Requirements`` clause's value lets the whole of it hold: true, or a
    non-zero number (``&&`` of such clauses is true; anything else never is)."""
    tag, value = result
    tag = np.asarray(tag)
    return ((tag == BOOL) | (tag == INT) | (tag == REAL)) & (np.asarray(value) != 0)


def ranks(result, worst: float | None) -> np.ndarray:
    """A rank per row: numbers and booleans as floats; anything else ``worst`` (the
    negotiator's ranks, NaN too) or 0.0 (a job's ``Rank``, NaN kept), as the scalar paths do."""
    tag, value = result
    tag = np.asarray(tag)
    value = np.asarray(value, dtype=float)
    number = (tag == BOOL) | (tag == INT) | (tag == REAL)
    if worst is None:
        return np.where(number, value, 0.0)
    return np.where(number & ~np.isnan(value), value, worst)
