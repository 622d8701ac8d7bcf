"""htc.daemons.job_io_relay.pump: bytes between two local sockets across a real connection."""

from __future__ import annotations

import asyncio
import socket

import pytest

from htc.daemons.job_io_relay import pump
from htc.wire import messages as m
from htc.wire.errors import WireError
from htc.wire.transport import Connection


async def _connections() -> tuple[Connection, Connection]:
    a, b = socket.socketpair()
    ra, wa = await asyncio.open_unix_connection(sock=a)
    rb, wb = await asyncio.open_unix_connection(sock=b)
    return Connection(ra, wa, label="starter"), Connection(rb, wb, label="schedd")


async def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    loop = asyncio.get_running_loop()
    data = b""
    while len(data) < n:
        chunk = await loop.sock_recv(sock, n - len(data))
        assert chunk, "closed early"
        data += chunk
    return data


def test_bytes_cross_both_ways_and_the_job_closing_ends_both_pumps():
    async def main():
        starter_conn, schedd_conn = await _connections()
        job, starter_end = socket.socketpair()
        server, schedd_end = socket.socketpair()
        for s in (job, server):
            s.setblocking(False)
        near = asyncio.ensure_future(pump(starter_conn, starter_end))
        far = asyncio.ensure_future(pump(schedd_conn, schedd_end))
        loop = asyncio.get_running_loop()
        big = bytes(range(256)) * 8192  # 2 MiB: more than one JobIOBytes
        _, got = await asyncio.gather(loop.sock_sendall(job, big), _recv_exactly(server, len(big)))
        assert got == big
        await loop.sock_sendall(server, b"reply")
        assert await _recv_exactly(job, 5) == b"reply"
        job.close()  # the job exits
        assert await loop.sock_recv(server, 10) == b""  # the server sees its end close
        counts = await asyncio.wait_for(far, 20)
        near_counts = await asyncio.wait_for(near, 20)
        server.close()
        return counts, near_counts

    far, near = asyncio.run(main())
    assert (near.out, near.into) == (2 * 1024 * 1024, 5)
    assert (far.into, far.out) == (2 * 1024 * 1024, 5)
    assert far.cpu > 0 and near.cpu > 0  # passing the chunks on took some CPU (the schedd's: its Leverage)


def test_a_message_other_than_job_io_bytes_is_a_protocol_error():
    async def main():
        ours, theirs = await _connections()
        local, end = socket.socketpair()
        task = asyncio.ensure_future(pump(ours, end))
        await theirs.send(m.Ack(detail="not bytes"))
        with pytest.raises(WireError, match="JobIOBytes, not Ack"):
            await asyncio.wait_for(task, 20)
        local.setblocking(False)
        assert await asyncio.get_running_loop().sock_recv(local, 10) == b""  # closed
        local.close()
        await theirs.aclose()

    asyncio.run(main())


def test_an_empty_chunk_is_refused():
    with pytest.raises(ValueError):
        m.JobIOBytes(data=b"")
