"""Functions the kill -9 tests run as calls (importable by the jobs: the tests' folder is on
their PYTHONPATH)."""

from __future__ import annotations

import os
import uuid


def mark_run(directory: str, i: int) -> int:
    """Leave a file of its own in ``directory`` for each run of call ``i`` (a side effect the
    test counts: two files, two runs), then return ``i``."""
    fd = os.open(os.path.join(directory, f"{i}.{uuid.uuid4().hex}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.close(fd)
    return i


def runs(directory: str) -> dict[int, int]:
    """How many times each call ran, from the files :func:`mark_run` left."""
    counts: dict[int, int] = {}
    for name in os.listdir(directory):
        head = name.split(".", 1)[0]
        if head.isdigit():
            counts[int(head)] = counts.get(int(head), 0) + 1
    return counts
