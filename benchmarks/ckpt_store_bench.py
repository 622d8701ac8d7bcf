"""The schedd's CPU per stored standard-universe checkpoint image.

Theory of operation
-------------------
Issue #20's leverage (remote CPU / submit-side CPU) is bounded by what the schedd spends storing
each checkpoint image. This script makes one real image with the checkpointing runtime (a CPython
process holding a few MB of random data: with the interpreter a ~20 MB image, as the
leverage bench's), then forks a receiver process that serves ``--images``
stores over a real Unix socket pair with the schedd's own store code
(:func:`htc.daemons.schedd.checkpoint_files.receive_checkpoint`: the file stream into a fresh
``incoming/``, the image verified, the swap). The sender (this process) streams the image with
:func:`htc.daemons.file_stream.send_stream`, as the starter does. The receiver measures its own
process CPU (user and system, :func:`resource.getrusage`, all threads) around each store and prints it per image, with
the load average: CPU, not wall-clock, so a loaded machine changes the figures little.

    .venv/bin/python benchmarks/ckpt_store_bench.py --images 10 --megabytes 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from htc.daemons.file_stream import Outgoing, send_stream
from htc.daemons.schedd import checkpoint_files as cf
from htc.runtime import checkpoint
from htc.wire import messages as m
from htc.wire.transport import Connection


def make_image(where: Path, megabytes: int) -> Path:
    """A real image of a CPython process holding ``megabytes`` MB of random bytes."""
    tools = checkpoint.build_tools()
    ready = where / "ready"
    code = (f"import time, pathlib\nx = bytearray({megabytes} << 20)\n"
            f"with open('/dev/urandom', 'rb', buffering=0) as f: f.readinto(x)\n"
            f"pathlib.Path({str(ready)!r}).touch()\nwhile True: time.sleep(0.01)")
    job = checkpoint.start(["/usr/bin/python3", "-c", code], where / "image", tools=tools)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            if time.monotonic() > deadline:
                raise SystemExit("the job never got ready")
            time.sleep(0.05)
        job.checkpoint()
    finally:
        job.kill()
    return where / "image"


async def _connection(sock: socket.socket) -> Connection:
    reader, writer = await asyncio.open_connection(sock=sock, limit=2 ** 20)  # as UnixTransport's
    return Connection(reader, writer, max_frame=4 << 20)


async def _store(conn: Connection, store: Path) -> None:
    receive = getattr(cf, "receive_checkpoint", None)
    if receive is not None:
        await receive(conn, store, None, "1.0", standard=True)
        return
    # a tree from before receive_checkpoint (for before/after figures): the same steps inline
    incoming = await asyncio.to_thread(cf._fresh_incoming, store, None)
    await cf.receive_stream(conn, cf.SpoolSink(incoming, None, "1.0"), peer="the bench")
    await asyncio.to_thread(cf.standard_image, incoming)
    await asyncio.to_thread(cf._swap_in, store)


async def _receive(sock: socket.socket, store: Path, images: int) -> list[float]:
    conn = await _connection(sock)
    cpu = []
    for _ in range(images):
        before = resource.getrusage(resource.RUSAGE_SELF)
        await _store(conn, store)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu.append((after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime))
        await conn.send(m.Ack(detail="stored"))
    return cpu


async def _send(sock: socket.socket, image: Path, images: int) -> None:
    conn = await _connection(sock)
    size = image.stat().st_size
    for _ in range(images):
        fd = os.open(image, os.O_RDONLY | os.O_CLOEXEC)
        entry = m.FileEntry(name=cf.IMAGE_NAME, kind="file", size=size, mode=0o600)
        await send_stream(conn, iter([Outgoing(entry, fd)]))
        reply = await conn.recv(600)
        assert isinstance(reply, m.Ack), reply


def main() -> None:
    """Make an image, store it ``--images`` times in a receiver process, print its CPU per image."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=10)
    ap.add_argument("--megabytes", type=int, default=3,
                    help="random data the job holds (the interpreter adds ~16 MB: 3 gives a ~20 MB image)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        image = make_image(where, args.megabytes)
        mine, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            mine.close()
            cpu = asyncio.run(_receive(theirs, where / "store", args.images))
            ms = [(u + s) * 1000 for u, s in cpu]
            print(f"image {image.stat().st_size / 1e6:.1f} MB x {len(ms)}: receiver CPU per image "
                  f"median {statistics.median(ms):.1f} ms (user {statistics.median(u for u, _ in cpu) * 1000:.0f}, "
                  f"system {statistics.median(s for _, s in cpu) * 1000:.0f}), min {min(ms):.1f}, max {max(ms):.1f} "
                  f"(load average {os.getloadavg()[0]:.1f})", flush=True)
            os._exit(0)
        theirs.close()
        asyncio.run(_send(mine, image, args.images))
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
