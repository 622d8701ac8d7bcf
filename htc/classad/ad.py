"""The Python API: :class:`ClassAd` and :class:`ExprTree`, shaped like HTCondor's ``classad2``.

A ClassAd is a mutable mapping from case-insensitive attribute names to expressions.  It
stores syntax-tree nodes (``_exprs``, keyed by lower-case name) and the first spelling of
each name (``_names``); the compiled form of each expression is cached on its node, so
evaluating an ad never re-parses or re-compiles.

htc's own packages (the job queue, the negotiator, the analyzer) reach the trees through a
small internal API instead of those private attributes: :attr:`ExprTree.node`,
:attr:`ClassAd.table`, :attr:`ClassAd.spellings` and :func:`external_refs` (see "Internal API
for htc's own packages" in ``docs/classad.md``).

Values cross the boundary as in classad2: ``ad[name]`` gives a Python value for a literal
(int, float, str, bool, list, ClassAd, ``Value.Undefined``/``Value.Error``) and an
:class:`ExprTree` otherwise; ``ad.eval(name)`` evaluates, giving absolute times as aware
``datetime`` objects and relative times as float seconds.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping, MutableMapping

from htc.classad import printing
from htc.classad.ast import AdExpr, ListExpr, Literal, Node, walk
from htc.classad.compiler import compile_node, evaluate
from htc.classad.context import EvalFailed
from htc.classad.errors import ClassAdEvaluationError, ClassAdParseError, ClassAdValueError
from htc.classad.operators import is_true_for_match
from htc.classad.parser import parse_ad_prefix, parse_expr
from htc.classad.values import (INT64_MAX, INT64_MIN, AbsTime, Error, ExprList, RelTime,
                                Undefined, Value,
                                is_classad, register_classad_type)

_UTC = datetime.timezone.utc


def to_python(v):
    """Convert an internal value to what the public API returns (datetime for absolute times)."""
    t = v.__class__
    if t is AbsTime:
        tz = datetime.timezone(datetime.timedelta(seconds=v.tz_offset)) if v.tz_offset else _UTC
        return datetime.datetime.fromtimestamp(v.secs, tz)
    if t is RelTime:
        return float(v.secs)
    if t is list or t is ExprList:
        return [to_python(x) for x in v]
    return v


def to_node(value) -> Node:
    """A syntax tree for a Python value (or the tree of an :class:`ExprTree`).

    Raises:
        ClassAdValueError: the value has no ClassAd equivalent.
    """
    if isinstance(value, ExprTree):
        return value._node
    if value is None:
        return Literal(Undefined)
    t = value.__class__
    if t is bool or t is str or t is float or t is Value:
        return Literal(value)
    if isinstance(value, bool):
        return Literal(bool(value))
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ClassAdValueError(
                f"the integer {value} does not fit a ClassAd's 64-bit integers; store it as a "
                "float or a string")
        return Literal(int(value))
    if isinstance(value, float):
        return Literal(float(value))
    if isinstance(value, str):
        return Literal(str(value))
    if isinstance(value, (AbsTime, RelTime)):
        return Literal(value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.astimezone()
        off = value.utcoffset()
        return Literal(AbsTime(value.timestamp(), int(off.total_seconds()) if off else 0))
    if isinstance(value, datetime.timedelta):
        return Literal(RelTime(value.total_seconds()))
    if isinstance(value, ClassAd):
        return AdExpr([(value._names[k], n) for k, n in value._exprs.items()])
    if isinstance(value, Mapping):
        return AdExpr([(_check_name(k), to_node(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return ListExpr([to_node(v) for v in value])
    raise ClassAdValueError(
        f"{value!r} ({type(value).__name__}) has no ClassAd equivalent; use a bool, int, float, "
        "str, list, dict, ClassAd, ExprTree, datetime or None")


def evaluate_public(node: Node, scope=None, target=None):
    """Evaluate and convert as classad2 does: a list literal's elements come back unevaluated.

    classad2 hands back a list value as its expression list: literal elements as Python
    values, other elements as :class:`ExprTree` (the caller evaluates them, usually in its
    own scope).  Lists computed by functions or selections are plain values.
    """
    try:
        v = evaluate(node, scope, target, strict=True)
    except EvalFailed:
        raise ClassAdEvaluationError("failed to evaluate expression") from None
    if v.__class__ is ExprList:
        return from_node(v.node)
    return to_python(v)


def from_node(node: Node, parent=None):
    """classad2's view of a stored expression: literals as Python values, else an ExprTree."""
    t = node.__class__
    if t is Literal:
        return to_python(node.value)
    if t is ListExpr:
        return [from_node(n, parent) for n in node.items]
    if t is AdExpr:
        return ClassAd._from_node(node, parent)
    return ExprTree(node)


