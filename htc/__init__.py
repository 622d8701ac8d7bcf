"""htc: a Python implementation of the Condor high-throughput computing system.

The names a user needs are importable from here::

    from htc import HTCExecutor

Heavy parts are imported lazily so that ``import htc`` (and the ``htc`` command) start fast.
"""

from __future__ import annotations

from htc.errors import HTCError, NotBuiltYet, PeerError, UsageError

__version__ = "0.1.0"

__all__ = ["HTCError", "HTCExecutor", "NotBuiltYet", "PeerError", "UsageError", "__version__",
           "checkpoint", "resume"]

#: names served by htc.executors: the executor, and the checkpoint calls a function job makes
_EXECUTOR_NAMES = ("HTCExecutor", "checkpoint", "resume")


def __getattr__(name: str):
    if name in _EXECUTOR_NAMES:
        import htc.executors

        return getattr(htc.executors, name)
    raise AttributeError(f"module 'htc' has no attribute {name!r}")
