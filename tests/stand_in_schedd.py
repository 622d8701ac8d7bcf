"""A schedd stand-in for tests of schedd clients (the DAG manager's node submissions): it serves
the ``schedd`` socket of a directory on an event loop in its own thread, one connection at a
time per task, with the subclass's ``_serve(conn)``; a context manager that starts and stops it."""

from __future__ import annotations

import abc
import asyncio
import threading

from htc.wire.transport import UnixTransport


class StandInSchedd(abc.ABC):
    """Serves ``socket_dir``'s ``schedd`` socket with :meth:`_serve` while in a ``with`` block."""

    def __init__(self, socket_dir):
        self.transport = UnixTransport(socket_dir)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with asyncio.TaskGroup() as tg:
            server = await self.transport.start_server("schedd", self._serve, task_group=tg)
            self._ready.set()
            await self._stop.wait()
            await server.aclose()

    @abc.abstractmethod
    async def _serve(self, conn) -> None:
        """Answer one connection (the subclass's conversation)."""

    def __enter__(self):
        self._thread.start()
        assert self._ready.wait(30), f"the {type(self).__name__} stand-in did not start"
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
