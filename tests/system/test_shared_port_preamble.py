"""The Forwarded preamble on a daemon's Unix socket: believed only from root or the pool's account."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from htc.wire import messages as m
from htc.wire.framing import frame
from htc.wire.transport import UnixTransport

NOBODY = 65534

async def serve(socket_dir: Path, body):
    seen = []

    async def handler(conn):
        while True:
            msg = await conn.recv()
            seen.append((type(msg).__name__, conn.peer))
            await conn.send(m.Pong(daemon=f"{conn.peer.host}|{conn.peer.identity}", pid=1, started_at=0))

    async with asyncio.TaskGroup() as tg:
        server = await UnixTransport(socket_dir).start_server("echo", handler, task_group=tg)
        try:
            await body(server)
        finally:
            await server.aclose()
    return seen


@pytest.fixture
def socket_dir():
    top = Path(tempfile.mkdtemp(prefix="htcpre"))
    os.chmod(top, 0o755)
    yield top / "sockets"
    shutil.rmtree(top, ignore_errors=True)


def test_a_preamble_from_the_pools_account_names_the_network_peer(socket_dir):
    async def body(server):
        reader, writer = await asyncio.open_unix_connection(server.path)
        writer.write(frame(m.encode(m.Forwarded(host="10.200.0.7", identity="alice@pool",
                                                authenticated_by="token"))) + frame(m.encode(m.Ping())))
        header = await reader.readexactly(4)
        reply = m.decode(await reader.readexactly(int.from_bytes(header, "big")))
        assert reply.daemon == "10.200.0.7|alice@pool"
        writer.close()

    seen = asyncio.run(serve(socket_dir, body))
    name, peer = seen[0]
    assert name == "Ping"
    assert (peer.host, peer.identity, peer.authenticated_by, peer.uid, peer.pid) == \
        ("10.200.0.7", "alice@pool", "token", None, None)


def test_a_preamble_after_the_first_message_is_refused(socket_dir):
    async def body(server):
        reader, writer = await asyncio.open_unix_connection(server.path)
        writer.write(frame(m.encode(m.Ping())) + frame(m.encode(m.Forwarded(host="10.200.0.7"))))
        data = await reader.read()
        assert b"may only open a connection" in data
        writer.close()

    seen = asyncio.run(serve(socket_dir, body))
    assert [name for name, _ in seen] == ["Ping"]
    assert seen[0][1].host is None and seen[0][1].uid == os.geteuid()


def test_a_preamble_from_another_user_is_refused_and_the_server_serves_on(socket_dir):
    if os.geteuid() != 0:
        pytest.skip("needs a second account to connect as: run the tests as root, as CI does")

    async def body(server):
        sock = socket.socket(socket.AF_UNIX)
        os.setegid(NOBODY)
        os.seteuid(NOBODY)          # SO_PEERCRED records who connected: nobody, not the pool's account
        try:
            sock.connect(str(server.path))
        finally:
            os.seteuid(0)
            os.setegid(0)
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        writer.write(frame(m.encode(m.Forwarded(host="10.9.9.9", identity="root@pool", authenticated_by="pool")))
                     + frame(m.encode(m.Ping())))
        data = await reader.read()
        assert b"refusing a Forwarded preamble" in data
        writer.close()
        reader, writer = await asyncio.open_unix_connection(server.path)
        writer.write(frame(m.encode(m.Ping())))
        header = await reader.readexactly(4)
        assert m.decode(await reader.readexactly(int.from_bytes(header, "big"))).daemon == "None|None"
        writer.close()

    seen = asyncio.run(serve(socket_dir, body))
    assert [(name, peer.uid) for name, peer in seen] == [("Ping", os.geteuid())]
