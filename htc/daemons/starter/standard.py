"""The starter's side of ``universe = standard``: the job runs under the checkpointing runtime,
its file I/O is forwarded, and its images go to the shadow.

Theory of operation
-------------------
A job with ``JobUniverse`` 1 (:func:`is_standard`) is started by the :class:`Starter` as any
other, with four differences, all made here (:class:`StandardJob`):

* **Resume.** Before it spawns anything the starter asks the shadow for the job's latest image
  (``FetchCheckpoint``; :mod:`htc.daemons.schedd.checkpoint_files`) and receives it into the sandbox.
  With an image the job is not exec'd: ``jobrt-restart --image-out IMAGE INCOMING`` turns a new
  process into the checkpointed one, wherever the image was taken (:mod:`htc.runtime.checkpoint`
  has the refusals: a foreign or damaged image fails the start, and the job is held).
* **Runtime.** The job runs with ``libjobrt.so`` preloaded and ``JOBRT_CKPT_IMAGE`` naming
  ``.htc_ckpt.img`` in the sandbox: SIGUSR2 writes an image and continues, SIGTSTP writes one and
  exits 85. Its real working directory is ``/``, which exists wherever it resumes.
* **Forwarded I/O.** Every path under the job's ``Iwd``, and every relative path (the job starts
  in its remote ``Iwd``), is forwarded over a socket pair inherited at
  :data:`~htc.runtime.remote_io.DEFAULT_JOB_FD` to a file server
  (``python -m htc.runtime.remote_io``) that runs as the job's **owner** with the ``Iwd`` as its
  root. When the job shares the machine's FileSystemDomain that server runs on the execute
  side, next to the starter, and serves the ``Iwd`` through the shared file system; when it
  does not (``relay_io``: :func:`htc.daemons.job_files.over_wire`) the starter instead relays the
  socket's bytes to the shadow (``RelayJobIO``; :mod:`htc.daemons.job_io_relay`), which runs
  the same server as the owner in the ``Iwd`` on the submit side. Files written this way are
  the job's output in place: a restart rolls them back to their size at the image.
* **Checkpoints.** Every ``interval`` seconds (``CHECKPOINT_INTERVAL``; 0: never) and on
  :meth:`StandardJob.checkpoint` the job is sent SIGUSR2; a vacate sends SIGTSTP instead of the
  job's ``KillSig``, and no SIGUSR2 follows it (the vacate's image is the last). Each new image -- told apart by the pid and sequence number in its header
  -- is streamed to the shadow with ``SendCheckpoint`` (:mod:`htc.wire.messages.checkpoints`;
  ``number`` is the header's sequence number, which the runtime carries on across restarts) as a
  checkpoint of one file, ``image`` (:mod:`htc.daemons.file_stream`, a chunk at a time); the
  schedd's checkpoint store keeps it once its checksum verifies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from htc.daemons.clock import REAL, Clock
from htc.daemons.file_stream import Outgoing, send_stream
from htc.daemons.job_io_relay import pump
from htc.daemons.job_files import TransferError
from htc.daemons.starter.procs import watch_exit
from htc.daemons.starter.wire_files import WireTransfer, fetch_stream
from htc.errors import HTCError
from htc.runtime import checkpoint as ckpt
from htc.runtime import remote_io
from htc.runtime.image import ImageError, read_header
from htc.wire import messages as m

__all__ = ["IMAGE_NAME", "INCOMING_NAME", "STANDARD_FILES", "StandardJob", "allows_unsupported", "is_standard"]

STANDARD_UNIVERSE = 1
_log = logging.getLogger(__name__)
#: the image the running job writes (in its sandbox)
IMAGE_NAME = ".htc_ckpt.img"
#: the image it resumes from, as the shadow sent it
INCOMING_NAME = ".htc_ckpt_in.img"
#: the image's name in a checkpoint stream (htc.daemons.schedd.checkpoint_files.IMAGE_NAME)
STORED_NAME = "image"
#: what the runtime leaves in the sandbox, never sent back as output
STANDARD_FILES = frozenset({IMAGE_NAME, INCOMING_NAME, IMAGE_NAME + ".tmp", IMAGE_NAME + ".refused"})


def is_standard(job_ad: Mapping[str, Any]) -> bool:
    """True for a standard-universe job (``JobUniverse == 1``)."""
    return job_ad.get("JobUniverse") == STANDARD_UNIVERSE


def allows_unsupported(job_ad: Mapping[str, Any]) -> bool:
    """True when the job may run on without checkpoints where the runtime cannot take them
    (``+CheckpointUnsupported = "allow"``); otherwise such a job fails with the runtime's reason."""
    value = job_ad.get("CheckpointUnsupported")
    return isinstance(value, str) and value.lower() == "allow"


