"""htc.runtime.remote_io.serve_socket: several job connections served by one event loop."""

from __future__ import annotations

import asyncio
import os

import pytest

from htc.errors import UsageError
from htc.runtime import protocol as P
from htc.runtime import remote_io


async def _client(sock, name: bytes) -> bytes:
    loop = asyncio.get_running_loop()
    sock.setblocking(False)
    await loop.sock_sendall(sock, P.encode_request(P.Op.OPEN, a1=os.O_WRONLY | os.O_CREAT, a2=0o644, path=name))
    h = P.decode_reply(await loop.sock_recv(sock, 4096))[0]
    # three pipelined writes and a read-back in one send
    batch = b"".join(P.encode_request(P.Op.WRITE, h, data=b"%s-%d;" % (name, i), flags=P.NOREPLY) for i in range(3))
    await loop.sock_sendall(sock, batch + P.encode_request(P.Op.CLOSE, h))
    assert P.decode_reply(await loop.sock_recv(sock, 4096))[:2] == (0, 0)
    await loop.sock_sendall(sock, P.encode_request(P.Op.OPEN, a1=os.O_RDONLY, path=name))
    h = P.decode_reply(await loop.sock_recv(sock, 4096))[0]
    await loop.sock_sendall(sock, P.encode_request(P.Op.READ, h, 100))
    data = P.decode_reply(await loop.sock_recv(sock, 4096))[3]
    sock.close()
    return data


def test_two_jobs_on_one_loop(tmp_path):
    async def scenario():
        pairs = [remote_io.socket_pair() for _ in range(2)]
        servers = [asyncio.create_task(remote_io.serve_socket(s, tmp_path)) for s, _ in pairs]
        got = await asyncio.wait_for(asyncio.gather(_client(pairs[0][1], b"a"), _client(pairs[1][1], b"b")), 60)
        counts = await asyncio.wait_for(asyncio.gather(*servers), 60)
        return got, counts

    got, counts = asyncio.run(scenario())
    assert got == [b"a-0;a-1;a-2;", b"b-0;b-1;b-2;"]
    assert counts == [7, 7]   # open, 3 writes, close, open, read


def test_job_environment_names_the_pieces(tmp_path):
    env = remote_io.job_environment(tmp_path / "lib.so", 1000, "/htc-remote", cwd=".", pipeline=False)
    assert env == {"LD_PRELOAD": str((tmp_path / "lib.so").resolve()), "JOBRT_IO_FD": "1000",
                   "JOBRT_IO_PREFIX": "/htc-remote", "JOBRT_IO_PIPELINE": "0", "JOBRT_IO_CWD": "."}
    with pytest.raises(UsageError, match="absolute path"):
        remote_io.job_environment("lib.so", 3, "relative")


def test_a_reply_bigger_than_the_socket_buffer(tmp_path):
    blob = os.urandom(6 << 20)
    (tmp_path / "big").write_bytes(blob)

    async def scenario():
        server_end, job_end = remote_io.socket_pair()
        served = asyncio.create_task(remote_io.serve_socket(server_end, tmp_path))
        loop = asyncio.get_running_loop()
        job_end.setblocking(False)
        await loop.sock_sendall(job_end, P.encode_request(P.Op.OPEN, a1=os.O_RDONLY, path=b"big"))
        h = P.decode_reply(await loop.sock_recv(job_end, 4096))[0]
        # the read's reply (6 MiB) fills the socket buffer many times over; the fstat waits behind it
        await loop.sock_sendall(job_end, P.encode_request(P.Op.READ, h, len(blob)) + P.encode_request(P.Op.FSTAT, h))
        got = bytearray()
        need = 2 * P.REPLY.size + len(blob) + P.STAT.size
        while len(got) < need:
            chunk = await asyncio.wait_for(loop.sock_recv(job_end, 1 << 20), 60)
            assert chunk
            got += chunk
        ret, err, aux, data, used = P.decode_reply(bytes(got))
        assert (ret, aux) == (len(blob), len(blob)) and data == blob
        assert P.STAT.unpack(P.decode_reply(bytes(got[used:]))[3])[8] == len(blob)
        job_end.close()
        return await asyncio.wait_for(served, 60)

    assert asyncio.run(scenario()) == 3
