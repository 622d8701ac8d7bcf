"""An SSH channel's messages pushed to a callback as they arrive (htc.wire.ssh_push): in order,
none lost of what was buffered before the switch, frames split across packets put together, and
the stream's end (the daemon closing, a frame above the limit) reported once.

Everything is real and in one process: the shared port's SSH server on 127.0.0.1, a daemon on its
Unix socket behind it, and an SshTransport logging in anonymously (trust on first use)."""

from __future__ import annotations

import asyncio

import asyncssh

from htc.wire import messages as m
from htc.wire import ssh_server
from htc.wire.errors import ConnectionClosed, FrameTooLarge
from htc.wire.framing import frame
from htc.wire.ssh_client import SshOptions, SshTransport
from htc.wire.ssh_push import SshConnection
from htc.wire.transport import UnixTransport


async def _daemon(conn) -> None:
    """``burst N``: N Acks in one write; ``split``: one Ack written a byte at a time; ``huge``: a
    header announcing a body above any limit; ``bye``: close."""
    while True:
        word = (await conn.recv()).detail
        if word.startswith("burst"):
            conn._writer.write(b"".join(frame(m.encode(m.Ack(detail=str(i)))) for i in range(int(word.split()[1]))))
        elif word == "split":
            for byte in frame(m.encode(m.Ack(detail="split" * 100))):
                conn._writer.write(bytes([byte]))
                await conn._writer.drain()
                await asyncio.sleep(0)
        elif word == "huge":
            conn._writer.write((2**31).to_bytes(4, "big"))
        elif word == "bye":
            await conn.aclose()
            return
        await conn._writer.drain()


def test_messages_are_pushed_in_order_until_the_stream_ends(tmp_path):
    sockets = tmp_path / "sockets"
    sockets.mkdir()

    async def scenario() -> None:
        server = ssh_server.SharedPortServer(sockets, asyncssh.generate_private_key("ssh-ed25519"),
                                             lambda token: None)
        async with asyncio.TaskGroup() as tg:
            daemon = await UnixTransport(sockets).start_server("pushy", _daemon, task_group=tg)
            await server.start("127.0.0.1", 0)
            transport = SshTransport(lambda: None, SshOptions(known_hosts_file=str(tmp_path / "known_hosts")))
            sinful = f"<127.0.0.1:{server.port}?sock=pushy>"
            try:
                for last, reason in (("bye", ConnectionClosed), ("huge", FrameTooLarge)):
                    conn = await transport.open_connection(sinful)
                    assert isinstance(conn, SshConnection)
                    await conn.send(m.Ack(detail="burst 4"))
                    assert await conn.recv(timeout=30) == m.Ack(detail="0")
                    await asyncio.sleep(0.2)  # the other three wait in the stream's buffer
                    got: list[str] = []
                    ended: asyncio.Future = asyncio.get_running_loop().create_future()
                    assert conn.push(lambda msg: got.append(msg.detail),
                                     lambda exc: ended.done() or ended.set_result(exc))
                    assert got == ["1", "2", "3"]
                    await conn.send(m.Ack(detail="split"))
                    await conn.send(m.Ack(detail="burst 3"))
                    await conn.send(m.Ack(detail=last))
                    exc = await asyncio.wait_for(ended, 30)
                    assert isinstance(exc, reason), exc
                    assert got == ["1", "2", "3", "split" * 100, "0", "1", "2"]
                    await conn.aclose()
            finally:
                await transport.aclose()
                await server.aclose()
                await daemon.aclose()

    asyncio.run(scenario())
