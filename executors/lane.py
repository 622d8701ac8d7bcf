"""A call lane: one long-lived worker process that runs the function calls its startd sends it.

``python -m htc.executors.lane`` is a lane's executable. The startd starts it like any function
job (sandbox, cgroup, slot user, usually forked by the starter zygote) with fd 0 one end of a
socket pair (``HTC_LANE_FD=0``; see :mod:`htc.wire.lane_frames` for the frames), then
writes calls to it as the schedd sends them; the lane runs them one at a time, in order.

Theory of operation
-------------------
At start the lane moves the channel off fd 0 (a call's subprocesses must not inherit it) and
points fd 0 at ``/dev/null``. Then, per :class:`~htc.wire.lane_frames.CallFrame`:

1. Empty ``htc_lane_call/`` in the sandbox (one directory, reused; skipped when the last
   call left nothing there) and write the call's files
   into it (``<parent id>.result``, the caller's input files; the call file, ``htc_call.pkl``
   or ``<call id>.call``, goes to the worker as bytes); make it the current directory.
2. Point fds 1 and 2 at ``.htc_lane_stdout`` / ``.htc_lane_stderr`` in the sandbox, emptied
   for each call, so what the call prints -- from Python or from C -- is its own.
3. Run it with :func:`htc.executors.worker.run`, which hands back the bytes of
   ``htc_result.pkl`` (no file: creating one costs more than a quick call) and returns
   ``EXIT_VALUE``/``EXIT_EXCEPTION``/``EXIT_ERROR``.
4. Flush Python's streams, put fds 1 and 2 back, and answer a
   :class:`~htc.wire.lane_frames.ResultFrame`: the status, every regular file of the
   directory that is new or changed (not the untouched inputs), what the call printed (at most
   ``MAX_STREAM_BYTES`` of each stream), its wall-clock start and end, and the user/system CPU
   it took (the lane's and its waited-for children's, ``getrusage``).

When the channel closes the lane exits 0. The startd's policy acts on the lane as on any job:
a suspended lane stops between or inside calls; the soft kill (SIGTERM) inside a call saves a
Checkpointable's checkpoint and ends the lane by the signal (the worker's handler), between
calls it ends it at once.

Importing this module imports the worker, so a zygote that imports it forks lanes warm.
"""

from __future__ import annotations

import os
import resource
import shutil
import socket
import sys
import time
import traceback
from pathlib import Path

import msgspec

from htc.wire import callfile as cf
from htc.executors import worker  # noqa: F401 - imported here so a zygote of this module has it warm
from htc.wire.lane_frames import (
    CHANNEL_ENV, HEADER, MAX_FRAME, MAX_RESULT_BYTES, MAX_STREAM_BYTES, CallFrame, ResultFrame, frame, plain_name,
)

__all__ = ["CALL_DIR", "Lane", "main"]

#: the directory (in the sandbox) each call runs in, emptied between calls
CALL_DIR = "htc_lane_call"
_OUT, _ERR = ".htc_lane_stdout", ".htc_lane_stderr"
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW


