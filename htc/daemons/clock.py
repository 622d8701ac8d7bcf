"""The clock every daemon service takes: the only place daemon code reads the time.

A core never reads the time; it is handed ``now`` with every event. A service gets ``now`` from
its :class:`Clock`, and waits (for the core's next deadline, for a retry, for a child to go)
through the same clock. So a test or a simulator that gives the service a :class:`FakeClock`
decides what time it is and when the service's timers fire; :meth:`FakeClock.advance` moves
time forward and wakes every wait whose moment has come, in order.

Two readings, as in the standard library:

* :meth:`Clock.time` -- wall-clock seconds since the epoch, for what is recorded or shown
  (``EnteredCurrentStatus``, an ad's ``LastHeardFrom``) and for the cores' deadlines;
* :meth:`Clock.monotonic` -- seconds that never go backwards, for measuring how long something
  took or bounding a wait.

Waiting:

* ``await clock.sleep(seconds)``;
* ``await clock.wait_for(event, timeout)`` -- until an :class:`asyncio.Event` is set or the
  timeout passes (True when the event was set);
* ``clock.sleep_blocking(seconds)`` -- in synchronous code that must pause (a retry around a
  locked ``/etc/passwd``).

:data:`REAL` is the clock of a running pool.

What stays on the event loop's own timers: the guards on waits for the kernel or a peer (a
request's timeout, an idle connection, a zygote that does not answer). They bound I/O that a
fake clock cannot hurry, and decide nothing about jobs or slots; every decision, deadline and
retry of a daemon goes through the clock.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time as _time


class Clock:
    """Real time: the system's clocks and asyncio's timers."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""
        return _time.time()

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never go backwards."""
        return _time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (no wait for zero or less, but still a chance for other tasks)."""
        await asyncio.sleep(max(0.0, seconds))

    async def wait_for(self, event: asyncio.Event, timeout: float | None) -> bool:
        """Wait until ``event`` is set (True) or ``timeout`` seconds pass (False); None: no limit."""
        if event.is_set():
            return True
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            return False
        return True

    def sleep_blocking(self, seconds: float) -> None:
        """Pause this thread ``seconds`` (synchronous code only)."""
        _time.sleep(max(0.0, seconds))


#: the clock of a running pool
REAL = Clock()


class FakeClock(Clock):
    """A clock that moves only when told to: for service tests and the simulator.

    Args:
        start: the wall-clock time it starts at (monotonic time starts at 0).

    ``advance(seconds)`` moves both readings forward and wakes, in time order, every
    :meth:`sleep` and :meth:`wait_for` whose moment has come. The woken tasks run when the
    caller next yields to the event loop (``await asyncio.sleep(0)``, or :meth:`settle`).
    :meth:`sleep_blocking` cannot wait for another task to advance the clock, so it advances the
    clock itself.
    """

    def __init__(self, start: float = 1_700_000_000.0):
        self._start = start
        self._elapsed = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self._start + self._elapsed

    def monotonic(self) -> float:
        return self._elapsed

    def next_wakeup(self) -> float | None:
        """The monotonic time of the earliest pending wait, or None when nothing waits."""
        self._drop_cancelled()
        return self._sleepers[0][0] if self._sleepers else None

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and wake every wait that is due."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} s)")
        self._elapsed += seconds
        while self._sleepers and self._sleepers[0][0] <= self._elapsed:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    async def settle(self, rounds: int = 5) -> None:
        """Let woken tasks run: yield to the event loop a few times."""
        for _ in range(rounds):
            await asyncio.sleep(0)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        await self._until(self._elapsed + seconds)

    async def wait_for(self, event: asyncio.Event, timeout: float | None) -> bool:
        if event.is_set():
            return True
        if timeout is None:
            await event.wait()
            return True
        waiter = asyncio.ensure_future(event.wait())
        timer = asyncio.ensure_future(self._until(self._elapsed + max(0.0, timeout)))
        try:
            await asyncio.wait({waiter, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiter, timer):
                task.cancel()
        return event.is_set()

    def sleep_blocking(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))

    async def _until(self, moment: float) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (moment, next(self._order), future))
        await future

    def _drop_cancelled(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
