"""The free slots of one cycle as columns: one array per slot attribute matching reads.

Theory of operation
-------------------
The vector search (:mod:`.vsearch`) looks at every free slot at once. :class:`SlotTable` keeps
the cycle's unclaimed slots in rows (row ``i`` is ``slots[i]``) and builds, on first need, one
column per attribute name: a ``(tags, values)`` pair of arrays in :mod:`.vexpr`'s encoding
(UNDEFINED, ERROR, boolean, integer or real literal; MISSING where the slot does not define
the name). A slot whose attribute is an expression or a string makes the column unusable
(:class:`~.vexpr.Unsupported`): whatever reads it is decided the scalar way.

``Cpus``, ``Memory`` and ``Disk`` are the carved columns: mutable, updated from the slot's ad
after every match on it (:meth:`SlotTable.update`; a fill's runs at once from the sizes it
knows, :meth:`SlotTable.update_whole`), as is the ``alive`` mask (a slot taken or used up
leaves it). Other columns never change during a cycle. The slot names' sort order is
a column of integers (``name_rank``), so the last tie-break of the key is an integer compare.

:meth:`SlotTable.rows` gives an environment over some rows (all, or a few), optionally with
the carved columns replaced by given values: that is how a run evaluates one slot at the
sizes of its next steps in one call.
"""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter

import numpy as np

from htc.classad.ast import Literal
from htc.daemons.negotiator.slots import CARVED
from htc.daemons.negotiator.vexpr import BOOL, INT, MISSING, REAL, Unsupported, scalar

_CARVED_ORDER = ("cpus", "memory", "disk")
_ABSENT = (MISSING, 0.0)  # a column's entry for a slot that does not define the name
_NUMBER_TAGS = {bool: BOOL, int: INT, float: REAL}  # (vexpr.scalar's tags)
_EXACT = 2 ** 53  # (vexpr.scalar's bound)
_NONE_ONLY = {type(None)}
_INT_FLOAT = {int, float}
_VALUE_OF = attrgetter("value")
_UNREAD = object()  # AdReads: a name not read yet


