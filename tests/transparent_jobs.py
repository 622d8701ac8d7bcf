"""Functions for ``checkpoint="transparent"`` calls (tests/system/test_executor_transparent_ckpt.py).

They know nothing about checkpoints: no ``htc.checkpoint``, all their state in local variables.
Their files are relative paths, so under the runtime they live in the call's ``Iwd`` on the
submit side, reached through the runtime's forwarded calls.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time


def count(steps: int, work: int = 20000, pause: float = 0.0) -> dict:
    """A pure-Python loop of ``steps`` steps (2-5 ms of CPU each with the default ``work``), each
    followed by ``pause`` seconds of sleep (which paces the run without costing CPU).

    ``starts.log`` gets a line each time the function is entered; ``steps.log`` a line for every
    step computed, the redone ones included (each is opened afresh, so a restart never rolls it
    back). Returns the digest, and the pids of the processes that computed steps: a call resumed
    from its image carries on in a new process with the same local variables.
    """
    with open("starts.log", "a") as log:
        log.write(f"{os.getpid()}\n")
    digest = hashlib.sha256()
    pids: list[int] = []
    for step in range(steps):
        for k in range(work):
            digest.update(k.to_bytes(4, "little"))
        if not pids or pids[-1] != os.getpid():
            pids.append(os.getpid())
        with open("steps.log", "a") as log:
            log.write(f"{step}\n")
        if pause:
            time.sleep(pause)
    return {"digest": digest.hexdigest(), "steps": steps, "pids": pids}


def threaded(n: int) -> int:
    """Starts a thread: the checkpointing runtime cannot handle it."""
    box: list[int] = []
    worker = threading.Thread(target=lambda: box.append(n * 2))
    worker.start()
    worker.join()
    return box[0]


def explicit(n: int) -> object:
    """Saves its state with ``htc.checkpoint`` as a ``checkpoint=True`` call does."""
    import htc

    saved = htc.checkpoint({"n": n})
    return saved, htc.resume(None)
