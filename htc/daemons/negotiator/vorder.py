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
the slots carved since, and not those used up: they match nothing again); past
:data:`STALE_LIMIT` of them the order is sorted again.

A look (:meth:`SharedOrder.ranked`) walks the sorted rows in growing chunks, testing each chunk
with the request's vectorised mask, and compares the first match with the best stale row
that matches. A request keeps its position in the sorted rows (:class:`Cursor`): a fresh row
it passed over did not match it and cannot start to (it has not changed), so the next look
starts where this one stopped.

A look gives a request its best few rows (:meth:`SharedOrder.ranked`), which it keeps as a
:class:`Queue` for its next turns: between two turns of a request usually only the slot it
carved changed, so the queue, brought up to date with the rows changed since, still holds
the true top of its candidates, and the order is looked at again only when the queue runs
short. The order keeps its last look: a turn that a request's fill (:mod:`.vfill`) may follow
looks as wide as the fill's first pass, which it then serves (nothing changed between them).
"""

from __future__ import annotations

import numpy as np

from htc.daemons.negotiator.vexpr import Inexact

#: stale rows an order tolerates before it is sorted again (fewer sorts against more stale
#: rows a look weighs: at 4,096 case 1's looks took 48.0 ms a cycle where they took 51.0 at
#: 1,536, 8 cycles each in one process, alternating; case 2's the same)
STALE_LIMIT = 4096
_FIRST_CHUNK = 32
_NONE = np.zeros(0, dtype=np.intp)  # (no positions: a look that found no fresh row)


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
        self._last = None  # (the last look: see _look)
        self._sort()

    def _sort(self) -> None:
        table = self.table
        idx = np.flatnonzero(table.alive)
        pre, jr, post = self.keys(table.rows(idx), idx.size)
        order = np.lexsort((table.name_rank[idx], -post, -jr, -pre))
        self.rows = idx[order]
        # a fresh row's key is the one it was sorted by: kept by position (a look reads its own)
        self.sorted_arrays = (np.asarray(pre, dtype=float)[order],
                              np.asarray(jr, dtype=float)[order],
                              np.asarray(post, dtype=float)[order], table.name_rank[self.rows])
        self.pos = len(table.log)
        n = len(table.slots)
        self.stale = np.zeros(n, dtype=bool)
        self.stale_rows = _NONE  # (the rows made stale, live then, as an array)
        self._seen = np.zeros(n, dtype=np.intp)  # (sync's scratch: a row's place in a batch)
        # the keys of stale rows as last evaluated; ``dirty``: changed since (or never done)
        self.stale_keys = (np.zeros(n), np.zeros(n), np.zeros(n))
        self.dirty = np.ones(n, dtype=bool)
        self.sorting += 1
        self.sorts += 1

    def sync(self) -> None:
        """Take in the rows changed since the last look (re-sorting when too many)."""
        table = self.table
        log = table.log
        if len(log) == self.pos:
            return
        changed = np.array(log[self.pos:], dtype=np.intp)
        self.pos = len(log)
        self.dirty[changed] = True
        changed = changed[~self.stale[changed]]
        if changed.size:
            if changed.size > 1:  # a row logged twice is one stale row: one place each kept
                seen, places = self._seen, np.arange(changed.size)
                seen[changed] = places  # (whichever place a row keeps, it keeps one)
                changed = changed[seen[changed] == places]
            self.stale[changed] = True
            # a row used up is stale (the walk skips it) but no candidate: none matches again
            live = changed[table.alive[changed]]
            if live.size:
                self.stale_rows = np.concatenate((self.stale_rows, live))
        if self.stale_rows.size > STALE_LIMIT:
            self._sort()

    def ranked(self, cursor: Cursor, mask, want: int, wider: int = 0):
        """The ``want`` best rows ``mask`` (``rows -> bool array``) accepts, best first, each
        as ``(row, (pre, jr, post, name rank))``, and whether they are all the rows it accepts
        (``complete``). Moves ``cursor`` up to the first fresh match. ``wider``: the look
        finds that many, for a next look with the same cursor and mask before anything
        changes (a turn's, for the fill that follows it: :meth:`_look`)."""
        stale, every_stale, fresh = self._look(cursor, mask, want, wider)
        rows = self.rows
        keys = zip(*(part[fresh].tolist() for part in self.sorted_arrays))
        ranked = list(zip(rows[fresh].tolist(), keys))
        if stale is not None:  # (the fresh rows are in order already)
            keys = zip(*(part.tolist() for part in stale[1:]))
            ranked = list(zip(stale[0].tolist(), keys)) + ranked
            ranked.sort(key=lambda item: order_key(item[1]))
        # every accepted row is here when the walk ran out of rows before ``want`` fresh ones
        # and no stale or fresh one was cut off
        complete = fresh.size < want and every_stale and len(ranked) <= want
        return ranked[:want], complete

    def ranked_arrays(self, cursor: Cursor, mask, want: int):
        """:meth:`ranked`'s answer as arrays, ``(rows, pre, jr, post, name ranks)`` best first,
        and ``complete``: for a look at many rows (a fill's, :mod:`.vfill`)."""
        stale, every_stale, fresh = self._look(cursor, mask, want)
        found = (self.rows[fresh], *(part[fresh] for part in self.sorted_arrays))
        if stale is not None:
            found = tuple(np.concatenate(pair) for pair in zip(stale, found))
        # (as ranked's: no stale or fresh accepted row was cut off)
        complete = fresh.size < want and every_stale and found[0].size <= want
        if stale is not None:
            order = np.lexsort((found[4], -found[3], -found[2], -found[1]))[:want]
            found = tuple(part[order] for part in found)
        return found, complete

    def _look(self, cursor: Cursor, mask, want: int, wider: int = 0):
        """``(stale, every_stale, fresh)`` of a look: the best ``want`` stale rows ``mask``
        accepts as arrays ``(rows, pre, jr, post, name ranks)`` best first (None: none), whether
        they are all it accepts, and the positions (an array) of the first ``want`` fresh rows
        it accepts in the sorted rows. Moves ``cursor`` up to the first fresh match.

        The last look (of ``max(want, wider)`` rows) is kept: a look with the same cursor,
        where it left it, and the same mask array (``mask`` is its ``__getitem__``), while the
        log has nothing new (so the stale rows, the mask and the sorting are as they were), is
        its first ``want`` rows: the walk from the first fresh match finds what it found."""
        key = getattr(mask, "__self__", None)
        last = self._last
        if not (last is not None and key is not None and last[0] == id(cursor)
                and last[1] is key and last[2] == len(self.table.log)
                and cursor.sorting == self.sorting and cursor.pos == last[3]
                and want <= last[4]):
            last = self._last = self._walk(cursor, mask, max(want, wider), key)
        best, candidates, fresh = last[5:]
        if best is not None and want < best[0].size:
            best = tuple(part[:want] for part in best)
        return best, candidates <= want, fresh[:want]

    def _walk(self, cursor: Cursor, mask, want: int, key) -> tuple:
        """A look (:meth:`_look`'s) of ``want`` rows, as what :meth:`_look` keeps: ``(id of
        the cursor, mask array, log length, cursor position, want, stale best, how many stale
        rows the mask accepts, fresh positions)`` (no reference to the cursor: it refers to
        this order)."""
        self.sync()
        table = self.table
        if cursor.sorting != self.sorting:
            cursor.sorting, cursor.pos = self.sorting, 0
        best = None
        stale = self.stale
        candidates = 0
        if self.stale_rows.size:
            cand = self.stale_rows
            cand = cand[table.alive[cand]]
            if cand.size:
                cand = cand[mask(cand)]
            if cand.size:
                best = self._best_of(cand, want)
                candidates = cand.size
        rows, pos, chunk = self.rows, cursor.pos, _FIRST_CHUNK
        found: list = []  # (arrays of the positions of fresh matches, chunk by chunk)
        count = seen = 0
        while pos < rows.size and count < want:
            part = rows[pos:pos + chunk]
            sub_pos = np.flatnonzero(~stale[part])
            if sub_pos.size:
                hits = sub_pos[mask(part[sub_pos])][:want - count]
                if hits.size:
                    found.append(hits + pos)
                    count += hits.size
            pos += part.size
            seen += part.size
            # the next chunk: at least twice this one, and what the matches still wanted take
            # at the rate found so far, a quarter over (a walk of a few chunks, not dozens)
            chunk = max(2 * chunk, (want - count) * seen * 5 // (4 * count + 4))
        fresh = (found[0] if len(found) == 1 else np.concatenate(found)) if found else _NONE
        cursor.pos = int(fresh[0]) if count else rows.size
        return (id(cursor), key, len(table.log), cursor.pos, want, best, candidates, fresh)

    def _best_of(self, cand, want: int) -> tuple:
        """The best ``want`` of stale rows ``cand`` with their keys, as arrays ``(rows, pre,
        jr, post, name ranks)`` best first (keys evaluated again only for the rows changed
        since their keys were last evaluated)."""
        table = self.table
        kpre, kjr, kpost = self.stale_keys
        need = cand[self.dirty[cand]]
        if need.size:
            pre, jr, post = self.keys(table.rows(need), need.size)
            kpre[need], kjr[need], kpost[need] = pre, jr, post
            self.dirty[need] = False
        pre, jr, post = kpre[cand], kjr[cand], kpost[cand]
        names = table.name_rank[cand]
        # best first: the highest pre, job rank, post (no NaN: the ranks map it to their
        # worst, a NaN job rank raises), then the first name
        k = np.lexsort((names, -post, -jr, -pre))[:want]
        return cand[k], pre[k], jr[k], post[k], names[k]


class Queue:
    """The best candidates of one request, best first, as ``(row, (pre, jr, post, name
    rank))``: the true top of its candidates as of the table's change log at ``pos``, so
    every other row that matched then ranks below the last (``complete``: they are every
    candidate). A row the log names since changed (carved or taken): it leaves the queue and
    comes back where its new key puts it, if it still matches and ranks above the last (or the
    queue is complete); every other row is as it was, with the same verdict and key."""

    __slots__ = ("plan", "pos", "ranked", "complete")

    def __init__(self, plan, pos: int, ranked: list, complete: bool):
        self.plan = plan
        self.pos = pos
        self.ranked = ranked
        self.complete = complete

    def take(self, table, keys, mask, changed: list, hint=None) -> None:
        """Take in the rows ``changed`` of ``table`` (``keys``: ``(rows, n) -> (pre, jr,
        post)`` of the request; ``mask``: every row's verdict now; ``hint``: the verdict and
        key of the one row changed, known, see :meth:`~.vsearch.VectorSearch._hinted`)."""
        gone = set(changed)
        ranked = [item for item in self.ranked if item[0] not in gone]
        items = ()
        if hint is not None:
            if hint[3]:
                items = [(hint[1], hint[4])]
        else:
            rows = np.array(sorted(gone), dtype=np.intp)
            rows = rows[mask[rows]]
            if rows.size:
                pre, jr, post = keys(table.rows(rows), rows.size)
                items = list(zip(rows.tolist(), zip(pre.tolist(), jr.tolist(), post.tolist(),
                                                    table.name_rank[rows].tolist())))
        if items:
            last = order_key(ranked[-1][1]) if ranked else None
            back = False
            for item in items:
                if self.complete or (last is not None and order_key(item[1]) < last):
                    ranked.append(item)
                    back = True
            if back:
                ranked.sort(key=lambda item: order_key(item[1]))
        self.ranked = ranked


def order_key(key: tuple) -> tuple:
    """A ``(pre, jr, post, name rank)`` key as a sort key: best first."""
    return (-key[0], -key[1], -key[2], key[3])


def ranks_of(pre, jr, post, rows, n: int):
    """The keys' parts ``(pre, job rank, post)`` of ``n`` ``rows``, by a plan's three rank
    functions (a shared order's ``keys`` is this with them bound: the functions, not the plan
    or the search, so that nothing refers back to the order)."""
    pre, jr, post = _full(pre(rows), n), _full(jr(rows), n), _full(post(rows), n)
    if np.isnan(jr).any():
        raise Inexact("a NaN job rank")  # tuple order with NaN: the scalar walk decides
    return pre, jr, post


def _full(values, n: int) -> np.ndarray:
    """``values`` as an array of ``n`` (a rank that is one number for every row)."""
    if values.__class__ is np.ndarray and values.ndim:
        return values
    return np.full(n, values)


def best_position(pre, jr, post, names, skip):
    """The position of the best key (highest pre, job rank, post, then the first name),
    leaving out position ``skip``."""
    cand = np.arange(pre.size)
    if skip is not None:
        cand = cand[cand != skip]
    for part in (pre, jr, post):
        if cand.size == 1:
            return int(cand[0])
        sub = part[cand]
        cand = cand[sub == sub.max()]
    return int(cand[np.argmin(names[cand])]) if cand.size > 1 else int(cand[0])


def first_permitted(pre, jr, post, names, costs, used: float, limit: float):
    """The position of the best key whose cost (``costs``, by position) the submitter's limit
    permits after ``used``, walking the whole order as the scalar walk does when the limit
    refuses the best (a cheaper slot may fit); None when the limit permits none."""
    order = np.lexsort((names, -post, -jr, -pre))
    costs = costs[order]
    permits = (used + costs <= limit * (1 + 1e-6) + 1e-9) | (used <= 0 and limit > 0)
    first = int(np.argmax(permits))
    if not permits[first]:
        return None
    return int(order[first])
