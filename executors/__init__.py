"""HTCExecutor: a ``concurrent.futures.Executor`` whose every call is a job in the pool.

Import it as ``from htc import HTCExecutor`` (this package installs as ``htc.executors``).
"""

from __future__ import annotations

from concurrent.futures import Executor

from htc.errors import NotBuiltYet

__all__ = ["HTCExecutor"]


class HTCExecutor(Executor):
    """A concurrent.futures Executor that runs each call as a job in an htc pool.

    This build does not have the executor yet: constructing one raises
    :class:`htc.NotBuiltYet`, which names what is missing.
    """

    def __init__(self, pool: str | None = None, **defaults):
        raise NotBuiltYet("HTCExecutor", "the personal pool daemons and the executor backend")
