"""The schedd's store of jobs' checkpoints, in its spool: self-checkpointing jobs' files and
standard-universe jobs' images.

Theory of operation
-------------------
A job submitted with ``checkpoint_exit_code`` sends its checkpoint each time it exits with
that code (:mod:`htc.daemons.starter.self_checkpoint`); a standard-universe job
(``JobUniverse`` 1) sends its image, a checkpoint of one file named ``image``
(:data:`IMAGE_NAME`), each time the runtime writes one (:mod:`htc.daemons.starter.standard`;
its ``number`` is the image's sequence number). Both ask for it back when they run again,
wherever that is. Both conversations come here, on connections of their own
(:mod:`htc.wire.messages.checkpoints`), and are served only for the run the schedd follows:
the claim id must be the one the job runs on.

Layout: beside the job's spool directory (:func:`htc.daemons.schedd.spool.spool_directory`,
HTCondor's ``$(SPOOL)/<cluster % 10000>/<proc % 10000>/cluster<C>.proc<P>.subproc0``) is
``...subproc0.checkpoint/``, owned by the job's owner, holding

* ``current/`` -- the latest complete checkpoint, the sandbox entries as the job left them;
* ``incoming/`` -- one being received.

``SendCheckpoint(number)`` empties ``incoming/``, writes the stream there as the job's owner
(names must stay beneath it; each file's SHA-256 is checked by the stream; an image's own
checksum is taken in the same pass, :class:`~htc.runtime.image.StreamChecksum`, so it is
not read again to be verified), and only then
swaps it in -- for a standard-universe job only when ``incoming/`` holds exactly ``image`` and
that image's own checksum verifies (:func:`standard_image`, :func:`htc.runtime.image.verify`;
otherwise ``incoming/`` is removed and the starter hears why): ``current/`` becomes ``previous/``, ``incoming/`` becomes ``current/``, and
``previous/`` is removed. A transfer that breaks off leaves ``current/`` as it was -- the job
keeps its last good checkpoint, as HTCondor keeps the previous one until the new MANIFEST is
written. The core then records it (:class:`~htc.daemons.schedd.checkpoints.CheckpointStored`:
``CheckpointNumber``, ``JobLastCheckpointTime``, ``CommittedTime``, the user log's transfer
events) before the starter hears Ack.

``FetchCheckpoint`` answers with ``current/`` as a file stream, read as the owner (an empty
stream when there is none).

A job's checkpoint conversations are served one at a time, in the order they arrive: a periodic
checkpoint's stream can still be in flight when the vacate's starts (a 20 MB image takes
seconds over SSH from another host), and two stores at once would share ``incoming/`` -- the
second emptying what the first was writing, the first's failure removing what the second was.
Each store logs where its stream came from and each fetch where it went (``host 10.200.0.2``).

A store outlives its job only briefly: from the first checkpoint conversation on, the service
sweeps the spool every :data:`SWEEP_INTERVAL` seconds and removes the stores of jobs no longer
in the queue (:func:`stale_stores`; completed, removed, or gone while the schedd was down).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from htc.daemons import owner_files as ofs
from htc.daemons.file_stream import StreamCounts, receive_stream, send_stream
from htc.daemons.job_files import TransferError
from htc.daemons.schedd.checkpoints import STANDARD_UNIVERSE, CheckpointStored
from htc.daemons.schedd.leverage import process_cpu
from htc.daemons.schedd.shadow import ad_text, ad_values, parse_job_id
from htc.daemons.schedd.spool import SpoolSink, spool_directory
from htc.daemons.schedd.transfers import tree_entries
from htc.errors import HTCError
from htc.runtime.image import ImageError, StreamChecksum, verify
from htc.wire import messages as m

__all__ = ["IMAGE_NAME", "SWEEP_INTERVAL", "CheckpointService", "checkpoint_directory", "checkpoint_stores",
           "receive_checkpoint", "stale_stores", "standard_image", "whence"]

#: the one file of a standard-universe job's checkpoint: its image
IMAGE_NAME = "image"

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

#: seconds between two sweeps of the stores of jobs that left the queue
SWEEP_INTERVAL = 60.0
_STORE = re.compile(r"^cluster(\d+)\.proc(\d+)\.subproc0\.checkpoint$")


def checkpoint_directory(spool: str | os.PathLike, cluster: int, proc: int) -> Path:
    """Where job ``cluster.proc`` keeps its checkpoints (see the module docstring)."""
    base = spool_directory(spool, cluster, proc)
    return base.with_name(base.name + ".checkpoint")


def _owned_directory(path: Path, owner: ofs.Identity | None) -> None:
    """Make ``path`` (and its parents) if missing; the last one owned by the owner when we are root."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    if owner is not None and owner.uid is not None and os.geteuid() == 0:
        os.chown(path, owner.uid, owner.gid if owner.gid is not None else -1)


