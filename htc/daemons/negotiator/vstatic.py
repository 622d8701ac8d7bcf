"""Per-slot values that no carve changes, evaluated once per group of slots that agree.

Theory of operation
-------------------
What the plan compilers (:mod:`.vexpr`, :mod:`.vtyped`) do not take -- strings, function
calls: ``TARGET.Arch == "X86_64"``, the slots' own ``Requirements``
-- and reads no carved resource has one value per slot for the whole cycle (a ``static``
column of :mod:`.vplan`), given by the ClassAd evaluator. :meth:`SlotGroups.evaluate` calls
the evaluator once per group of slots, not once per slot:

* an expression's value is a function of the values it reads. :func:`slot_reads` gives the
  slot names it can read when the slot's values of them are literals (the job's expressions
  followed back and forth, a name one ad lacks falling back to the other); slots that agree on
  those literal values (each of one type: 1, 1.0 and true differ, as do 0.0 and -0.0) are one
  group, and a slot whose value of one of them is an expression is a group of its own.
  Anything that reads more than the two ads' values (``time()``, ``random()``,
  ``CurrentTime``, another scope) is evaluated slot by slot;
* a name the expression only compares with string constants (``TARGET.FileSystemDomain ==
  MY.FileSystemDomain``, :func:`_string_tests`) is keyed by what those comparisons give, not
  by its value: 10,000 host names make one or two groups;
* the slot's own ``Requirements`` (:data:`SLOT_REQUIREMENTS`) is keyed by its chain of plain
  references and the literal it ends in (``Requirements = START; START = true``). Slots whose
  chain ends in one expression node (one object: ``ExprTree`` gives one node to one text) are
  keyed by that node and their verdict, computed for all of them in one :mod:`.vexpr` pass
  over their literal values (:func:`_verdicts`: 2,446 desktop slots of ``START =
  (KeyboardIdle > 15 * 60) && (LoadAvg < 0.3)`` evaluate it twice, once per verdict).

``tests/unit/test_negotiator_vstatic.py`` compares every grouped column with the slot-by-slot
evaluation on random ads (slots that share an expression node and slots that do not), and a
mutation of any key above fails it.
"""

from __future__ import annotations

import math
from itertools import repeat
from operator import attrgetter

import numpy as np

from htc.classad import ClassAd, ExprTree
from htc.classad.ast import AbsRef, AdExpr, AttrRef, Binary, Call, Literal, Select, walk
from htc.classad.context import _VIRTUAL_NAMES, SPECIAL_NAMES
from htc.classad.operators import fold
from htc.daemons.negotiator.clauses import slot_names_read
from htc.daemons.negotiator.columns import AdReads, literal_column
from htc.daemons.negotiator.slots import closure
from htc.daemons.negotiator.vexpr import Inexact, Unsupported, compile_vector, holds