class SlotTable:
    """The unclaimed free slots of a cycle as columns (see the module docstring)."""

    def __init__(self, slots: list):
        self.slots = slots
        self.row_of = {id(slot): i for i, slot in enumerate(slots)}
        n = len(slots)
        self.alive = np.array([not slot.taken for slot in slots], dtype=bool)
        self.partitionable = np.array([slot.partitionable for slot in slots], dtype=bool)
        order = sorted(range(n), key=[slot.name for slot in slots].__getitem__)
        self.name_rank = np.empty(n, dtype=np.int64)
        self.name_rank[order] = np.arange(n)
        self.weight = np.array([slot.weight for slot in slots], dtype=float)
        self._columns: dict[str, tuple] = {}
        self._bad: set[str] = set()
        self._uniform: dict[str, int | None] = {}  # name -> the one tag of its column
        #: grows when a carve changes the type of a carved column (compiled plans go stale)
        self.epoch = 0
        #: rows in the order matches changed them (shared orders read it, see .vorder)
        self.log: list[int] = []
        #: the carved resources as plain numbers (NaN: the slot does not say), for fitting
        self.res = np.full((3, n), np.nan)
        # its rows as views: one item written through a 1-d view costs a third of res[k, i]
        self._res_rows = (self.res[0], self.res[1], self.res[2])
        #: each row's expressions (a slot keeps its ad while the table lives: a carve edits it)
        self._exprs = [slot.ad._exprs for slot in slots]
        #: the rows' trees and literal values of a name, read once per name (the columns and
        #: :mod:`.vstatic`'s groups of slots read the same names)
        self.reads = AdReads(self._exprs)
        if not self._read_numbers():
            for i, slot in enumerate(slots):
                self._read_res(i, slot, slot.ad._exprs)

    def _read_numbers(self) -> bool:
        """Write every row's carved resources when each is a literal number (the common
        case, read without a Python step per row); False, having written nothing, when one
        is not (then :meth:`_read_res`, row by row, says which).

        The carved columns are made from what was read, as :func:`literal_column` would make
        them (a search reads them all, and reading the ads again cost as much as this read);
        :meth:`update` keeps them current from then on, as it keeps ``res``."""
        columns = []
        for lname in _CARVED_ORDER:
            nodes = list(map(dict.get, self._exprs, repeat(lname)))
            try:  # (only a Literal has a value: not a slot that lacks it, nor an expression)
                values = list(map(_VALUE_OF, nodes))
            except AttributeError:
                return False
            classes = set(map(type, values))
            if not classes <= _INT_FLOAT:
                return False
            columns.append((lname, values, classes))
        n = len(self._exprs)
        for row, (lname, values, classes) in zip(self._res_rows, columns):
            row[:] = values
            if int in classes and not _within_exact(row):
                ints = values if len(classes) == 1 else [v for v in values if v.__class__ is int]
                if max(ints) > _EXACT or min(ints) < -_EXACT:
                    continue  # (the column is left to column(), which refuses it)
            if len(classes) == 1:
                tags = np.full(n, _NUMBER_TAGS[classes.pop()], dtype=np.int8)
            else:
                tags = np.array([_NUMBER_TAGS[cls] for cls in map(type, values)], dtype=np.int8)
            self._columns[lname] = (tags, row.copy())
        return True

    def _read_res(self, i: int, slot, exprs) -> tuple:
        """Write row ``i``'s carved resources; return their syntax trees (None: missing)."""
        nodes = (exprs.get("cpus"), exprs.get("memory"), exprs.get("disk"))
        for row, name, node in zip(self._res_rows, _CARVED_ORDER, nodes):
            if node is None:
                row[i] = np.nan
            elif node.__class__ is Literal and node.value.__class__ in (int, float):
                row[i] = node.value
            else:
                raise Unsupported(f"{slot.name}: {name} is not a number")
        return nodes

    def column(self, lname: str) -> tuple[np.ndarray, np.ndarray]:
        """The ``(tags, values)`` column of one attribute over all rows (:func:`literal_column`,
        cached; a name it refuses is remembered)."""
        col = self._columns.get(lname)
        if col is None:
            if lname in self._bad:
                raise Unsupported(f"slot attribute {lname}")
            try:
                col = literal_column(self._exprs, lname, self.reads)
            except Unsupported:
                self._bad.add(lname)
                raise
            self._columns[lname] = col
        return col

    def uniform(self, lname: str) -> int | None:
        """The tag every row of a column has (MISSING: no slot defines it), or None."""
        if lname not in self._uniform:
            tags = self.column(lname)[0]
            first = int(tags[0]) if tags.size else MISSING
            self._uniform[lname] = first if (tags == first).all() else None
        return self._uniform[lname]

    def update(self, slot) -> None:
        """Read a slot's carved resources and its state again (after a match on it)."""
        i = self.row_of.get(id(slot))
        if i is None:
            return
        self.log.append(i)
        if slot.taken:  # (a slot is never given back during a cycle: alive only goes False)
            self.alive[i] = False
        self.weight[i] = slot.weight
        exprs, columns, uniform = slot.ad._exprs, self._columns, self._uniform
        # _read_res and vexpr.scalar of each, in one pass: a match on a slot makes one call
        for res, lname in zip(self._res_rows, _CARVED_ORDER):
            node = exprs.get(lname)
            if node is None:
                res[i] = np.nan
                tag, value = _ABSENT
            else:
                value = node.value if node.__class__ is Literal else None
                cls = value.__class__
                if cls is int:
                    res[i] = value
                    if value > _EXACT or value < -_EXACT:
                        raise Unsupported("integer beyond 2**53")  # (as scalar)
                    tag = INT
                elif cls is float:
                    res[i] = value
                    tag = REAL
                else:
                    raise Unsupported(f"{slot.name}: {lname} is not a number")
            col = columns.get(lname)
            if col is not None:
                col[1][i] = value
                was = uniform.get(lname)
                if was != tag:  # (a uniform column holds the tag in every row already)
                    col[0][i] = tag
                    if was is not None:
                        uniform[lname] = None  # (the column's type changed: plans compile again)
                        self.epoch += 1

    def update_whole(self, rows, left, taken, weight) -> None:
        """:meth:`update` of the slots of ``rows`` in that order (a row may come back), from
        what the caller knows instead of their ads: ``left`` their carved resources after the
        match, ``(3, len(rows))`` whole numbers within 2**53 (INT literals in the ads), and
        their ``taken`` and ``weight``. Every row is the table's. The same ``res``,
        columns, tags, ``alive``, ``weight``, ``log`` and ``epoch`` (a fill's commit:
        :func:`~.vfill.commit`; ``tests/unit/test_negotiator_update_whole.py`` compares the
        two)."""
        rows = np.asarray(rows, dtype=np.intp)
        if not rows.size:
            return
        listed = rows.tolist()
        self.log += listed
        left, weight = np.asarray(left, dtype=float), np.asarray(weight, dtype=float)
        # each row's last block: that block's numbers are what update of each leaves (a
        # fill's rows are most often each in one block: then they are all)
        if len(set(listed)) == len(listed):
            last, final = slice(None), rows
        else:
            _, back = np.unique(rows[::-1], return_index=True)
            last = rows.size - 1 - back
            final = rows[last]
        self.alive[rows[np.asarray(taken, dtype=bool)]] = False  # (alive only goes False)
        self.weight[final] = weight[last]
        columns, uniform = self._columns, self._uniform
        for k, (res, lname) in enumerate(zip(self._res_rows, _CARVED_ORDER)):
            values = left[k, last]
            res[final] = values
            col = columns.get(lname)
            if col is not None:
                col[1][final] = values
                was = uniform.get(lname)
                if was != INT:  # (as update: one INT after another changes it once)
                    col[0][final] = INT
                    if was is not None:
                        uniform[lname] = None
                        self.epoch += 1

    def rows(self, index=None, carved=None) -> Rows:
        """An environment over ``index`` (None: every row), the carved columns optionally
        replaced by ``carved``: ``{"cpus": (tags, values), ...}`` for those rows."""
        return Rows(self, index, carved)


