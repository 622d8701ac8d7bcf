"""A standard-universe job's forwarded file calls carried over a connection, both ends.

Theory of operation
-------------------
A standard-universe job forwards its file calls over a socket at fd 1000
(:mod:`htc.runtime.remote_io`). When the job's ``Iwd`` is on a shared file system the starter
serves them next to the job. When the execute machine is in another FileSystemDomain
(:func:`htc.daemons.job_files.over_wire`) it cannot see the ``Iwd``; the starter then opens a
connection to the shadow and sends ``RelayJobIO`` (:mod:`htc.wire.messages.checkpoints`); the
schedd checks that the claim runs the job, starts the same file server
(``python -m htc.runtime.remote_io``) as the job's **owner** with the ``Iwd`` as its root,
answers Ack, and from then on both sides :func:`pump`: the bytes from their local socket go out
as ``JobIOBytes`` frames and the frames that come in are written to the socket, unchanged (the
file server's protocol runs end to end; nothing here parses it).

Either end closing ends the relay: the job exits (its socket closes, the starter closes the
connection, the schedd closes the server's socket and the server exits), or the server or the
connection fails (the other side closes its socket, and the job's next forwarded call fails
with EIO, as a broken local server makes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

from htc.errors import HTCError
from htc.wire import messages as m
from htc.wire.errors import WireError

__all__ = ["RelayCounts", "pump"]


class RelayCounts:
    """Bytes relayed each way by one :func:`pump`."""

    def __init__(self) -> None:
        self.out = 0  # from the local socket to the connection
        self.into = 0  # from the connection to the local socket
        self.cpu = 0.0  # thread CPU seconds of passing each chunk on (not the waits; htc.daemons.schedd.leverage)


async def pump(conn, sock: socket.socket, counts: RelayCounts | None = None) -> RelayCounts:
    """Relay between ``sock`` and ``conn`` (``JobIOBytes`` frames) until either side ends; then
    close both. Returns the byte counts.

    Raises:
        WireError: the peer sent something other than JobIOBytes (both are closed first).
    """
    counts = counts if counts is not None else RelayCounts()
    loop = asyncio.get_running_loop()
    sock.setblocking(False)

    async def outward() -> None:
        with contextlib.suppress(OSError, HTCError):
            while data := await loop.sock_recv(sock, m.MAX_JOB_IO_CHUNK):
                start = time.thread_time()
                await conn.send(m.JobIOBytes(data=data))
                counts.out += len(data)
                counts.cpu += time.thread_time() - start

    async def inward() -> None:
        while True:
            try:
                msg = await conn.recv()
            except WireError:
                raise
            except HTCError:  # closed, or gone
                return
            if not isinstance(msg, m.JobIOBytes):
                raise WireError(f"a job I/O relay carries JobIOBytes, not {type(msg).__name__}")
            start = time.thread_time()
            try:
                await loop.sock_sendall(sock, msg.data)
            except OSError:
                return
            counts.into += len(msg.data)
            counts.cpu += time.thread_time() - start

    tasks = [asyncio.ensure_future(outward()), asyncio.ensure_future(inward())]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                with contextlib.suppress(OSError, HTCError):
                    await task
        sock.close()
        with contextlib.suppress(HTCError, OSError):
            await conn.aclose()
    for task in done:
        task.result()  # (a protocol error from inward)
    return counts