class SlotGroups:
    """Evaluates per-slot values by groups of slots of one table (see the module docstring).

    Args:
        slots: the table's slots, in row order.
        slot_targets: what the slots' expressions read of the job (and the names they lack).
    """

    def __init__(self, slots, slot_targets, reads: AdReads | None = None):
        self.slots = slots
        self._slot_targets = slot_targets
        self._keys: dict = {}  # name (or name, constants) -> a key per row
        self._group_codes: dict = {}  # the same -> those keys as _codes
        self._slot_exprs = [slot.ad._exprs for slot in slots] if reads is None \
            else reads.exprs  # row -> its ad's trees
        #: the rows' trees and values of a name (the table's: it reads the same names)
        self._reads = AdReads(self._slot_exprs) if reads is None else reads

    def evaluate(self, verdict, read, job, dtype) -> np.ndarray:
        """``verdict(slot)`` for every row of the table, called once per group of slots that
        agree on every value the evaluation can read of the slot.

        ``read`` is ``(expression, slot_is_my)``, what ``verdict`` evaluates against ``job``
        (None: unknown, every slot evaluated). :func:`slot_reads` gives the slot names it can
        read when the slot's values of them are literals; a slot whose value of one of them is
        an expression is a group of its own. Evaluation is a function of those values (and of
        the job's): one verdict per group is the verdict of each of its slots. Expressions that
        read anything else (``time()``, ``random()``, ``CurrentTime``, another scope) are
        evaluated slot by slot, as before."""
        slots = self.slots
        if read is SLOT_REQUIREMENTS:
            codes = self._requirements_codes(job)
        else:
            names = None if read is None else slot_reads(read[0], job, read[1])
            if names == ():  # the verdict reads nothing of the slot
                return np.full(len(slots), verdict(slots[0]) if slots else False, dtype=dtype)
            tests = {} if not names or read[1] else _string_tests(read[0], job)
            codes = None if names is None else _combined([
                self._codes(n) if n not in tests else self._codes((n, tests[n]))
                for n in names])
        if codes is not None and codes[1] == 1:  # every slot agrees on every value it reads
            return np.full(len(slots), verdict(slots[0]) if slots else False, dtype=dtype)
        if codes is None or codes[1] == len(slots):
            return np.array([verdict(slot) for slot in slots], dtype=dtype)
        # a verdict per group (at its first row), then each row's group's
        first, group = _groups(*codes)
        if first.size == len(slots):
            return np.array([verdict(slot) for slot in slots], dtype=dtype)
        return np.array([verdict(slots[i]) for i in first.tolist()], dtype=dtype)[group]

    def _codes(self, key) -> tuple:
        """:func:`_codes` of the keys of a name (``key`` a name: :meth:`_literal_keys`) or of
        a name and the strings it is compared with (:meth:`_string_codes`, or
        :meth:`_test_keys` when its values are not all strings), cached per table."""
        codes = self._group_codes.get(key)
        if codes is None:
            if key.__class__ is str:
                codes = _codes(self._literal_keys(key))
            else:
                codes = self._string_codes(*key) or _codes(self._test_keys(*key))
            self._group_codes[key] = codes
        return codes

    def _string_codes(self, lname, constants) -> tuple | None:
        """``(codes, count)`` of a name the expression only compares with the strings
        ``constants`` (:func:`_string_tests`) when the slots' values of it are all strings
        (None otherwise): a string's code is what those comparisons give (10,000 host names
        compared with the job's FileSystemDomain: two codes at most). For one constant, the
        pair (folded equal, exactly equal) as an integer (:data:`_PAIR_CODE`) renumbered to
        the pairs present (:func:`_dense`): the groups :func:`_codes` of the pairs would
        give, numbered by the pair rather than by first appearance, with no dictionary pass
        per row. Few distinct strings (two architectures) are each compared once; many (host
        names) are compared row by row, without a dictionary of them."""
        literals = self._literal_keys(lname)
        if not literals or literals[0].__class__ is not str:
            return None  # (one str: all are, see _literal_keys)
        folded = [fold(c) for c in constants]
        n = len(literals)
        if len(constants) > 1:
            key_of = {v: (tuple(fold(v) == f for f in folded),
                          tuple(v == c for c in constants)) for v in set(literals)}
            return _codes(list(map(key_of.__getitem__, literals)))
        (c,), (f,) = constants, folded
        distinct = set(literals)
        if len(distinct) * 4 <= n:
            distinct = list(distinct)
            # (ASCII strings, each lower-cased as fold does)
            ascii_only = all(map(str.isascii, distinct))
            lowered = map(str.lower, distinct) if ascii_only else map(fold, distinct)
            key_of = dict(zip(distinct, map(_PAIR_CODE.__getitem__, zip(
                map(f.__eq__, lowered), map(c.__eq__, distinct)))))
            return _dense(np.fromiter(map(key_of.__getitem__, literals), np.int64, n),
                          len(_PAIR_CODE))
        # fold keeps a string's length (it lower-cases ASCII letters only, in place), so only
        # the strings as long as the constant are folded (10,000 host names against the job's
        # FileSystemDomain: a test of equality and of length per row, no lower-casing)
        exact = np.fromiter(map(c.__eq__, literals), np.int64, n)
        folded = np.zeros(n, dtype=np.int64)
        rows = np.flatnonzero(np.fromiter(map(len, literals), np.int64, n) == len(f)).tolist()
        if rows:
            folded[rows] = list(map(f.__eq__, map(fold, map(literals.__getitem__, rows))))
        return _dense(folded * 2 + exact, len(_PAIR_CODE))  # (as _PAIR_CODE numbers them)

    def _requirements_codes(self, job):
        """:func:`_codes` of a key per row of the slot's own ``Requirements`` when it is a
        chain of plain references ending in a literal or in a name the slot lacks
        (``Requirements = START; START = true``): the chain's names and its end's value; in an
        expression node other slots' chains end in too: the node and the verdict
        (:meth:`_shared_ends`); any other slot has a key of its own. None when the job's
        values the slots read are not all literals (a job expression could read the slot
        back).

        The chains are followed a link at a time for all the rows at one name together (maps
        over the rows, no Python step per row: 10,000 slots of ``Requirements = START``)."""
        exprs = job._exprs
        for name in self._slot_targets:
            node = exprs.get(name)
            if node is not None and node.__class__ is not Literal:
                return None
        slot_exprs = self._slot_exprs
        n = len(slot_exprs)
        codes = np.empty(n, dtype=np.int64)
        count = 0
        every = list(range(n))
        todo = [(1, "requirements", every)]  # (links so far, name, rows at it)
        while todo:
            links, name, rows = todo.pop()
            # (every row: the table's read of the name, kept for the next job view)
            nodes = self._reads.nodes(name) if rows is every else list(
                map(dict.get, map(slot_exprs.__getitem__, rows), repeat(name)))
            for cls, part in _by_class(nodes):
                sub = list(map(rows.__getitem__, part)) if len(part) < len(rows) else rows
                if cls is AttrRef and links < 9:
                    names = list(map(_LNAME_OF, map(nodes.__getitem__, part)))
                    by_name: dict[str, list] = {}
                    ends = []  # MY, TARGET, ...: not a plain reference, a key of its own
                    one = set(names)
                    if len(one) == 1 and not one <= _SCOPES:  # (every row: START)
                        by_name[one.pop()] = sub
                    else:
                        for row, lname in zip(sub, names):
                            if lname in _SCOPES:
                                ends.append(row)
                            else:
                                by_name.setdefault(lname, []).append(row)
                    todo.extend((links + 1, lname, more) for lname, more in by_name.items())
                    sub = ends
                elif cls is Literal or cls is _NONE_TYPE:
                    # the end of a plain chain: one code per value (this chain's alone)
                    if cls is _NONE_TYPE:
                        local, distinct = np.zeros(len(sub), dtype=np.int64), 1
                    else:
                        values = list(map(_VALUE_OF, map(nodes.__getitem__, part)))
                        classes = set(map(type, values))
                        if not (len(classes) == 1 and classes <= {str, int, bool}):
                            values = [_literal_key(nodes[k], row) for k, row in zip(part, sub)]
                        local, distinct = _codes(values)
                    codes[sub] = local + count
                    count += distinct
                    continue
                if cls is not AttrRef:  # an expression ends the chain: shared by some rows?
                    sub, count = self._shared_ends(nodes, part, sub, job, codes, count)
                # not a plain chain (a cycle is cut at 8 links): a key of its own per row
                codes[sub] = np.arange(count, count + len(sub))
                count += len(sub)
        return codes, count

    def _shared_ends(self, nodes, part, sub, job, codes, count) -> tuple:
        """Code the rows ``sub`` (their chains' ends ``nodes[k]``, ``k`` in ``part``) whose
        chain ends in one expression node with others (by identity: ``ExprTree`` gives one
        node to one text) by that node and their verdict, :func:`_verdicts`; return the rows
        left (a node of one row, or one :func:`_verdicts` does not take) and ``count``."""
        ends = list(map(nodes.__getitem__, part))
        by_node: dict[int, list] = {}  # id(node) -> [node, its rows...]
        if len(set(map(id, ends))) == 1:  # (one node on every row: 2,446 desktop slots)
            by_node[id(ends[0])] = [ends[0], *sub]
        else:
            for node, row in zip(ends, sub):
                by_node.setdefault(id(node), [node]).append(row)
        left = []
        for node, *rows in by_node.values():
            if len(rows) > 1:
                verdicts = _verdicts(node, list(map(self._slot_exprs.__getitem__, rows)), job)
                if verdicts is not None:
                    codes[rows] = verdicts + count
                    count += 2
                    continue
            left.extend(rows)
        return left, count

    def _test_keys(self, lname, constants) -> list:
        """:meth:`_literal_keys` of a name the expression only compares with the strings
        ``constants`` (:func:`_string_tests`) when the slots' values are not all strings
        (those: :meth:`_string_codes`): a string's key is what those comparisons give, any
        other value keeps its own key."""
        key = (lname, constants)
        keys = self._keys.get(key)
        if keys is None:
            literals = self._literal_keys(lname)
            folded = [fold(c) for c in constants]
            keys = []  # (a column of strings only: _string_codes)
            for i, literal in enumerate(literals):
                if literal.__class__ is tuple and len(literal) == 2 and literal[0] is str:
                    value = literal[1]
                else:
                    keys.append(literal)
                    continue
                f = fold(value)
                keys.append((_COMPARED, tuple(f == c for c in folded),
                             tuple(value == c for c in constants)))
            self._keys[key] = keys
        return keys

    def _literal_keys(self, lname) -> list:
        """Per row, a key of the slot's value of ``lname``: equal keys for equal literal values
        (of one type), a key of its own for an expression (cached per table)."""
        keys = self._keys.get(lname)
        if keys is None:
            # (read once per name and table, shared with the table's columns: AdReads)
            nodes = self._reads.nodes(lname)
            keys = None
            read = self._reads.values(lname)
            if read is None:  # (a slot that lacks it or has an expression)
                if set(map(type, nodes)) == _NONE_ONLY:
                    keys = [_ABSENT] * len(nodes)  # no slot defines it
            else:
                values, classes = read
                if len(classes) == 1 and classes <= {str, int, bool}:
                    keys = values  # one type: the value is the key (1 never meets 1.0 here)
            if keys is None:
                keys = [_literal_key(node, i) for i, node in enumerate(nodes)]
            self._keys[lname] = keys
        return keys


