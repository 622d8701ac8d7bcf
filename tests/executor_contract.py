"""Helpers for the executor tests: functions the jobs run, and the executors under test.

The functions live in a module of their own (not a test file) so that the same objects are
used by the thread pool and by jobs; the executor ships this module by value (it is not an
installed package), as it would a user's helper module.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def double(x):
    return 2 * x


def add(a, b=0, *, c=0):
    return a + b + c


def fail(text):
    raise ValueError(text)


def slow(x, seconds):
    time.sleep(seconds)
    return x


def gate(path, value, started=None, limit=60.0, pause=0.0, finished=None):
    """Wait until ``path`` exists (the test opens the gate), then return ``value`` (``pause``
    seconds later: a call that is not quick), creating ``finished`` first when given."""
    if started:  # (whole or not at all: a test reads the pid as soon as the file is there)
        Path(f"{started}.{os.getpid()}.tmp").write_text(str(os.getpid()))
        os.replace(f"{started}.{os.getpid()}.tmp", started)
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the gate {path} was never opened")
        time.sleep(0.01)
    time.sleep(pause)
    if finished:
        Path(finished).touch()
    return value


def wait_for(predicate, limit=60.0, what="condition"):
    """Poll ``predicate`` until true (tests only; for conditions with no event to await)."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {limit} s")
        time.sleep(0.01)
