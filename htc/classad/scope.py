"""ClassAds assembled on demand, and evaluating one expression against many ads.

Theory of operation
-------------------
A compiled expression (:mod:`htc.classad.compiler`) reads an ad through its node table
only: ``ad._exprs.get(lname)`` for an unqualified or ``MY.`` reference, plus ``ad._parent``
for lexical scoping. When an expression is evaluated against many ads that are mostly the
same -- the procs of a cluster, say -- building each whole :class:`~htc.classad.ad.ClassAd`
(copying a table of fifty nodes, parsing every value) costs far more than evaluating an
expression that reads two attributes.

A :class:`LazyAd` is a ClassAd whose table is a :class:`LazyAttributes`: ``get`` asks the
table's :meth:`~LazyAttributes.resolve` for that one attribute and remembers the answer;
nothing else is looked at. An attribute found in the table is evaluated with the lazy ad as
its scope, so an expression taken from a shared ad still sees this ad's own values (a
cluster's ``Bar = strcat(Args, "x")`` reads the proc's ``Args``). Everything that needs the
whole ad -- iterating, ``len``, printing, comparing, copying, assigning -- first builds the
complete table from :meth:`~LazyAttributes.listing` and from then on the ad is an ordinary
ClassAd. ``resolve`` and ``listing`` must describe the same ad: ``resolve(n)`` is the node
``listing`` gives for ``n``, or None when it gives none.

:func:`compile_evaluator` evaluates one expression against many ads, with MY = the ad and
no TARGET, exactly as ``ExprTree.evaluate_internal(ad)`` does, but reusing one evaluation
context instead of building one per ad.
"""

from __future__ import annotations

from abc import abstractmethod

from collections.abc import Callable, Iterable, Iterator, MutableMapping

from htc.classad.ad import ClassAd, ExprTree
from htc.classad.ast import Node
from htc.classad.context import Ctx, EvalFailed, root_of
from htc.classad.values import Error

_UNSEEN = object()


class LazyAttributes(MutableMapping):
    """The node table of a :class:`LazyAd`: lower-case name -> expression node.

    Subclasses implement :meth:`resolve` and :meth:`listing`; this class remembers what
    ``resolve`` answered and builds the full table the first time something needs it.
    """

    __slots__ = ("_found", "_full", "_spellings")

    def __init__(self):
        self._found: dict[str, Node | None] = {}
        self._full: dict[str, Node] | None = None
        self._spellings: dict[str, str] | None = None

    @abstractmethod
    def resolve(self, lname: str) -> Node | ExprTree | None:
        """The expression of the attribute named ``lname`` (lower case), or None if absent."""

    @abstractmethod
    def listing(self) -> Iterable[tuple[str, Node | ExprTree]]:
        """Every attribute as ``(name as spelled, expression)``, in the ad's order.

        A name may come more than once; the first spelling and the last expression are kept.
        """

    # -- the fast path used by evaluation ----------------------------------------------
    def get(self, lname: str, default=None):
        full = self._full
        if full is not None:
            return full.get(lname, default)
        found = self._found
        node = found.get(lname, _UNSEEN)
        if node is _UNSEEN:
            node = self.resolve(lname)
            if node.__class__ is ExprTree:
                node = node._node
            found[lname] = node
        return default if node is None else node

    def __contains__(self, lname) -> bool:
        return self.get(lname) is not None

    def __getitem__(self, lname: str) -> Node:
        node = self.get(lname)
        if node is None:
            raise KeyError(lname)
        return node

    # -- everything else works on the complete table -----------------------------------
    def materialize(self) -> tuple[dict[str, Node], dict[str, str]]:
        """The complete ``(nodes, spellings)`` tables, both keyed by lower-case name."""
        if self._full is None:
            nodes: dict[str, Node] = {}
            names: dict[str, str] = {}
            for name, node in self.listing():
                low = name.lower()
                nodes[low] = node._node if node.__class__ is ExprTree else node
                names.setdefault(low, name)
            self._full, self._spellings = nodes, names
        return self._full, self._spellings  # type: ignore[return-value]

    def __iter__(self) -> Iterator[str]:
        return iter(self.materialize()[0])

    def __len__(self) -> int:
        return len(self.materialize()[0])

    def __setitem__(self, lname: str, node: Node) -> None:
        self.materialize()[0][lname] = node

    def __delitem__(self, lname: str) -> None:
        del self.materialize()[0][lname]


class LazyAd(ClassAd):
    """A ClassAd whose attributes come from a :class:`LazyAttributes` table, read on demand.

    It is a ClassAd in every respect (``is_classad``, ``eval``, printing, ``==``); reading
    one attribute costs one ``resolve`` call, anything that looks at the whole ad builds the
    whole table once.
    """

    __slots__ = ()

    def __init__(self, table: LazyAttributes):
        self._exprs = table
        self._parent = None

    @property
    def _names(self) -> dict[str, str]:  # type: ignore[override]
        # Spellings are needed only to list or print the ad: build them with the table.
        return self._exprs.materialize()[1]


def compile_evaluator(expr: ExprTree) -> Callable[[ClassAd], object]:
    """A function evaluating ``expr`` with MY = its argument and no TARGET.

    ``compile_evaluator(e)(ad)`` returns exactly ``e.evaluate_internal(ad)`` (internal
    values: ``AbsTime``/``RelTime`` are not converted), but one evaluation context is built
    once and re-pointed at each ad, which matters when the same expression is evaluated
    against thousands of ads.

    The returned function is not thread-safe: use one per thread.
    """
    fn = expr.compile()
    ctx = Ctx(None, None, None)
    busy = ctx.busy

    def evaluate(ad: ClassAd) -> object:
        ctx.ad = ad
        ctx.my = my = root_of(ad)
        ctx.target = None
        ctx.fallback = True
        ctx.set_scopes(my, None)
        ctx.depth = 0
        try:
            return fn(ctx)
        except (RecursionError, EvalFailed):
            return Error
        finally:
            if busy:  # left over only when an evaluation was cut short
                busy.clear()

    return evaluate


__all__ = ["LazyAttributes", "LazyAd", "compile_evaluator"]
