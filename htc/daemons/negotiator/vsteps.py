"""A run's verdicts evaluated ahead: the next steps of many slots in one call.

Theory of operation
-------------------
A run (:meth:`~.vsearch.VectorSearch.extend`) asks, for the slot a request just carved, at
each size of its next steps (:func:`~.runs._numeric_steps`): does the slot still match (the
plan's clauses), and what is its key (the ranks)? Both are a function of the row and of the
slot's size alone: the other columns of a row never change in a cycle, and the plan is the
request's. The sizes of the steps are a function of the size at the first step and the carve
alone (each step takes the same carve, with the same arithmetic, until the carve no longer
fits or the slot is used up), cut short by the request's limits.

So when one row needs its steps evaluated, :class:`StepMemo` evaluates in the same call the
steps of every row the request will probably carve next (the rows of its queue, see
:class:`~.vorder.Queue`), each from the size the first carve will leave it (the size now
less one carve), and keeps, per row, the sizes with their verdicts and keys. A later run of
such a row takes them when its first size is the one kept (value and type): then its sizes
are the kept ones, step by step, and so are the verdicts. Anything else (another size, a
longer run than kept, a batch whose types differ or that raised) is evaluated as before, row
by row. A batch takes the queue's rows only as far as the request's jobs left reach (a
request of 20 jobs carves two or three slots, not sixteen).

What a run leaves is known too (:func:`after_run`): the slot's size where the run stopped
is one of the kept ones (or past the last, where the carve no longer fits), so the request's
next turn need not evaluate the slot again (:meth:`~.vsearch.VectorSearch._hinted`).
"""

from __future__ import annotations

import numpy as np

from htc.classad.ast import Literal
from htc.daemons.negotiator.vexpr import INT, MISSING, REAL

_CARVED = ("cpus", "memory", "disk")
_EXACT = float(2 ** 53)
_WHOLE = 2 ** 53
#: the steps kept per row (a longer run is evaluated row by row)
MOST_STEPS = 64


class StepMemo:
    """The kept steps of one request's plan: ``row -> (carve, sizes, tags, ok, keys, ended)``
    (``ended``: ``sizes`` are every step's, not cut at :data:`MOST_STEPS`)."""

    __slots__ = ("plan", "rows")

    def __init__(self, plan):
        self.plan = plan
        self.rows: dict[int, tuple] = {}

    def steps(self, row: int, carve, states):
        """``(tags, ok, keys, sizes, ended)`` kept for ``row`` when its run is ``states`` with
        ``carve`` (``keys``: ``(-pre, -jr, -post)`` per step; ``sizes``: the sizes of the
        steps from the first, ``states`` their first ones), else None."""
        entry = self.rows.get(row)
        if entry is None or entry[0] != carve or len(states) > len(entry[1]):
            return None
        first, kept = states[0], entry[1][0]
        for a, b in zip(first, kept):
            if a != b or a.__class__ is not b.__class__:
                return None
        return entry[2], entry[3], entry[4], entry[1], entry[5]

    def evaluate(self, search, carve, starts: list, jobs: int) -> None:
        """Evaluate the steps of the rows ``starts`` (``[(row, size at the first step)]``,
        the likeliest first) in one call and keep them, as many rows as take ``jobs`` steps
        (the request's jobs left: rows past them are not evaluated); keeps nothing when their
        types differ or it raises."""
        table, plan = search.table, self.plan
        seqs, counts, total = [], [], 0
        for _row, start in starts:
            if seqs and total >= jobs:
                break
            seq = _sequence(start, carve)
            seqs.append(seq)
            counts.append(len(seq[0]))
            total += counts[-1]
        if total == 0:
            return
        flat = [state for seq, _ended in seqs for state in seq]
        carved, tags = {}, []
        for lname, values in zip(_CARVED, zip(*flat)):  # (the three columns of the states)
            column = carved_column(values)
            if column is None:
                return  # (row by row, as before)
            tags.append(column[0])
            carved[lname] = (np.full(total, column[0], dtype=np.int8), column[1])
        starts = starts[:len(seqs)]
        index = np.repeat(np.array([row for row, _start in starts], dtype=np.intp), counts)
        rows = table.rows(index, carved)
        try:
            ok = np.ones(total, dtype=bool)
            for fn in plan.clauses:
                ok &= fn(rows)
            pre, jr, post = search._keys(plan, rows, total)
        except Exception:  # noqa: BLE001 - Inexact and the like: a row's own run raises again
            return
        ok, keys = ok.tolist(), list(zip((-pre).tolist(), (-jr).tolist(), (-post).tolist()))
        tags = tuple(tags)
        at = 0
        for (row, _start), (seq, ended), n in zip(starts, seqs, counts):
            if n:
                self.rows[row] = (carve, seq, tags, ok[at:at + n], keys[at:at + n], ended)
            at += n


