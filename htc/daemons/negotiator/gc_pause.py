"""Python's cyclic garbage collector held off for the length of one negotiation cycle.

Theory of operation
-------------------
A cycle of a large pool allocates millions of small objects (slot ad copies, syntax-tree
literals, heap entries, matches) while millions more stay alive (the pool's ads, the cycle's
caches). CPython starts a collection every few hundred net allocations, and every tenth of
those walks the older generations: each walk visits the live objects, which are many, so the
collector's passes cost about a quarter of a 4,000-machine cycle's CPU time
(``benchmarks/negotiator_bench.py``; ``tests/unit/test_negotiator_gc_pause.py``).

The cycle's objects do not form garbage cycles worth reclaiming mid-cycle: what the cycle
frees goes at once by reference counting, and what it keeps lives until the cycle ends. So
:func:`collector_paused` disables the automatic collector for the cycle and restores it after
(also when the cycle raises); cycles made meanwhile are collected by the next automatic
collection. A caller that had disabled the collector itself keeps it disabled.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable Python's automatic cyclic garbage collection inside the ``with`` block, and
    re-enable it afterwards if it was enabled on entry (nested uses are fine)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
