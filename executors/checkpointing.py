"""Explicit checkpoints for function jobs: ``htc.checkpoint(state)`` and ``htc.resume()``.

Inside a function running as a job::

    def simulate(steps):
        state = htc.resume(default={"step": 0, "total": 0.0})
        for step in range(state["step"], steps):
            state["total"] += work(step)
            state["step"] = step + 1
            htc.checkpoint(state)          # cheap enough to call every few seconds
        return state["total"]

``checkpoint`` pickles the state into the sandbox (``htc_checkpoint.pkl``, written whole and
renamed into place, so an eviction mid-write keeps the previous one). When the job is evicted
(the owner came back, a higher-priority user preempted it, ``future.vacate()``), the file goes
back with the job; wherever the job starts next, ``resume()`` returns the last state saved.

A callable object can instead follow the :class:`Checkpointable` protocol: the worker calls
``set_checkpoint(state)`` before the call when resuming, and ``get_checkpoint()`` when the job
is asked to leave (the soft-kill signal), saving what it returns.

Outside a job (the same function run by a ``ThreadPoolExecutor``, or called directly),
``checkpoint`` saves nothing and returns False, and ``resume`` returns ``default``: code that
checkpoints runs unchanged anywhere.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["Checkpointable", "checkpoint", "resume"]

_NOTHING = object()


@runtime_checkable
class Checkpointable(Protocol):
    """A callable that can hand over its progress and take it back.

    ``get_checkpoint()`` returns picklable state (called when the job must leave);
    ``set_checkpoint(state)`` restores it (called before the call when the job restarts).
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def get_checkpoint(self) -> Any: ...

    def set_checkpoint(self, state: Any) -> None: ...


class RunContext:
    """Where the running call keeps its checkpoint; the worker installs one per call."""

    def __init__(self, path: Path, serializer: str, state: Any = _NOTHING):
        self.path = path
        self.serializer = serializer
        self._state = state
        self._lock = threading.Lock()
        self.saved = 0

    @property
    def resumed(self) -> bool:
        """True when an earlier run of this call left a checkpoint."""
        return self._state is not _NOTHING

    def state(self, default: Any) -> Any:
        """The checkpointed state, or ``default``."""
        return default if self._state is _NOTHING else self._state

    def save(self, state: Any) -> None:
        """Pickle ``state`` to the checkpoint file, atomically."""
        from htc.wire.callfile import write_atomic
        from htc.executors.serialize import dumps_value

        payload, _ = dumps_value(state, self.serializer)
        with self._lock:
            write_atomic(self.path, payload)
            self._state = state
            self.saved += 1


_current: RunContext | None = None


def install(context: RunContext | None) -> None:
    """Make ``context`` the running call's (the worker's business; None clears it)."""
    global _current
    _current = context


def checkpoint(state: Any) -> bool:
    """Save ``state`` so that a restarted call can continue from it.

    Args:
        state: any picklable object (with the call's serializer).

    Returns:
        True when saved; False outside a job, where there is nothing to save to.

    Raises:
        SerializationError: ``state`` cannot be pickled (the message names its type).
    """
    context = _current
    if context is None:
        return False
    context.save(state)
    return True


def resume(default: Any = None) -> Any:
    """The state the last :func:`checkpoint` of an earlier run of this call saved.

    Args:
        default: returned when there is no checkpoint (a first run, or outside a job).

    Returns:
        The saved state, or ``default``.
    """
    context = _current
    return default if context is None else context.state(default)
