"""The ad a match offers for a partitionable slot: the slot as it was before that carve.

Theory of operation
-------------------
Each match on a partitionable slot carries the slot's ad as the match saw it (the schedd gets
it in MatchNotify): the ``Cpus``, ``Memory`` and ``Disk`` it had before its carve. A copy per
match costs a dict of the whole ad, and at pool scale most of those copies are never read
before the cycle's result is turned into messages.

But between the matches of one cycle the cycle's ad of a slot (a private copy made when the
pool is built, :meth:`~.cycle._Cycle.build_pool`) changes only in those three attributes:
carving replaces their literal values and nothing else writes the ad (the run analysis sets
them and restores them, :mod:`.runs`). So a match's ad is fully told by the cycle's ad and the
three values of that moment. :class:`MatchedSlotAd` holds just that and builds the real table
the first time anything reads the ad (a lookup, a comparison, ``repr()``): the same table a
copy taken at the match would have had, in the same order.

Its text (``str()``, what MatchNotify carries: the service prints every match's ad) is made the
same way without a table: the printed ad is its attributes' texts joined, each printed on its
own, so the texts of every attribute but the three are the cycle ad's. :class:`_Text` prints
them once per cycle ad (kept while that ad lives) and fills in the three per match; it is used
only after it printed a probe ad exactly as ``ClassAd.__str__`` does, once per process (else the
views print the ordinary way). Case 1 of ``benchmarks/negotiator_bench.py`` prints 7,947 slot ads
twice instead of 81,642 views once each.
"""

from __future__ import annotations

import weakref

from htc.classad import ClassAd, ExprTree
from htc.classad.ast import Literal
from htc.classad.printing import Unparser, print_new, quote_name
from htc.daemons.negotiator.slotreads import literal

_CARVED = ("cpus", "memory", "disk")
_IN_ORDER = (0, 1, 2)  # a _Text's holes in the order of _CARVED, each there
_HOLE = "\x00"  # where a _Text's text leaves a size open (printed, a NUL is an escape)
_NUMBERS = (int, float)


class MatchedSlotAd(ClassAd):
    """A slot's ad as one match saw it (see the module docstring); a ClassAd in every way.

    Args:
        source: the cycle's ad of the slot; from now on only its ``Cpus``, ``Memory`` and
            ``Disk`` may change.
        sizes: those three as they were at the match, each a syntax tree, a number (an int or
            float literal), or None when the ad lacks the attribute.
    """

    __slots__ = ("_source", "_sizes")

    def __init__(self, source: ClassAd, sizes: tuple):  # noqa: D107 - see the class docstring
        # ClassAd.__init__ is not called on purpose: _exprs, _names and _parent stay unset
        # until the first read (__getattr__ below)
        self._source = source
        self._sizes = sizes

    def __getattr__(self, name: str):
        # Called only for attributes not found the ordinary way: the table's slots before the
        # ad was first read. Build them then; anything else is a real AttributeError.
        if name not in ("_exprs", "_names", "_parent"):
            raise AttributeError(name)
        self._materialise()
        return object.__getattribute__(self, name)

    def __str__(self) -> str:
        sizes = self._sizes
        if sizes is not None:  # not read yet: print it from the cycle ad's text
            text = _Text.of(self._source)
            if text is not None:
                return text.render(sizes)
        return ClassAd.__str__(self)

    def _materialise(self) -> None:
        source = self._source
        exprs = dict(source._exprs)
        for lname, value in zip(_CARVED, self._sizes):
            if value is None:
                continue  # the ad lacks it (carving never adds or removes an attribute)
            exprs[lname] = literal(value) if value.__class__ in _NUMBERS else value
        self._exprs = exprs
        self._names = dict(source._names)
        self._parent = None
        self._sizes = None  # (read: from now on the view prints its own table)