def slot_size(slot):
    """The size of ``slot`` (``(cpus, memory, disk)``, None where it does not say) as a run
    reads it; None when one is not a number."""
    exprs = slot.ad._exprs
    out = []
    for lname in _CARVED:
        node = exprs.get(lname)
        if node is None:
            out.append(None)
        elif node.__class__ is not Literal or node.value.__class__ not in (int, float):
            return None
        else:
            out.append(node.value)
    return tuple(out)


def size_after_carve(slot, carve):
    """The size of ``slot`` once ``carve`` is taken from it, as a carve leaves it; None when
    one is not a number."""
    size = slot_size(slot)
    return None if size is None else carved_size(size, carve)


def carved_size(size: tuple, carve) -> tuple:
    """``size`` less ``carve``, as a carve leaves a slot of that size."""
    return less_carve(*size, *carve)


def less_carve(h0, h1, h2, c0, c1, c2):
    """Cpus, Memory and Disk less one carve, as the slot keeps them (an int stays an int when
    the difference is whole, :func:`~.slotreads.same_type`; None: the slot does not say), the three
    in one call: the step loops of :func:`~.runs._numeric_steps` and :func:`_sequence` make
    one per step of every run."""
    if h0 is not None:
        v = h0 - c0
        h0 = int(v) if h0.__class__ is int and float(v).is_integer() else v
    if h1 is not None:
        v = h1 - c1
        h1 = int(v) if h1.__class__ is int and float(v).is_integer() else v
    if h2 is not None:
        v = h2 - c2
        h2 = int(v) if h2.__class__ is int and float(v).is_integer() else v
    return h0, h1, h2


def carve_sizes(slot, carve):
    """``(size, after)`` of the partitionable ``slot``: its ``(cpus, memory, disk)`` (None
    where it does not say) and what ``carve`` leaves of them, in one pass (:func:`slot_size`
    and :func:`carved_size`: this runs once per slot a request fills); None when
    :meth:`~.vsearch.VectorSearch.take` leaves the carve to ``make_match``: a size that is not
    a number, a carve that changes the row's type, or one that uses the slot up and would
    still fit what it leaves (a fractional carve: ``make_match`` and ``extend`` decide what
    follows). A carve that uses the slot up and no longer fits it is the run's last step."""
    exprs, size, after = slot.ad._exprs, [], []
    for lname, amount in zip(_CARVED, carve):
        node = exprs.get(lname)
        if node is None:
            size.append(None)
            after.append(None)
            continue
        have = node.value if node.__class__ is Literal else None
        kind = have.__class__
        if kind is not int and kind is not float:
            return None  # (not a number: the table would not have taken the slot)
        left = have - amount
        if kind is int and left.__class__ is not int:
            if not float(left).is_integer():
                return None  # the carve changes the row's type (and may move the epoch)
            left = int(left)
        size.append(have)
        after.append(left)
    if (1.0 if after[0] is None else after[0]) < 1.0 or (
            1.0 if after[1] is None else after[1]) <= 0:
        for left, amount in zip(after, carve):  # used up by this carve: does it still fit?
            if left is not None and amount > left:
                return tuple(size), after  # no: no step follows (steps_from's first test)
        return None
    return tuple(size), after


