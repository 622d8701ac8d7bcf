"""PeerConnections (htc/wire/peers.py): reused connections to real servers on Unix sockets."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from htc.wire import messages as m
from htc.wire.errors import ConnectionClosed, DaemonUnreachable, RemoteError, RequestTimeout
from htc.wire.framing import frame
from htc.wire.peers import PeerConnections
from htc.wire.transport import Connection, UnixTransport


@pytest.fixture
def sockdir():
    # Unix socket paths are limited to 107 bytes; pytest's tmp_path can be longer.
    path = Path(tempfile.mkdtemp(prefix="htcp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Daemon:
    """A test server: counts connections and requests; QueryAds(limit=n) waits n/100 s."""

    def __init__(self, idle_timeout: float = 10.0, drop: str | None = None):
        self.accepted = 0
        self.closed = 0
        self.got: list[m.Message] = []
        self.idle_timeout = idle_timeout
        self.drop = drop  # a QueryAds with this constraint is read, then the connection is closed unanswered

    async def serve(self, conn: Connection) -> None:
        self.accepted += 1
        try:
            while True:
                try:
                    msg = await conn.recv(timeout=self.idle_timeout)
                except RequestTimeout:
                    return
                self.got.append(msg)
                if isinstance(msg, m.Ping):
                    await conn.send(m.Pong(daemon="test", pid=os.getpid(), started_at=0))
                elif isinstance(msg, m.QueryAds):
                    if msg.constraint == self.drop:
                        return
                    await asyncio.sleep((msg.limit or 0) / 100)
                    await conn.send(m.AdsReply(ads=(msg.constraint,)))
                else:
                    await conn.send(m.ErrorReply(code="unknown_request", message=type(msg).__name__))
        finally:
            self.closed += 1


def query(text: str, delay_cs: int = 0) -> m.QueryAds:
    return m.QueryAds(ad_type=m.AdType.Any, constraint=text, limit=delay_cs or None)


def run(body, sockdir, daemon: Daemon, **peer_options):
    """Serve ``daemon`` as "testd"; run ``body(peers, transport, server, tg)``."""

    async def main():
        transport = UnixTransport(sockdir)
        peers = PeerConnections(transport, **peer_options)
        async with asyncio.TaskGroup() as tg:
            server = await transport.start_server("testd", daemon.serve, task_group=tg)
            try:
                return await body(peers, transport, server, tg)
            finally:
                await peers.aclose()
                await server.aclose()

    return asyncio.run(main())


def test_sequential_requests_share_one_connection(sockdir):
    daemon = Daemon()

    async def body(peers, *_):
        replies = [await peers.request("testd", query(f"q{i}")) for i in range(20)]
        pong = await peers.request("testd", m.Ping())
        return replies, pong, peers.opened, peers.idle_count("testd")

    replies, pong, opened, idle = run(body, sockdir, daemon)
    assert [r.ads for r in replies] == [(f"q{i}",) for i in range(20)]
    assert pong.daemon == "test"
    assert (daemon.accepted, opened, idle) == (1, 1, 1)


def test_requests_in_flight_use_several_connections_and_at_most_max_idle_stay(sockdir):
    daemon = Daemon()

    async def body(peers, *_):
        replies = await asyncio.gather(*(peers.request("testd", query(f"q{i}", delay_cs=10)) for i in range(5)))
        kept = peers.idle_count("testd")
        await asyncio.sleep(0.1)  # the server notices the connections closed beyond max_idle
        closed = daemon.closed
        again = await asyncio.gather(*(peers.request("testd", query(f"r{i}", delay_cs=10)) for i in range(2)))
        return replies, again, kept, closed, peers.opened

    replies, again, kept, closed, opened = run(body, sockdir, daemon, max_idle=2)
    assert sorted(r.ads[0] for r in replies) == [f"q{i}" for i in range(5)]
    assert [r.ads[0] for r in again] == ["r0", "r1"]
    assert daemon.accepted == 5 and kept == 2 and closed == 3
    assert opened == 5  # the second burst of two found two idle connections


def test_an_error_reply_is_a_whole_answer_and_the_connection_is_kept(sockdir):
    daemon = Daemon()

    async def body(peers, *_):
        with pytest.raises(RemoteError) as refused:
            await peers.request("testd", m.Reconfig())
        pong = await peers.request("testd", m.Ping())
        return refused.value.code, pong, peers.opened

    code, pong, opened = run(body, sockdir, daemon)
    assert code == "unknown_request" and pong.daemon == "test" and opened == 1 == daemon.accepted


def test_a_restarted_server_is_reached_on_a_fresh_connection(sockdir):
    daemon = Daemon()

    async def body(peers, transport, server, tg):
        await peers.request("testd", m.Ping())
        await server.aclose()  # the daemon dies: its connections are closed
        with pytest.raises(DaemonUnreachable):
            await peers.request("testd", m.Ping())
        successor = Daemon()
        again = await transport.start_server("testd", successor.serve, task_group=tg)
        try:
            pong = await peers.request("testd", m.Ping())
            await peers.request("testd", m.Ping())
        finally:
            await again.aclose()
        return pong, successor.accepted, peers.resent

    pong, accepted, resent = run(body, sockdir, daemon)
    assert pong.daemon == "test" and accepted == 1 and resent == 0


def test_a_connection_the_server_closed_while_idle_is_replaced_transparently(sockdir):
    daemon = Daemon(idle_timeout=0.05)

    async def body(peers, *_):
        await peers.request("testd", m.Ping())
        await asyncio.sleep(0.3)  # the server times the idle connection out
        pong = await peers.request("testd", m.Ping())
        return pong, peers.opened, peers.resent

    pong, opened, resent = run(body, sockdir, daemon)
    assert pong.daemon == "test" and opened == 2 == daemon.accepted and resent == 0
    assert [type(x) for x in daemon.got] == [m.Ping, m.Ping]


def test_idle_connections_are_closed_after_idle_timeout(sockdir):
    daemon = Daemon()

    async def body(peers, *_):
        await asyncio.gather(*(peers.request("testd", query("x", delay_cs=5)) for _ in range(3)))
        before = peers.idle_count("testd")
        await asyncio.sleep(0.4)
        return before, peers.idle_count("testd"), daemon.closed

    before, after, closed = run(body, sockdir, daemon, idle_timeout=0.1)
    assert (before, after, closed) == (3, 0, 3)


def test_a_request_whose_connection_drops_after_sending_fails_and_is_not_resent(sockdir):
    daemon = Daemon(drop="drop me")

    async def body(peers, *_):
        await peers.request("testd", m.Ping())  # the connection is now idle and reused below
        with pytest.raises(ConnectionClosed):
            await peers.request("testd", query("drop me"))
        pong = await peers.request("testd", m.Ping())
        return pong, peers.resent

    pong, resent = run(body, sockdir, daemon)
    assert pong.daemon == "test" and resent == 0
    assert [x.constraint for x in daemon.got if isinstance(x, m.QueryAds)] == ["drop me"]


def test_a_timed_out_request_drops_its_connection_so_a_late_reply_is_never_misread(sockdir):
    daemon = Daemon()

    async def body(peers, *_):
        with pytest.raises(RequestTimeout):
            await peers.request("testd", query("slow", delay_cs=30), timeout=0.1)
        fast = await peers.request("testd", query("fast"))
        return fast, peers.opened

    fast, opened = run(body, sockdir, daemon)
    assert fast.ads == ("fast",) and opened == 2


def test_a_send_that_fails_on_a_closed_reused_connection_is_resent_once(sockdir):
    """The peer closed the idle connection, and we have not yet seen its EOF: sending fails
    (EPIPE), nothing was delivered, so the request goes again on a fresh connection."""
    path = sockdir / "testd.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    close_first = threading.Event()
    first_closed = threading.Event()
    seen: list[str] = []

    def serve_one(conn: socket.socket, index: int) -> None:
        with conn:
            while True:
                try:
                    header = conn.recv(4, socket.MSG_WAITALL)
                except OSError:
                    return
                if len(header) < 4:
                    return
                body = conn.recv(int.from_bytes(header, "big"), socket.MSG_WAITALL)
                msg = m.decode(body)
                seen.append(f"{index}:{type(msg).__name__}")
                conn.sendall(frame(m.encode(m.Pong(daemon=f"conn{index}", pid=0, started_at=0))))
                if index == 0:
                    close_first.wait(5)
                    conn.shutdown(socket.SHUT_RDWR)
                    conn.close()
                    first_closed.set()
                    return

    def accept_loop() -> None:
        for index in range(2):
            conn, _ = listener.accept()
            threading.Thread(target=serve_one, args=(conn, index), daemon=True).start()

    acceptor = threading.Thread(target=accept_loop, daemon=True)
    acceptor.start()

    async def main():
        peers = PeerConnections(UnixTransport(sockdir))
        try:
            first = await peers.request("testd", m.Ping())
            close_first.set()
            # Block the event loop: the EOF of the closed connection cannot be noticed before reuse.
            assert first_closed.wait(5)
            time.sleep(0.05)
            second = await peers.request("testd", m.Ping())
            return first, second, peers.resent, peers.opened
        finally:
            await peers.aclose()

    try:
        first, second, resent, opened = asyncio.run(main())
    finally:
        listener.close()
    assert (first.daemon, second.daemon) == ("conn0", "conn1")
    assert resent == 1 and opened == 2
    assert seen == ["0:Ping", "1:Ping"]  # the failed send delivered nothing


def test_fire_and_forget_sends_use_a_connection_of_their_own(sockdir):
    daemon = Daemon()

    async def body(peers, *_):
        await peers.request("testd", m.Ping())
        await peers.send("testd", m.Ack(detail="fyi"))
        await asyncio.sleep(0.1)
        pong = await peers.request("testd", m.Ping())  # not confused by the ErrorReply the Ack drew
        return pong, peers.idle_count("testd")

    pong, idle = run(body, sockdir, daemon)
    assert pong.daemon == "test" and idle == 1 and daemon.accepted == 2


def test_after_aclose_requests_fail_and_no_connection_is_left_open(sockdir):
    daemon = Daemon()

    async def body(peers, *_):
        await asyncio.gather(*(peers.request("testd", query("x", delay_cs=5)) for _ in range(2)))
        await peers.aclose()
        await asyncio.sleep(0.1)
        with pytest.raises(ConnectionClosed):
            await peers.request("testd", m.Ping())
        return daemon.closed

    assert run(body, sockdir, daemon) == 2


def test_a_server_that_stops_accepting_keeps_serving_its_current_connections(sockdir):
    daemon = Daemon()

    async def body(peers, transport, server, tg):
        await peers.request("testd", m.Ping())
        server.stop_accepting()
        pong = await peers.request("testd", m.Ping())  # the kept connection is still served
        with pytest.raises(DaemonUnreachable):
            await transport.open_connection("testd")
        return pong

    assert run(body, sockdir, daemon).daemon == "test"