def texts(source: ClassAd, sizes) -> list[str]:
    """The texts of ``source``'s views at each of ``sizes``, in order: what ``str()`` of a
    :class:`MatchedSlotAd` each gives, without making the views (a run's MatchNotify messages,
    :mod:`.adapter`)."""
    text = _Text.of(source)
    if text is None:
        return [str(MatchedSlotAd(source, have)) for have in sizes]
    render = text.render
    return [render(have) for have in sizes]


class _Text:
    """The pretty text (``str()``) of a cycle ad's matched views, with the three carved
    attributes left open: printed once per cycle ad, kept while that ad lives."""

    __slots__ = ("ref", "exprs", "parts", "printer", "pieces", "order")

    #: id(cycle ad) -> its _Text (whose parts are None when its text cannot be made so)
    _kept: dict[int, _Text] = {}
    #: attribute name -> "\n        Name = " (quote_name's answer depends on the name alone)
    _prefixes: dict[str, str] = {}
    _HEAD, _PAD, _TAIL = "\n    [", "\n        ", "\n    ]"  # Unparser.ad, pretty, at the top

    def __init__(self, source: ClassAd):
        key = id(source)
        # (the entry goes when the ad does, before its id can be another's)
        self.ref = weakref.ref(source, lambda _ref: _Text._kept.pop(key, None))
        self.exprs = source._exprs  # (not the ad itself: the entry must not keep it alive)
        self.printer = printer = Unparser(pretty=True)
        printer.indent = 8  # as inside Unparser.ad
        names, prefixes = source._names, self._prefixes
        parts: list[str] = []
        order: list[int] = []  # which of the three each hole is, in the ad's order
        for lname, node in source._exprs.items():
            name = names[lname]
            prefix = prefixes.get(name)
            if prefix is None:  # (the pool's slot ads share their few dozen names)
                if len(prefixes) >= 10_000:
                    prefixes.clear()
                prefix = prefixes[name] = f"{self._PAD}{quote_name(name)} = "
            if lname in _CARVED:  # a hole: its value is each view's own
                order.append(_CARVED.index(lname))
                parts.append(prefix + _HOLE)
            elif node.__class__ is Literal:
                # (Unparser.node prints a literal as Unparser.literal its value, and that an int
                # as str() does: most of a slot ad's attributes, printed without the two calls)
                value = node.value
                parts.append(prefix + (str(value) if value.__class__ is int else printer.literal(value)))
            else:
                parts.append(prefix + printer.node(node))
        # the ad's text (its parts joined as Unparser.ad joins them) cut at the three values:
        # pieces[0], the value of order[0], pieces[1], ... (render joins 7 strings, not one
        # per attribute)
        self.pieces = f"{self._HEAD}{'; '.join(parts)}{self._TAIL}".split(_HOLE)
        self.order = tuple(order)
        # None (print each view whole) if an attribute's own text held the mark of a hole
        self.parts = parts if len(self.pieces) == len(order) + 1 else None

    @classmethod
    def of(cls, source: ClassAd) -> _Text | None:
        """The text maker of ``source``'s views, or None if it cannot print ``source`` exactly."""
        text = cls._kept.get(id(source))
        if text is None or text.ref() is not source:
            text = cls._kept[id(source)] = cls(source)
            if not cls._prints_as_unparser():
                text.parts = None  # laid out otherwise: print each view whole
        return text if text.parts is not None else None

    #: (head, pad, tail) -> whether a _Text of that layout prints an ad as ``ClassAd.__str__``
    _layouts: dict[tuple[str, str, str], bool] = {}

    @classmethod
    def _prints_as_unparser(cls) -> bool:
        """Whether views printed from their cycle ad's text read as ``ClassAd.__str__`` prints
        them, tried once per layout on :func:`_probe_ad`.

        Each ad's text is made by the same steps (each attribute printed by one ``Unparser`` at
        ``Unparser.ad``'s indentation, its ``Name = `` from ``quote_name``, the parts joined as
        ``Unparser.ad`` joins them, the three sizes printed as ``Unparser.node`` prints them), so
        what can differ from ``print_new`` is the way those steps are put together, not the ad:
        the probe, whose attributes take every path (sizes an int, a float and an expression out
        of order; a list, a nested ad, a quoted name), tells for all. (Checking each cycle ad
        printed it twice: 0.3-0.5 s of CPU in case 1's 7,947 slot ads.)
        """
        layout = (cls._HEAD, cls._PAD, cls._TAIL)
        ok = cls._layouts.get(layout)
        if ok is None:
            probe = _probe_ad()
            text = cls(probe)
            ok = cls._layouts[layout] = text.render(sizes_of(probe)) == print_new(probe._pairs(), pretty=True)
        return ok

    def render(self, sizes: tuple) -> str:
        """The text of the view with ``sizes`` (see :class:`MatchedSlotAd`)."""
        pieces = self.pieces
        if self.order == _IN_ORDER:  # (the usual slot ad: one join, ints printed inline)
            cpus, memory, disk = sizes
            return "".join((
                pieces[0], str(cpus) if cpus.__class__ is int else self.text(cpus, 0),
                pieces[1], str(memory) if memory.__class__ is int else self.text(memory, 1),
                pieces[2], str(disk) if disk.__class__ is int else self.text(disk, 2),
                pieces[3]))
        out = [pieces[0]]
        for k, which in enumerate(self.order, 1):
            out.append(self.text(sizes[which], which))
            out.append(pieces[k])
        return "".join(out)

    def text(self, value, which: int) -> str:
        """What printing the view's ``which``-th carved attribute prints, its size ``value``
        (Unparser.node prints a literal as Unparser.literal its value, and that an int as
        str() does)."""
        cls = value.__class__
        if cls is Literal:
            value = value.value
            return str(value) if value.__class__ is int else self.printer.literal(value)
        if cls is int:
            return str(value)
        if cls is float:
            return self.printer.literal(value)
        if value is None:  # as _materialise: the source's own
            return self.printer.node(self.exprs[_CARVED[which]])
        return self.printer.node(value)


