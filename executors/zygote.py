"""A pre-imported Python process that forks one child per function job.

Starting a fresh interpreter and importing cloudpickle costs ~75 ms of CPU per job; forking a
process that has already done so costs about one. The zygote is that process: it imports the
worker (and any modules named in ``preload``) once, then waits for requests on its stdin and
answers on its stdout.

Theory of operation
-------------------
Requests and answers are length-prefixed pickles of plain tuples (both ends are htc):

=================================================  ==============================================
request                                            answer
=================================================  ==============================================
``("run", call_id, sandbox, call_bytes, stdout,    ``("started", call_id, pid)`` at once, then
stderr, env)``                                     ``("exited", call_id, pid, code, signal,
                                                   user_cpu, sys_cpu, maxrss_kib)`` when it ends
``("kill", pid, signal)``                          nothing (the ``exited`` answer follows)
=================================================  ==============================================

The zygote is single-threaded (forking a threaded process is unsafe): one selector watches
its stdin and the wake-up pipe that SIGCHLD writes to, and exited children are reaped with
``wait4`` so their CPU time and peak memory are measured by the kernel (the same wake-up and
reap loop as the starter's zygote: :mod:`htc.daemons.starter.reaping`). Each child starts a
new session (``kill`` signals the whole process group), moves into its sandbox, points fds
1 and 2 at its output files, reseeds random generators it inherited, runs
:func:`htc.executors.worker.run` and leaves with its exit status.

When its stdin closes (the client went away) the zygote kills its children and exits, so no
job outlives the backend that started it.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

from htc.daemons.starter.reaping import drain, open_sigchld_wakeup, reap_exited
from htc.executors.errors import ScheddLost

__all__ = ["Zygote", "serve"]

_LEN = struct.Struct(">I")


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=5)
    return _LEN.pack(len(data)) + data


class _Frames:
    """Splits a byte stream into frames."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self.buffer += data
        out = []
        while len(self.buffer) >= 4:
            (size,) = _LEN.unpack_from(self.buffer)
            if len(self.buffer) < 4 + size:
                break
            out.append(pickle.loads(bytes(self.buffer[4:4 + size])))
            del self.buffer[:4 + size]
        return out


# --- the zygote process ---------------------------------------------------------------------------


def _child(call_id: str, sandbox: str, call_bytes: bytes, stdout: str, stderr: str, env: dict[str, str]) -> None:
    """Runs in the forked child; never returns."""
    code = 70
    try:
        os.setsid()
        os.chdir(sandbox)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        err = out if stderr == stdout else os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.environ.update(env)
        if "numpy" in sys.modules:  # a preloaded numpy would hand every child the same random stream
            sys.modules["numpy"].random.seed()
        from htc.executors.worker import run

        code = run(sandbox, call_data=call_bytes)
    except BaseException:  # noqa: BLE001 - report anything on the job's stderr, then leave
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(preload: Iterable[str] = ()) -> int:
    """The zygote's main loop (``python -m htc.executors.zygote [MODULE ...]``).

    Args:
        preload: modules to import before the first fork.

    Returns:
        0 once the client has gone and every child has been reaped.
    """
    import importlib

    import htc.executors.worker  # noqa: F401 - the point of the zygote: import once, fork many
    from htc.executors.serialize import package_version

    for name in preload:
        importlib.import_module(name)
    # Children check the versions their call records; answer the usual questions once, here.
    for top in {"cloudpickle", "dill", "msgspec", *(name.partition(".")[0] for name in preload)}:
        package_version(top)
    requests = 0  # stdin
    answers = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # a stray print must not corrupt the protocol
    wake_r, wake_w = open_sigchld_wakeup()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the client's terminal is the client's
    sel = selectors.DefaultSelector()
    sel.register(requests, selectors.EVENT_READ, "requests")
    sel.register(wake_r, selectors.EVENT_READ, "children")
    frames = _Frames()
    children: dict[int, str] = {}
    client_gone = False

    def send(obj: Any) -> None:
        data = _frame(obj)
        while data:
            data = data[os.write(answers, data):]

    def reaped(pid: int, status: int, ru: Any) -> None:
        call_id = children.pop(pid, None)
        if call_id is None:
            return
        code = os.waitstatus_to_exitcode(status)
        exit_code, sig = (code, None) if code >= 0 else (None, -code)
        if not client_gone:
            send(("exited", call_id, pid, exit_code, sig, ru.ru_utime, ru.ru_stime, ru.ru_maxrss))

    def reap() -> None:
        if children:
            reap_exited(reaped)

    ready = ("ready", os.getpid(), sys.version_info[:3])
    send(ready)
    while not (client_gone and not children):
        for key, _ in sel.select(timeout=1.0 if client_gone else None):
            if key.data == "children":
                drain(wake_r)
                reap()
                continue
            data = os.read(requests, 1 << 20)
            if not data:
                client_gone = True
                sel.unregister(requests)
                for pid in list(children):
                    _killpg(pid, signal.SIGKILL)
                continue
            for request in frames.feed(data):
                if request[0] == "run":
                    _, call_id, sandbox, call_bytes, stdout, stderr, env = request
                    pid = os.fork()
                    if pid == 0:
                        signal.set_wakeup_fd(-1)
                        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                        signal.signal(signal.SIGINT, signal.SIG_DFL)
                        sel.close()
                        for fd in (requests, answers, wake_r, wake_w):
                            os.close(fd)
                        _child(call_id, sandbox, call_bytes, stdout, stderr, env)
                    children[pid] = call_id
                    send(("started", call_id, pid))
                elif request[0] == "kill":
                    _, pid, sig = request
                    if pid in children:
                        _killpg(pid, sig)
        reap()
    return 0


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            return