def _check_name(name) -> str:
    if not isinstance(name, str):
        raise ClassAdValueError(f"ClassAd attribute names are strings, not {type(name).__name__}")
    return name


class ExprTree:
    """A parsed ClassAd expression; compiled once, evaluated any number of times."""

    __slots__ = ("_node",)

    def __init__(self, expr: "str | ExprTree | Node" = "undefined"):
        """Parse ``expr``.

        Raises:
            ClassAdParseError: the text is not one well-formed expression.
        """
        if isinstance(expr, ExprTree):
            self._node = expr._node
        elif isinstance(expr, Node):
            self._node = expr
        else:
            self._node = parse_expr(expr)

    @property
    def node(self) -> Node:
        """The syntax tree (:mod:`htc.classad.ast`), itself, not a copy: treat it as immutable.

        Each node caches its compiled closure, so evaluating the tree again
        (:func:`htc.classad.compiler.evaluate`) neither parses nor compiles.
        """
        return self._node

    def eval(self, scope: "ClassAd | None" = None, target: "ClassAd | None" = None):
        """Evaluate with MY = ``scope`` and TARGET = ``target``.

        Returns:
            A Python value: bool, int, float, str, list, ClassAd, datetime (absolute time),
            ``Value.Undefined`` or ``Value.Error``.
        """
        return evaluate_public(self._node, scope, target)

    def evaluate_internal(self, scope=None, target=None):
        """Evaluate, keeping internal time values (AbsTime/RelTime) for library callers."""
        return evaluate(self._node, scope, target)

    def unparse(self, pretty: bool = False, exact: bool = False) -> str:
        """Canonical one-line text (``pretty``: classad2's multi-line ``str`` form; ``exact``:
        reals with every digit, for storage that must read back bit for bit)."""
        return printing.unparse(self._node, pretty=pretty, exact=exact)

    def attributes(self) -> set[str]:
        """Names this expression reads from outside itself, lower-cased (``TARGET.x`` as ``target.x``)."""
        return external_refs(self._node)

    def compile(self):
        """The compiled closure (mostly for benchmarks and tools)."""
        return compile_node(self._node)

    def __str__(self) -> str:
        return printing.unparse(self._node, pretty=True)

    def __repr__(self) -> str:
        return printing.unparse(self._node)

    def __eq__(self, other) -> bool:
        if isinstance(other, ExprTree):
            return self._node == other._node
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._node)

    def __reduce__(self):
        return (ExprTree, (printing.unparse(self._node, exact=True),))


def external_refs(node: Node) -> set[str]:
    """Attribute references of a tree that are not resolved inside the tree itself."""
    from htc.classad.ast import AbsRef, AttrRef, Select
    refs: set[str] = set()
    for n in walk(node):
        if n.__class__ is AttrRef and n.lname not in ("my", "target", "parent"):
            refs.add(n.lname)
        elif n.__class__ is AbsRef:
            refs.add(n.lname)  # .x: the outermost ad's x
        elif n.__class__ is Select and n.base.__class__ is AttrRef:
            base = n.base.lname
            if base == "target":
                refs.add("target." + n.lname)
            elif base in ("my", "self", "root", "toplevel"):
                refs.add(n.lname)
    # Selection bases such as ``a`` in ``a.b`` are references too; MY/TARGET are not.
    return refs


