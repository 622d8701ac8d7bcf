"""Monte Carlo estimate of pi: many independent batches of random samples, one job each.

Run it on the personal pool (started if needed)::

    python examples/monte_carlo.py

or without any pool::

    python examples/monte_carlo.py --local

Each batch seeds its own generator (jobs forked from the same process must not share a
random stream), checkpoints its running count with ``htc.checkpoint`` so that an evicted batch
resumes where it stopped, and the estimates are combined as they complete
(``htc.executors.as_completed``, with a progress bar on a terminal).
"""

from __future__ import annotations

import random
import sys

import htc
from htc import HTCExecutor
from htc.executors import as_completed


def batch(seed: int, samples: int, chunk: int = 10_000) -> tuple[int, int]:
    """Count the random points of the unit square inside the quarter circle."""
    state = htc.resume(default={"done": 0, "inside": 0, "rng": None})
    rng = random.Random(seed)
    if state["rng"] is not None:
        rng.setstate(state["rng"])
    while state["done"] < samples:
        n = min(chunk, samples - state["done"])
        state["inside"] += sum(1 for _ in range(n) if rng.random() ** 2 + rng.random() ** 2 <= 1.0)
        state["done"] += n
        state["rng"] = rng.getstate()
        htc.checkpoint(state)
    return state["inside"], state["done"]


def main(batches: int = 8, samples: int = 100_000, **executor_args) -> float:
    """Estimate pi from ``batches`` jobs of ``samples`` points; return the estimate.

    Args:
        batches: how many jobs.
        samples: points per job.
        **executor_args: passed to HTCExecutor (``backend="local"``, ``pool=...``, options).
    """
    inside = total = 0
    with HTCExecutor(**executor_args) as ex:
        futures = [ex.options(checkpoint=True).submit(batch, seed, samples) for seed in range(batches)]
        for future in as_completed(futures):
            hits, count = future.result()
            inside += hits
            total += count
    estimate = 4.0 * inside / total
    print(f"pi is about {estimate:.5f} from {total:,} samples in {batches} jobs")
    return estimate


if __name__ == "__main__":
    main(**({"backend": "local"} if "--local" in sys.argv[1:] else {}))
