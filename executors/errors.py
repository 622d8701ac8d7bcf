"""What can go wrong with a function job, as exceptions a caller can catch.

Three families, following :mod:`htc.errors`:

* the caller's mistakes, raised at once by ``submit``/``options`` (:class:`SerializationError`,
  :class:`ImpossibleRequest`, :class:`OptionError`) -- all :class:`~htc.errors.UsageError`;
* a call that did not produce a value, raised by ``future.result()``
  (:class:`JobFailed` and its subclasses) -- the message says what happened to the job and
  which command shows more;
* the executor itself gone wrong (:class:`ScheddLost`) -- a
  :class:`concurrent.futures.BrokenExecutor`, as the standard executors raise.

An exception the *function* raised is not wrapped: ``result()`` re-raises the original
exception, with the remote traceback as its ``__cause__`` (:class:`RemoteTraceback`), exactly
as :class:`concurrent.futures.ProcessPoolExecutor` does.
"""

from __future__ import annotations

import pickle
from concurrent.futures import BrokenExecutor

from htc.errors import HTCError, UsageError

__all__ = [
    "CallTimedOut", "DependencyFailed", "ImpossibleRequest", "JobFailed", "JobHeld", "JobKilled",
    "JobOutOfMemory", "JobRemoved", "OptionError", "RemoteTraceback", "ResultExpired", "ScheddLost",
    "SerializationError", "SessionError", "UnpicklableRemoteException", "VersionMismatch",
]


class SerializationError(UsageError, pickle.PicklingError):
    """A function, argument or result could not be pickled; the message names the object."""


class OptionError(UsageError, ValueError):
    """An executor option is unknown or has a value htc cannot use."""


class ImpossibleRequest(UsageError):
    """No slot of the pool (or this machine) could ever satisfy the call's resource request."""


class SessionError(UsageError):
    """A named executor session does not exist or cannot be attached as asked."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised inside a job, attached as the exception's cause."""

    def __init__(self, tb: str):
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return self.tb


class UnpicklableRemoteException(HTCError):
    """The function raised an exception that could not be pickled; its type, text and traceback."""

    def __init__(self, type_name: str, text: str):
        super().__init__(f"{type_name}: {text} (the job's exception could not be pickled, so htc re-raises "
                         "this stand-in; make the exception class picklable to get the original type)")
        self.type_name = type_name
        self.text = text

    def __reduce__(self):
        return (type(self), (self.type_name, self.text))


class VersionMismatch(HTCError):
    """The execute side runs a different Python or package version than the caller pickled with."""

    def __init__(self, message: str, mismatches: tuple[tuple[str, str, str], ...] = ()):
        super().__init__(message)
        #: (name, version on the submit side, version on the execute side or "missing")
        self.mismatches = mismatches

    def __reduce__(self):
        return (type(self), (str(self), self.mismatches))


class JobFailed(HTCError):
    """The call's job ended without producing a value (it died, was held, or was removed)."""

    def __init__(self, message: str, job_id: str | None = None):
        super().__init__(message)
        self.job_id = job_id

    def __reduce__(self):
        return (type(self), (str(self), self.job_id))


class JobKilled(JobFailed):
    """The job's process was killed by a signal (or exited without writing a result)."""


class JobOutOfMemory(JobFailed):
    """The job used more memory than it requested and was killed."""


class JobHeld(JobFailed):
    """The job was put on hold; it stays in the queue for inspection until released or removed."""

    def __init__(self, message: str, job_id: str | None = None, reason: str = "", code: int | None = None):
        super().__init__(message, job_id)
        self.reason = reason
        self.code = code

    def __reduce__(self):
        return (type(self), (str(self), self.job_id, self.reason, self.code))


class CallTimedOut(JobFailed):
    """The call ran longer than its ``timeout=`` and was stopped on the execute side."""


class JobRemoved(JobFailed):
    """Someone else removed the job from the queue (``htc rm``) before it finished."""


class DependencyFailed(JobFailed):
    """A future passed as an argument failed, so the call that needed its value never ran."""


class ResultExpired(JobFailed):
    """The job finished, but its result was collected or expired from the spool before this attach."""


class ScheddLost(BrokenExecutor, HTCError):
    """The executor lost its schedd (or its local worker); pending futures cannot complete."""