def _fresh_incoming(store: Path, owner: ofs.Identity | None) -> Path:
    _owned_directory(store, owner)
    incoming = store / "incoming"
    shutil.rmtree(incoming, ignore_errors=True)
    _owned_directory(incoming, owner)
    return incoming


def _swap_in(store: Path) -> None:
    """``incoming/`` becomes ``current/``; the checkpoint it replaces is removed."""
    current, previous = store / "current", store / "previous"
    shutil.rmtree(previous, ignore_errors=True)
    if current.exists():
        os.rename(current, previous)
    os.rename(store / "incoming", current)
    shutil.rmtree(previous, ignore_errors=True)


def standard_image(incoming: Path, checksum: int | None = None) -> int:
    """Check that a standard-universe checkpoint received into ``incoming`` is one image that
    verifies; its size. ``checksum``: the image's checksum taken as it was received
    (:class:`~htc.runtime.image.StreamChecksum`), which spares reading it again.

    Raises:
        TransferError: anything else arrived, or the image is damaged (``incoming`` is removed:
            the job's current image stays its latest).
    """
    try:
        names = sorted(os.listdir(incoming))
        if names != [IMAGE_NAME]:
            raise TransferError(f"a standard-universe checkpoint is one file named {IMAGE_NAME!r}, not {names}")
        try:
            fd = os.open(incoming / IMAGE_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:  # (a symbolic link: ELOOP)
            raise TransferError(f"a standard-universe checkpoint's {IMAGE_NAME!r} cannot be opened as a "
                                f"regular file: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise TransferError(f"a standard-universe checkpoint's {IMAGE_NAME!r} is not a regular file")
            try:
                # the file opened, whatever its owner does to the name
                verify(f"/proc/self/fd/{fd}", checksum=checksum)
            except ImageError as exc:
                detail = str(exc).split(": ", 1)[-1]
                raise TransferError(f"the checkpoint image does not verify ({detail}); the previous image is kept") \
                    from None
            return st.st_size
        finally:
            os.close(fd)
    except BaseException:
        shutil.rmtree(incoming, ignore_errors=True)
        raise


def checkpoint_stores(spool: str | os.PathLike) -> dict[tuple[int, int], Path]:
    """Every checkpoint store under ``spool``, by job id."""
    stores = {}
    for store in Path(spool).glob("*/*/*.checkpoint"):
        found = _STORE.match(store.name)
        if found is not None:
            stores[int(found[1]), int(found[2])] = store
    return stores


def stale_stores(stores: dict[tuple[int, int], Path], in_queue: Callable[[tuple[int, int]], bool]) -> list[Path]:
    """The stores of ``stores`` whose job ``in_queue`` says has left the queue."""
    return [store for job_id, store in sorted(stores.items()) if not in_queue(job_id)]


def whence(peer) -> str:
    """Where a checkpoint conversation's peer is, for the log: ``host 10.0.0.7`` (over the
    network) or ``this host``."""
    host = getattr(peer, "host", None)
    return f"host {host}" if host else "this host"


def _remove(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


async def receive_checkpoint(conn, store: Path, owner: ofs.Identity | None, label: str, *,
                             standard: bool) -> StreamCounts:
    """Receive one checkpoint's file stream from ``conn`` into ``store`` and swap it in (see the
    module docstring); for a standard-universe job (``standard``) only an image that verifies.

    Raises:
        TransferError: the stream was bad or refused, or the image did not verify (``current/``
            is untouched).
    """
    incoming = await asyncio.to_thread(_fresh_incoming, store, owner)
    sink = SpoolSink(incoming, owner, label)
    sums: dict[str, StreamChecksum] = {}

    def tap(entry: m.FileEntry):
        if not standard or entry.name != IMAGE_NAME:
            return None
        sums[entry.name] = StreamChecksum()  # (a second "image" entry starts its sum afresh)
        return sums[entry.name].update

    counts = await receive_stream(conn, sink, peer=f"the starter of job {label}", taps=tap)
    if standard:
        image = sums.get(IMAGE_NAME)
        await asyncio.to_thread(standard_image, incoming, image.value if image is not None else None)
    await asyncio.to_thread(_swap_in, store)
    return counts


def _stored_entries(current: Path, owner: ofs.Identity | None, job: str):
    """The stored checkpoint as a file stream's entries (nothing when there is none)."""
    try:
        fd = os.open(current, _DIR)
    except FileNotFoundError:
        return
    try:
        yield from tree_entries("", fd, owner, job)
    finally:
        os.close(fd)


class CheckpointService:
    """Serves SendCheckpoint and FetchCheckpoint for the schedd's service (see the module docstring)."""

    def __init__(self, service):
        self.service = service
        self._sweeping = False
        self._locks: dict[tuple[int, int], asyncio.Lock] = {}
        self._users: collections.Counter = collections.Counter()

    @contextlib.asynccontextmanager
    async def _exclusive(self, job_id: str):
        """One checkpoint conversation of job ``job_id`` at a time: a store and the next one
        (a periodic checkpoint still in flight when the vacate's arrives) would share
        ``incoming/``."""
        key = parse_job_id(job_id)
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] += 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key], self._locks[key]

    def _sweep_soon(self) -> None:
        """Start the periodic sweep of stores whose job left the queue (once)."""
        if self._sweeping:
            return
        self._sweeping = True
        self.service.start_task(self._sweep_forever(), "sweep checkpoint stores")

    async def _sweep_forever(self) -> None:
        core = self.service.core
        while True:
            await self.service.clock.sleep(SWEEP_INTERVAL)
            if core.settings.spool:
                stores = await asyncio.to_thread(checkpoint_stores, core.settings.spool)
                gone = stale_stores(stores, lambda job_id: core.job(job_id) is not None)  # (the queue: here)
                await asyncio.to_thread(_remove, gone)
                for store in gone:
                    self.service.log.info("removed the checkpoints of a job that left the queue: %s", store)

    def _run(self, msg: m.SendCheckpoint | m.FetchCheckpoint) -> tuple[dict[str, Any], str, Path]:
        """The job's values, ``cluster.proc`` and checkpoint store, when ``msg``'s claim runs it.

        Raises:
            TransferError: no run of the job on that claim, or no SPOOL.
        """
        core = self.service.core
        job_id = parse_job_id(msg.job_id)
        shadow = core.shadows.get(job_id)
        job = core.job(job_id)
        if shadow is None or shadow.claim_id != msg.claim_id or job is None:
            raise TransferError(f"no run of job {msg.job_id} on that claim; the checkpoint transfer is refused")
        if not core.settings.spool:
            raise TransferError("the schedd has no SPOOL directory configured to keep checkpoints in; set SPOOL")
        return ad_values(ad_text(job)), msg.job_id, checkpoint_directory(core.settings.spool, *job_id)

    @staticmethod
    def _owner(ad: dict[str, Any], label: str) -> ofs.Identity:
        try:
            return ofs.Identity.owner(ad.get("Owner"))
        except ofs.OwnerFileError as exc:
            raise TransferError(f"job {label}: {exc}") from None

    async def store(self, conn, msg: m.SendCheckpoint, peer=None) -> None:
        """Receive checkpoint ``msg.number`` into the job's store, have the core record it, answer."""
        log, started = self.service.log, self.service.clock.time()
        self._sweep_soon()
        try:
            async with self._exclusive(msg.job_id):
                cpu = process_cpu()  # (after the wait: an earlier store's work is charged to it only)
                ad, label, store = self._run(msg)
                owner = self._owner(ad, label)
                counts = await receive_checkpoint(conn, store, owner, label,
                                                  standard=ad.get("JobUniverse") == STANDARD_UNIVERSE)
        except (TransferError, ofs.OwnerFileError, OSError) as exc:
            log.warning("job %s: checkpoint %d not stored: %s", msg.job_id, msg.number, exc)
            with contextlib.suppress(HTCError):
                await conn.send_error("bad_request", f"checkpoint {msg.number} of job {msg.job_id} not stored: {exc}")
                await conn.linger()
            return
        except HTCError as exc:  # the starter went away mid-stream: current/ is untouched
            log.info("job %s: checkpoint %d transfer stopped: %s", msg.job_id, msg.number, exc)
            return
        log.info("job %s: checkpoint %d stored (%d entries, %d bytes) from %s", msg.job_id, msg.number,
                 counts.files, counts.bytes, whence(peer))
        self.service.feed(CheckpointStored(parse_job_id(msg.job_id), msg.claim_id, msg.number, started,
                                           counts.files, counts.bytes, process_cpu() - cpu))
        with contextlib.suppress(HTCError):
            await conn.send(m.Ack(detail=f"checkpoint {msg.number}: {counts.files} entries, {counts.bytes} bytes"))

    async def fetch(self, conn, msg: m.FetchCheckpoint, peer=None) -> None:
        """Send the job's latest checkpoint as a file stream."""
        log = self.service.log
        try:
            async with self._exclusive(msg.job_id):  # (not while a new one is swapped in)
                ad, label, store = self._run(msg)
                owner = self._owner(ad, label)
                counts = await send_stream(conn, _stored_entries(store / "current", owner, label))
            log.info("job %s: sent its checkpoint (%d entries, %d bytes) to %s", label, counts.files, counts.bytes,
                     whence(peer))
        except TransferError as exc:
            log.warning("job %s: checkpoint not sent: %s", msg.job_id, exc)
            with contextlib.suppress(HTCError):
                await conn.send_error("bad_request", str(exc))
        except HTCError as exc:
            log.info("job %s: checkpoint transfer stopped: %s", msg.job_id, exc)