# --- the client's handle ------------------------------------------------------------------------


class Zygote:
    """The client's end of a zygote process.

    Args:
        preload: modules the zygote imports before forking (``["numpy"]``).
        env: environment of the zygote (default: this process's).
    """

    def __init__(self, preload: Iterable[str] = (), env: dict[str, str] | None = None):
        self.preload = tuple(preload)
        self._frames = _Frames()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "htc.executors.zygote", *self.preload], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=None, bufsize=0, close_fds=True, env=env,
            start_new_session=True)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._out = self.proc.stdout.fileno()
        self._in = self.proc.stdin.fileno()
        os.set_blocking(self._out, False)
        self.pid: int | None = None
        self.ready = False

    def fileno(self) -> int:
        """The fd to select on for answers."""
        return self._out

    def _send(self, obj: Any) -> None:
        data = _frame(obj)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._in, view):]
        except (BrokenPipeError, OSError) as exc:
            raise ScheddLost(f"the local worker process (zygote pid {self.proc.pid}) is gone: {exc}; "
                             "make a new executor") from None

    def run(self, call_id: str, sandbox: str, call_bytes: bytes, stdout: str, stderr: str,
            env: dict[str, str]) -> None:
        """Ask for a child running ``call_bytes`` in ``sandbox``.

        Raises:
            ScheddLost: the zygote has died.
        """
        self._send(("run", call_id, sandbox, call_bytes, stdout, stderr, env))

    def kill(self, pid: int, sig: int = signal.SIGKILL) -> None:
        """Signal a child's process group (its ``exited`` answer follows)."""
        self._send(("kill", pid, sig))

    def read(self) -> list[tuple]:
        """Every answer that has arrived (without blocking).

        Raises:
            ScheddLost: the zygote closed its end (it died).
        """
        out: list[tuple] = []
        while True:
            try:
                data = os.read(self._out, 1 << 20)
            except BlockingIOError:
                break
            if not data:
                code = self.proc.poll()
                raise ScheddLost(f"the local worker process (zygote pid {self.proc.pid}) exited"
                                 f"{'' if code is None else f' with status {code}'}; its running calls are lost")
            out += self._frames.feed(data)
        for answer in out:
            if answer[0] == "ready":
                self.ready, self.pid = True, answer[1]
        return [a for a in out if a[0] != "ready"]

    def close(self, timeout: float = 5.0) -> None:
        """Close the zygote's stdin (it kills its children and exits) and reap it."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):  # it may be dead already: reaping below is what matters
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


if __name__ == "__main__":
    raise SystemExit(serve(sys.argv[1:]))
