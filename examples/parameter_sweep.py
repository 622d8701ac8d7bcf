"""A parameter sweep: evaluate a model on a grid of parameters, one job per point, keep the best.

Run it on the personal pool (started if needed)::

    python examples/parameter_sweep.py

or without any pool, as processes on this machine::

    python examples/parameter_sweep.py --local

Each grid point is a call; ``map`` submits them all in one batch (one cluster in the schedd),
the progress bar follows them on a terminal, and the results come back in grid order.
"""

from __future__ import annotations

import itertools
import sys

from htc import HTCExecutor


def loss(alpha: float, beta: int) -> float:
    """A stand-in for an expensive evaluation: smallest at alpha = 0.5, beta = 2."""
    total = 0.0
    for i in range(20_000):  # a little real work per call
        x = i / 20_000
        total += (alpha * x - 0.5 * x) ** 2 + (beta - 2) ** 2 * x
    return round(total / 20_000, 9)


def main(**executor_args) -> tuple[dict, float]:
    """Sweep the grid; return the best parameters and their loss.

    Args:
        **executor_args: passed to HTCExecutor (``backend="local"``, ``pool=...``, options).
    """
    alphas = [0.1, 0.25, 0.5, 0.75, 1.0]
    betas = [1, 2, 3]
    grid = list(itertools.product(alphas, betas))
    with HTCExecutor(**executor_args) as ex:
        losses = list(ex.options(request_memory="256MB").map(loss, *zip(*grid)))
    (alpha, beta), best = min(zip(grid, losses), key=lambda pair: pair[1])
    print(f"{len(grid)} points evaluated; best alpha={alpha} beta={beta} with loss {best}")
    return {"alpha": alpha, "beta": beta}, best


if __name__ == "__main__":
    main(**({"backend": "local"} if "--local" in sys.argv[1:] else {}))
