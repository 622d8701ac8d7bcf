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
the first time anything reads the ad (``str()`` for the wire, a lookup in a test): the same
table a copy taken at the match would have had, in the same order.
"""

from __future__ import annotations

from htc.classad import ClassAd
from htc.classad.ast import Literal
from htc.daemons.negotiator.slots import literal

_CARVED = ("cpus", "memory", "disk")
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


def sizes_of(ad: ClassAd) -> tuple:
    """The syntax trees of ``ad``'s ``Cpus``, ``Memory`` and ``Disk`` (None where it lacks one)."""
    get = ad._exprs.get
    return (get("cpus"), get("memory"), get("disk"))


def carve_numbers(ad: ClassAd, carve: tuple) -> bool:
    """Carve ``carve`` (cpus, memory, disk) out of ``ad`` when its three are numeric literals
    (or missing): each becomes the shared literal of ``have - amount``, an int where it was one
    and the result is whole (:func:`~.slots.same_type`), as evaluating and assigning them would
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
