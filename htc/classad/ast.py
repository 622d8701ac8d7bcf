"""Syntax tree nodes of ClassAd expressions.

Nodes are immutable once built and may be shared between ads and expression objects.  Each
node caches its compiled evaluator in ``fn`` (filled in lazily by
:func:`htc.classad.compiler.compile_node`), so an expression is compiled once however many
times and in however many ads it is evaluated.
"""

from __future__ import annotations


class Node:
    """Base class of every expression node."""

    __slots__ = ("fn",)

    def children(self) -> tuple["Node", ...]:
        """The direct sub-expressions, in source order."""
        return ()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def _key(self) -> tuple:
        raise TypeError(f"{type(self).__name__} has no comparison key")


class Literal(Node):
    """A constant: int, float, str, bool, Undefined, Error, AbsTime or RelTime."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.fn = None
        self.value = value

    def _key(self):
        v = self.value
        return (type(v).__name__, repr(v))


class AttrRef(Node):
    """An unqualified attribute reference such as ``Memory`` (name keeps its source case)."""

    __slots__ = ("name", "lname")

    def __init__(self, name: str):
        self.fn = None
        self.name = name
        self.lname = name.lower()

    def _key(self):
        return (self.lname,)


class Select(Node):
    """Attribute selection ``base.name`` (``MY.x``, ``TARGET.x``, ``ad.b.c``)."""

    __slots__ = ("base", "name", "lname")

    def __init__(self, base: Node, name: str):
        self.fn = None
        self.base = base
        self.name = name
        self.lname = name.lower()

    def children(self):
        return (self.base,)

    def _key(self):
        return (self.base, self.lname)


class Subscript(Node):
    """Subscript ``base[index]``: a list element or an attribute of an ad by name."""

    __slots__ = ("base", "index")

    def __init__(self, base: Node, index: Node):
        self.fn = None
        self.base = base
        self.index = index

    def children(self):
        return (self.base, self.index)

    def _key(self):
        return (self.base, self.index)


class Unary(Node):
    """A prefix operator: ``-``, ``+``, ``!`` or ``~``."""

    __slots__ = ("op", "operand")

    def __init__(self, op: str, operand: Node):
        self.fn = None
        self.op = op
        self.operand = operand

    def children(self):
        return (self.operand,)

    def _key(self):
        return (self.op, self.operand)


class Binary(Node):
    """An infix operator; ``=?=`` and ``=!=`` are stored as ``is`` and ``isnt``."""

    __slots__ = ("op", "left", "right")

    def __init__(self, op: str, left: Node, right: Node):
        self.fn = None
        self.op = op
        self.left = left
        self.right = right

    def children(self):
        return (self.left, self.right)

    def _key(self):
        return (self.op, self.left, self.right)


class Conditional(Node):
    """``cond ? then : else``; ``then`` is None for the ``cond ?: else`` form."""

    __slots__ = ("cond", "then", "other")

    def __init__(self, cond: Node, then: Node | None, other: Node):
        self.fn = None
        self.cond = cond
        self.then = then
        self.other = other

    def children(self):
        if self.then is None:
            return (self.cond, self.other)
        return (self.cond, self.then, self.other)

    def _key(self):
        return (self.cond, self.then, self.other)


class Paren(Node):
    """Parentheses written in the source; kept so that unparsing reproduces them."""

    __slots__ = ("inner",)

    def __init__(self, inner: Node):
        self.fn = None
        self.inner = inner

    def children(self):
        return (self.inner,)

    def _key(self):
        return (self.inner,)


class Call(Node):
    """A function call; ``name`` keeps its source case, lookup uses ``lname``."""

    __slots__ = ("name", "lname", "args")

    def __init__(self, name: str, args: list[Node]):
        self.fn = None
        self.name = name
        self.lname = name.lower()
        self.args = tuple(args)

    def children(self):
        return self.args

    def _key(self):
        return (self.lname, self.args)


class ListExpr(Node):
    """A list literal ``{ a, b, ... }``."""

    __slots__ = ("items",)

    def __init__(self, items: list[Node]):
        self.fn = None
        self.items = tuple(items)

    def children(self):
        return self.items

    def _key(self):
        return self.items


class AdExpr(Node):
    """A nested ad literal ``[ a = 1; b = a + 1 ]``: ordered (name, node) pairs, last one wins."""

    __slots__ = ("pairs", "table")

    def __init__(self, pairs: list[tuple[str, Node]]):
        self.fn = None
        table: dict[str, tuple[str, Node]] = {}
        for name, node in pairs:
            low = name.lower()
            prev = table.get(low)
            # a repeated name keeps its first spelling and takes the last value
            table[low] = (prev[0] if prev else name, node)
        self.table = table
        self.pairs = tuple(table.values())

    def children(self):
        return tuple(node for _, node in self.pairs)

    def _key(self):
        return tuple((name.lower(), node) for name, node in self.pairs)


def walk(node: Node):
    """Yield ``node`` and every node below it, parents before children."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children()))
