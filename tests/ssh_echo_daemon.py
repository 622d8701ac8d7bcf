"""A stand-in daemon for the SSH transport's tests: ``python ssh_echo_daemon.py SOCKET_DIR [NAME]``.

It listens on ``SOCKET_DIR/NAME.sock`` (default ``echo``) through the real UnixTransport server
(so the shared port's Forwarded preamble is handled exactly as in a daemon) and answers:

* ``Ping`` with a ``Pong`` whose ``daemon`` field is ``host|identity|authenticated_by`` of the
  connection's PeerInfo (``None`` when unset), so a test sees what the daemon saw;
* ``JobOutput`` (no answer): counts the bytes of ``data``, sleeping ``SLOW`` seconds (environment
  variable, default 0) per message to make the sender wait on flow control;
* ``Reconfig`` with ``Ack(detail=<bytes counted on this connection>)``.

It prints ``ready`` once listening and serves until killed.
"""

from __future__ import annotations

import asyncio
import os
import sys

from htc.wire import messages as m
from htc.wire.transport import UnixTransport


async def main(socket_dir: str, name: str) -> None:
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

    async with asyncio.TaskGroup() as tg:
        await UnixTransport(socket_dir).start_server(name, handler, task_group=tg)
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "echo"))
