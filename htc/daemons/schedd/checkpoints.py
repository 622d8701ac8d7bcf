"""The shadow's side of a standard-universe job's checkpoints: images received into the
schedd's spool, and the latest one sent to the job's next starter.

Theory of operation
-------------------
A standard-universe job (``JobUniverse`` 1) runs under the checkpointing runtime
(:mod:`htc.runtime`; the starter's side is :mod:`htc.daemons.starter.standard`). Each time its
starter has a new image -- a periodic checkpoint, ``htc checkpoint``, a vacate -- it opens a
connection to the shadow (the schedd at the ActivateClaim's ``shadow_address``) and sends
``SendCheckpoint(claim_id, job_id)`` followed by a file stream (:mod:`htc.daemons.file_stream`)
of one file, the image. The stream is written chunk by chunk to ``image.incoming`` in the job's
checkpoint directory, ``$(SPOOL)/<cluster % 10000>/<proc % 10000>/cluster<C>.proc<P>.ckpt``
(the seeds' checkpoint server is the schedd's spool), never held whole in memory. The image's
own checksum (:func:`htc.runtime.image.verify`: the header's CRC-32 over the whole file) is
then checked, and only a verified image is renamed over ``image``: until that moment the
previous image stays the job's latest, so a vacate that breaks half-way loses only the work
since the previous checkpoint. For a verified image the job gets ``LastCkptTime``,
``NumCkpts`` and ``CkptSize`` (bytes), a ``CheckpointedEvent`` (003, "Job was checkpointed.")
goes to its user log, and the answer is ``Ack``; otherwise the incoming file is removed and
the answer is an ``ErrorReply`` saying why.

When the job is matched again, its new starter sends ``FetchCheckpoint(claim_id, job_id)`` and
receives a stream with the latest image (or no file at all: the job starts afresh); the
restarter (``jobrt-restart``) resumes it from there, on whichever slot it now runs.

Both conversations are served only for a run the schedd follows (the claim id must be the one
the job runs on), like the input and output transfers of :mod:`htc.daemons.schedd.transfers`.
The images are the schedd's own files (mode 0600), as the spool is; the job's directory is
removed when the job leaves the queue by :func:`forget`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from htc.daemons.file_stream import Outgoing, receive_stream, send_stream
from htc.daemons.job_files import TransferError
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.shadow import parse_job_id
from htc.daemons.schedd.spool import spool_directory
from htc.errors import HTCError
from htc.eventlog import events as ev
from htc.runtime.image import ImageError, verify
from htc.wire import messages as m

__all__ = ["CheckpointService", "checkpoint_directory", "forget", "IMAGE_NAME"]

#: the name of the image in a stream and in the job's checkpoint directory
IMAGE_NAME = "image"
_INCOMING = IMAGE_NAME + ".incoming"


def checkpoint_directory(spool: str | os.PathLike, cluster: int, proc: int) -> Path:
    """Where job ``cluster.proc`` keeps its checkpoint image (beside its spool directory)."""
    return spool_directory(spool, cluster, proc).with_name(f"cluster{cluster}.proc{proc}.ckpt")


def forget(spool: str | os.PathLike, cluster: int, proc: int) -> None:
    """Remove a job's checkpoints (it left the queue)."""
    shutil.rmtree(checkpoint_directory(spool, cluster, proc), ignore_errors=True)


