"""A stand-in daemon for the SSH transport's tests: ``python ssh_echo_daemon.py SOCKET_DIR [NAME]``.

It listens on ``SOCKET_DIR/NAME.sock`` (default ``echo``) through the real UnixTransport server
(so the shared port's Forwarded preamble is handled exactly as in a daemon) and answers:

* ``Ping`` with a ``Pong`` whose ``daemon`` field is ``host|identity|authenticated_by`` of the
  connection's PeerInfo (``None`` when unset), so a test sees what the daemon saw;
* ``JobOutput`` (no answer): counts the bytes of ``data``, sleeping ``SLOW`` seconds (environment
  variable, default 0) per message to make the sender wait on flow control;
* ``Reconfig`` with ``Ack(detail=<bytes counted on this connection>)``.

It prints ``ready`` once listening and serves until killed. With ``--tcp HOST:PORT`` it also
serves the same conversation on plain TCP (the benchmark's yardstick).
"""

from __future__ import annotations

import asyncio
import os
import sys

from htc.wire import messages as m
from htc.wire.transport import Connection, PeerInfo, UnixTransport


async def main(socket_dir: str, name: str, tcp: str | None = None) -> None:
    slow = float(os.environ.get("SLOW", "0"))

    async def handler(conn) -> None:
        counted = 0
        while True:
            msg = await conn.recv()
            if isinstance(msg, m.Ping):
                p = conn.peer
                await conn.send(m.Pong(daemon=f"{p.host}|{p.identity}|{p.authenticated_by}", pid=os.getpid(),
                                       started_at=0))
            elif isinstance(msg, m.JobOutput):
                counted += len(msg.data)
                if slow:
                    await asyncio.sleep(slow)
            elif isinstance(msg, m.Reconfig):
                await conn.send(m.Ack(detail=str(counted)))
            else:
                await conn.send(m.ErrorReply(code="unknown_request", message=type(msg).__name__))

    async def tcp_client(reader, writer) -> None:
        conn = Connection(reader, writer, peer=PeerInfo(host=writer.get_extra_info("peername")[0]))
        try:
            await handler(conn)
        except Exception:  # noqa: BLE001 - the client went away; the benchmark's server serves on
            writer.close()

    async with asyncio.TaskGroup() as tg:
        await UnixTransport(socket_dir).start_server(name, handler, task_group=tg)
        if tcp:
            host, _, port = tcp.rpartition(":")
            await asyncio.start_server(tcp_client, host, int(port), limit=2 ** 20)
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    args = sys.argv[1:]
    tcp_at = None
    if "--tcp" in args:
        i = args.index("--tcp")
        tcp_at = args[i + 1]
        del args[i:i + 2]
    asyncio.run(main(args[0], args[1] if len(args) > 1 else "echo", tcp_at))
