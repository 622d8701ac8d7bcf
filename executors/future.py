"""``HTCFuture``: a ``concurrent.futures.Future`` that also shows its job.

It is a real :class:`concurrent.futures.Future` (``wait``, ``as_completed``, callbacks,
``result(timeout)`` all behave as documented); on top of that it knows the job that runs the
call: ``job_id``, ``status`` (finer than the future's state, see
:mod:`htc.executors.status`), ``evictions``, ``stdout``/``stderr``, the job's ClassAd,
``why()`` it waits, and ``vacate()`` to evict it on purpose.
"""

from __future__ import annotations

import os

import time
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures._base import CANCELLED, PENDING
from typing import TYPE_CHECKING, Any

from htc.executors.status import CallStatus

if TYPE_CHECKING:
    from htc.executors.executor import HTCExecutor

__all__ = ["HTCFuture"]

#: outputs up to this size are kept in the future when the call ends
_KEEP_OUTPUT = 1 << 20


class HTCFuture(Future):
    """The future of one call. Made by :meth:`HTCExecutor.submit`, never by hand."""

    def __init__(self, executor: HTCExecutor, call_id: str, label: str, parents: tuple[str, ...] = ()):
        super().__init__()
        self._executor = executor
        #: the call's id within its session (names its directory in the spool)
        self.call_id = call_id
        #: ``module.qualname`` of the function
        self.label = label
        #: call ids of the futures this call waits for
        self.parents = parents
        #: ``"cluster.proc"`` once the job is in the queue (None while waiting or submitting)
        self.job_id: str | None = None
        self._status = CallStatus.WAITING if parents else CallStatus.SUBMITTING
        #: words about the status: a hold reason, a retry, an eviction
        self.detail = ""
        #: how many times the job was evicted (it keeps running after each, from its checkpoint)
        self.evictions = 0
        #: where the job runs or ran
        self.host = ""
        #: every status the call went through: (time.time(), status, detail)
        self.history: list[tuple[float, CallStatus, str]] = [(time.time(), self._status, "")]
        self._outputs: dict[str, str] = {}

    def __repr__(self) -> str:
        job = f" job {self.job_id}" if self.job_id else ""
        extra = f" evictions={self.evictions}" if self.evictions else ""
        return f"<HTCFuture {self.label}{job} {self._status.value}{extra} at {id(self):#x}>"

    @property
    def status(self) -> CallStatus:
        """What the call is doing now (``idle``, ``running``, ``evicted``, ``retrying``, ...)."""
        return self._status

    def cancel(self) -> bool:
        """Cancel the call and remove its job, unless it already runs or ran.

        Returns:
            True when the call is (now) cancelled; False when it is running or done, as for
            every ``concurrent.futures.Future``.
        """
        with self._condition:
            if self._state != PENDING:
                return super().cancel()  # False when running or done, True when already cancelled
            # Only the thread that moves the future out of PENDING tells the executor, so the
            # job is removed and waiters are notified exactly once.
            self._state = CANCELLED
            self._condition.notify_all()
        self._invoke_callbacks()
        self._executor._cancelled(self)
        return True

    # --- output ------------------------------------------------------------------------------
    def _output(self, stream: str) -> str:
        if stream in self._outputs:
            return self._outputs[stream]
        path = self._executor._output_path(self, stream)
        try:
            return path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _keep_outputs(self) -> None:
        """Read small outputs into the future (the executor calls this when the call ends).
        A call that printed nothing usually has no file: one failed ``open`` says so."""
        for stream in ("stdout", "stderr"):
            try:
                fd = os.open(self._executor._output_path(self, stream), os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._outputs[stream] = ""
                continue
            try:
                size = os.fstat(fd).st_size
                if size <= _KEEP_OUTPUT:
                    with open(fd, errors="replace", closefd=False) as f:  # as Path.read_text reads
                        self._outputs[stream] = f.read()
            except OSError:
                self._outputs[stream] = ""
            finally:
                os.close(fd)

    @property
    def stdout(self) -> str:
        """What the call printed to standard output so far (all of it once it is done)."""
        return self._output("stdout")

    @property
    def stderr(self) -> str:
        """What the call printed to standard error so far (all of it once it is done)."""
        return self._output("stderr")

    def stream(self, stream: str = "stdout", *, interval: float = 0.1) -> Iterator[str]:
        """Lines of the call's output as they are written, until the call ends.

        Live output needs ``stream_output=True`` in the call's options on the pool backend
        (the local backend always writes live); otherwise the lines arrive when the job ends.
        When an evicted call runs again its output starts over, and so do the lines (from
        the new run's first line, once the file is seen shorter than before).

        Args:
            stream: ``"stdout"`` or ``"stderr"``.
            interval: seconds between looks at the file.

        Yields:
            Each line, with its newline.
        """
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"stream={stream!r}; use 'stdout' or 'stderr'")
        offset = 0
        pending = ""
        while True:
            finished = self.done()
            text = self._output(stream)
            if len(text) < offset:  # the file started again: a new run after an eviction
                offset = 0
            chunk, offset = text[offset:], len(text)
            pending += chunk
            *lines, pending = pending.split("\n")
            for line in lines:
                yield line + "\n"
            if finished:
                if pending:
                    yield pending
                return
            time.sleep(interval)

    # --- the job -------------------------------------------------------------------------------
    def classad(self) -> Any:
        """The job's ClassAd (from the queue, or the history once it has left).

        Returns:
            An :class:`htc.classad.ClassAd`.

        Raises:
            SessionError: the call has no job yet (it waits for its parents).
        """
        return self._executor._job_ad(self)

    def why(self) -> str:
        """Why the call is not running: its parents, its place in the queue, a hold, or the
        slots that do not match (``htc q -better-analyze``).

        Returns:
            A few lines of text.
        """
        return self._executor._why(self)

    def vacate(self) -> None:
        """Evict the running job: it saves its checkpoint and goes back to idle, to run again
        (on another slot if one is free); ``status`` shows ``evicted``, ``evictions`` counts."""
        self._executor._vacate(self)
