"""A call lane's own cost per call: the worker side of the executor's fast path, in one process.

Run: ``python benchmarks/lane_worker_bench.py [--calls N] [--count]``.

Theory of operation: a real :class:`htc.executors.lane.Lane` serves one end of a socket pair in
the main thread of this process (a call sets signal handlers), in a sandbox of its own; a
thread writes N call frames (a no-op call pickled by the executor's own serializer, the call
file as the client makes it) one at a time and reads each result frame back, as the startd
does for a sequential caller.
It prints the lane's (main) thread's CPU per call (``time.thread_time``: the feeding thread's
work is not counted) and, with ``--count``, the Python function calls the lane made per call (a
profile hook). Counts do not move with the machine's load; CPU per call does (about a third at
load 5-10): compare counts, and CPU side by side. For the lane's system calls run it under
``strace -c -f`` (the feeding thread adds one send and one or two recv per call).

Figures, 2026-11-28 14:00, load 10-11, int (b43041f) and the xlane branch run alternately:
0.39 and 0.54 ms of CPU per call before, 0.30 and 0.27 after; 233 Python calls per call before,
170 after; ``strace -c -f`` on a pool's lane, 300 sequential calls: 35 system calls per call
before (an mmap, mremap and munmap of recv's 256 KiB buffer, two ftruncate, a uname), 29 after.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def noop(x):
    """The call the lane runs (pickled by value from this module, as a user's script's)."""
    return x


def _call_frames(n: int) -> list[bytes]:
    import msgspec

    from htc.executors.serialize import dumps_call, python_version
    from htc.wire import callfile as cf
    from htc.wire.lane_frames import CallFrame, frame

    encode = msgspec.msgpack.Encoder().encode
    frames = []
    for i in range(n):
        pickled = dumps_call(noop, (i,), {}, serializer="cloudpickle")
        header = cf.CallHeader(call_id=f"bench-{i}", function="noop", serializer="cloudpickle",
                               python=python_version(), packages=pickled.packages, parents=pickled.parents)
        frames.append(frame(encode(CallFrame(f"1.{i}", {f"bench-{i}.call": cf.pack_call(header, pickled.payload)}))))
    return frames


def run(n: int, count: bool) -> None:
    """Drive ``n`` calls through a lane; print CPU (and counts) per call."""
    from htc.executors.lane import Lane
    from htc.wire.lane_frames import HEADER

    frames = _call_frames(n + 20)
    ours, theirs = socket.socketpair()
    calls = [0]
    spent = {}
    with tempfile.TemporaryDirectory(prefix="htc-lane-bench-") as tmp:
        lane = Lane(theirs, Path(tmp))

        def serve() -> None:
            body = lane._read()
            lane.channel.sendall(_frame(lane.encode(lane.run(lane.decode(body)))))  # warm-up call
            t0 = time.thread_time()
            if count:
                def hook(_frame, event, _arg):
                    if event in ("call", "c_call"):
                        calls[0] += 1
                sys.setprofile(hook)
            lane.serve()
            sys.setprofile(None)
            spent["cpu"] = time.thread_time() - t0

        def feed() -> None:
            buf = b""
            for data in frames[:n + 1]:
                ours.sendall(data)
                while True:
                    if len(buf) >= HEADER.size:
                        (size,) = HEADER.unpack_from(buf)
                        if len(buf) >= HEADER.size + size:
                            buf = buf[HEADER.size + size:]
                            break
                    buf += ours.recv(1 << 16)
            ours.shutdown(socket.SHUT_WR)

        from htc.wire.lane_frames import frame as _frame
        cwd = os.getcwd()
        feeder = threading.Thread(target=feed)  # the lane runs in the main thread: a call sets signal handlers
        feeder.start()
        serve()
        feeder.join()
        os.chdir(cwd)
    cpu = spent["cpu"] * 1000 / n
    line = f"lane worker: {n} calls, {cpu:.3f} ms CPU/call (load {'/'.join(f'{x:.1f}' for x in os.getloadavg())})"
    if count:
        line += f", {calls[0] / n:.0f} Python calls/call (profile hook on: CPU is inflated)"
    print(line)


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--count", action="store_true", help="count Python calls per call (slower)")
    args = parser.parse_args(argv)
    run(args.calls, args.count)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
