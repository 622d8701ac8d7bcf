"""Bulk conversations travel on an SSH connection of their own (htc.wire.ssh_client, "Bulk
conversations travel apart"), so a small request never waits behind a file stream's bytes.

Everything is real and in one process: the shared port's SSH server on 127.0.0.1, a daemon on its
Unix socket behind it, and an SshTransport logging in anonymously (trust on first use)."""

from __future__ import annotations

import asyncio
import contextlib

import asyncssh
import pytest

from htc.wire import messages as m
from htc.wire import ssh_server
from htc.wire.ssh_client import BULK, SMALL, SshOptions, SshTransport
from htc.wire.transport import UnixTransport


@contextlib.asynccontextmanager
async def _host(tmp_path, monkeypatch):
    """A shared port in front of an ``echo`` daemon; yields (port, server connections, counts)."""
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    counted: list[int] = []

    async def echo(conn) -> None:
        total = 0
        while True:
            msg = await conn.recv()
            if isinstance(msg, m.Ping):
                await conn.send(m.Pong(daemon="echo", pid=0, started_at=0))
            elif isinstance(msg, m.JobOutput):
                total += len(msg.data)
            else:
                counted.append(total)
                await conn.send(m.Ack(detail=str(total)))

    accepted: list[asyncssh.SSHServerConnection] = []
    made = ssh_server._ServerConn.connection_made

    def record(self, conn) -> None:
        accepted.append(conn)
        made(self, conn)

    monkeypatch.setattr(ssh_server._ServerConn, "connection_made", record)
    server = ssh_server.SharedPortServer(sockets, asyncssh.generate_private_key("ssh-ed25519"),
                                         lambda token: None)
    async with asyncio.TaskGroup() as tg:
        daemon = await UnixTransport(sockets).start_server("echo", echo, task_group=tg)
        await server.start("127.0.0.1", 0)
        try:
            yield server.port, accepted
        finally:
            await server.aclose()
            await daemon.aclose()


def _transport(tmp_path) -> SshTransport:
    return SshTransport(lambda: None, SshOptions(known_hosts_file=str(tmp_path / "known_hosts"),
                                                 keepalive_interval=1.0))


def test_bulk_channels_share_one_connection_of_their_own_and_reconnect(tmp_path, monkeypatch):
    async def scenario():
        async with _host(tmp_path, monkeypatch) as (port, accepted):
            transport = _transport(tmp_path)
            sinful = f"<127.0.0.1:{port}?sock=echo>"
            for opener in (transport.open_connection, transport.open_bulk_connection,
                           transport.open_bulk_connection, transport.open_connection):
                async with await opener(sinful) as conn:
                    assert isinstance(await conn.request(m.Ping()), m.Pong)
            # one connection per lane, each reused
            assert transport.connections_opened == 2 and len(accepted) == 2
            assert transport.connected("127.0.0.1", port, SMALL) and transport.connected("127.0.0.1", port, BULK)
            # the host drops the bulk connection: the next bulk conversation makes a new one, and
            # small requests keep theirs
            accepted[1].close()
            for _ in range(200):
                if not transport.connected("127.0.0.1", port, BULK):
                    break
                await asyncio.sleep(0.01)
            async with await transport.open_bulk_connection(sinful) as conn:
                assert isinstance(await conn.request(m.Ping()), m.Pong)
            async with await transport.open_connection(sinful) as conn:
                assert isinstance(await conn.request(m.Ping()), m.Pong)
            assert transport.connections_opened == 3 and len(accepted) == 3
            await transport.aclose()

    asyncio.run(scenario())