def _probe_ad() -> ClassAd:
    """An ad whose text takes every path of :class:`_Text` (see ``_Text._prints_as_unparser``)."""
    ad = ClassAd({"Name": "slot1@probe", "Disk": 7, "Lists": [1, [2, 3.5]], "Nested": ClassAd({"x": "y"}),
                  "Memory": 2.5, "State": "Unclaimed"})
    ad["'odd name'"] = "a\nb"
    ad["Cpus"] = ExprTree("TotalCpus - 1")
    ad["Requirements"] = ExprTree('Cpus >= 1 && (Arch == "X86_64" || Memory > 1e3)')
    return ad


def sizes_of(ad: ClassAd) -> tuple:
    """The syntax trees of ``ad``'s ``Cpus``, ``Memory`` and ``Disk`` (None where it lacks one)."""
    get = ad._exprs.get
    return (get("cpus"), get("memory"), get("disk"))


def carve_numbers(ad: ClassAd, carve: tuple) -> bool:
    """Carve ``carve`` (cpus, memory, disk) out of ``ad`` when its three are numeric literals
    (or missing): each becomes the shared literal of ``have - amount``, an int where it was one
    and the result is whole (:func:`~.slotreads.same_type`), as evaluating and assigning them would
    make it. Returns False, changing nothing, when one is an expression (evaluate it then)."""
    exprs = ad._exprs
    nodes = (exprs.get("cpus"), exprs.get("memory"), exprs.get("disk"))
    for node in nodes:
        if node is not None and (node.__class__ is not Literal
                                 or node.value.__class__ not in _NUMBERS):
            return False
    for lname, node, amount in zip(_CARVED, nodes, carve):
        if node is not None:
            have = node.value
            value = have - amount
            if have.__class__ is int and float(value).is_integer():
                value = int(value)
            exprs[lname] = literal(value)
    return True
