"""Connections and the Unix transport, over real sockets in a temporary directory."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from htc.wire import messages as m
from htc.wire.errors import (
    AddressInUse,
    BadAddress,
    ConnectionClosed,
    DaemonUnreachable,
    FrameTooLarge,
    RemoteError,
    RequestTimeout,
    WireError,
)
from htc.wire.framing import frame
from htc.wire.transport import Connection, UnixTransport


@pytest.fixture
def sockdir():
    # Unix socket paths are limited to 107 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="htcw-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def answer(conn: Connection) -> None:
    """A tiny daemon: Ping -> Pong, QueryAds -> AdsReply of its constraint, else ErrorReply."""
    while True:
        msg = await conn.recv(timeout=10)
        if isinstance(msg, m.Ping):
            await conn.send(m.Pong(daemon="test", pid=os.getpid(), started_at=0))
        elif isinstance(msg, m.QueryAds):
            await conn.send(m.AdsReply(ads=(f"[ Constraint = {msg.constraint!r} ]",) * (msg.limit or 1)))
        else:
            await conn.send(m.ErrorReply(code="unknown_request", message=type(msg).__name__))


def run(coro_fn, sockdir, handler=answer, max_frame=2 ** 20):
    """Serve ``handler`` as "testd" and run ``coro_fn(transport)`` as its client."""

    async def main():
        transport = UnixTransport(sockdir, max_frame=max_frame)
        async with asyncio.TaskGroup() as tg:
            server = await transport.start_server("testd", handler, task_group=tg)
            try:
                return await coro_fn(transport, server)
            finally:
                await server.aclose()

    return asyncio.run(main())


def test_request_reply(sockdir):
    async def client(transport, server):
        async with await transport.open_connection("testd") as conn:
            pong = await conn.request(m.Ping())
            ads = await conn.request(m.QueryAds(ad_type=m.AdType.Startd, constraint="x", limit=3))
            return pong, ads

    pong, ads = run(client, sockdir)
    assert pong == m.Pong(daemon="test", pid=os.getpid(), started_at=0)
    assert len(ads.ads) == 3
    assert not (sockdir / "testd.sock").exists(), "closing the server removes its socket file"


def test_error_reply_becomes_remote_error(sockdir):
    async def client(transport, server):
        async with await transport.open_connection("testd") as conn:
            with pytest.raises(RemoteError) as info:
                await conn.request(m.Reschedule())
            assert info.value.code == "unknown_request"
            assert "testd refused the request (unknown_request): Reschedule" in str(info.value)
            # The connection is still usable after an error reply.
            return await conn.request(m.Ping())

    assert isinstance(run(client, sockdir), m.Pong)


def test_wrong_reply_type_is_a_wire_error(sockdir):
    async def client(transport, server):
        async with await transport.open_connection("testd") as conn:
            with pytest.raises(WireError, match="answered Ping with Pong, expected AdsReply"):
                await conn.request(m.Ping(), expect=m.AdsReply)

    run(client, sockdir)


def test_peer_credentials_are_known_to_the_server(sockdir):
    seen = []

    async def handler(conn):
        seen.append(conn.peer)
        await answer(conn)

    async def client(transport, server):
        async with await transport.open_connection("testd") as conn:
            await conn.request(m.Ping())

    run(client, sockdir, handler)
    assert (seen[0].pid, seen[0].uid) == (os.getpid(), os.getuid())


async def _raw_exchange(path: Path, data: bytes) -> list[m.Message]:
    """Send raw bytes, then read frames until the server closes; return the messages."""
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(data)
    await writer.drain()
    replies = []
    conn = Connection(reader, writer, label="server")
    try:
        while True:
            replies.append(await conn.recv(timeout=5))
    except ConnectionClosed:
        pass
    finally:
        await conn.aclose()
    return replies


def test_server_survives_fuzzed_garbage(sockdir):
    rng = random.Random(5)
    blobs = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))) for _ in range(60)]
    # A valid length header around garbage, an invalid message in a valid frame, a bad tag.
    blobs += [frame(b"\xc1\xc1"), frame(b"\x81\xa4type\xa4Nope"), frame(b"")]

    async def client(transport, server):
        path = transport.path_of("testd")
        outcomes = []
        for blob in blobs:
            # Half-close so that a short blob (an incomplete header) still ends the exchange.
            reader, writer = await asyncio.open_unix_connection(path)
            writer.write(blob)
            writer.write_eof()
            conn = Connection(reader, writer, label="server")
            got = []
            try:
                while True:
                    got.append(await conn.recv(timeout=5))
            except (ConnectionClosed, WireError):
                pass
            await conn.aclose()
            outcomes.append(got)
            # ... and the server still answers a well-behaved client.
            async with await transport.open_connection("testd") as good:
                assert isinstance(await good.request(m.Ping()), m.Pong)
        return outcomes

    outcomes = run(client, sockdir)
    errors = [msg for got in outcomes for msg in got]
    assert errors, "garbage must be answered with ErrorReply"
    assert all(isinstance(e, m.ErrorReply) and e.code in ("malformed", "too_large") for e in errors)
    # The three framed-but-invalid bodies are each answered with a reason.
    assert [got[0].code for got in outcomes[-3:]] == ["malformed"] * 3
    assert "Invalid value 'Nope'" in outcomes[-2][0].message


def test_oversize_frame_is_refused_and_connection_closed(sockdir):
    async def client(transport, server):
        path = transport.path_of("testd")
        replies = await _raw_exchange(path, (2 ** 20 + 1).to_bytes(4, "big") + b"x" * 100)
        async with await transport.open_connection("testd") as conn:
            # The sender refuses to build an oversize frame, too.
            with pytest.raises(FrameTooLarge):
                await conn.send(m.AdsReply(ads=("[ A = \"" + "x" * 2 ** 20 + "\" ]",)))
            # ... and a reply above the client's limit is refused on arrival.
            conn.max_frame = 100
            with pytest.raises(FrameTooLarge, match="above the limit of 100"):
                await conn.request(m.QueryAds(ad_type=m.AdType.Startd, constraint="y", limit=50))
        async with await transport.open_connection("testd") as conn:
            assert isinstance(await conn.request(m.Ping()), m.Pong)
        return replies

    replies = run(client, sockdir)
    assert len(replies) == 1 and replies[0].code == "too_large"
    assert "1048577-byte frame" in replies[0].message


def test_silent_server_times_out_and_dead_one_is_unreachable(sockdir):
    async def silent(conn):
        await conn.recv(timeout=10)
        await asyncio.sleep(10)

    async def client(transport, server):
        async with await transport.open_connection("testd") as conn:
            with pytest.raises(RequestTimeout, match="sent nothing for 0.2 s"):
                await conn.request(m.Ping(), timeout=0.2)
        with pytest.raises(DaemonUnreachable, match="no nobody daemon is listening.*htc pool start"):
            await transport.open_connection("nobody")

    run(client, sockdir, silent)


def test_closed_connection_mid_request(sockdir):
    async def hangup(conn):
        await conn.recv()

    async def client(transport, server):
        async with await transport.open_connection("testd") as conn:
            with pytest.raises(ConnectionClosed, match="instead of answering Ping"):
                await conn.request(m.Ping())

    run(client, sockdir, hangup)


def test_stale_socket_is_replaced_and_live_one_refused(sockdir):
    stale = sockdir / "testd.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()  # a socket file nobody listens on, as a killed daemon leaves behind

    async def client(transport, server):
        async with asyncio.TaskGroup() as tg:
            with pytest.raises(AddressInUse, match="already listening"):
                await transport.start_server("testd", answer, task_group=tg)
        async with await transport.open_connection("testd") as conn:
            return await conn.request(m.Ping())

    assert isinstance(run(client, sockdir), m.Pong)


def test_bad_addresses(sockdir):
    transport = UnixTransport(sockdir)
    with pytest.raises(BadAddress, match="not a daemon name"):
        transport.path_of("../etc/passwd")
    with pytest.raises(BadAddress, match="shorter HTC_HOME"):
        UnixTransport("/tmp/" + "d" * 120).path_of("collector")
    (sockdir / "plain.sock").write_text("not a socket")

    async def main():
        async with asyncio.TaskGroup() as tg:
            with pytest.raises(AddressInUse, match="is not a socket"):
                await transport.start_server("plain", answer, task_group=tg)

    asyncio.run(main())


def test_handler_bug_closes_only_that_connection(sockdir, caplog):
    # A bug met while serving one peer is that peer's answer (internal), not the server's end.
    async def buggy(conn):
        msg = await conn.recv()
        if isinstance(msg, m.Reconfig):
            raise ZeroDivisionError("bug in a daemon")
        await conn.send(m.Pong(daemon="testd", pid=os.getpid(), started_at=0.0))

    async def main():
        transport = UnixTransport(sockdir)
        async with asyncio.TaskGroup() as tg:
            server = await transport.start_server("testd", buggy, task_group=tg)
            async with await transport.open_connection("testd") as conn:
                with pytest.raises(RemoteError) as info:
                    await conn.request(m.Reconfig(), timeout=10)
                assert info.value.code == "internal"
                assert "ZeroDivisionError: bug in a daemon" in str(info.value)
            async with await transport.open_connection("testd") as conn:
                assert isinstance(await conn.request(m.Ping(), timeout=10), m.Pong)
            await server.aclose()

    asyncio.run(main())
    assert "ZeroDivisionError: bug in a daemon" in caplog.text and "Traceback" in caplog.text


def test_server_close_cancels_open_connections(sockdir):
    async def client(transport, server):
        conn = await transport.open_connection("testd")
        await conn.request(m.Ping())
        assert server.active_connections == 1
        await server.aclose()
        assert server.active_connections == 0
        with pytest.raises(ConnectionClosed):
            await conn.recv(timeout=5)
        await conn.aclose()
        with pytest.raises(DaemonUnreachable):
            await transport.open_connection("testd")

    run(client, sockdir)


def test_a_blocking_connection_speaks_the_same_frames_and_raises_the_same_errors(sockdir):
    from htc.wire import blocking

    async def hangup_on_reschedule(conn):
        while True:
            msg = await conn.recv(timeout=10)
            if isinstance(msg, m.Reschedule):
                return  # hang up without answering
            if isinstance(msg, m.Reconfig):
                await asyncio.sleep(2)  # silent for longer than the client waits
                continue
            await conn.send(m.Pong(daemon="test", pid=os.getpid(), started_at=0) if isinstance(msg, m.Ping) else
                            m.ErrorReply(code="unknown_request", message=type(msg).__name__))

    def blocking_client(transport):
        conn = blocking.connect(transport, "testd", timeout=5)
        pong = conn.request(m.Ping(), timeout=5)
        with pytest.raises(RemoteError, match="unknown_request"):
            conn.request(m.QueryAds(ad_type=m.AdType.Startd), timeout=5)
        with pytest.raises(WireError, match="answered Ping with Pong, expected AdsReply"):
            conn.request(m.Ping(), expect=m.AdsReply, timeout=5)
        again = conn.request(m.Ping(), timeout=5)  # still usable after an error reply
        with pytest.raises(ConnectionClosed, match="instead of answering Reschedule"):
            conn.request(m.Reschedule(), timeout=5)
        assert conn.closed
        slow = blocking.connect(transport, "testd", timeout=5)
        with pytest.raises(RequestTimeout, match="did not answer Reconfig within 0.2 s"):
            slow.request(m.Reconfig(), timeout=0.2)
        assert slow.closed  # a late reply must not be taken for the next request's
        with pytest.raises(DaemonUnreachable, match="no nobody daemon is listening"):
            blocking.connect(transport, "nobody")
        return pong, again

    async def client(transport, server):
        return await asyncio.to_thread(blocking_client, transport)

    pong, again = run(client, sockdir, hangup_on_reschedule)
    assert pong == again == m.Pong(daemon="test", pid=os.getpid(), started_at=0)


def test_only_a_unix_transport_has_a_blocking_form():
    from htc.wire import blocking
    from htc.wire.transport import Transport

    class Elsewhere(Transport):
        async def open_connection(self, address, *, timeout=None):
            raise AssertionError("not used")

        async def start_server(self, address, handler, *, task_group):
            raise AssertionError("not used")

    assert blocking.connect(Elsewhere(), "schedd") is None
