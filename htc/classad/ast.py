"""Syntax tree nodes of ClassAd expressions.

Nodes are immutable once built and may be shared between ads and expression objects.  Each
node caches its compiled evaluator in ``fn`` (filled in lazily by
:func:`htc.classad.compiler.compile_node`), so an expression is compiled once however many
times and in however many ads it is evaluated.

Deep trees
----------
A chain of left-associative operators (``a || b || c ...``, ``a + b - c ...``), of postfix
selections and subscripts (``a.b.c``, ``a[0][1]``) or of ``?:`` is a tree whose *left spine*
is as long as the chain, and the parser accepts chains of any length (HTCondor does). Every
walk over trees therefore follows a left spine with a loop, never with one recursive call per
link (:func:`spine` gives the links); everything else nests at most
:data:`htc.classad.parser.MAX_DEPTH` levels, which the parser enforces.  Equality and hashing
below are iterative for the same reason.
"""

from __future__ import annotations


class Node:
    """Base class of every expression node."""

    __slots__ = ("fn",)

    def children(self) -> tuple["Node", ...]:
        """The direct sub-expressions, in source order."""
        return ()

    def __eq__(self, other: object) -> bool:
        # Structural equality, walked with a stack (a tree may be thousands of links deep).
        if self is other:
            return True
        todo = [(self, other)]
        while todo:
            a, b = todo.pop()
            if a is b:
                continue
            if type(a) is not type(b) or a._local() != b._local():  # type: ignore[attr-defined]
                return False
            ca, cb = a.children(), b.children()  # type: ignore[attr-defined]
            if len(ca) != len(cb):
                return False
            todo.extend(zip(ca, cb))
        return True

    def __hash__(self) -> int:
        h = 0
        for n in walk(self):  # parents before children, with each node's arity: one tree, one order
            h = hash((h, type(n).__name__, n._local(), len(n.children())))
        return h

    def _local(self) -> tuple:
        """What tells this node from another of its class, its children aside."""
        return ()


class Literal(Node):
    """A constant: int, float, str, bool, Undefined, Error, AbsTime or RelTime."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.fn = None
        self.value = value

    def _local(self):
        v = self.value
        return (type(v).__name__, repr(v))


class AttrRef(Node):
    """An unqualified attribute reference such as ``Memory`` (name keeps its source case)."""

    __slots__ = ("name", "lname")

    def __init__(self, name: str):
        self.fn = None
        self.name = name
        self.lname = name.lower()

    def _local(self):
        return (self.lname,)


class AbsRef(Node):
    """An absolute reference ``.name``: looked up from the outermost ad of the evaluation."""

    __slots__ = ("name", "lname")

    def __init__(self, name: str):
        self.fn = None
        self.name = name
        self.lname = name.lower()

    def _local(self):
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

    def _local(self):
        return (self.lname,)


class Subscript(Node):
    """Subscript ``base[index]``: a list element or an attribute of an ad by name."""

    __slots__ = ("base", "index")

    def __init__(self, base: Node, index: Node):
        self.fn = None
        self.base = base
        self.index = index

    def children(self):
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

    def _local(self):
        return (self.op,)


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

    def _local(self):
        return (self.op,)


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

    def _local(self):
        return (self.then is None,)


class Paren(Node):
    """Parentheses written in the source; kept so that unparsing reproduces them."""

    __slots__ = ("inner",)

    def __init__(self, inner: Node):
        self.fn = None
        self.inner = inner

    def children(self):
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

    def _local(self):
        return (self.lname,)


class ListExpr(Node):
    """A list literal ``{ a, b, ... }``."""

    __slots__ = ("items",)

    def __init__(self, items: list[Node]):
        self.fn = None
        self.items = tuple(items)

    def children(self):
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

    @classmethod
    def of_table(cls, table: dict[str, tuple[str, Node]]) -> "AdExpr":
        """The ad whose ``table`` (lower-case name -> (spelling, node)) is already built as
        :meth:`__init__` builds it (the parser's quick reading); the node takes the dict."""
        node = cls.__new__(cls)
        node.fn = None
        node.table = table
        node.pairs = tuple(table.values())
        return node

    def children(self):
        return tuple(node for _, node in self.pairs)

    def _local(self):
        return tuple(name.lower() for name, _ in self.pairs)


def walk(node: Node):
    """Yield ``node`` and every node below it, parents before children."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children()))


def left_link(node: Node) -> Node | None:
    """The node a chain continues into: the left operand of a binary operator, the base of a
    selection or subscript, the first operand of ``?:``; None for any other node."""
    t = node.__class__
    if t is Binary:
        return node.left  # type: ignore[attr-defined]
    if t is Select or t is Subscript:
        return node.base  # type: ignore[attr-defined]
    if t is Conditional and node.then is None:  # type: ignore[attr-defined]
        return node.cond  # type: ignore[attr-defined]
    return None


def spine(node: Node) -> tuple[Node, list[Node]]:
    """Split ``node`` at its left spine: ``(first, links)`` where ``first`` is the innermost
    left operand and ``links`` the chain's nodes from the innermost out, so that a walk can
    visit ``first`` and then each link's other operands in source order, with a loop."""
    links: list[Node] = []
    while True:
        nxt = left_link(node)
        if nxt is None:
            links.reverse()
            return node, links
        links.append(node)
        node = nxt
