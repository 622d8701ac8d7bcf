"""The startd's side of a call lane: calls in over the lane's socket, results out as CallsDone.

Theory of operation
-------------------
A *call lane* is a function-call worker (:mod:`htc.executors.lane`) that a claim runs as its
job (ActivateClaim with ``lane=True``) and that stays up, running the calls the schedd sends
with RunCalls one after another. Its starter gives it one end of a socket pair as fd 0 (see
:mod:`htc.wire.lane_frames` for the frames); :class:`LaneRelay` holds the other:

* :meth:`LaneRelay.queue` (RunCalls, checked by the wire adapter) writes the calls' frames to
  the socket at once (one write), in order, and notes their job ids; calls that come before the
  starter has spawned the lane wait in the relay and are written by :meth:`LaneRelay.attach`. Writing
  everything at once means the lane reads its next call without a round trip through the
  startd; the socket (and the event loop's write buffer) hold what it has not read yet.
* The socket's protocol (:class:`_Channel`, called by the event loop as bytes arrive: no task
  to wake per result) decodes each result frame (typed msgpack: the startd never unpickles what
  the slot user's process sends) into a :class:`~htc.wire.messages.LaneResult` for the oldest
  outstanding job id. A frame that does not decode, or that has no call to belong to, is a
  broken lane: the relay closes the socket, the lane reads end-of-file and exits.
* A sender task sends every result that is ready as one CallsDone (``send``: the service's, to
  the shadow address of the activation), in the order the calls ran, one CallsDone at a time
  (the shadow's answer, MoreCalls, brings the lane's next calls, which ``send`` queues):
  results that finish while one is on its way go in the next. While the lane has a call
  queued behind the one it runs, so that it cannot run dry, a ready result also waits up to
  :data:`GATHER` for the next ones (one CallsDone costs the shadow a transaction, a log write
  and a message each way, whatever it carries), but no longer than it takes the ready
  results to be as many as the calls still queued: the shadow's answer then comes while the
  lane runs the rest. With nothing queued it goes at once.
  A transient failure is retried (every :data:`RETRY` seconds) with whatever is ready by then;
  a refusal drops that batch (logged) and goes on.
* :meth:`LaneRelay.finish`, after the lane's process has ended and before the service reports
  JobExited, reads the rest, sends every result and stops, giving up (logged) after
  ``deadline`` seconds; calls queued that never produced a result are logged -- the schedd
  learns of them from the JobExited, which ends every call still outstanding.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Iterable

import msgspec

from htc.daemons.clock import REAL, Clock
from htc.wire.callfile import CallFileError, call_file_in
from htc.wire.lane_frames import HEADER, MAX_FRAME, CallFrame, ResultFrame, frame, plain_name
from htc.wire import messages as m
from htc.wire.messages.schema import built_here

__all__ = ["BATCH_BYTES", "LaneRelay", "RETRY", "lane_result", "refused_call"]

#: seconds between attempts to deliver a CallsDone the shadow did not take
RETRY = 0.5
#: seconds a result may wait for others while its lane has a call queued (see LaneRelay._gather)
GATHER = 0.25
#: the most result bytes one CallsDone carries (more go in the next one)
BATCH_BYTES = 16 * 1024 * 1024

_MAX_SECONDS = 1e12  # (htc.wire.messages.Seconds; NaN fails the comparison too)
_MIN_INT = -m.INT64_MAX - 1

#: ``send(results)`` -> True (acknowledged), False (try again later), None (refused: drop them)
Send = Callable[[tuple[m.LaneResult, ...]], Awaitable[bool | None]]


def refused_call(calls: Iterable[m.LaneCall]) -> str | None:
    """Why these calls cannot go to a lane (None: they can): names that are not plain file
    names, no call file, or more input than a lane call may carry."""
    for call in calls:
        bad = [name for name in call.files if not plain_name(name)]
        size = sum(map(len, call.files.values()))
        why = f"file names must be plain names (no '/', not '.' or '..'): {bad}" if bad else None
        if why is None:
            try:
                call_file_in(call.files, "the call")
            except CallFileError as exc:
                why = str(exc)
        if why is None and size > m.MAX_LANE_CALL_BYTES:
            why = f"it carries {size} bytes, more than {m.MAX_LANE_CALL_BYTES}"
        if why:
            return f"call {call.job_id} refused: {why}"
    return None


def lane_result(job_id: str, r: ResultFrame) -> m.LaneResult:
    """The LaneResult of a lane's ResultFrame for ``job_id`` (one of the relay's own, checked on
    receipt), times below zero taken as zero.

    The frame was decoded into its types already; what LaneResult adds (times finite and at most
    1e12, an exit code of 64 bits, no empty file name) is checked here in a few comparisons, and
    then the record is built without :func:`~htc.wire.messages.schema.validate`'s conversion,
    which copies every byte of the files (twice, through base64). A frame that fails them is
    built the checked way, which says what is wrong.
    """
    times = (max(r.started, 0.0), max(r.finished, 0.0), max(r.user_cpu, 0.0), max(r.sys_cpu, 0.0))
    fields = dict(job_id=job_id, exit_code=r.exit_code, files=r.files, stdout=r.stdout, stderr=r.stderr,
                  started=times[0], finished=times[1], user_cpu=times[2], sys_cpu=times[3])
    if all(map(_MAX_SECONDS.__ge__, times)) and _MIN_INT <= r.exit_code <= m.INT64_MAX and "" not in r.files:
        with built_here():
            return m.LaneResult(**fields)
    return m.LaneResult(**fields)  # (raises MessageInvalid naming the field)


class _Channel(asyncio.Protocol):
    """The relay's end of the lane's socket: bytes in go straight to :meth:`LaneRelay._received`."""

    def __init__(self, relay: LaneRelay):
        self.relay = relay

    def data_received(self, data: bytes) -> None:
        """Whole frames become results (the rest waits for more bytes)."""
        if not self.relay._reader.done():  # (after a broken frame nothing more is read)
            self.relay._received(data)

    def eof_received(self) -> bool:
        """The lane closed its end (it ended): nothing more comes; close ours too."""
        self.relay._read_ended()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """Closed or broken: nothing more comes."""
        self.relay._read_ended()


class LaneRelay:
    """Calls to one lane, results back to its shadow (see the module docstring).

    Args:
        name: how logs name the lane (the claim, short).
        send: delivers one CallsDone's results.
        log: where trouble is reported.
        clock: how it waits (:data:`GATHER`, :data:`RETRY`, the ``deadline`` of :meth:`finish`).
    """

    def __init__(self, name: str, send: Send, log: logging.Logger | None = None, clock: Clock = REAL):
        self.name = name
        self.send = send
        self.log = log or logging.getLogger(__name__)
        self.clock = clock
        self.outstanding: deque[str] = deque()  # job ids written to the lane, results not yet read
        self.ready: list[m.LaneResult] = []     # results read, not yet acknowledged by the shadow
        self.delivered = 0
        self._backlog: list[bytes] = []         # frames queued before the lane was spawned
        self._writer: asyncio.WriteTransport | None = None
        self._reader: asyncio.Future | None = None  # done when the channel has no more to read
        self._buf = bytearray()                     # bytes read, not yet a whole result frame
        self._sender: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._encode = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder(ResultFrame).decode

    def queue(self, calls: Iterable[m.LaneCall]) -> None:
        """Send ``calls`` to the lane (now, or once it is spawned), in order. A call the lane
        holds already (given, no result yet) is not given twice; one whose result came back may
        come again (``max_retries`` runs it again). The frames of one batch go in one write (one
        system call, not one per call)."""
        frames = []
        for call in calls:
            if call.job_id in self.outstanding:
                continue
            frames.append(frame(self._encode(CallFrame(call.job_id, call.files))))
            self.outstanding.append(call.job_id)
        if not frames:
            return
        if self._writer is None:
            self._backlog.extend(frames)
        elif not self._writer.is_closing():
            self._writer.write(b"".join(frames) if len(frames) > 1 else frames[0])

    async def attach(self, sock: socket.socket) -> None:
        """The lane is spawned with the other end of ``sock``: write what waited, start relaying."""
        loop = asyncio.get_running_loop()
        self._reader = loop.create_future()
        self._writer, _ = await loop.create_unix_connection(lambda: _Channel(self), sock=sock)
        self._writer.write(b"".join(self._backlog))
        self._backlog.clear()
        self._sender = asyncio.create_task(self._send_loop(), name=f"send results of lane {self.name}")

    def _received(self, data: bytes) -> None:
        """Bytes from the lane (the event loop's callback, no task in between): each whole
        result frame becomes the LaneResult of the oldest outstanding call, and wakes the sender."""
        buf = self._buf
        buf += data
        pos, got = 0, False
        try:
            while len(buf) - pos >= HEADER.size:
                (size,) = HEADER.unpack_from(buf, pos)
                if size > MAX_FRAME or not self.outstanding:
                    raise ValueError(f"a result frame of {size} bytes" if size > MAX_FRAME else
                                     "a result with no call outstanding")
                end = pos + HEADER.size + size
                if len(buf) < end:
                    break
                result = self._decode(buf[pos + HEADER.size:end])
                self.ready.append(lane_result(self.outstanding.popleft(), result))
                pos, got = end, True
        except (ValueError, msgspec.DecodeError) as exc:
            self.log.error("lane %s sent what is not a result (%s); closing its channel", self.name, exc)
            buf.clear()
            self._close_writer()
            self._read_ended()
            return
        finally:
            if got:
                self._wake.set()
        del buf[:pos]

    def _read_ended(self) -> None:
        """The lane's channel has no more to read (end of file, closed, broken)."""
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)
        self._wake.set()

    async def _send_loop(self) -> None:
        while True:
            while not self.ready:
                if self._stopping and (self._reader is None or self._reader.done()):
                    return
                self._wake.clear()
                await self._wake.wait()
            await self._gather()
            batch, size = [], 0
            for result in self.ready:
                weight = len(result.stdout) + len(result.stderr) + sum(map(len, result.files.values()))
                if batch and size + weight > BATCH_BYTES:
                    break
                batch.append(result)
                size += weight
            outcome = await self.send(tuple(batch))
            if outcome is False:
                await self.clock.sleep(RETRY)
                continue
            if outcome is None:
                self.log.warning("lane %s: the shadow refused the results of %s; dropped", self.name,
                                 ", ".join(r.job_id for r in batch))
            else:
                self.delivered += len(batch)
            del self.ready[:len(batch)]

    async def _gather(self) -> None:
        """Hold ready results for up to :data:`GATHER` s while the lane has a call queued
        behind the one it runs (it cannot run dry meanwhile), so that one CallsDone carries
        several: each costs the shadow a transaction, a log write and a message each way.
        Only until they are as many as the calls it still holds, though: the shadow then ends
        them and answers with the next calls while the lane runs the other half, instead of
        the lane and the shadow taking turns (a lane that held 33 no-op calls ran them in
        about 10 ms, then waited some 20 ms for the shadow to end them)."""
        deadline = self.clock.monotonic() + GATHER
        while len(self.outstanding) >= max(2, len(self.ready) + 1) and not self._stopping:
            left = deadline - self.clock.monotonic()
            if left <= 0:
                return
            self._wake.clear()
            if not await self.clock.wait_for(self._wake, left):
                return

    async def finish(self, deadline: float = 30.0) -> None:
        """The lane's process ended: read and deliver the rest (see the module docstring)."""
        self._stopping = True
        self._wake.set()
        tasks = [t for t in (self._reader, self._sender) if t is not None]

        async def both() -> None:
            for task in tasks:
                await asyncio.shield(task)

        done = asyncio.Event()
        joined = asyncio.ensure_future(both())
        joined.add_done_callback(lambda _: done.set())
        try:
            if not await self.clock.wait_for(done, deadline):
                self.log.warning("lane %s: %d result(s) could not be delivered within %g s; they are lost",
                                 self.name, len(self.ready), deadline)
            elif not joined.cancelled() and joined.exception() is not None:
                # a broken relay costs these results, not the job's exit report
                self.log.error("lane %s: relaying its results failed", self.name, exc_info=joined.exception())
        finally:
            joined.cancel()
            if self.outstanding:
                self.log.info("lane %s ended with %d call(s) not run to the end: %s", self.name,
                              len(self.outstanding), ", ".join(self.outstanding))
            self.close()

    def _close_writer(self) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.close()

    def close(self) -> None:
        """Stop relaying and close the channel (idempotent)."""
        for task in (self._reader, self._sender):
            if task is not None and not task.done():
                task.cancel()
        self._close_writer()
        self._backlog.clear()
