"""The "now" that ClassAd evaluation reads: ``time()``, ``currentTime()``, ``CurrentTime``...

By default it is the real clock. A caller that evaluates on a clock of its own (a daemon core
given ``now``, a simulation on a FakeClock) supplies it for a stretch of evaluations::

    with evaluation_time(now):
        ExprTree("time() - EnteredCurrentState").eval(slot_ad)

The setting is a context variable, so it holds for the current thread (or asyncio task) only
and nests: the innermost ``with`` wins, and leaving it restores the one before.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: the supplied time in seconds since the epoch, or None for the real clock
_NOW: ContextVar[float | None] = ContextVar("htc_classad_now", default=None)


def now_seconds() -> float:
    """Seconds since the epoch as evaluation sees them (the supplied time, else the real one)."""
    now = _NOW.get()
    return time.time() if now is None else now


@contextmanager
def evaluation_time(now: float | None) -> Iterator[None]:
    """Evaluate with ``now`` (seconds since the epoch) as the current time inside the block.

    ``None`` means the real clock (useful to pass a caller's optional time straight through).
    """
    token = _NOW.set(now)
    try:
        yield
    finally:
        _NOW.reset(token)