#: functions whose value depends on their arguments only (no clock, no randomness, no state)
_PURE_CALLS = frozenset({
    "ifthenelse", "isundefined", "iserror", "isstring", "isinteger", "isreal", "isboolean",
    "islist", "isclassad", "isabstime", "isreltime", "int", "real", "string", "bool", "floor",
    "ceil", "ceiling", "round", "pow", "quantize", "min", "max", "member", "identicalmember",
    "strcat", "toupper", "tolower", "size", "substr", "strcmp", "stricmp", "stringlistmember",
    "stringlistimember", "regexp"})
_SCOPES = SPECIAL_NAMES | _VIRTUAL_NAMES
_FEW_CODES = 16  # _groups: up to so many groups, no sort
_ABSENT = ("absent",)  # the key of a slot that does not define the name
_COMPARED = ("compared",)  # _test_keys' mark of a string's key
#: _string_codes' code of one string compared with one constant (folded, exactly)
_PAIR_CODE = {(False, False): 0, (False, True): 1, (True, False): 2, (True, True): 3}
#: :meth:`SlotGroups.evaluate`'s ``read`` for the slot's own ``Requirements``
SLOT_REQUIREMENTS = ("the slot's Requirements",)
_NONE_ONLY = {type(None)}
_NONE_TYPE = type(None)
_LNAME_OF = attrgetter("lname")
_VALUE_OF = attrgetter("value")
_EMPTY = ClassAd()  # a slot that defines nothing: every name falls back (see slot_reads)