def _build(cache: Path | None) -> ckpt.Tools:
    """The runtime's parts, built into ``cache`` (made readable by every user) when needed."""
    if cache is not None:
        cache.mkdir(mode=0o755, parents=True, exist_ok=True)
        cache.chmod(0o755)
    return ckpt.build_tools(cache)


class _FileSink:
    """Receives the one image of a FetchCheckpoint stream at ``path``, owned by uid/gid."""

    def __init__(self, path: Path, uid: int | None, gid: int | None):
        self.path, self.uid, self.gid, self.received = path, uid, gid, False

    def begin(self, entry: m.FileEntry) -> int | None:
        """Open the incoming image afresh; refuse anything else."""
        if entry.kind != "file" or self.received:
            raise TransferError(f"a checkpoint stream carries one image, not {entry.name!r}")
        self.received = True
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        if self.uid is not None:
            os.fchown(fd, self.uid, self.gid if self.gid is not None else -1)
        return fd

    def finish(self, entry: m.FileEntry, fd: int) -> None:
        """The image is complete."""
        os.close(fd)


class StandardJob:
    """One standard-universe run (see the module docstring).

    Args:
        channel: how to reach the shadow (a fresh connection per conversation).
        interval: seconds between periodic checkpoints (0: none).
        clock: the starter's clock.
        cache: where the runtime is built (or found built) on first use; the job's user must be
            able to read it (the startd uses a directory beside EXECUTE).
        relay_io: serve the job's forwarded calls on the submit side, over a connection to the
            shadow (the job's Iwd is in another FileSystemDomain), not here.
        allow_unsupported: the job asked (``CheckpointUnsupported = "allow"``) to run on without
            checkpoints if it starts a thread, forks or opens a socket, instead of failing at once.
    """

    def __init__(self, channel: WireTransfer, interval: float = 0.0, clock: Clock = REAL,
                 cache: Path | None = None, relay_io: bool = False, allow_unsupported: bool = False):
        self.channel, self.interval, self.clock = channel, interval, clock
        self.relay_io, self.allow_unsupported = relay_io, allow_unsupported
        self._relay: asyncio.Task | None = None
        self.cache = cache
        self.tools: ckpt.Tools | None = None
        self.sandbox: Path | None = None
        self.resumed = False
        self.pid: int | None = None
        self.sent = 0  # images the shadow kept during this run
        self.vacate_checkpointed: bool | None = None  # the vacate's image kept (None: no vacate image)
        self._seen = -1  # the newest sequence number handled
        self._kept = -1  # the newest sequence number the shadow kept (or this run resumed from)
        self._server: subprocess.Popen | None = None
        self._server_exit: asyncio.Future | None = None
        self._job_end: socket.socket | None = None
        self._periodic: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self._vacating = False  # the vacate's signal is sent: no more checkpoint signals

    @property
    def image(self) -> Path:
        """Where the running job writes its images."""
        assert self.sandbox is not None
        return self.sandbox / IMAGE_NAME

    # ------------------------------------------------------------------------- before the job
    async def prepare(self, plan: dict[str, Any], sandbox: Path, iwd: Path, job_user: tuple[int | None, int | None],
                      owner: tuple[int | None, int | None]) -> dict[str, Any]:
        """Fetch the latest image, start the file server, and return the spawn plan that runs
        (or resumes) the job under the runtime. Raises StarterError-worthy errors as
        TransferError (the image) or OSError/UsageError (the runtime)."""
        self.sandbox = sandbox
        if self.tools is None:
            self.tools = await asyncio.to_thread(_build, self.cache)
        incoming = sandbox / INCOMING_NAME
        self.resumed = await self._fetch(incoming, *job_user)
        server_end, self._job_end = remote_io.socket_pair()
        self._job_end.set_inheritable(False)  # dup2'd to its number in the child only
        if self.relay_io:
            try:
                conn = await self._open_relay()
            except BaseException:
                server_end.close()
                raise
            self._relay = asyncio.ensure_future(pump(conn, server_end))
        else:
            with server_end:
                self._server = self._start_server(server_end.fileno(), iwd, *owner)
            self._server_exit = watch_exit(self._server.pid)
        env = dict(plan["env"])
        env.update(remote_io.job_environment(self.tools.library, remote_io.DEFAULT_JOB_FD, str(iwd), cwd="."))
        env.update({"JOBRT_CKPT_IMAGE": str(self.image), "JOBRT_CKPT_SIGNAL": str(int(ckpt.CHECKPOINT_SIGNAL)),
                    "JOBRT_CKPT_EXIT_SIGNAL": str(int(ckpt.VACATE_SIGNAL)),
                    "JOBRT_CKPT_EXIT_CODE": str(ckpt.VACATED_EXIT), "JOBRT_CKPT_FSYNC": "1",
                    "JOBRT_CKPT_UNSUPPORTED": "allow" if self.allow_unsupported else "fail"})
        argv = list(plan["argv"])
        if self.resumed:
            header = read_header(incoming)
            self._seen = self._kept = header.seq
            _log.info("job %s: resuming from its checkpoint %d (%d bytes, fetched from its shadow)",
                      self.channel.job_id, header.seq, incoming.stat().st_size)
            argv = [str(self.tools.restarter), "--image-out", str(self.image), str(incoming)]
        return {**plan, "argv": argv, "env": env, "cwd": "/",
                "job_fds": {remote_io.DEFAULT_JOB_FD: self._job_end.fileno()}}

    async def _fetch(self, path: Path, uid: int | None, gid: int | None) -> bool:
        """Receive the job's latest image at ``path``; False when it has none."""
        sink = _FileSink(path, uid, gid)
        request = m.FetchCheckpoint(claim_id=self.channel.claim_id, job_id=self.channel.job_id)
        await fetch_stream(self.channel, request, sink, "checkpoint")
        return sink.received

    async def _open_relay(self):
        """A connection on which the shadow serves the job's forwarded calls (RelayJobIO, Ack).

        Raises:
            TransferError: the shadow cannot be reached or refused.
        """
        label = f"the shadow of job {self.channel.job_id}"
        try:
            conn = await self.channel.connect()
        except HTCError as exc:
            raise TransferError(f"cannot reach {label} to serve the job's file calls: {exc}") from None
        try:
            reply = await conn.request(m.RelayJobIO(claim_id=self.channel.claim_id, job_id=self.channel.job_id))
        except HTCError as exc:
            await conn.aclose()
            raise TransferError(f"{label} does not serve the job's file calls: {exc}") from None
        if not isinstance(reply, m.Ack):
            await conn.aclose()
            raise TransferError(f"{label} does not serve the job's file calls: {getattr(reply, 'message', reply)}")
        return conn

    @staticmethod
    def _start_server(fd: int, iwd: Path, uid: int | None, gid: int | None) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "htc.runtime.remote_io", "--fd", str(fd), "--root", str(iwd),
               "--blocking"]  # one job per server: a plain loop (docs/remote-io.md, "Speed")
        if uid is not None and os.geteuid() == 0:
            cmd += ["--uid", str(uid), "--gid", str(gid if gid is not None else uid)]
        return subprocess.Popen(cmd, pass_fds=(fd,), stdin=subprocess.DEVNULL, start_new_session=True)

    def started(self, pid: int) -> None:
        """The job runs as ``pid``: drop our end of its connection, start periodic checkpoints."""
        self.pid = pid
        if self._job_end is not None:
            self._job_end.close()
            self._job_end = None
        if self.interval > 0:
            self._periodic = asyncio.ensure_future(self._every_interval())

    # ------------------------------------------------------------------------- while it runs
    async def _every_interval(self) -> None:
        while not self._vacating:
            await self.clock.sleep(self.interval)
            if self._vacating:
                return  # the vacate's image is the last
            try:
                await self.checkpoint()
            except (ckpt.CheckpointRefused, ckpt.CheckpointFailed, TransferError) as exc:
                sys.stderr.write(f"starter: periodic checkpoint of pid {self.pid}: {exc}\n")

    async def checkpoint(self, timeout: float = 120.0) -> int:
        """Checkpoint the running job and send the image to the shadow; its size in bytes.

        Raises:
            CheckpointRefused: the job cannot be checkpointed now (it runs on).
            CheckpointFailed: no image came in ``timeout`` seconds, or the job is gone.
            TransferError: the shadow did not keep it.
        """
        async with self._lock:
            if self.pid is None:
                raise ckpt.CheckpointFailed("the job has not started")
            await self._await_handler(min(timeout, 30.0))
            if self._vacating:  # (checked with no await before the signal: the vacate's is final)
                raise ckpt.CheckpointRefused(f"pid {self.pid} is vacating: its vacate writes the image")
            os.kill(self.pid, ckpt.CHECKPOINT_SIGNAL)
            await self._await_image(timeout)
            return await self._send()

    async def _await_handler(self, timeout: float) -> None:
        """Wait until the job catches the checkpoint signal: right after the spawn the runtime
        has not installed its handler yet, and SIGUSR2 would kill the job (``htc checkpoint``
        straight after the start)."""
        assert self.pid is not None
        bit = 1 << (int(ckpt.CHECKPOINT_SIGNAL) - 1)
        deadline = self.clock.time() + timeout
        while True:
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                raise ckpt.CheckpointFailed(f"pid {self.pid} is gone") from None
            caught = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
            if caught & bit:
                return
            if self.clock.time() > deadline:
                raise ckpt.CheckpointRefused(f"pid {self.pid} does not catch {ckpt.CHECKPOINT_SIGNAL.name} within "
                                             f"{timeout:g} s: the runtime is not running in it yet")
            await self.clock.sleep(0.02)

    async def _await_image(self, timeout: float, after: int | None = None) -> None:
        """Wait for an image of this job newer than ``after`` (default: than the newest handled)."""
        after = self._seen if after is None else after
        deadline = self.clock.time() + timeout
        refused = self.image.with_name(IMAGE_NAME + ".refused")
        while True:
            header = None
            with contextlib.suppress(FileNotFoundError, ImageError):
                header = read_header(self.image)
            if header is not None and header.pid == self.pid and header.seq > after:
                self._seen = max(self._seen, header.seq)
                return
            with contextlib.suppress(FileNotFoundError):
                text = refused.read_text().strip()
                if f" of pid {self.pid} " in text:
                    refused.unlink()
                    raise ckpt.CheckpointRefused(text)
            if self.clock.time() > deadline:
                raise ckpt.CheckpointFailed(f"pid {self.pid} wrote no image within {timeout} s")
            await self.clock.sleep(0.02)

    async def _send(self) -> int:
        """Stream the image to the shadow; its size once the shadow has kept it."""
        fd = os.open(self.image, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        size = os.fstat(fd).st_size
        try:
            number = read_header(f"/proc/self/fd/{fd}").seq  # (the image opened, not a newer one)
        except ImageError as exc:
            os.close(fd)
            raise TransferError(f"the job's image cannot be read: {exc}") from None
        source = iter([Outgoing(m.FileEntry(name=STORED_NAME, kind="file", mode=0o600, size=size), fd)])
        try:
            conn = await self.channel.open_stream()
        except HTCError as exc:
            os.close(fd)
            raise TransferError(f"cannot reach the shadow of job {self.channel.job_id}: {exc}") from None
        streaming = False  # from send_stream on, the stream closes the descriptor
        try:
            await conn.send(m.SendCheckpoint(claim_id=self.channel.claim_id, job_id=self.channel.job_id,
                                             number=max(1, number)))
            streaming = True
            await send_stream(conn, source)
            reply = await conn.recv(timeout=300.0)
        except HTCError as exc:
            if isinstance(exc, TransferError):
                raise
            raise TransferError(f"the checkpoint could not be sent: {exc}") from None
        finally:
            if not streaming:
                os.close(fd)
            await conn.aclose()
        if not isinstance(reply, m.Ack):
            raise TransferError(f"the shadow did not keep the checkpoint: {getattr(reply, 'message', reply)}")
        self.sent += 1
        self._kept = max(self._kept, number)
        return size

    # ------------------------------------------------------------------------- the end
    def vacate_signal(self) -> signal.Signals:
        """The signal that checkpoints the job and makes it exit (instead of its KillSig). The
        caller sends it now: from here on no checkpoint signal is sent (:meth:`checkpoint`
        refuses), so none can land beside the vacate's in one of the job's forwarded calls."""
        self._vacating = True
        return ckpt.VACATE_SIGNAL

    async def finish(self, exit_code: int | None) -> str | None:
        """The job has exited: send the image a vacate wrote, stop the file server. Returns an
        error text when the image could not be kept (the previous one stays the latest; the job
        is requeued to resume from it, :mod:`htc.daemons.startd.reports`); sets
        :attr:`vacate_checkpointed`."""
        if self._periodic is not None:
            self._periodic.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._periodic
        error = None
        if exit_code == ckpt.VACATED_EXIT and self.sandbox is not None:
            self.vacate_checkpointed = False
            try:
                async with self._lock:
                    # newer than the last image kept, not than the last one seen: a periodic
                    # checkpoint cancelled above may have seen the image the vacate wrote (both
                    # signals caught as one) without sending it. Generous: a loaded machine
                    # writes a large image slowly.
                    await self._await_image(60.0, after=self._kept)
                    await self._send()
                self.vacate_checkpointed = True
            except (ckpt.CheckpointFailed, ckpt.CheckpointRefused, TransferError, OSError) as exc:
                error = f"the vacate's checkpoint was not kept: {exc}"
        await self.close()
        return error

    async def close(self) -> None:
        """Stop the file server or the relay (each ends by itself once the job's end is closed)."""
        if self._job_end is not None:
            self._job_end.close()
            self._job_end = None
        if self._server is not None and self._server_exit is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._server_exit), 10.0)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self._server.kill()
                await self._server_exit
            self._server = None
        if self._relay is not None:
            # the job's end is closed: the relay ends once the last replies are through
            try:
                await asyncio.wait_for(asyncio.shield(self._relay), 10.0)
            except (asyncio.TimeoutError, HTCError) as exc:
                sys.stderr.write(f"starter: the relay of job {self.channel.job_id}'s file calls: {exc!r}\n")
                self._relay.cancel()
                with contextlib.suppress(asyncio.CancelledError, HTCError):
                    await self._relay
            self._relay = None
