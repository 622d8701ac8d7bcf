"""A best-first order of the free slots, shared by the requests that rank slots alike.

Theory of operation
-------------------
A request's best slot is the first slot, in the order of the key (pre-job rank, job ``Rank``,
post-job rank, name), that matches it. The order depends on the ranks and on the job values
they read, not on the request's ``Requirements`` or size, so requests that rank alike (the
default ranks and a constant job ``Rank``: nearly everybody) share one :class:`SharedOrder`,
sorted once with ``np.lexsort``.

Slots change as they are carved. The order keeps the position it has read up to in the
table's change log (:attr:`~.columns.SlotTable.log`); a row changed since it was sorted is
*stale*: it is skipped in the sorted rows and evaluated afresh on every look (there are few:
the slots carved since); past :data:`STALE_LIMIT` of them the order is sorted again.

A look (:meth:`SharedOrder.best`) walks the sorted rows in growing chunks, testing each chunk
with the request's vectorised mask, and compares the first match with the best stale row
that matches. A request keeps its position in the sorted rows (:class:`Cursor`): a fresh row
it passed over did not match it and cannot start to (it has not changed), so the next look
starts where this one stopped.
"""

from __future__ import annotations

import numpy as np

#: stale rows an order tolerates before it is sorted again
STALE_LIMIT = 384
_FIRST_CHUNK = 32


class Cursor:
    """A request's position in one shared order (valid for one sorting of it)."""

    __slots__ = ("order", "sorting", "pos")

    def __init__(self, order):
        self.order = order
        self.sorting = -1
        self.pos = 0


class SharedOrder:
    """The table's rows best first for one ranking (see the module docstring).

    Args:
        table: the :class:`~.columns.SlotTable`.
        keys: ``(rows, n) -> (pre, job rank, post)`` arrays of the ranking.
    """

    def __init__(self, table, keys):
        self.table = table
        self.keys = keys
        self.sorting = -1
        self.sorts = 0
        self._sort()

    def _sort(self) -> None:
        table = self.table
        idx = np.flatnonzero(table.alive)
        pre, jr, post = self.keys(table.rows(idx), idx.size)
        self.rows = idx[np.lexsort((table.name_rank[idx], -post, -jr, -pre))]
        self.pos = len(table.log)
        self.stale = np.zeros(len(table.slots), dtype=bool)
        self.stale_rows: list[int] = []
        self.sorting += 1
        self.sorts += 1

    def sync(self) -> None:
        """Take in the rows changed since the last look (re-sorting when too many)."""
        log = self.table.log
        if len(log) == self.pos:
            return
        stale, rows = self.stale, self.stale_rows
        for r in log[self.pos:]:
            if not stale[r]:
                stale[r] = True
                rows.append(r)
        self.pos = len(log)
        if len(rows) > STALE_LIMIT:
            self._sort()

    def best(self, cursor: Cursor, mask, exclude: int | None = None):
        """The best row ``mask`` (``rows -> bool array``) accepts, as ``(row, (pre, jr, post,
        name rank))``, or None; ``exclude`` leaves one row out. Moves ``cursor`` up to the
        first fresh match."""
        self.sync()
        table = self.table
        if cursor.sorting != self.sorting:
            cursor.sorting, cursor.pos = self.sorting, 0
        found = None
        stale = self.stale
        if self.stale_rows:
            cand = np.array(self.stale_rows)
            cand = cand[table.alive[cand]]
            if exclude is not None:
                cand = cand[cand != exclude]
            if cand.size:
                cand = cand[mask(cand)]
            if cand.size:
                found = _best_of(self.keys, table, cand)
        rows, pos, chunk = self.rows, cursor.pos, _FIRST_CHUNK
        fresh = None
        while pos < rows.size:
            part = rows[pos:pos + chunk]
            ok = ~stale[part]
            if exclude is not None:
                ok &= part != exclude
            sub = part[ok]
            if sub.size:
                hits = mask(sub)
                if hits.any():
                    fresh = int(sub[int(np.argmax(hits))])
                    pos += int(np.flatnonzero(part == fresh)[0])
                    break
            pos += part.size
            chunk *= 2
        if exclude is None:
            cursor.pos = pos
        if fresh is not None:
            key = _key_of(self.keys, table, fresh)
            if found is None or _before(key, found[1]):
                found = (fresh, key)
        return found


def _key_of(keys, table, row: int) -> tuple:
    pre, jr, post = keys(table.rows(np.array([row])), 1)
    return (float(pre[0]), float(jr[0]), float(post[0]), int(table.name_rank[row]))


def _best_of(keys, table, cand):
    pre, jr, post = keys(table.rows(cand), cand.size)
    best = np.arange(cand.size)
    for part in (pre, jr, post):
        if best.size == 1:
            break
        sub = part[best]
        best = best[sub == sub.max()]
    if best.size > 1:
        best = best[np.argmin(table.name_rank[cand[best]])]
    k = int(np.ravel(best)[0])
    row = int(cand[k])
    return row, (float(pre[k]), float(jr[k]), float(post[k]), int(table.name_rank[row]))


def _before(a: tuple, b: tuple) -> bool:
    """Is key ``a`` (pre, jr, post, name rank) better than ``b``? (Higher ranks first.)"""
    return (-a[0], -a[1], -a[2], a[3]) < (-b[0], -b[1], -b[2], b[3])