def slot_reads(expr, job, slot_is_my: bool) -> tuple | None:
    """The slot names evaluating ``expr`` against ``job`` can read when the slot's values of
    them are literals (sorted), or None when its value may depend on more than the two ads'
    values (a call outside :data:`_PURE_CALLS`, a special or another scope's name), anywhere
    in ``expr`` or in the job's expressions it reaches.

    The slot is taken as defining nothing (:data:`_EMPTY`), so that every name read of it
    also falls back to the job, and the job's expressions are followed back and forth
    (:func:`~.clauses.slot_names_read`): a superset of what any slot with literal values of
    those names reads."""
    if expr.__class__ is not ExprTree:
        return None
    names = slot_names_read(expr, job, _EMPTY, slot_is_my)
    # every job name it can reach: plain ones, and TARGET.x, the job's when MY is the slot
    refs = {r[7:] if r.startswith("target.") else r for r in expr.attributes()}
    reached, _ = closure(job, names | refs)
    trees = [expr.node]
    for name in reached:
        node = job._exprs.get(name)
        if node is not None and node.__class__ is not Literal:
            trees.append(node)
    scopes = set()  # the MY and TARGET that select a name (a bare one is the whole ad)
    for tree in trees:
        for node in walk(tree):  # (a selection before its base)
            cls = node.__class__
            if cls is Call:
                if node.lname not in _PURE_CALLS:
                    return None
            elif cls is AttrRef:
                if node.lname in _SCOPES and id(node) not in scopes:
                    return None
            elif cls is Select:
                base = node.base
                if base.__class__ is not AttrRef or base.lname not in ("my", "target"):
                    return None
                scopes.add(id(base))
            elif cls is AbsRef or cls is AdExpr:
                return None
    return tuple(sorted(names))


