"""The backend seam: what the executor needs from whatever runs its calls.

:class:`~htc.executors.HTCExecutor` keeps the ``concurrent.futures`` contract (futures,
statuses, dependencies, progress, cancellation) and hands the running of calls to a
*backend*. Two ship with htc:

* ``"pool"`` (:class:`~htc.executors.pool.PoolBackend`, the default): every call is a job in
  an htc pool's schedd -- durable, fair-shared, checkpointable, visible to ``htc q``;
* ``"local"`` (:class:`~htc.executors.local.LocalProcessBackend`): calls run as processes on
  this machine, forked from a pre-imported zygote, without any daemon -- for a laptop without
  a pool, for CI, and for debugging a function before sending it to the pool. It keeps the
  options that make sense on one machine (cpus, memory, requirements against this machine,
  priority, retries, timeouts, checkpoints and eviction) but nothing outlives the client, so
  named sessions and ``attach`` need a pool.

A third backend (an HTCondor schedd through the ``htcondor2`` bindings, say) implements
:class:`Backend` and is passed as ``HTCExecutor(backend=MyBackend(...))``; htc has none yet.

Theory of operation
-------------------
All backend methods are called from the executor's one service thread, never concurrently,
so a backend needs no locks of its own except for what :meth:`Backend.wake` touches.
The thread's loop is::

    submit_calls(batch)         # everything submitted since the last turn, in one go
    remove / vacate / release   # what cancel(), vacate() and retries asked for
    updates = poll(timeout)     # blocks until something happens, wake() or timeout
    ... apply each JobUpdate to its future (see htc.executors.status) ...

A :class:`JobUpdate` carries one :class:`~htc.executors.status.CallEvent`. When a call has
ended with a result file (the function returned, raised, or could not run) the update carries
the file's bytes; when it ended without one (a signal, the memory limit, a hold, a removal by
someone else) it carries the :class:`~htc.executors.errors.JobFailed` to raise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from htc.errors import UsageError
from htc.executors.options import CallOptions
from htc.executors.spool import Spool
from htc.executors.status import CallEvent

__all__ = ["Backend", "CallSpec", "JobUpdate", "RecoveredCall", "make_backend"]


@dataclass
class CallSpec:
    """One call, ready for a backend."""

    call_id: str
    #: ``module.qualname`` of the function, for displays
    label: str
    #: the call file's bytes (:mod:`htc.wire.callfile`)
    data: bytes
    options: CallOptions
    #: call ids whose results the call needs (already finished when the call is submitted)
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobUpdate:
    """Something that happened to a call's job."""

    call_id: str
    event: CallEvent
    job_id: str | None = None
    #: human words for the status (a hold or eviction reason, the retry being made)
    detail: str = ""
    #: the result file, when the call ended with one
    result: bytes | None = None
    #: the exception, when it ended without a result file
    error: BaseException | None = None
    #: how many times the job has been evicted so far (None: unchanged)
    evictions: int | None = None
    #: where it runs or ran
    host: str = ""


@dataclass(frozen=True)
class RecoveredCall:
    """A call of an earlier session, as the backend finds it again (for ``attach``)."""

    call_id: str
    label: str
    job_id: str | None
    parents: tuple[str, ...]
    options: CallOptions
    #: the call's last known state: an update to apply to a fresh future (None: still waiting
    #: for its parents, never submitted)
    update: JobUpdate | None
    data: bytes | None = None


@runtime_checkable
class Backend(Protocol):
    """What runs an executor's calls. See the module docstring."""

    #: ``"pool"``, ``"local"``, ...
    kind: str

    def open(self, spool: Spool, *, named: bool, create: bool) -> None:
        """Start (or reconnect to) the session whose directory is ``spool`` (the executor has
        created and locked it; the backend keeps call directories there).

        Raises:
            SessionError: ``create`` is False and there is no such session, or it is in use.
            ScheddLost: the pool (or the local worker) cannot be reached.
        """

    def check_request(self, options: CallOptions) -> None:
        """Refuse at once a request no slot could ever satisfy.

        Raises:
            ImpossibleRequest: naming what is too big or never true, and the largest slot.
        """

    def submit_calls(self, calls: Sequence[CallSpec]) -> list[str]:
        """Queue ``calls`` (as few transactions as their options allow).

        Returns:
            Each call's job id, in order.

        Raises:
            ScheddLost: the schedd cannot be reached.
        """

    def poll(self, timeout: float) -> list[JobUpdate]:
        """Block up to ``timeout`` seconds (less after :meth:`wake`) and return what changed."""

    def wake(self) -> None:
        """Make a blocked :meth:`poll` return soon (called from any thread)."""

    def remove(self, call_ids: Sequence[str], reason: str) -> None:
        """Remove the calls' jobs (killing them if they run)."""

    def vacate(self, call_ids: Sequence[str]) -> None:
        """Evict the calls' running jobs (they checkpoint and go back to idle)."""

    def output(self, call_id: str, stream: str) -> Path:
        """Where the call's ``stdout`` or ``stderr`` is (or will be) on this machine."""

    def job_ad(self, call_id: str) -> Any:
        """The call's job :class:`htc.classad.ClassAd` (from the queue, else the history)."""

    def why(self, call_id: str) -> str:
        """Why the call's job is idle or held, in words (``htc q -better-analyze``)."""

    def recover(self) -> list[RecoveredCall]:
        """Every call of the opened session still known (for ``attach``)."""

    def collected(self, call_ids: Sequence[str]) -> None:
        """The calls' results are in their futures; the backend may forget them."""

    def close(self, *, detach: bool) -> None:
        """Release the backend's resources; ``detach`` leaves queued jobs to a later attach."""


def make_backend(backend: Backend | str | None, pool: Any, schedd: str | None = None) -> Backend:
    """The backend ``HTCExecutor(pool, backend=...)`` asks for.

    Args:
        backend: None or ``"pool"`` (a :class:`~htc.executors.pool.PoolBackend` of ``pool``),
            ``"local"``, or an object implementing :class:`Backend`.
        pool: where the schedd is (``"local"`` takes none): None, a pool's home directory, a
            Transport, or ``HOST[:PORT]`` of another machine's central manager.
        schedd: the schedd's name in a pool on another machine (None: its only schedd).

    Raises:
        UsageError: an unknown name, a pool given to ``"local"``, or an object that is no backend.
    """
    if backend is None or backend == "pool":
        from htc.executors.remote import RemoteBackend, is_remote_pool

        if is_remote_pool(pool):
            return RemoteBackend(pool, schedd=schedd)
        if schedd is not None:
            raise UsageError(f"schedd={schedd!r} names a schedd of a pool on another machine; give that pool as "
                             "pool='HOST[:PORT]' of its central manager")
        from htc.executors.pool import PoolBackend

        return PoolBackend(pool)
    if backend == "local":
        if pool is not None or schedd is not None:
            raise UsageError("backend='local' runs calls on this machine and takes no pool address; "
                             "drop pool= or use the default pool backend")
        from htc.executors.local import LocalProcessBackend

        return LocalProcessBackend()
    if isinstance(backend, str):
        raise UsageError(f"backend={backend!r} is not known; use 'pool' (default), 'local', or a Backend object")
    if not isinstance(backend, Backend):
        raise UsageError(f"backend={backend!r} does not implement htc.executors.Backend "
                         "(open, check_request, submit_calls, poll, wake, remove, vacate, ...)")
    return backend