def test_a_small_request_is_answered_while_the_bulk_connection_is_stuck(tmp_path, monkeypatch):
    """The host stops reading the bulk connection's socket: the stream's bytes pile up in front of
    anything else sent on that TCP connection, yet a small request still gets its answer (on one
    shared connection it waited behind them: the head-of-line blocking of issue #18)."""

    async def scenario():
        async with _host(tmp_path, monkeypatch) as (port, accepted):
            transport = _transport(tmp_path)
            sinful = f"<127.0.0.1:{port}?sock=echo>"
            small = await transport.open_connection(sinful)
            assert isinstance(await small.request(m.Ping()), m.Pong)
            stream = await transport.open_bulk_connection(sinful)
            bulk_side = accepted[-1]  # the connection the stream came on
            bulk_side._transport.pause_reading()  # the host reads nothing more of the bulk connection
            chunk = b"x" * (1 << 20)

            async def send(mib: int) -> m.Ack:
                for i in range(mib):
                    await stream.send(m.JobOutput(claim_id="c", job_id="1.0", stream="stdout",
                                                  offset=i << 20, data=chunk))
                return await stream.request(m.Reconfig(), timeout=60)

            sending = asyncio.create_task(send(32))
            await asyncio.sleep(0.2)  # (the stream has filled the window and the socket buffers)
            assert not sending.done()
            for _ in range(5):
                assert isinstance(await small.request(m.Ping(), timeout=10), m.Pong)
            bulk_side._transport.resume_reading()
            ack = await asyncio.wait_for(sending, 60)
            assert int(ack.detail) == 32 << 20
            await small.aclose()
            await stream.aclose()
            await transport.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("bulk", [True, False])
def test_a_starters_file_streams_take_the_bulk_lane_when_it_has_one(bulk):
    from htc.daemons.starter.wire_files import WireTransfer

    opened: list[str] = []

    async def small():
        opened.append("small")

    async def big():
        opened.append("bulk")

    transfer = WireTransfer(small, "claim", "1.0", big if bulk else None)
    asyncio.run(transfer.open_stream())
    asyncio.run(transfer.connect())
    assert opened == (["bulk", "small"] if bulk else ["small", "small"])


def test_routing_sends_bulk_conversations_to_the_remote_bulk_lane_and_keeps_local_ones_local():
    from htc.wire.routing import RoutingTransport
    from htc.wire.transport import Transport

    class Recorder(Transport):
        def __init__(self, name: str):
            self.name, self.calls = name, []

        async def open_connection(self, address, *, timeout=None):
            self.calls.append(("small", address))

        async def open_bulk_connection(self, address, *, timeout=None):
            self.calls.append(("bulk", address))

        async def start_server(self, address, handler, *, task_group):
            raise NotImplementedError  # (not used here)

    local, remote = Recorder("local"), Recorder("remote")
    routing = RoutingTransport(local, remote, own_endpoints=[("10.0.0.1", 9618)])

    async def scenario():
        await routing.open_bulk_connection("<10.0.0.2:9618?sock=schedd>")
        await routing.open_bulk_connection("<10.0.0.1:9618?sock=schedd>")
        await routing.open_connection("<10.0.0.2:9618?sock=schedd>")

    asyncio.run(scenario())
    assert remote.calls == [("bulk", "<10.0.0.2:9618?sock=schedd>"), ("small", "<10.0.0.2:9618?sock=schedd>")]
    assert local.calls == [("bulk", "schedd")]


def test_the_startd_gives_its_starters_a_bulk_lane_to_the_shadow():
    from types import SimpleNamespace

    from htc.daemons.startd.service import StartdService

    calls: list[tuple[str, str]] = []

    class Recorder:
        async def open_connection(self, address, **_):
            calls.append(("small", address))

        async def open_bulk_connection(self, address, **_):
            calls.append(("bulk", address))

    shadow = "<10.0.0.2:9618?sock=schedd>"
    fake = SimpleNamespace(transport=Recorder(),
                           daemon_core=SimpleNamespace(output_target=lambda claim: (shadow,)))
    transfer = StartdService._to_shadow(fake, "claim#1", {"ClusterId": 7, "ProcId": 0})

    async def scenario():
        await transfer.open_stream()  # input, output, checkpoint images
        await transfer.connect()      # a standard job's relayed calls

    asyncio.run(scenario())
    assert calls == [("bulk", shadow), ("small", shadow)]
