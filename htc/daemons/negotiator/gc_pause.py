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

**Survivors go to the oldest generation.** What the cycle made and keeps (the pool's ads and
views, the accountant's records, the matches on their way to the schedds: about 730,000
objects after a cycle of 10,000 machines and 81,642 matches) would otherwise sit in the youngest
generations, and the first young collections after the pause would walk them all, once per
generation, for nothing: they live on. So the outermost pause ends with ``gc.freeze()`` then
``gc.unfreeze()``, which moves every tracked object into the oldest generation at the cost of
two list splices, as a full collection would have left them (benchmark case 1: 0.3 s of CPU
less, by same-process A/B). Garbage cycles made during the cycle are then reclaimed by the next
full collection instead of a young one. A process that froze objects on purpose
(``gc.get_freeze_count()`` is not 0) is left alone: unfreezing would undo its freeze.
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
            if gc.get_freeze_count() == 0:
                gc.freeze()  # every tracked object, the cycle's survivors too, set aside...
                gc.unfreeze()  # ...and back, into the oldest generation (see the docstring)
            gc.enable()
