"""A request's mask over the slot table: which rows are free, match it and fit its carve.

Theory of operation
-------------------
A row matches a request when it is free (``alive``), its static verdicts hold (the plan's
``static`` column: what no carve changes), the request's literal carve fits it (a
partitionable slot's ``Cpus``/``Memory``/``Disk``) and the plan's compiled clauses that read
a carved resource hold. The request keeps its mask across its turns (``plan.mask``): a row's
verdict changes only when a match changes the row, and every such change is in the table's
log (:attr:`~.columns.SlotTable.log`), so a turn evaluates only the rows logged since the
last (:func:`current_mask`), or none when the run that changed the one row logged since left
its verdict (the hint of :meth:`~.vsearch.VectorSearch._hinted`). A mask made afresh
(:func:`full_mask`) evaluates the clauses over every row at once when none can raise
(``plan.whole``: no arithmetic, or values computed once), else over the matching rows alone
(a row that does not match may be one where a clause would raise).
"""

from __future__ import annotations

import numpy as np


def current_mask(table, plan, hinted) -> np.ndarray:
    """The request's mask over every row, kept across its turns: only the rows logged since
    the last turn are evaluated again (all of them when the log grew by more than an eighth of
    the table); ``hinted(plan, pos)`` gives the verdict of the one row changed since ``pos``
    when it is known, else None."""
    log = table.log
    mask = plan.mask
    if mask is None or len(log) - plan.log_pos > (mask.size >> 3):
        mask = plan.mask = full_mask(table, plan)
    elif len(log) > plan.log_pos:
        hint = hinted(plan, plan.log_pos)
        if hint is not None:
            mask[hint[1]] = hint[3]
        else:
            # (a row logged twice gets the same verdict twice)
            changed = np.array(log[plan.log_pos:], dtype=np.intp)
            mask[changed] = rows_mask(table, plan, changed)
    plan.log_pos = len(log)
    return mask


def full_mask(table, plan) -> np.ndarray:
    """The request's mask over every row, evaluated afresh."""
    mask = table.alive & plan.static
    mask &= ~(plan.wants_col > table.res).any(axis=0) | ~table.partitionable
    if plan.clauses and plan.whole:  # (none can raise: over every row, no gather of some)
        rows = table.rows()
        for fn in plan.clauses:
            mask &= fn(rows)
    elif plan.clauses:
        idx = np.flatnonzero(mask)
        if idx.size:
            rows = table.rows(idx)
            ok = np.ones(idx.size, dtype=bool)
            for fn in plan.clauses:
                ok &= fn(rows)
            mask[idx[~ok]] = False
    return mask


def rows_mask(table, plan, idx) -> np.ndarray:
    """Which of rows ``idx`` are free, match the request and fit its carve."""
    ok = table.alive[idx] & plan.static[idx]
    ok &= ~(plan.wants_col > table.res[:, idx]).any(axis=0) | ~table.partitionable[idx]
    if plan.clauses and ok.any():
        rows = table.rows(idx)
        for fn in plan.clauses:
            ok &= fn(rows)
    return ok
