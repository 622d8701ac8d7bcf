"""HTCExecutor: a ``concurrent.futures.Executor`` whose every call is a job in the pool.

Import it as ``from htc import HTCExecutor`` (this package installs as ``htc.executors``)::

    from htc import HTCExecutor

    with HTCExecutor() as ex:                      # the personal pool under $HTC_HOME
        print(ex.submit(pow, 2, 10).result())      # 1024, computed by a job

See docs/executor.md for the tutorial and :mod:`htc.executors.executor` for how it works.
"""

from __future__ import annotations

import importlib

#: public name -> module that defines it; imported on first use, so that the worker (which
#: imports htc.executors.worker on every execute node) does not pay for the client side
_LAZY = {
    "Backend": "backend", "CallSpec": "backend", "JobUpdate": "backend", "RecoveredCall": "backend",
    "Checkpointable": "checkpointing", "checkpoint": "checkpointing", "resume": "checkpointing",
    "CallTimedOut": "errors", "DependencyFailed": "errors", "ImpossibleRequest": "errors", "JobFailed": "errors",
    "JobHeld": "errors", "JobKilled": "errors", "JobOutOfMemory": "errors", "JobRemoved": "errors",
    "OptionError": "errors", "RemoteTraceback": "errors", "ResultExpired": "errors", "ScheddLost": "errors",
    "SerializationError": "errors", "SessionError": "errors", "UnpicklableRemoteException": "errors",
    "VersionMismatch": "errors",
    "HTCExecutor": "executor", "attach": "executor", "HTCFuture": "future", "CallOptions": "options",
    "as_completed": "progress", "wait": "progress", "CallStatus": "status",
    "LocalProcessBackend": "local", "PoolBackend": "pool", "RemoteBackend": "remote", "shared_python": "execute_env",
    "client_python": "client_env",
}

__all__ = [
    "Backend", "CallOptions", "CallSpec", "CallStatus", "CallTimedOut", "Checkpointable", "DependencyFailed",
    "HTCExecutor", "HTCFuture", "ImpossibleRequest", "JobFailed", "JobHeld", "JobKilled", "JobOutOfMemory",
    "JobRemoved", "JobUpdate", "LocalProcessBackend", "OptionError", "RecoveredCall", "RemoteTraceback",
    "ResultExpired", "ScheddLost", "SerializationError", "SessionError", "UnpicklableRemoteException",
    "PoolBackend", "RemoteBackend", "VersionMismatch", "as_completed", "attach", "checkpoint", "client_python", "forget", "resume",
    "sessions",
    "shared_python", "wait",
]


def sessions() -> list[dict]:
    """Every executor session under ``$HTC_HOME/executor``, oldest first (name, backend, created, ...)."""
    from htc.executors.spool import sessions as _sessions

    return _sessions()


def forget(name: str) -> None:
    """Delete a named session's journal and results (its jobs, if any still run, are removed).

    Args:
        name: the session's name.

    Raises:
        SessionError: no such session, or a live executor holds it.
    """
    from htc.executors.errors import SessionError
    from htc.executors.spool import Spool

    spool = Spool(name)
    if not spool.exists():
        raise SessionError(f"there is no executor session {name!r} to forget; htc.executors.sessions() lists them")
    spool.lock()
    try:
        if spool.info().get("backend") == "pool":
            from htc.executors.pool import remove_session_jobs

            remove_session_jobs(spool)
    finally:
        spool.remove()


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'htc.executors' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"htc.executors.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
