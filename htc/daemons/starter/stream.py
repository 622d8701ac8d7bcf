"""Streaming a running job's stdout/stderr to its shadow (``stream_output`` / ``stream_error``).

Theory of operation
-------------------
A job whose ad says ``StreamOut = true`` (``StreamErr = true``) should have its standard output
(error) reach the submit side's ``output`` (``error``) file *while it runs*, not only when it
ends. The job still writes to its sandbox file (``_condor_stdout``/``_condor_stderr``); the
startd service tails that file and sends what is new to the shadow:

* :func:`streamed_files` says which streams of a job are streamed (the starter's final
  transfer skips exactly these, so a streamed file is never overwritten at the end). Only a
  stream captured in the sandbox qualifies: with a shared file system, or ``transfer_output =
  false``, the job writes its target directly and there is nothing to stream. A job whose
  ``error`` is its ``output`` has one file, streamed as ``stdout`` when either is asked for.
* :class:`OutputStreamer` opens each streamed file once the job has started -- as the
  sandbox's user, never through a link (:func:`open_sandbox_file`) -- and keeps the
  descriptor: the starter removes the sandbox after the job has ended, and the final read
  after that still finds every byte. :meth:`OutputStreamer.pump` reads what is new past the
  last *acknowledged* offset, in chunks of at most :data:`CHUNK` bytes, and hands each to the
  ``send`` callable given (the service's: a :class:`~htc.wire.messages.JobOutput` request to
  the shadow), one at a time and in order. A chunk not acknowledged is read and sent again
  from the same offset at the next pump: the shadow writes each chunk at its offset, so a
  resend is harmless. A shadow that refuses (``not_found``: it follows no such job any more)
  stops the streaming for good.
* :meth:`OutputStreamer.run` pumps every :data:`INTERVAL` seconds while the job runs;
  :meth:`OutputStreamer.finish` (after the job has exited, before the service reports
  JobExited) stops that loop and pumps until everything is acknowledged, retrying an
  unreachable shadow until ``deadline`` seconds have passed; what is still unsent then is
  lost and logged, and the exit is reported anyway.

A new run of the job (after an eviction) starts at offset 0 again: the shadow truncates the
target files when it starts a run of a streaming job (see :mod:`htc.daemons.schedd.shadows`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from htc.daemons import owner_files as ofs
from htc.daemons.clock import REAL, Clock
from htc.daemons.job_files import streamed_files

#: the most bytes one JobOutput carries
CHUNK = 256 * 1024
#: seconds between looks at the files while the job runs
INTERVAL = 0.5

#: ``send(stream, offset, data)`` -> True (acknowledged), False (try again later), None (refused: stop)
Send = Callable[[str, int, bytes], Awaitable[bool | None]]


def open_sandbox_file(path: Path) -> int:
    """Open a file the job writes in its sandbox for reading, as the sandbox's user and without
    following a link (:func:`htc.daemons.owner_files.open_beneath`): a job that swaps its
    ``_condor_stdout`` for a link to ``/etc/shadow`` streams nothing it could not read itself.

    Raises:
        OSError: missing, a link, not a regular file, or not readable by the job's user.
    """
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(parent)
        fd, info = ofs.open_beneath(parent, path.name, ofs.Identity.account(st.st_uid, st.st_gid),
                                    what="streamed output")
    finally:
        os.close(parent)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ofs.OwnerFileError(f"cannot stream {path}: it is not a regular file")
    return fd


class OutputStreamer:
    """Tails a running job's streamed files and sends what is new (see the module docstring).

    Args:
        files: stream name (``stdout``/``stderr``) -> the sandbox file to tail.
        send: delivers one chunk; True when acknowledged, False to retry, None when refused.
        log: where a lost stream is reported.
        chunk: the most bytes per send.
        clock: how the pumps wait (:mod:`htc.daemons.clock`; the startd's service passes its own).
    """

    def __init__(self, files: Mapping[str, Path], send: Send, log: logging.Logger | None = None,
                 chunk: int = CHUNK, clock: Clock = REAL):
        self.send = send
        self.clock = clock
        self.log = log or logging.getLogger(__name__)
        self.chunk = chunk
        self.fds: dict[str, int] = {}
        self.acked: dict[str, int] = {}  # stream -> bytes the shadow has taken
        self.refused = False
        self._stop = asyncio.Event()
        for stream, path in files.items():
            try:
                self.fds[stream] = open_sandbox_file(Path(path))
            except OSError as exc:
                self.log.warning("cannot stream the job's %s from %s: %s", stream, path, exc)
                continue
            self.acked[stream] = 0

    async def pump(self) -> bool:
        """Send everything written so far; True when all of it was acknowledged."""
        for stream, fd in self.fds.items():
            while not self.refused:
                data = os.pread(fd, self.chunk, self.acked[stream])
                if not data:
                    break
                outcome = await self.send(stream, self.acked[stream], data)
                if outcome is None:
                    self.refused = True
                elif not outcome:
                    return False
                else:
                    self.acked[stream] += len(data)
        return True

    async def run(self, interval: float = INTERVAL) -> None:
        """Pump every ``interval`` seconds until :meth:`finish` (or a refusal)."""
        while not self._stop.is_set() and not self.refused:
            await self.pump()
            await self.clock.wait_for(self._stop, interval)  # (or the next look is due)

    async def finish(self, runner: asyncio.Task | None, deadline: float = 30.0, retry: float = 1.0) -> None:
        """The job has exited: stop ``runner`` (the :meth:`run` task), send the rest, close the files."""
        self._stop.set()
        try:
            if runner is not None:
                try:
                    await runner
                except Exception:  # noqa: BLE001 -- a broken loop costs the live view, not the rest
                    self.log.exception("streaming the job's output failed; sending the rest now")
            give_up = self.clock.monotonic() + deadline
            while not await self.pump():
                if self.clock.monotonic() >= give_up:
                    self.log.warning("the job's streamed output could not all be delivered within %g s; "
                                     "the rest is lost (acknowledged: %s)", deadline, self.acked)
                    break
                await self.clock.sleep(retry)
        finally:
            self.close()

    def close(self) -> None:
        """Close the files (idempotent)."""
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


__all__ = ["CHUNK", "INTERVAL", "OutputStreamer", "streamed_files"]
