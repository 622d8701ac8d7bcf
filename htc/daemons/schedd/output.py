"""Streamed job output on the submit side: where it goes, and the write the service does.

The schedd core decides, the service writes (as with :mod:`htc.daemons.schedd.userlog`). A
running job with ``stream_output``/``stream_error`` (``StreamOut``/``StreamErr``) has its
startd send new bytes of its stdout/stderr as :class:`~htc.wire.messages.JobOutput`
(:mod:`htc.daemons.starter.stream`); the shadow turns each into a :class:`WriteJobOutput`
of the job's ``Out``/``Err`` file -- relative to ``Iwd``, as the starter's final transfer
resolves it -- which the service performs before the Ack goes back. Each chunk is written at
its offset (``pwrite``), so a chunk sent twice leaves the file as it was. When a run of a
streaming job starts, the shadow truncates its streamed files first (a ``truncate`` write of
nothing at offset 0): an evicted job's next run writes its output afresh, as HTCondor's does.
A file that cannot be written costs that chunk and a line in the SchedLog, never the schedd.
Every write uses the rights of the job's owner and never follows a link at the file
(:mod:`htc.daemons.owner_files`): ``output = /etc/passwd`` is refused as the owner would be.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from htc.daemons import owner_files as ofs
from htc.daemons.schedd.events import WriteJobOutput
from htc.daemons.schedd.userlog import literal
from htc.daemons.job_files import streamed_files

#: stream -> the job attribute naming its file
STREAM_ATTRS = {"stdout": "Out", "stderr": "Err"}

_ATTRS = ("Out", "Err", "StreamOut", "StreamErr", "TransferOut", "TransferErr", "ShouldTransferFiles")


def job_output(job: Mapping[str, str], path: str, offset: int, data: bytes,
               truncate: bool = False) -> WriteJobOutput:
    """The write of one streamed chunk (or truncation) of ``job``'s output file ``path``."""
    owner = literal(job, "Owner")
    job_id = f"{literal(job, 'ClusterId', 0)}.{literal(job, 'ProcId', 0)}"
    return WriteJobOutput(path, offset, data, truncate, owner if isinstance(owner, str) else None, job_id)


def streamed_paths(job: Mapping[str, str]) -> dict[str, str]:
    """A stored job's streamed streams and the files they go to (``{"stdout": "/home/u/out"}``)."""
    values = {name: literal(job, name) for name in _ATTRS}
    streams = streamed_files({k: v for k, v in values.items() if v is not None})
    if not streams:
        return {}
    iwd = literal(job, "Iwd")
    base = Path(iwd) if isinstance(iwd, str) and iwd else Path("/")
    out = {}
    for stream in streams:
        target = str(values[STREAM_ATTRS[stream]])
        if "://" in target:
            scheme, _, rest = target.partition("://")
            if scheme.lower() != "file":
                continue  # no plugin would deliver it at the end either
            target = rest
        path = Path(target)
        out[stream] = str(path if path.is_absolute() else base / path)
    return out


def truncations(job: Mapping[str, str]) -> list[WriteJobOutput]:
    """The writes that empty a streaming job's files as a run of it starts."""
    return [job_output(job, path, 0, b"", truncate=True) for path in streamed_paths(job).values()]


def write_job_output(action: WriteJobOutput) -> None:
    """Carry out one :class:`WriteJobOutput` with the rights of the job's owner, never through
    a link and only into a regular file (:mod:`htc.daemons.owner_files`).

    Raises:
        OSError: the file cannot be created or written (an
            :class:`~htc.daemons.owner_files.OwnerFileError` says why and for whom).
    """
    who = ofs.Identity.owner(action.owner)
    path = ofs.check_path(action.path, "output file", action.job_id)
    ofs.makedirs(os.path.dirname(path) or ".", who, what="output directory", job=action.job_id)
    fd = ofs.open_write(path, who, what="output file", job=action.job_id, truncate=action.truncate)
    try:
        view = memoryview(action.data)
        offset = action.offset
        while view:
            written = os.pwrite(fd, view, offset)
            view, offset = view[written:], offset + written
    finally:
        os.close(fd)


__all__ = ["STREAM_ATTRS", "WriteJobOutput", "job_output", "streamed_paths", "truncations", "write_job_output"]
