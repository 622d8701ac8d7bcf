"""The executor's book of calls: every future, what waits for what, and each status change.

Theory of operation
-------------------
:class:`CallBook` holds the executor's calls: every future (``futures``, oldest first), the
*outbox* of calls ready for the backend, the calls *waiting* for their parents and, per
parent, its children, and the removals and evictions asked for since the service thread's
last turn. The caller's threads (``submit``, ``cancel()``) and the executor's one service
thread share it under one lock.

Every status change of a call goes through :func:`htc.executors.status.advance` here
(:meth:`CallBook.apply`), and the future follows with exactly one ``Future`` method per change
of its own state: ``set_running_or_notify_cancel`` when the job starts, ``set_result`` or
``set_exception`` when it ends (a result file is read back by
:func:`htc.executors.results.decode_result`).

Futures among a call's arguments are its *parents*: the call waits (status ``waiting``) until
every parent has a value, then goes to the outbox; a parent that fails fails its children
with :class:`~htc.executors.errors.DependencyFailed` (:meth:`CallBook.resolve_children`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import PENDING, RUNNING
from typing import Any

from htc.executors.backend import Backend, CallSpec, JobUpdate, RecoveredCall
from htc.executors.errors import DependencyFailed, JobFailed, ResultExpired, ScheddLost
from htc.executors.future import HTCFuture
from htc.executors.results import decode_result
from htc.executors.status import CallEvent, CallStatus, advance
from htc.transitions import IllegalTransition

__all__ = ["CallBook"]


def _mark_running(future: Future) -> bool:
    """Move a pending future to running; False when it was cancelled (its canceller notifies)."""
    with future._condition:
        if future._state == PENDING:
            return future.set_running_or_notify_cancel()
        return future._state == RUNNING


def _settle(future: Future, ok: bool, value: Any) -> bool:
    if not _mark_running(future):
        return False
    try:
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
    except InvalidStateError:
        return False
    return True


class CallBook:
    """The calls of one executor and their futures. See the module docstring.

    Args:
        name: the executor's session name (for messages).
        backend: what runs the calls (woken when there is work; told what was collected).
    """

    def __init__(self, name: str, backend: Backend):
        self.name = name
        self.backend = backend
        self.lock = threading.RLock()
        self.by_call: dict[str, HTCFuture] = {}
        #: every future (for a named session: the earlier sessions' too), oldest first
        self.futures: list[HTCFuture] = []
        self.outbox: list[CallSpec] = []
        self.waiting: dict[str, CallSpec] = {}
        self.children: dict[str, list[str]] = {}
        self.removes: list[str] = []
        self.vacates: list[str] = []
        #: calls not finished yet
        self.open = 0
        #: why the executor is broken (None: it is not)
        self.broken: str | None = None

    def register(self, future: HTCFuture) -> None:
        """Keep ``future`` (one new call)."""
        self.by_call[future.call_id] = future
        self.futures.append(future)
        self.open += 1

    def add(self, future: HTCFuture, spec: CallSpec) -> None:
        """A new call: to the outbox, or waiting for its parents, or failed with one.

        Raises:
            ScheddLost: the executor is broken.
        """
        call_id = spec.call_id
        with self.lock:
            if self.broken:
                raise ScheddLost(self.broken)
            self.register(future)
            missing = [p for p in spec.parents if self.by_call[p]._status is not CallStatus.COMPLETED]
            failed_parent = next((self.by_call[p] for p in missing if self.by_call[p]._status.done), None)
            if failed_parent is None and missing:
                self.waiting[call_id] = spec
                for parent in missing:
                    self.children.setdefault(parent, []).append(call_id)
            elif failed_parent is None:
                if spec.parents:  # every parent has its value already: nothing to wait for
                    future._status = advance(call_id, future._status, CallEvent.PARENTS_DONE)
                self.outbox.append(spec)
        if failed_parent is not None:
            self.fail_child(future, failed_parent)
        self.backend.wake()

    def statistics(self) -> dict[str, int]:
        """How many calls are in each status now."""
        counts: dict[str, int] = {}
        with self.lock:
            for future in self.futures:
                counts[future._status.value] = counts.get(future._status.value, 0) + 1
        return counts

    # --- what futures ask ------------------------------------------------------------------------
    def cancelled(self, future: HTCFuture) -> None:
        """``future.cancel()`` just succeeded in the caller's thread."""
        with self.lock:
            if future._status.done:
                return
            submitted = future._status not in (CallStatus.WAITING, CallStatus.SUBMITTING)
            in_outbox = False
            if future._status is CallStatus.SUBMITTING:
                before = len(self.outbox)
                self.outbox = [s for s in self.outbox if s.call_id != future.call_id]
                in_outbox = len(self.outbox) != before
            self.waiting.pop(future.call_id, None)
            if submitted or (future._status is CallStatus.SUBMITTING and not in_outbox):
                self.removes.append(future.call_id)
            future._status = advance(future.call_id, future._status, CallEvent.CANCELLED)
            future.detail = "cancelled"
            self.open -= 1
        future.set_running_or_notify_cancel()  # returns False: wakes wait() and as_completed()
        self.resolve_children(future)
        self.backend.wake()

    def vacate(self, future: HTCFuture) -> None:
        """``future.vacate()``: evict its job if it runs."""
        with self.lock:
            if future._status is CallStatus.RUNNING:
                self.vacates.append(future.call_id)
        self.backend.wake()

    def why(self, future: HTCFuture) -> str:
        """What the call waits for, in words."""
        status = future._status
        if status is CallStatus.WAITING:
            parts = []
            for pid in future.parents:
                parent = self.by_call.get(pid)
                if parent is not None and parent._status is not CallStatus.COMPLETED:
                    job = f" (job {parent.job_id})" if parent.job_id else ""
                    parts.append(f"{parent.label}{job}, {parent._status.value}")
            return "waiting for the calls it depends on: " + "; ".join(parts)
        if status is CallStatus.SUBMITTING:
            return "being submitted: it is in this executor's next batch for the schedd"
        if status.done:
            detail = f" ({future.detail})" if future.detail else ""
            return f"job {future.job_id} is {status.value}{detail}"
        return self.backend.why(future.call_id)

    # --- what the backend reports -------------------------------------------------------------------
    def apply(self, update: JobUpdate) -> None:
        """Move the call's status by ``update`` and make its future follow."""
        with self.lock:
            future = self.by_call.get(update.call_id)
            if future is None or future._status.done:
                return
            try:
                new = advance(future.job_id or future.call_id, future._status, update.event)
            except IllegalTransition as exc:
                print(f"htc executor {self.name}: ignoring an update: {exc}", file=sys.stderr)
                return
            if update.job_id:
                future.job_id = update.job_id
            if update.host:
                future.host = update.host
            if update.evictions is not None:
                future.evictions = update.evictions
            future._status = new
            future.detail = update.detail
            future.history.append((time.time(), new, update.detail))
            if new.done:
                self.open -= 1
        if new is CallStatus.RUNNING:
            _mark_running(future)
        elif new in (CallStatus.COMPLETED, CallStatus.FAILED):
            self._finish(future, update)

    def _finish(self, future: HTCFuture, update: JobUpdate) -> None:
        future._keep_outputs()
        if update.result is not None:
            ok, value, host = decode_result(update.result, future.label, future.job_id or future.call_id)
            future.host = host or future.host
        else:
            ok, value = False, update.error or JobFailed(f"call {future.label} (job {future.job_id}) ended without "
                                                         "a result", future.job_id)
        if not ok:
            future._status = CallStatus.FAILED
        _settle(future, ok, value)
        self.resolve_children(future)
        self.backend.collected([future.call_id])

    def resolve_children(self, parent: HTCFuture) -> None:
        """``parent`` is done: its children with every value go to the outbox, or fail with it."""
        with self.lock:
            children = self.children.pop(parent.call_id, [])
            ready, doomed = [], []
            for child_id in children:
                child = self.by_call[child_id]
                if child._status.done or child_id not in self.waiting:
                    continue
                if parent._status is not CallStatus.COMPLETED:
                    doomed.append(child)
                elif all(self.by_call[p]._status is CallStatus.COMPLETED for p in child.parents):
                    ready.append(child)
            for child in ready:
                child._status = advance(child.call_id, child._status, CallEvent.PARENTS_DONE)
                self.outbox.append(self.waiting.pop(child.call_id))
        for child in doomed:
            self.fail_child(child, parent)
        if ready:
            self.backend.wake()

    def fail_child(self, child: HTCFuture, parent: HTCFuture) -> None:
        """``child`` cannot run: ``parent`` failed or was cancelled."""
        if parent.cancelled():
            what, cause = "was cancelled", None
        else:
            cause = parent.exception() if parent.done() else None
            what = f"failed with {type(cause).__name__}: {cause}" if cause is not None else parent._status.value
        error = DependencyFailed(f"call {child.label} needs the value of {parent.label} (job {parent.job_id}), "
                                 f"which {what}; it was not run", child.job_id)
        error.__cause__ = cause
        with self.lock:
            self.waiting.pop(child.call_id, None)
            if child._status.done:
                return
            child._status = CallStatus.FAILED
            child.detail = f"parent {parent.label} {what.split(':')[0]}"
            self.open -= 1
        _settle(child, False, error)
        self.resolve_children(child)

    def break_all(self, exc: BaseException) -> None:
        """The backend is lost: every unfinished future fails with :class:`ScheddLost`."""
        text = f"executor {self.name!r} lost its backend ({self.backend.kind}): {type(exc).__name__}: {exc}"
        if isinstance(exc, ScheddLost):
            text = str(exc)
        with self.lock:
            self.broken = text
            victims = [f for f in self.futures if not f._status.done]
            for future in victims:
                future._status = CallStatus.FAILED
                future.detail = "the executor broke"
            self.open = 0
        for future in victims:
            error = ScheddLost(text)
            error.__cause__ = exc
            _settle(future, False, error)

    # --- attach ---------------------------------------------------------------------------------
    def recover(self, recovered: list[RecoveredCall], new_future: Callable[[RecoveredCall], HTCFuture]) -> None:
        """Futures for the calls of an earlier session, brought to where their jobs are."""
        waiting: list[tuple[HTCFuture, CallSpec]] = []
        for rc in recovered:
            future = new_future(rc)
            self.register(future)
            if rc.job_id is not None:
                future.job_id = rc.job_id
                future._status = CallStatus.IDLE
                if rc.update is not None and rc.update.event is not CallEvent.SUBMITTED:
                    self.apply(rc.update)
            elif rc.data is not None:
                waiting.append((future, CallSpec(rc.call_id, rc.label, rc.data, rc.options, rc.parents)))
            else:
                self.apply(JobUpdate(rc.call_id, CallEvent.FAILED, error=ResultExpired(
                    f"call {rc.label} of session {self.name!r} cannot be recovered: its call file is gone", None)))
        for future, spec in waiting:
            parents = [self.by_call.get(p) for p in spec.parents]
            lost = [p for p, f in zip(spec.parents, parents) if f is None]
            if lost:
                self.apply(JobUpdate(spec.call_id, CallEvent.FAILED, error=ResultExpired(
                    f"call {spec.label} waits for {', '.join(lost)}, whose results were collected or expired", None)))
                continue
            self.waiting[spec.call_id] = spec
            for parent in parents:
                self.children.setdefault(parent.call_id, []).append(spec.call_id)
        for future, _ in waiting:
            for pid in future.parents:
                parent = self.by_call.get(pid)
                if parent is not None and parent._status.done:
                    self.children.setdefault(pid, [])
                    self.resolve_children(parent)
