"""An unmodified Python function that survives eviction: ``checkpoint="transparent"``.

Run it on the personal pool (started if needed)::

    python examples/transparent_checkpoint.py [STEPS]

``count`` is a plain loop: its state is in local variables, and it never calls
``htc.checkpoint``. The call runs as a standard-universe job under htc's checkpointing runtime
(docs/executor.md, "Transparent checkpoints"). A quarter of the way through, the example evicts
it (``future.vacate()``, which is ``htc vacate_job``): the runtime writes an image of the
interpreter, and the next run resumes from that image in the middle of the loop. The result is
the one an uninterrupted run returns, and ``steps.log`` -- written through the runtime's
forwarded calls into the call's directory on this machine, one line per step computed -- shows
that next to no step was computed twice.

Needs a pool whose execute machines can build the runtime (gcc and libc6-dev; ``htc runtime
check`` says) and are of the same kind (kernel build, CPU features) as each other.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

from htc import HTCExecutor


def count(steps: int) -> str:
    """``steps`` steps of hashing, about 5 ms of CPU each; one line per step in ``steps.log``."""
    digest = hashlib.sha256()
    for step in range(steps):
        for k in range(20000):
            digest.update(k.to_bytes(4, "little"))
        with open("steps.log", "a") as log:  # a relative path: the call's directory, on the submit side
            log.write(f"{step}\n")
    return digest.hexdigest()


def _lines(path: Path) -> int:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return 0


def main(steps: int = 1000, **executor_args) -> tuple[str, int, int]:
    """Run ``count(steps)`` transparently checkpointed, evicting it part-way.

    Args:
        steps: the loop's length.
        **executor_args: passed to HTCExecutor (``pool=...``, ``python=`` ...).

    Returns:
        The digest, the steps computed (redone ones included) and the evictions.
    """
    with HTCExecutor(**executor_args) as ex:
        future = ex.options(checkpoint="transparent").submit(count, steps)
        while future.job_id is None and not future.done():
            time.sleep(0.1)
        log = Path(future.classad()["Iwd"]) / "steps.log"  # the call's directory
        while _lines(log) < steps // 4 and not future.done():
            time.sleep(0.1)
        if not future.done():
            future.vacate()  # the image is written; the call resumes from it
        digest = future.result()
        computed, evictions = _lines(log), future.evictions
    print(f"count({steps}) = {digest[:16]}...: {computed} steps computed for {steps}, "
          f"evicted {evictions} time(s)")
    return digest, computed, evictions


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