class Lane:
    """The lane's loop over its channel (see the module docstring).

    Args:
        channel: the connected socket the calls come from and the results go to.
        home: the sandbox (the call directory and the output files are made there).
    """

    def __init__(self, channel: socket.socket, home: Path):
        self.channel = channel
        self.home = Path(home).resolve()
        self.dir = self.home / CALL_DIR
        self.dir.mkdir(exist_ok=True)
        self.dir_fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._left_over = True  # whether the directory may hold anything (the last look saw some)
        self.out = os.open(self.home / _OUT, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        self.err = os.open(self.home / _ERR, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        self.saved = (os.dup(1), os.dup(2))  # (non-inheritable) the lane's own stdout/stderr
        self.buffer = bytearray()
        self.chunk = bytearray(1 << 18)  # recv_into it: a fresh 256 KiB buffer per recv is an mmap and munmap
        self.decode = msgspec.msgpack.Decoder(CallFrame).decode
        self.encode = msgspec.msgpack.Encoder().encode

    def serve(self) -> int:
        """Run calls until the channel closes; the exit status (0)."""
        while True:
            body = self._read()
            if body is None:
                return 0
            self.channel.sendall(frame(self.encode(self.run(self.decode(body)))))

    def _read(self) -> bytes | None:
        buf = self.buffer
        while True:
            if len(buf) >= HEADER.size:
                (size,) = HEADER.unpack_from(buf)
                if size > MAX_FRAME:
                    raise ValueError(f"a call frame of {size} bytes; the most is {MAX_FRAME}")
                end = HEADER.size + size
                if len(buf) >= end:
                    body = bytes(buf[HEADER.size:end])
                    del buf[:end]
                    return body
            got = self.channel.recv_into(self.chunk)
            if not got:
                return None
            buf += memoryview(self.chunk)[:got]

    # ------------------------------------------------------------------ one call
    def run(self, call: CallFrame) -> ResultFrame:
        """Run one call (see the module docstring) and say how it ended."""
        bad = [name for name in call.files if not plain_name(name)]
        why, call_file = (f"file names must be plain names: {bad}" if bad else None), ""
        if why is None:
            try:
                call_file = cf.call_file_in(call.files, "the call")
            except cf.CallFileError as exc:
                why = str(exc)
        if why is not None:
            return ResultFrame(worker.EXIT_ERROR, {}, b"", f"htc lane: {why}\n".encode(), time.time(), time.time(),
                               0.0, 0.0)
        if self._left_over:
            self._empty()
        # (the call file goes to the worker as bytes: one file less to write and remove per call)
        inputs = {name: self._write(name, data) for name, data in call.files.items() if name != call_file}
        os.chdir(self.dir)
        for stream in (sys.stdout, sys.stderr):
            _flush(stream)
        for fd, target in ((self.out, 1), (self.err, 2)):
            if os.fstat(fd).st_size:  # (most calls print nothing: truncating an empty file costs more)
                os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.dup2(fd, target)
        self_before, children_before = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
        results: list[bytes] = []
        started = time.time()
        try:
            code = worker.run(self.dir, call_data=call.files[call_file], result_sink=results.append)
        except Exception:  # noqa: BLE001 - the lane outlives a call that broke the worker itself
            traceback.print_exc()
            code = worker.EXIT_ERROR
        finally:
            finished = time.time()
            for stream in (sys.stdout, sys.stderr):
                _flush(stream)
            os.dup2(self.saved[0], 1)
            os.dup2(self.saved[1], 2)
        self_after, children_after = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
        files = self._changed(inputs)
        if results:
            files[cf.RESULT_FILE] = results[-1]
        size = sum(map(len, files.values()))
        stderr = _slurp(self.err)
        if size > MAX_RESULT_BYTES:
            files = {}
            code = worker.EXIT_ERROR
            stderr += (f"htc lane: the call left {size} bytes of files; a call lane carries at most "
                       f"{MAX_RESULT_BYTES}; return less (write big results to shared storage)\n").encode()
        return ResultFrame(code, files, _slurp(self.out), stderr, started, finished,
                           self_after[0] - self_before[0] + children_after[0] - children_before[0],
                           self_after[1] - self_before[1] + children_after[1] - children_before[1])

    def _empty(self) -> None:
        for entry in os.scandir(self.dir_fd):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(self.dir / entry.name, ignore_errors=True)
            else:
                os.unlink(entry.name, dir_fd=self.dir_fd)

    def _write(self, name: str, data: bytes) -> tuple[int, int, int]:
        fd = os.open(name, _FILE_FLAGS, 0o644, dir_fd=self.dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _changed(self, inputs: dict[str, tuple[int, int, int]]) -> dict[str, bytes]:
        files = {}
        self._left_over = False
        for entry in os.scandir(self.dir_fd):
            self._left_over = True
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            if inputs.get(entry.name) == (st.st_ino, st.st_size, st.st_mtime_ns):
                continue
            fd = os.open(entry.name, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=self.dir_fd)
            try:
                files[entry.name] = _read_all(fd)
            finally:
                os.close(fd)
        return files


def _flush(stream) -> None:
    if stream is not None:
        try:
            stream.flush()
        except (OSError, ValueError):  # a call closed or broke the stream: nothing left to flush
            return


def _cpu(who: int) -> tuple[float, float]:
    ru = resource.getrusage(who)
    return ru.ru_utime, ru.ru_stime


def _read_all(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, 1 << 20):
        parts.append(chunk)
    return b"".join(parts)


def _slurp(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    if not size:
        return b""
    data = os.pread(fd, min(size, MAX_STREAM_BYTES), 0)
    if size > MAX_STREAM_BYTES:
        data += f"\n[htc lane: {size - MAX_STREAM_BYTES} more bytes cut]\n".encode()
    return data


def main() -> int:
    """``python -m htc.executors.lane``: serve the channel named by ``HTC_LANE_FD`` (in the sandbox)."""
    value = os.environ.get(CHANNEL_ENV)
    if value is None or not value.isdigit():
        print(f"htc lane: {CHANNEL_ENV} is not set to a descriptor; a call lane is started by the startd "
              "(ActivateClaim with lane=True), not by hand", file=sys.stderr)
        return 2
    fd = int(value)
    channel = socket.socket(fileno=os.dup(fd))  # (non-inheritable: a call's subprocesses never get it)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, fd)
    os.close(null)
    try:
        return Lane(channel, Path.cwd()).serve()
    except (BrokenPipeError, ConnectionResetError):  # the startd went away: the lane has no one to serve
        return 0
    finally:
        channel.close()


if __name__ == "__main__":
    raise SystemExit(main())
