"""Benchmark: a job's file over the connection (htc.daemons.file_stream) against a plain copy.

Sends one file of ``--mib`` MiB from a source (read as the shadow reads input) to a sink (written
as the starter writes a sandbox) over a real Unix socket with the daemons' framing and messages,
checksummed per file, and copies the same file with ``shutil.copyfile`` (the direct path's
kernel copy) for a yardstick. Prints MiB/s for both, the ratio, and how much the process's peak
resident memory grew during the stream (bounded by a few chunks, whatever the file size).
Usage::

    python benchmarks/transfer_bench.py [--mib 512]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from htc.daemons.file_stream import receive_stream, send_stream
from htc.daemons.schedd.transfers import input_source
from htc.daemons.starter.wire_files import SandboxSink
from htc.wire.transport import Connection


def _make(path: Path, mib: int) -> None:
    block = os.urandom(1024 * 1024)
    with open(path, "wb") as fh:
        for _ in range(mib):
            fh.write(block)


async def _stream(src_dir: Path, dst_dir: Path, name: str) -> float:
    sock = str(src_dir / "bench.sock")
    done: asyncio.Future = asyncio.get_running_loop().create_future()

    async def serve(reader, writer):
        conn = Connection(reader, writer, label="starter")
        await send_stream(conn, input_source({"Iwd": str(src_dir), "TransferInput": name}, None, "1.0"))
        await done
        writer.close()

    server = await asyncio.start_unix_server(serve, sock, limit=2 ** 20)
    start = time.perf_counter()
    reader, writer = await asyncio.open_unix_connection(sock, limit=2 ** 20)
    await receive_stream(Connection(reader, writer, label="shadow"), SandboxSink(dst_dir, None, None), peer="shadow")
    elapsed = time.perf_counter() - start
    done.set_result(None)
    writer.close()
    server.close()
    return elapsed


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="file size in MiB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src, dst, copy = Path(tmp, "iwd"), Path(tmp, "box"), Path(tmp, "copy")
        for d in (src, dst, copy):
            d.mkdir()
        _make(src / "big.bin", args.mib)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        streamed = asyncio.run(_stream(src, dst, "big.bin"))
        rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
        start = time.perf_counter()
        shutil.copyfile(src / "big.bin", copy / "big.bin")
        copied = time.perf_counter() - start
        assert (dst / "big.bin").stat().st_size == args.mib * 1024 * 1024
    print(f"file of {args.mib} MiB")
    print(f"over the connection (1 MiB chunks, sha256): {args.mib / streamed:8.1f} MiB/s  ({streamed:.2f} s)")
    print(f"direct copy (shutil.copyfile):            {args.mib / copied:8.1f} MiB/s  ({copied:.2f} s)")
    print(f"stream / direct: {copied / streamed:.2f}")
    print(f"peak RSS growth during the stream: {rss_growth / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