class _ImageSink:
    """Receives the one file of a SendCheckpoint stream as ``image.incoming``."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.received = False

    def begin(self, entry: m.FileEntry) -> int | None:
        """Open ``image.incoming`` afresh for the image; refuse anything else."""
        if entry.kind != "file" or entry.name != IMAGE_NAME or self.received:
            raise TransferError(f"a checkpoint stream carries one file named {IMAGE_NAME!r}, not {entry.name!r}")
        self.received = True
        path = self.directory / _INCOMING
        path.unlink(missing_ok=True)
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)

    def finish(self, entry: m.FileEntry, fd: int) -> None:
        """The image is complete: flush it to disk."""
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _keep(directory: Path) -> int:
    """Verify ``image.incoming`` and make it the latest image; its size.

    Raises:
        TransferError: it does not verify (the previous image stays).
    """
    incoming = directory / _INCOMING
    try:
        verify(incoming)
    except ImageError as exc:
        incoming.unlink(missing_ok=True)
        raise TransferError(f"the checkpoint image does not verify ({exc}); the previous image is kept") from None
    size = incoming.stat().st_size
    os.replace(incoming, directory / IMAGE_NAME)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)  # the rename is durable before the starter hears Ack
    finally:
        os.close(fd)
    return size


def _latest(directory: Path) -> Iterator[Outgoing]:
    """The stream of the latest image (nothing when there is none)."""
    try:
        fd = os.open(directory / IMAGE_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    st = os.fstat(fd)
    yield Outgoing(m.FileEntry(name=IMAGE_NAME, kind="file", mode=0o600, size=st.st_size), fd)


class CheckpointService:
    """Serves SendCheckpoint and FetchCheckpoint for the schedd's service (module docstring)."""

    def __init__(self, service):
        self.service = service

    def _run(self, msg: m.SendCheckpoint | m.FetchCheckpoint):
        """(job, its values, label, checkpoint directory) when ``msg``'s claim runs the job.

        Raises:
            TransferError: it does not, or the schedd has no spool.
        """
        core = self.service.core
        job_id = parse_job_id(msg.job_id)
        shadow = core.shadows.get(job_id)
        job = core.job(job_id) if shadow is not None and shadow.claim_id == msg.claim_id else None
        if job is None:
            raise TransferError(f"no run of job {msg.job_id} on that claim; the checkpoint transfer is refused")
        spool = core.settings.spool
        if not spool:
            raise TransferError("the schedd has no SPOOL directory to keep checkpoints in; set SPOOL")
        return job_id, job, f"{job_id[0]}.{job_id[1]}", checkpoint_directory(spool, *job_id)

    async def serve(self, conn, msg: m.SendCheckpoint | m.FetchCheckpoint, peer=None) -> None:
        """Serve one checkpoint conversation on ``conn``."""
        log = self.service.log
        try:
            job_id, job, label, directory = self._run(msg)
            if isinstance(msg, m.FetchCheckpoint):
                counts = await send_stream(conn, _latest(directory))
                log.info("job %s: sent its latest checkpoint (%d bytes)", label, counts.bytes)
                return
            await asyncio.to_thread(directory.mkdir, mode=0o700, parents=True, exist_ok=True)
            sink = _ImageSink(directory)
            await receive_stream(conn, sink, peer=f"the starter of job {label}")
            if not sink.received:
                raise TransferError("the checkpoint stream carried no image")
            size = await asyncio.to_thread(_keep, directory)
            self._record(job_id, job, size)
            log.info("job %s: checkpoint of %d bytes kept in %s", label, size, directory)
            await conn.send(m.Ack(detail=f"checkpoint of {size} bytes kept"))
        except TransferError as exc:
            self.service.log.warning("job %s: checkpoint transfer failed: %s", msg.job_id, exc)
            await conn.send_error("bad_request", str(exc))
        except HTCError as exc:  # the starter went away: nothing to answer
            log.info("job %s: checkpoint transfer stopped: %s", msg.job_id, exc)

    def _record(self, job_id, job, size: int) -> None:
        """The job's checkpoint attributes and its CheckpointedEvent."""
        core, now = self.service.core, self.service.clock.time()
        count = int(ul.number(job, "NumCkpts", 0)) + 1
        with core.queue.transaction():
            core.queue.set_attributes(job_id, {"LastCkptTime": str(int(now)), "NumCkpts": str(count),
                                               "CkptSize": str(size)})
        core.changed()
        event = ev.CheckpointedEvent(**ul.ids(job), timestamp=now, sent_bytes=float(size))
        for action in ul.write(job, event):
            self.service._write_user_log(action)  # batched with the core's own log writes