class Rows:
    """Some rows of a :class:`SlotTable`, as compiled expressions read them."""

    __slots__ = ("table", "index", "carved")

    def __init__(self, table: SlotTable, index, carved):
        self.table = table
        self.index = index
        self.carved = carved

    def column(self, lname: str):
        if self.carved is not None and lname in CARVED:
            return self.carved[lname]
        tags, values = self.table.column(lname)
        if self.index is None:
            return tags, values
        return tags[self.index], values[self.index]


def literal_column(exprs: list, lname: str, reads: AdReads | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The ``(tags, values)`` column of ``lname`` over the ads' expressions ``exprs`` (one
    ``ClassAd._exprs`` per row): :func:`~.vexpr.scalar` of each literal value, MISSING where
    an ad lacks the name. :class:`~.vexpr.Unsupported` when a value is an expression, a string
    or outside the subset scalar takes (the table's columns; :mod:`.vstatic`'s slots that share
    one ``Requirements`` expression). ``reads``: an :class:`AdReads` of ``exprs`` that may
    have read the name already."""
    if reads is None:
        reads = AdReads(exprs)
    col = _plain_column(reads, lname)
    if col is not None:
        return col
    pairs = []  # (tag, value) per row, made arrays at once (cheaper than per item)
    append = pairs.append
    for node in reads.nodes(lname):
        if node is None:
            append(_ABSENT)
        elif node.__class__ is not Literal:
            raise Unsupported(f"slot attribute {lname} is an expression")
        else:
            append(scalar(node.value))
    tags, values = zip(*pairs) if pairs else ((), ())
    return np.array(tags, dtype=np.int8), np.array(values, dtype=float)


def _plain_column(reads: AdReads, lname: str):
    """:func:`literal_column` when every ad lacks the name, or has a literal number or boolean
    of it within 2**53 (the common case, built without a call per row); else None."""
    nodes = reads.nodes(lname)  # (no Python step per row)
    if nodes:  # a first slot with a string, a list, an expression: the loop decides
        first = nodes[0]
        if first is not None and (first.__class__ is not Literal
                                  or first.value.__class__ not in _NUMBER_TAGS):
            return None
    n = len(nodes)
    read = reads.values(lname)
    if read is None:  # (only a Literal has a value: not an ad that lacks it, nor an expression)
        if set(map(type, nodes)) <= _NONE_ONLY:
            return np.full(n, MISSING, dtype=np.int8), np.zeros(n)
        return None
    values, classes = read
    if not classes <= _NUMBER_TAGS.keys():
        return None
    try:
        column = np.array(values, dtype=float)
    except OverflowError:
        return None  # (an integer no float holds: scalar refuses it, the loop raises)
    if int in classes and not _within_exact(column):
        ints = values if classes == {int} else [v for v in values if v.__class__ is int]
        if max(ints) > _EXACT or min(ints) < -_EXACT:
            return None  # (scalar refuses it: the loop raises)
    if len(classes) == 1:
        tags = np.full(n, _NUMBER_TAGS[next(iter(classes))], dtype=np.int8)
    else:
        tags = np.array([_NUMBER_TAGS[cls] for cls in map(type, values)], dtype=np.int8)
    return tags, column


class AdReads:
    """Rows' syntax trees of a name (one ``ClassAd._exprs`` per row) and their literal values,
    each read once per name: a table's columns and :mod:`.vstatic`'s groups read the same
    names. What costs is each (ad, name) looked up, about 150 ns an ad out of the cache (case
    1's 10,000 ads: 1.5 ms a name); reading several names of an ad in one visit
    (``itemgetter`` of them all) costs as much as a pass per name, so only reading fewer
    pairs pays. The carved names are read as they are at each call (a carve replaces their
    trees); no other name of a row changes while the rows are in use (carving never adds nor
    removes one)."""

    __slots__ = ("exprs", "_nodes", "_values")

    def __init__(self, exprs: list):
        self.exprs = exprs
        self._nodes: dict[str, list] = {}
        self._values: dict[str, tuple | None] = {}

    def nodes(self, lname: str) -> list:
        """Each row's tree of ``lname`` (None where the row lacks it). Do not change it."""
        nodes = self._nodes.get(lname)
        if nodes is None:
            nodes = list(map(dict.get, self.exprs, repeat(lname)))
            if lname not in CARVED:
                self._nodes[lname] = nodes
        return nodes

    def values(self, lname: str) -> tuple[list, set] | None:
        """``(values, classes)``: each row's literal value of ``lname`` and the set of their
        classes; None when a row lacks the name or holds an expression. Do not change them."""
        read = self._values.get(lname, _UNREAD)
        if read is _UNREAD:
            try:  # (only a Literal has a value: not a row that lacks it, nor an expression)
                values = list(map(_VALUE_OF, self.nodes(lname)))
            except AttributeError:
                read = None
            else:
                read = (values, set(map(type, values)))
            if lname not in CARVED:
                self._values[lname] = read
        return read


def _within_exact(column: np.ndarray) -> bool:
    """Is every value of a column of numbers below 2**53 in magnitude (then its integers are
    within what :func:`~.vexpr.scalar` takes, with no Python step per row)? False for NaN,
    infinities and anything from 2**53 up, which the caller checks on the integers exactly."""
    with np.errstate(invalid="ignore"):
        return bool((np.abs(column) < _EXACT).all())