def _verdicts(node, slot_exprs: list, job) -> np.ndarray | None:
    """Per slot (its ad's expressions in ``slot_exprs``), 1 where ``node`` -- the end of
    its ``Requirements``' chain of plain references -- lets ``Requirements`` hold against
    ``job`` (:func:`~htc.classad.match.requirements_hold`'s verdict), else 0; None when
    :mod:`.vexpr` does not take the expression or a value it reads of the slots (a string, an
    expression) or of the job.

    The value of the chain is the value of its end evaluated with MY = the slot (each link a
    plain name of the slot), so :func:`~.vexpr.compile_vector` of the end, over the columns
    of those slots' literal values (:func:`~.columns.literal_column`; a name a slot lacks
    falls back to the job) gives each slot's value with ClassAd's semantics, and
    :func:`~.vexpr.holds` HTCondor's test of it (``KeyboardIdle > 15 * 60 && LoadAvg < 0.3``
    of 2,446 slots in one pass, not 2,446 evaluations)."""
    try:
        result = holds(compile_vector(node, job, True)(_Rows(slot_exprs)))
    except (Unsupported, Inexact, RecursionError):
        return None
    return np.broadcast_to(result, (len(slot_exprs),)).astype(np.int64)


class _Rows:
    """Some slots' literal values as :func:`~.vexpr.compile_vector`'s functions read them."""

    __slots__ = ("exprs",)

    def __init__(self, exprs: list):
        self.exprs = exprs

    def column(self, lname: str) -> tuple:
        return literal_column(self.exprs, lname)


def _string_tests(expr, job) -> dict:
    """The slot names ``expr`` (MY = ``job``) reads only as ``TARGET.x`` compared (``==``,
    ``!=``, ``=?=``, ``=!=``) with a string constant: a string literal, or a job attribute
    whose value is a literal string. Returns ``{name: (constants...)}``; empty when the
    job's expressions that ``expr`` reaches are not all literals (they could read the slot)."""
    node = expr.node
    exprs = job._exprs
    reached, _ = closure(job, {r for r in expr.attributes() if not r.startswith("target.")})
    for name in reached:
        value = exprs.get(name)
        if value is not None and value.__class__ is not Literal:
            return {}
    found: dict[str, set] = {}
    bad = set()
    todo = [(node, None)]
    while todo:
        node, parent = todo.pop()
        cls = node.__class__
        if cls is Select and node.base.__class__ is AttrRef and node.base.lname == "target":
            const = _string_operand(parent, node, exprs)
            if const is None:
                bad.add(node.lname)
            else:
                found.setdefault(node.lname, set()).add(const)
            continue
        if cls is AttrRef and node.lname not in exprs:
            bad.add(node.lname)  # a plain name the job lacks is the slot's
        todo.extend((child, node) for child in node.children())
    return {name: tuple(sorted(consts)) for name, consts in found.items() if name not in bad}


