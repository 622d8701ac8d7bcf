"""``HTCExecutor``: a ``concurrent.futures.Executor`` whose every call is a job.

Theory of operation
-------------------
``submit(fn, *args, **kwargs)`` does the caller's share of the work in the caller's thread, so
that mistakes surface where they are made: it checks the options against what the pool could
ever offer (:class:`ImpossibleRequest`), pickles the call (:class:`SerializationError` naming
the culprit), records the Python and package versions the pickle needs, and returns an
:class:`~htc.executors.future.HTCFuture`. The call then waits in an *outbox*.

One service thread per executor owns everything after that. Each turn it

1. takes the outbox, up to ``_SUBMIT_BATCH_MOST`` calls, and hands them to the backend in one
   ``submit_calls`` (a schedd stores each cluster in one transaction: pipelined submission,
   many calls per commit; a burst goes in several, so a lane starts on the first while the
   rest travel);
2. passes on removals (``cancel()``), evictions (``vacate()``);
3. waits in ``backend.poll`` for job changes and applies each to its future through the
   status table of :mod:`htc.executors.status`, calling exactly one ``Future`` method per
   change of the future's own state (the book of calls, :mod:`htc.executors.calls`).

Futures among a call's arguments are its *parents*: the pickler replaces each by its call id,
the call waits (status ``waiting``) until every parent has a value, and is then submitted
with the parents' result files as input; the worker puts each value where its future was.
A parent that fails fails its children with :class:`DependencyFailed`.

Cancellation follows the standard rules: ``cancel()`` succeeds only while the call has not
started, and then removes its job; the canceller's thread notifies ``wait``/``as_completed``
(through ``set_running_or_notify_cancel``), and the service thread never touches a cancelled
future again.

Sessions: every executor has a session directory (:mod:`htc.executors.spool`); an unnamed
one is deleted at shutdown, a named one (``name="sweep1"``) keeps its journal and results so
that ``HTCExecutor(name="sweep1")`` or :func:`attach` in a later process gets the futures
back (``executor.futures``).

At interpreter exit an unnamed executor waits for its calls, as the standard executors do
(a second Ctrl-C removes them instead); a named one detaches and leaves its jobs running.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from concurrent.futures._base import PENDING
from pathlib import Path
from typing import Any

from htc.errors import HTCError
from htc.executors.backend import Backend, CallSpec, JobUpdate, RecoveredCall, make_backend
from htc.executors.calls import CallBook
from htc.executors.errors import ScheddLost, SerializationError, SessionError
from htc.executors.future import HTCFuture
from htc.executors.options import CallOptions
from htc.executors.progress import ProgressBar, enabled
from htc.executors.serialize import dumps_call, python_version
from htc.executors.spool import Spool, options_to_json
from htc.executors.status import CallEvent
from htc.wire import callfile as cf

__all__ = ["HTCExecutor", "attach"]

_live: weakref.WeakSet[HTCExecutor] = weakref.WeakSet()
_exiting = False
_names = itertools.count(1)
#: seconds the service thread waits in poll when it has nothing else to do
_IDLE_POLL = 1.0
#: calls sent to the schedd in one submission at the most. A burst's calls pile up while the
#: first submission travels; sent as one batch of hundreds, none runs until the schedd has
#: stored them all (over 0.1 s for 700 calls), and only then does a lane start on them. In
#: batches of this size the lane starts on the first while the rest are sent.
_SUBMIT_BATCH_MOST = 128
#: result lifetime of named sessions: a week
_WEEK = 7 * 24 * 3600.0


def _python_exit() -> None:
    global _exiting
    _exiting = True
    for executor in list(_live):
        executor._at_exit()


try:
    threading._register_atexit(_python_exit)  # type: ignore[attr-defined]  # as concurrent.futures does
except (AttributeError, RuntimeError):  # pragma: no cover - interpreters without the hook
    import atexit

    atexit.register(_python_exit)


def _label(fn: Callable) -> str:
    import functools

    if isinstance(fn, functools.partial):
        return f"partial({_label(fn.func)})"
    name = getattr(fn, "__qualname__", None)
    module = getattr(fn, "__module__", None)
    if name is None:
        name, module = type(fn).__qualname__, type(fn).__module__
    return f"{module}.{name}" if module and module != "builtins" else str(name)


class _OptionsView:
    """``executor.options(...)``: submit and map with these options (chain more with ``options``)."""

    def __init__(self, executor: HTCExecutor, options: CallOptions):
        self._executor = executor
        self._options = options

    def __repr__(self) -> str:
        return f"<options of {self._executor!r}: {self._options}>"

    def options(self, **changes: Any) -> _OptionsView:
        """These options with ``changes`` on top (checked at once).

        Raises:
            OptionError: an unknown option or a bad value.
        """
        return _OptionsView(self._executor, self._options.merge(**changes))

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any) -> HTCFuture:
        """As :meth:`HTCExecutor.submit`, with these options."""
        return self._executor._submit(fn, args, kwargs, self._options)

    def map(self, fn: Callable, *iterables: Iterable, timeout: float | None = None,
            chunksize: int = 1) -> Iterator[Any]:
        """As :meth:`HTCExecutor.map`, with these options."""
        return self._executor._map(fn, iterables, timeout, chunksize, self._options)


class HTCExecutor(Executor):
    """A ``concurrent.futures.Executor`` that runs every call as a job.

    Args:
        pool: where the schedd is: None for the personal pool under ``$HTC_HOME`` (started
            if it is not running, and left running afterwards), a pool's home directory, a
            :class:`~htc.wire.transport.Transport`, or ``"HOST[:PORT]"`` of the central manager
            of a pool on another machine (as the tools' ``-pool``; calls, results and events
            then travel over SSH with the user's token: :mod:`htc.executors.remote`).
        name: a session name; the session's jobs and results outlive this process, and
            ``HTCExecutor(name=...)`` or :func:`attach` later gives back its futures.
        backend: ``"pool"`` (default), ``"local"`` (processes on this machine, no pool), or
            an object implementing :class:`~htc.executors.backend.Backend`.
        schedd: the schedd's name in a pool on another machine (the tools' ``-name``; None:
            the pool's only schedd).
        progress: progress bars for ``map`` (None: when stderr is a terminal).
        result_lifetime: seconds a named session keeps a result nobody collected (a week).
        **defaults: call options for every call (see :class:`~htc.executors.options.CallOptions`:
            ``request_cpus``, ``request_memory``, ``requirements``, ``priority``,
            ``max_retries``, ``checkpoint`` (True, or ``"transparent"``), ``timeout``,
            ``transfer_input_files``, ``serializer``, ...); ``options(...)`` overrides them per call.

    Raises:
        OptionError: an unknown option or a bad value.
        SessionError: ``name`` is in use by another live executor.
        ScheddLost: the pool could not be started or reached.
    """

    def __init__(self, pool: Any = None, *, name: str | None = None, backend: Backend | str | None = None,
                 schedd: str | None = None, progress: bool | None = None, result_lifetime: float = _WEEK, _attach: bool = False,
                 **defaults: Any):
        self._defaults = CallOptions().merge(**defaults)
        self._progress = progress
        self._named = name is not None
        self.name = name if name is not None else \
            f"anon-{socket.gethostname()}-{os.getpid()}-{next(_names)}-{secrets.token_hex(3)}"
        self._backend = make_backend(backend, pool, schedd)
        self._spool = Spool(self.name)
        if _attach and not self._spool.exists():
            raise SessionError(f"there is no executor session {self.name!r} to attach to; "
                               "htc.executors.sessions() lists them")
        self._spool.lock()
        try:
            self._spool.create({"backend": self._backend.kind, "named": self._named, "pid": os.getpid(),
                                "pool": None if pool is None else str(pool), "schedd": schedd})
            if self._named:
                self._spool.expire(result_lifetime)
            self._backend.open(self._spool, named=self._named, create=not _attach)
        except BaseException:
            if self._named:
                self._spool.unlock()
            else:
                self._spool.remove()
            raise
        self._calls = CallBook(self.name, self._backend)
        self._lock = self._calls.lock
        #: every future of this executor (for a named session: the earlier sessions' too), oldest first
        self.futures: list[HTCFuture] = self._calls.futures
        self._journal_lock = threading.Lock()
        self._checked: dict[int, CallOptions] = {}
        self._shutdown = False
        self._detached = False
        self._stop = False
        self._token = secrets.token_hex(3)
        self._ids = itertools.count(1)
        self._calls.recover(self._backend.recover(), self._recovered_future)
        self._thread = threading.Thread(target=self._serve, name=f"htc-executor-{self.name}", daemon=True)
        self._thread.start()
        _live.add(self)

    def __repr__(self) -> str:
        state = "broken" if self._calls.broken else "shut down" if self._shutdown else "running"
        return f"<HTCExecutor {self.name!r} {self._backend.kind} {state}, {self._calls.open} open calls>"

    # --- the public API ------------------------------------------------------------------------
    def options(self, **changes: Any) -> _OptionsView:
        """Submit and map with other options: ``executor.options(request_cpus=2).submit(fn, x)``.

        Args:
            **changes: call options overriding the executor's defaults.

        Returns:
            An object with ``submit``, ``map`` and ``options``.

        Raises:
            OptionError: an unknown option or a bad value.
        """
        return _OptionsView(self, self._defaults.merge(**changes))

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any) -> HTCFuture:
        """Run ``fn(*args, **kwargs)`` as a job.

        Futures of this executor among the arguments (at any depth) are dependencies: the job
        runs once they have values, and gets those values in their place.

        Returns:
            An :class:`HTCFuture`.

        Raises:
            RuntimeError: the executor was shut down.
            ScheddLost: the executor lost its schedd (a ``BrokenExecutor``).
            SerializationError: something could not be pickled (the message names it).
            ImpossibleRequest: no slot could ever run the call.
        """
        return self._submit(fn, args, kwargs, self._defaults)

    def map(self, fn: Callable, *iterables: Iterable, timeout: float | None = None,
            chunksize: int = 1) -> Iterator[Any]:
        """``map(fn, *iterables)`` with every call (or chunk of calls) a job.

        Args:
            fn, *iterables: as for the builtin ``map``; the iterables are read at once.
            timeout: seconds from this call after which the iterator raises ``TimeoutError``.
            chunksize: calls per job (bigger chunks for short calls).

        Returns:
            An iterator of the results in order; it raises the first exception met, and
            cancels the calls left when it is closed early. A progress bar follows it on a
            terminal.

        Raises:
            ValueError: ``chunksize`` < 1.
            RuntimeError, ScheddLost, SerializationError, ImpossibleRequest: as for :meth:`submit`.
        """
        return self._map(fn, iterables, timeout, chunksize, self._defaults)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking calls; standard semantics.

        Args:
            wait: block until every call has finished and the executor's resources are
                released. ``wait=False`` on a named executor detaches at once: its jobs keep
                running, the session is released for a later :func:`attach` (which gives
                fresh futures), and this executor's unfinished futures no longer change.
            cancel_futures: cancel (and remove the jobs of) every call that has not started.
        """
        with self._lock:
            self._shutdown = True
            pending = [f for f in self.futures if f._state == PENDING] if cancel_futures else []
        for future in pending:
            future.cancel()
        if not wait and self._named:
            self._detach()
            return
        self._backend.wake()
        if wait and threading.current_thread() is not self._thread:
            self._thread.join()

    def _detach(self) -> None:
        """Stop following the session's jobs and release it; the jobs run on for a later attach.

        The futures of calls not finished stay as they are (they no longer change): attach
        to the session for fresh ones.
        """
        with self._lock:
            self._detached = True
            self._stop = True
        self._backend.wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)

    def statistics(self) -> dict[str, int]:
        """How many calls are in each status now."""
        return self._calls.statistics()

    # --- submitting ------------------------------------------------------------------------------
    def _persistent_id(self, obj: Any) -> str | None:
        if isinstance(obj, HTCFuture):
            if obj._executor is not self:
                raise SerializationError(f"{obj!r} belongs to another executor ({obj._executor.name!r}); a call "
                                         "can only depend on futures of its own executor -- pass future.result()")
            return obj.call_id
        if isinstance(obj, Future):
            raise SerializationError(f"{obj!r} is a future of another kind of executor; pass future.result() "
                                     "instead, or submit that call to this executor")
        return None

    def _check(self, options: CallOptions) -> None:
        if id(options) in self._checked:
            return
        self._backend.check_request(options)
        self._checked[id(options)] = options  # keeps the object alive, so its id stays its own

    def _submit(self, fn: Callable, args: tuple, kwargs: dict, options: CallOptions, chunked: bool = False) -> HTCFuture:
        if not callable(fn):
            raise TypeError(f"{fn!r} is not callable")
        with self._lock:
            if self._calls.broken:
                raise ScheddLost(self._calls.broken)
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if _exiting:
                raise RuntimeError("cannot schedule new futures after interpreter shutdown")
        self._check(options)
        call_id = f"{self._token}-{next(self._ids)}"
        label = _label(fn)
        pickled = dumps_call(fn, args, kwargs, serializer=options.serializer, persistent=self._persistent_id)
        header = cf.CallHeader(call_id=call_id, function=label, serializer=options.serializer, python=python_version(),
                               packages=pickled.packages, parents=pickled.parents,
                               check_versions=options.check_versions, timeout=options.timeout, chunked=chunked)
        spec = CallSpec(call_id, label, cf.pack_call(header, pickled.payload), options, pickled.parents)
        future = HTCFuture(self, call_id, label, pickled.parents)
        if self._named:
            # A named session's call is on disk before submit returns: a client killed right
            # after still leaves it to a later attach (a waiting call needs its call file too).
            with self._journal_lock:
                if spec.parents:
                    self._spool.prepare(call_id, spec.data, (), options)
                self._spool.record([{"op": "call", "id": call_id, "label": label, "parents": list(spec.parents),
                                     "options": options_to_json(options)}])
        self._calls.add(future, spec)
        return future

    def _map(self, fn: Callable, iterables: tuple, timeout: float | None, chunksize: int,
             options: CallOptions) -> Iterator[Any]:
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        end_time = None if timeout is None else timeout + time.monotonic()
        if chunksize == 1:
            fs = [self._submit(fn, args, {}, options) for args in zip(*iterables)]
        else:
            it = zip(*iterables)
            chunks = iter(lambda: list(itertools.islice(it, chunksize)), [])
            fs = [self._submit(fn, (chunk,), {}, options, chunked=True) for chunk in chunks]
        bar = ProgressBar(fs, _label(fn), enabled(self._progress))

        def result_iterator() -> Iterator[Any]:
            with bar:
                try:
                    fs.reverse()
                    while fs:
                        future = fs.pop()
                        try:
                            value = future.result() if end_time is None else \
                                future.result(end_time - time.monotonic())
                        except BaseException:
                            future.cancel()
                            raise
                        finally:
                            del future
                        if chunksize == 1:
                            yield value
                        else:
                            yield from value
                finally:
                    for future in fs:
                        future.cancel()

        return result_iterator()

    # --- what futures ask of the executor ----------------------------------------------------------
    def _cancelled(self, future: HTCFuture) -> None:
        """``future.cancel()`` just succeeded in the caller's thread."""
        self._calls.cancelled(future)

    def _vacate(self, future: HTCFuture) -> None:
        self._calls.vacate(future)

    def _output_path(self, future: HTCFuture, stream: str) -> Path:
        return self._backend.output(future.call_id, stream)

    def _job_ad(self, future: HTCFuture) -> Any:
        if future.job_id is None:
            raise SessionError(f"call {future.label} has no job yet ({future._status.value}); "
                               "future.why() says what it waits for")
        return self._backend.job_ad(future.call_id)

    def _why(self, future: HTCFuture) -> str:
        return self._calls.why(future)

    # --- the service thread ---------------------------------------------------------------------------
    def _serve(self) -> None:
        backend, calls = self._backend, self._calls
        try:
            while True:
                with self._lock:
                    batch = calls.outbox[:_SUBMIT_BATCH_MOST]
                    del calls.outbox[:_SUBMIT_BATCH_MOST]
                    removes, calls.removes = calls.removes, []
                    vacates, calls.vacates = calls.vacates, []
                    stop = self._stop or (self._shutdown and calls.open == 0 and not batch)
                if batch:
                    self._submit_batch(batch)
                if removes:
                    backend.remove(removes, "cancelled by the executor")
                if vacates:
                    backend.vacate(vacates)
                if stop:
                    break
                for update in backend.poll(0.0 if calls.outbox else _IDLE_POLL):
                    calls.apply(update)
        except BaseException as exc:  # noqa: BLE001 - the executor is broken; every future must hear it
            calls.break_all(exc)
        finally:
            self._close_backend()

    def _submit_batch(self, batch: list[CallSpec]) -> None:
        try:
            job_ids = self._backend.submit_calls(batch)
        except ScheddLost:
            raise
        except HTCError as exc:  # the schedd refused these calls: they fail, the executor goes on
            for spec in batch:
                self._calls.apply(JobUpdate(spec.call_id, CallEvent.FAILED, error=exc))
            return
        for spec, job_id in zip(batch, job_ids):
            self._calls.apply(JobUpdate(spec.call_id, CallEvent.SUBMITTED, job_id))

    def _close_backend(self) -> None:
        try:
            self._backend.close(detach=self._named)
        finally:
            if self._named:
                self._spool.unlock()
            else:
                self._spool.remove()
            _live.discard(self)

    def _at_exit(self) -> None:
        if self._named or self._calls.broken:
            self._detach()
            return
        try:
            self.shutdown(wait=True)
        except KeyboardInterrupt:
            with self._lock:
                self._calls.removes.extend(f.call_id for f in self.futures if not f._status.done)
                self._stop = True
            self._backend.wake()
            self._thread.join(timeout=10)

    def _recovered_future(self, rc: RecoveredCall) -> HTCFuture:
        return HTCFuture(self, rc.call_id, rc.label, rc.parents)


def attach(name: str, pool: Any = None, *, backend: Backend | str | None = None, schedd: str | None = None,
           progress: bool | None = None, **defaults: Any) -> HTCExecutor:
    """The executor of an earlier named session, with its futures in ``executor.futures``.

    Args:
        name: the session's name (``HTCExecutor(name=...)`` made it).
        pool, backend, schedd, progress, **defaults: as for :class:`HTCExecutor`.

    Returns:
        The executor; futures of calls that finished meanwhile are already done.

    Raises:
        SessionError: no such session, or another live executor holds it.
    """
    return HTCExecutor(pool, name=name, backend=backend, schedd=schedd, progress=progress, _attach=True, **defaults)

