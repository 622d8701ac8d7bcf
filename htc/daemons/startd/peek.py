"""``htc tail`` across hosts: the startd reads a running job's files for its owner (PeekJob).

Theory of operation
-------------------
HTCondor's condor_tail asks the starter that runs the job. Here the tool asks the startd whose
address is the job ad's ``StartdIpAddr`` (over SSH when it is another host's), with a
:class:`~htc.wire.messages.PeekJob`; the startd finds the starter running that job and answers
with the asked bytes of each file (:class:`~htc.wire.messages.PeekReply`).

Who may look: the job's owner or an administrator. A peer on this host is the owner when its
account is the job's ``Owner``; a peer from another host when the identity it proved is the
job's ``User`` (``alice@pool``), which the schedd set from the identity that submitted it.

What may be read: ``stdout`` and ``stderr`` are the starter's captures in the sandbox
(``_condor_stdout``, ``_condor_stderr``); any other name is a relative path inside the sandbox.
The startd runs as root and the sandbox belongs to the job, which may plant links in it, so a
path is opened one component at a time relative to the one before with ``O_NOFOLLOW`` (a link
anywhere on the way is refused, never followed) and only a regular file is read: a job cannot
make the startd read a file its owner could not.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from htc.daemons.job_files import STDERR_NAME, STDOUT_NAME
from htc.wire import messages as m
from htc.wire.transport import Connection, PeerInfo

__all__ = ["PeekRefused", "install_peek", "may_peek", "read_chunk", "sandbox_path"]

_STREAMS = {"stdout": STDOUT_NAME, "stderr": STDERR_NAME}


class PeekRefused(Exception):
    """A file cannot be read for the client; the text says why (sent as ErrorReply)."""

    def __init__(self, code: str, text: str):
        super().__init__(text)
        self.code = code


def sandbox_path(name: str) -> PurePosixPath:
    """The relative path in the sandbox that ``name`` means (``stdout`` -> ``_condor_stdout``).

    Raises:
        PeekRefused: an absolute path, or one that climbs out with ``..``.
    """
    path = PurePosixPath(_STREAMS.get(name, name))
    if path.is_absolute() or ".." in path.parts or not path.parts or "\0" in name:
        raise PeekRefused("bad_request", f"{name!r}: name a file inside the job's sandbox, relative to it")
    return path


def read_chunk(sandbox: Path, name: str, offset: int, max_bytes: int) -> m.PeekChunk:
    """Up to ``max_bytes`` of ``name`` in ``sandbox`` from ``offset`` (-1: the last bytes),
    no link followed on the way (module header).

    Raises:
        PeekRefused: no such file, a link, not a regular file, or a bad name.
    """
    parts = sandbox_path(name).parts
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(sandbox, flags | os.O_DIRECTORY)
    except OSError as exc:
        raise PeekRefused("not_found", f"the job's sandbox is gone ({exc.strerror}): it has just ended") from None
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            except OSError as exc:
                raise PeekRefused("not_found", f"{name}: {part} is not a directory of the sandbox "
                                               f"({exc.strerror})") from None
            os.close(fd)
            fd = nxt
        try:
            leaf = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
        except FileNotFoundError:
            if name in _STREAMS:
                raise PeekRefused("not_found", f"the job's {name} is not kept in its sandbox (its submit "
                                               f"description names no {'output' if name == 'stdout' else 'error'} "
                                               "file, or the job writes it in place on a shared file "
                                               "system)") from None
            raise PeekRefused("not_found", f"the job has no {name} file (yet)") from None
        except OSError as exc:  # ELOOP: a link
            raise PeekRefused("denied", f"{name} cannot be read: {exc.strerror} (links are not followed)") from None
    finally:
        os.close(fd)
    try:
        st = os.fstat(leaf)
        if not stat.S_ISREG(st.st_mode):
            raise PeekRefused("bad_request", f"{name} is not a regular file")
        start = max(0, st.st_size - max_bytes) if offset < 0 else min(offset, st.st_size)
        data = os.pread(leaf, max_bytes, start)
    finally:
        os.close(leaf)
    return m.PeekChunk(name=name, offset=start, size=st.st_size, data=data)


def may_peek(peer: PeerInfo, job_ad: dict) -> bool:
    """Whether ``peer`` may read the files of the job with ``job_ad`` (module header)."""
    if peer.administrator:
        return True
    if peer.host is not None:
        user = job_ad.get("User")
        return bool(peer.identity) and isinstance(user, str) and user.lower() == str(peer.identity).lower()
    owner = job_ad.get("Owner")
    return peer.user is not None and isinstance(owner, str) and owner == peer.user


def _job_id(job_ad: dict) -> str:
    return f"{job_ad.get('ClusterId')}.{job_ad.get('ProcId')}"


def install_peek(service) -> None:
    """Serve PeekJob on the startd ``service`` (a StartdService: its ``starters`` and log)."""

    async def peek(conn: Connection, msg: m.PeekJob, peer: PeerInfo) -> None:
        wanted = msg.job_id if "." in msg.job_id else f"{msg.job_id}.0"
        found = [run.starter for run in service.starters.values()
                 if _job_id(run.starter.job_ad) == wanted and run.starter.sandbox is not None]
        if not found:
            await conn.send(m.ErrorReply(code="not_found", message=f"job {wanted} is not running on this "
                                                                   "machine (it may have just finished)"))
            return
        starter = found[0]
        if not may_peek(peer, starter.job_ad):
            service.log.warning("PERMISSION DENIED to %s for PeekJob of job %s: not its owner (%s) nor an "
                                "administrator", peer.identity or peer.user or peer.description, wanted,
                                starter.job_ad.get("User") or starter.job_ad.get("Owner"))
            await conn.send(m.ErrorReply(code="denied", message=f"job {wanted} belongs to "
                                         f"{starter.job_ad.get('User') or starter.job_ad.get('Owner')}; only its "
                                         "owner or an administrator may read its files"))
            return
        offsets = msg.offsets or (-1,) * len(msg.names)
        chunks = []
        try:
            for name, offset in zip(msg.names, offsets):
                chunks.append(read_chunk(starter.sandbox.path, name, offset, msg.max_bytes))
        except PeekRefused as exc:
            await conn.send(m.ErrorReply(code=exc.code, message=f"job {wanted}: {exc}"))
            return
        await conn.send(m.PeekReply(chunks=tuple(chunks), running=True))

    service.register_conversation(m.PeekJob, peek)