def _string_operand(parent, node, exprs):
    """The string ``node`` is compared with in ``parent``, when ``parent`` is such a test and
    the other operand is a string literal or ``MY.y`` / ``y`` of a literal string of the job."""
    if parent.__class__ is not Binary or parent.op not in ("==", "!=", "is", "isnt"):
        return None
    other = parent.right if parent.left is node else parent.left
    if other is node:
        return None  # TARGET.x == TARGET.x
    cls = other.__class__
    if cls is Select:
        if other.base.__class__ is not AttrRef or other.base.lname != "my":
            return None
        other = exprs.get(other.lname)
    elif cls is AttrRef:
        if other.lname in _SCOPES:
            return None
        other = exprs.get(other.lname)
    if other.__class__ is Literal and other.value.__class__ is str:
        return other.value
    return None


def _by_class(nodes: list) -> list:
    """``[(class, positions)]`` of ``nodes``: the positions of the nodes of each class."""
    kinds = list(map(type, nodes))
    classes = set(kinds)
    if len(classes) == 1:
        return [(classes.pop(), range(len(nodes)))]
    ids = np.fromiter(map(id, kinds), np.int64, len(kinds))
    return [(cls, np.flatnonzero(ids == id(cls)).tolist()) for cls in classes]


def _codes(keys: list) -> tuple:
    """``(codes, count)``: per row a small integer, equal for equal keys (numbered in order
    of first appearance, ``count`` of them)."""
    number = dict.fromkeys(keys)  # (in order of first appearance)
    if len(number) == 1:
        return np.zeros(len(keys), dtype=np.int64), 1
    for i, key in enumerate(number):
        number[key] = i
    return np.fromiter(map(number.__getitem__, keys), np.int64, len(keys)), len(number)


def _dense(codes: np.ndarray, bound: int) -> tuple:
    """``(codes, count)`` of integer ``codes`` below ``bound``, renumbered to the values
    present (in their order): equal codes stay equal, different ones different."""
    present = np.flatnonzero(np.bincount(codes, minlength=bound))
    if present.size == bound:
        return codes, bound
    number = np.zeros(bound, dtype=np.int64)
    number[present] = np.arange(present.size)
    return number[codes], present.size


def _groups(codes: np.ndarray, bound: int) -> tuple:
    """``(first, group)`` of ``codes`` (each below ``bound``): the first row of each
    distinct code in the codes' order, and each row's position in it -- what
    ``np.unique(codes, return_index=True, return_inverse=True)`` gives, without its sort
    when the codes are few (a handful of groups of 10,000 rows: a count per code and a scan
    for each first row)."""
    if bound <= _FEW_CODES * 4:
        present = np.flatnonzero(np.bincount(codes, minlength=bound))
        if present.size <= _FEW_CODES:
            first = np.array([int(np.argmax(codes == code)) for code in present.tolist()],
                             dtype=np.intp)
            number = np.zeros(bound, dtype=np.intp)
            number[present] = np.arange(present.size)
            return first, number[codes]
    _, first, group = np.unique(codes, return_index=True, return_inverse=True)
    return first, group


def _combined(parts: list) -> tuple:
    """``(codes, bound)`` of the rows' tuples of keys, from each key's :func:`_codes`: equal
    codes for the rows equal in every part, each code below ``bound`` (the parts' codes as
    the digits of one number, renumbered when the next digit could pass 2**62)."""
    codes, count = parts[0]
    for more, base in parts[1:]:
        if base == 1:
            continue  # one key on every row: it tells no rows apart
        if count == 1:
            codes, count = more, base
            continue
        if count * base >= 2 ** 62:
            unique, codes = np.unique(codes, return_inverse=True)
            count = unique.size
        codes, count = codes * base + more, count * base
    return codes, count


def _literal_key(node, row: int):
    """The grouping key of a slot's value (see :meth:`SlotGroups._literal_keys`)."""
    if node is None:
        return _ABSENT
    if node.__class__ is not Literal:
        return ("expression", row)
    value = node.value
    cls = value.__class__
    if cls is float and value == 0.0:
        return (cls, value, math.copysign(1.0, value))  # -0.0 is not 0.0 to string()
    try:
        hash(value)
    except TypeError:
        return ("unhashable", row)
    return (cls, value)