@register_classad_type
class ClassAd(MutableMapping):
    """A ClassAd: a mutable mapping with case-insensitive keys (see the module docstring)."""

    __slots__ = ("_exprs", "_names", "_parent", "__weakref__")

    #: True for the copy a string subscript hands back (:class:`SubscriptedAd`)
    _detached = False

    def __init__(self, source: "str | Mapping | None" = None):
        """Build an ad from new-syntax text, a mapping of Python values, or nothing.

        Raises:
            ClassAdParseError: the text is not a new-syntax ad.
            ClassAdValueError: a mapping value has no ClassAd equivalent.
        """
        self._exprs: dict[str, Node] = {}
        self._names: dict[str, str] = {}
        self._parent = None
        if source is None:
            return
        if isinstance(source, str):
            got = parse_ad_prefix(source)
            if got is None:
                raise ClassAdParseError(source, len(source), "a ClassAd '[ ... ]'")
            table = got[0].table  # (lower-case name -> (first spelling, last tree))
            self._exprs = {low: pair[1] for low, pair in table.items()}
            self._names = {low: pair[0] for low, pair in table.items()}
            return
        if isinstance(source, Mapping):
            for k, v in source.items():
                self[k] = v
            return
        raise ClassAdValueError(
            f"a ClassAd is built from new-syntax text or a mapping, not {type(source).__name__}")

    @classmethod
    def _from_node(cls, node: AdExpr, parent=None) -> "ClassAd":
        ad = cls.__new__(cls)
        table = node.table
        ad._exprs = {k: v[1] for k, v in table.items()}
        ad._names = {k: v[0] for k, v in table.items()}
        ad._parent = parent
        return ad

    @classmethod
    def _from_pairs(cls, pairs) -> "ClassAd":
        ad = cls()
        for name, node in pairs:
            low = name.lower()
            if low not in ad._names:
                ad._names[low] = name
            ad._exprs[low] = node
        return ad

    # -- mapping protocol --------------------------------------------------------------
    def __getitem__(self, name: str):
        return from_node(self._exprs[name.lower()], self)

    def __setitem__(self, name: str, value) -> None:
        low = _check_name(name).lower()
        node = to_node(value)
        if low not in self._names:
            self._names[low] = name
        self._exprs[low] = node

    def __delitem__(self, name: str) -> None:
        low = name.lower()
        del self._exprs[low]
        del self._names[low]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names.values()))

    def __len__(self) -> int:
        return len(self._exprs)

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name.lower() in self._exprs

    def __copy__(self) -> "ClassAd":
        ad = ClassAd()
        ad._exprs = dict(self._exprs)
        ad._names = dict(self._names)
        return ad

    copy = __copy__

    # -- internal API for htc's own packages (docs/classad.md) -------------------------
    @property
    def table(self) -> dict[str, Node]:
        """The attribute table: lower-case name -> syntax tree; the ad's own dict, not a copy.

        Read it freely (``ad.table.get("requirements")``); assigning ``table[lname]`` may
        replace the tree of an attribute the ad has. A caller that adds or removes names
        directly, for speed, keeps :attr:`spellings` in step: a name is in both or in neither.
        """
        return self._exprs

    @property
    def spellings(self) -> dict[str, str]:
        """Lower-case name -> the name as first written into the ad; the ad's own dict, not a
        copy, with the same keys as :attr:`table`."""
        return self._names

    # -- classad2 API ------------------------------------------------------------------
    def lookup(self, name: str) -> ExprTree:
        """The expression of attribute ``name`` (unevaluated).

        Raises:
            KeyError: the ad has no such attribute.
        """
        return ExprTree(self._exprs[name.lower()])

    def eval(self, name: str, target: "ClassAd | None" = None):
        """Evaluate attribute ``name`` inside this ad (TARGET = ``target``).

        Raises:
            KeyError: the ad has no such attribute.
        """
        node = self._exprs[name.lower()]
        if node.__class__ is Literal:
            return to_python(node.value)
        return evaluate_public(node, self, target)

    def evaluate_internal(self, name: str, target=None):
        """Like :meth:`eval` but keeps internal time values (AbsTime/RelTime)."""
        node = self._exprs[name.lower()]
        if node.__class__ is Literal:
            return node.value
        return evaluate(node, self, target)

    def matches(self, other: "ClassAd") -> bool:
        """True when this ad satisfies ``other``'s Requirements (evaluated with TARGET = self)."""
        node = other._exprs.get("requirements")
        if node is None:
            return False
        return is_true_for_match(evaluate(node, other, self))

    def symmetricMatch(self, other: "ClassAd") -> bool:  # noqa: N802 (classad2 name)
        """True when each ad's Requirements holds against the other."""
        return self.matches(other) and other.matches(self)

    def printOld(self) -> str:  # noqa: N802
        """The ad in old syntax, one ``Name = expr`` line each (as ``condor_q -long`` prints)."""
        return printing.print_old(self._pairs())

    formatOld = printOld

    def printJson(self) -> str:  # noqa: N802
        """The ad as a JSON object (non-literal expressions as ``"\\/Expr(...)\\/"``)."""
        return printing.json_object(self._pairs())

    formatJson = printJson

    def externalRefs(self, expr: ExprTree) -> list[str]:  # noqa: N802
        """Names ``expr`` references that this ad does not define (``TARGET.x`` kept qualified)."""
        out = []
        for r in sorted(external_refs(expr._node)):
            if r.startswith("target.") or r not in self._exprs:
                out.append(r)
        return out

    def internalRefs(self, expr: ExprTree) -> list[str]:  # noqa: N802
        """Names ``expr`` references that this ad defines."""
        return sorted(r for r in external_refs(expr._node) if r in self._exprs)

    def _pairs(self):
        names = self._names
        return [(names[k], n) for k, n in self._exprs.items()]

    def __str__(self) -> str:
        return printing.print_new(self._pairs(), pretty=True)

    def __repr__(self) -> str:
        return printing.print_new(self._pairs(), pretty=False)

    def __eq__(self, other) -> bool:
        if not isinstance(other, ClassAd):
            return NotImplemented
        return self._exprs == other._exprs

    __hash__ = None  # type: ignore[assignment]

    def unparse(self, pretty: bool = False, exact: bool = False) -> str:
        """The ad in new syntax (``exact``: reals with every digit, so it reads back bit for bit)."""
        return printing.print_new(self._pairs(), pretty=pretty, exact=exact)

    def __reduce__(self):
        return (ClassAd, (self.unparse(exact=True),))


class SubscriptedAd(ClassAd):
    """The ad ``ad["name"]`` gives when that attribute is an ad: as in HTCondor, a copy cut off
    from the ads around it (no parent; a subscript into it evaluates with the copy as its root and
    no target), and one a selection cannot look into: HTCondor frees the copy before its
    ``.attr`` is looked up, so ``b["c"].a`` is UNDEFINED where ``b.c.a`` and ``b["c"]["a"]`` are
    not. ``=?=`` between such a copy and an ad that is not one is FALSE (their types differ)."""

    __slots__ = ()
    _detached = True


def quote(s: str) -> str:
    """``s`` as a ClassAd string literal, with quotes and escapes."""
    return printing.quote_string(s)


def unquote(s: str) -> str:
    """The string value of a ClassAd string literal.

    Raises:
        ClassAdParseError: ``s`` is not exactly one string literal.
    """
    node = parse_expr(s)
    if node.__class__ is not Literal or node.value.__class__ is not str:
        raise ClassAdParseError(s, 0, "a single string literal in double quotes")
    return node.value


__all__ = ["ClassAd", "ExprTree", "quote", "unquote", "to_python", "to_node", "external_refs",
           "is_classad", "Error", "Undefined"]