def after_run(ahead, k: int, alive: bool):
    """``(matches, (-pre, -jr, -post))`` of a slot after ``k`` steps of a run whose steps
    were evaluated ahead (``ahead``: :meth:`StepMemo.steps`' answer), as the request's mask and
    key would find it (its static verdicts held at the turn); None when not known."""
    _tags, ok, keys, sizes, ended = ahead
    if k < len(sizes):  # its size is sizes[k]: the carve fits it
        return (alive and ok[k]), keys[k]
    if ended:  # the carve no longer fits, or it used the slot up
        return False, None
    return None


def _sequence(start, carve) -> tuple[list, bool]:
    """The sizes of the steps from ``start`` as :func:`~.runs._numeric_steps` steps them,
    without the request's limits (which only cut them short): while the carve fits, each
    step's size, then the size less the carve, until that uses the slot up; and whether they
    ended so (False: cut at :data:`MOST_STEPS`)."""
    whole = _whole_sequence(start, carve)
    if whole is not None:
        return whole
    return step_by_step(start, carve, MOST_STEPS)


def step_by_step(start, carve, most: int) -> tuple[list, bool]:
    """:func:`_sequence`'s answer one step after another, at most ``most`` steps: the
    one-step loop itself (one :func:`less_carve` per step), which :func:`_whole_sequence`
    must agree with."""
    h0, h1, h2 = start
    c0, c1, c2 = carve
    seq = []
    while len(seq) < most:
        if (h0 is not None and c0 > h0) or (h1 is not None and c1 > h1) or (
                h2 is not None and c2 > h2):
            break
        seq.append((h0, h1, h2))
        h0, h1, h2 = less_carve(h0, h1, h2, c0, c1, c2)
        if (1.0 if h0 is None else h0) < 1.0 or (1.0 if h1 is None else h1) <= 0:
            return seq, True
    return seq, len(seq) < most


def _whole_sequence(start, carve):
    """:func:`_sequence`'s answer computed at once, when the slot says all three sizes, as
    integers, and the carve is three positive whole numbers (as ``RequestCpus = 1`` and the
    like arrive: ``1.0``), all within 2**53; else None. Then each step is the integer
    ``h - c`` that :func:`less_carve` gives (``float(h) - c`` is exact and whole, and it
    keeps an int), so the steps are ``h - i * c``: the carve fits at step ``i`` while
    ``(i + 1) * c <= h``, and step ``i`` uses the slot up when ``h - (i + 1) * c`` leaves
    under one core (``i >= (h - 1) // c``) or no memory (``(i + 1) * c >= h``)."""
    h0, h1, h2 = start
    if h0.__class__ is not int or h1.__class__ is not int or h2.__class__ is not int:
        return None
    c0, c1, c2 = carve
    if not (0 < c0 <= _WHOLE and 0 < c1 <= _WHOLE and 0 < c2 <= _WHOLE  # (NaN: False)
            and -_WHOLE <= h0 <= _WHOLE and -_WHOLE <= h1 <= _WHOLE and -_WHOLE <= h2 <= _WHOLE):
        return None
    k0, k1, k2 = int(c0), int(c1), int(c2)  # (a float's integer part; an int itself)
    if k0 != c0 or k1 != c1 or k2 != c2:
        return None
    limit = MOST_STEPS
    fit = min(h0 // k0, h1 // k1, h2 // k2, limit + 1)
    used = max(min((h0 - 1) // k0, -(-h1 // k1) - 1), 0)
    if used < fit and used < limit:
        n, ended = used + 1, True
    else:
        n = max(min(fit, limit), 0)
        ended = n < limit
    return list(zip(range(h0, h0 - n * k0, -k0), range(h1, h1 - n * k1, -k1),
                    range(h2, h2 - n * k2, -k2))), ended


def carved_column(values):
    """``(tag, values)`` of one carved resource at some steps (a sequence), as
    :func:`~.vexpr.scalar` encodes each; None when they are not all of one type (or an
    integer leaves what a float holds exactly). A resource a slot does not say is MISSING."""
    first = values[0]
    cls = first.__class__
    if len(set(map(type, values))) > 1:  # (one pass in C: this runs for every batch of steps)
        return None
    if first is None:
        return MISSING, np.zeros(len(values))
    if cls is not int and cls is not float:
        return None
    if cls is int and max(abs(min(values)), abs(max(values))) > _EXACT:
        return None
    return (INT if cls is int else REAL), np.array(values, dtype=float)
