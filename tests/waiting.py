"""Waiting for another process's doing in the multi-host tests (tests/netns_hosts.py and
tests/ssh_netns.py hosts): a state in another process, or on another simulated host, has no event
this process could await, so :func:`wait_until` polls it under a generous deadline -- never a
sleep that assumes an idle machine."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 30.0, what: str = "condition",
               interval: float = 0.05) -> T:
    """Call ``condition()`` every ``interval`` seconds until it is truthy; return that value.

    Raises:
        AssertionError: still falsy after ``timeout`` seconds (naming ``what`` was awaited).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
