"""Serving a job's remote file calls over asyncio, and the environment that turns them on.

Theory of operation
-------------------
The execute side starts the job with ``libjobrt.so`` preloaded and one end of a connected
socket pair inherited at a known fd (:func:`job_environment` builds the variables); the other
end goes to the file server. :func:`serve_socket` watches that end with the event loop; each
time it is readable, the bytes go to :class:`~htc.runtime.fileserver.FileServer` and whatever
replies it returns are written back: one ``feed`` per arrival, so a batch of pipelined writes
that came in one segment costs one callback and no reply. It returns when the job side closes.

The file calls themselves are ordinary blocking system calls on the event loop's thread. They
are local-disk calls of one job, each a few microseconds; a server meant to share its loop with
other work should run in its own process, which is also how it runs as the job's owner:
:func:`serve_fd` (``python -m htc.runtime.remote_io --fd N --root DIR --uid U --gid G``) drops
to that uid/gid before it opens anything, so the kernel's own permission checks apply to every
forwarded call.

The pool (the starter next to the job, the schedd for a relayed job) runs that process with
``--blocking``: it serves exactly one job, so :func:`serve_blocking`'s plain recv/feed/send loop
does the same work as the event loop with less per call (``benchmarks/runtime_bench.py`` prints
both: about 36-52 us against 42-81 us for a small call on a quiet host). A job waits for each
reply it needs before its next request, and pipelined writes have no reply, so the plain loop
never blocks writing while the job is blocked writing too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from pathlib import Path

from htc.errors import PeerError, UsageError
from htc.runtime.fileserver import FileServer

#: the fd number the job's end of the connection gets by default (high, to stay out of the way)
DEFAULT_JOB_FD = 1000


async def serve_socket(sock: socket.socket, root: str | os.PathLike) -> int:
    """Serve one job connection (a connected stream socket) beneath ``root`` until the job side
    closes; return how many requests it served. Raises PeerError on a malformed stream.

    The socket is driven with ``loop.add_reader``/``add_writer`` and plain ``recv``/``send``
    rather than a transport and protocol: a forwarded call is one small read and one small
    write, and the transport's layers doubled the server's time per call (runtime_bench.py).
    While a reply too big for the socket buffer is being sent, reading pauses (the shim waits for
    that reply anyway).
    """
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    server = FileServer(root)
    sock.setblocking(False)
    fd = sock.fileno()
    pending = bytearray()

    def finish(error: BaseException | None = None) -> None:
        loop.remove_reader(fd)
        loop.remove_writer(fd)
        if not done.done():
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(server.requests)

    def send(out) -> None:
        try:
            n = sock.send(out)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:   # the job side is gone
            finish()
            return
        if n < len(out):
            pending[:] = memoryview(out)[n:]
            loop.remove_reader(fd)
            loop.add_writer(fd, writable)

    def writable() -> None:
        try:
            n = sock.send(pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            finish()
            return
        del pending[:n]
        if not pending:
            loop.remove_writer(fd)
            loop.add_reader(fd, readable)

    def readable() -> None:
        try:
            data = sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            finish()
            return
        try:
            out = server.feed(data)
        except PeerError as err:
            finish(err)
            return
        if out:
            send(out)

    loop.add_reader(fd, readable)
    try:
        return await done
    finally:
        loop.remove_reader(fd)
        loop.remove_writer(fd)
        server.close()
        sock.close()


def serve_blocking(sock: socket.socket, root: str | os.PathLike) -> int:
    """Serve one job connection with a plain blocking loop (no event loop); return the request
    count. The same FileServer as :func:`serve_socket`; the benchmark compares the two."""
    server = FileServer(root)
    try:
        while data := sock.recv(1 << 16):
            out = server.feed(data)
            if out:
                sock.sendall(out)
        return server.requests
    finally:
        server.close()
        sock.close()


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """Return (server end, job end): the job end inheritable, to be passed to the job."""
    server_end, job_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    job_end.set_inheritable(True)
    return server_end, job_end


def job_environment(library: str | os.PathLike, fd: int, prefix: str, *, cwd: str | None = None,
                    pipeline: bool = True) -> dict[str, str]:
    """Return the environment variables that make a job forward its file calls.

    ``fd`` is the job's number of the connection; ``prefix`` the absolute job-side directory that
    stands for the server's root; ``cwd`` (a server path such as ``"."``) starts the job in a
    remote directory, so relative paths are remote; ``pipeline`` lets small writes go without
    waiting for their result (a failure is reported by the file's close or fsync).
    """
    if not prefix.startswith("/"):
        raise UsageError(f"the remote I/O prefix must be an absolute path, not {prefix!r}")
    env = {
        "LD_PRELOAD": str(Path(library).resolve()),
        "JOBRT_IO_FD": str(fd),
        "JOBRT_IO_PREFIX": prefix,
        "JOBRT_IO_PIPELINE": "1" if pipeline else "0",
    }
    if cwd is not None:
        env["JOBRT_IO_CWD"] = cwd
    return env


def drop_privileges(uid: int, gid: int) -> None:
    """Become ``uid``/``gid`` for good (supplementary groups cleared), if not already."""
    if os.getuid() == uid and os.getgid() == gid:
        return
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def serve_fd(fd: int, root: str, uid: int | None = None, gid: int | None = None,
             blocking: bool = False) -> int:
    """Serve the connection at ``fd`` beneath ``root`` as ``uid``/``gid``, in this process
    (with asyncio, or with :func:`serve_blocking`)."""
    if uid is not None:
        drop_privileges(uid, gid if gid is not None else uid)
    sock = socket.socket(fileno=fd)
    if blocking:
        return serve_blocking(sock, root)
    return asyncio.run(serve_socket(sock, root))


def main(argv: list[str] | None = None) -> int:
    """``python -m htc.runtime.remote_io``: serve one inherited connection and exit."""
    parser = argparse.ArgumentParser(prog="python -m htc.runtime.remote_io", description=main.__doc__)
    parser.add_argument("--fd", type=int, required=True, help="the inherited connection's fd")
    parser.add_argument("--root", required=True, help="the directory the job's remote paths map onto")
    parser.add_argument("--uid", type=int, help="run the calls as this user")
    parser.add_argument("--gid", type=int, help="and this group")
    parser.add_argument("--blocking", action="store_true", help="a plain loop instead of asyncio")
    args = parser.parse_args(argv)
    try:
        serve_fd(args.fd, args.root, args.uid, args.gid, args.blocking)
    except PeerError as err:
        print(f"remote_io: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
