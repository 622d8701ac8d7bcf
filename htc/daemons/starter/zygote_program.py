"""The starter zygote's own program: what runs inside the zygote process, under the job's Python.

The startd side -- which zygote, when, and what it does with the answers -- is
:mod:`htc.daemons.starter.zygote`; this module is only the child's side.

Theory of operation
-------------------
**Shipping.** The zygote is started as ``PYTHON -c BOOTSTRAP SOCK_FD MODULE``: :data:`BOOTSTRAP`
reads a program from stdin and runs it, and the startd writes :func:`program` there -- the
source of :mod:`htc.daemons.starter.reaping` (the SIGCHLD wake-up and the ``wait4`` loop the
local executor's zygote uses too), then that of :func:`zygote_main` (taken with
:func:`inspect.getsource`, so it is the files' text) and a line that calls it. The interpreter so
needs no access to htc, and :func:`zygote_main` must keep to the standard library and Python
3.9, import what it uses inside itself, and reach nothing else of this module but the reaping
helpers it is shipped with (imported here under the same names, so the function also reads right
in place).

**The program.** It points fds 0/1/2 at ``/dev/null``, imports ``MODULE`` once (an import
error is sent as ``error`` and the zygote leaves), says ``ready`` with its pid, and then
serves the ``SOCK_SEQPACKET`` socket: one JSON message per request, a job's stdin/stdout/
stderr attached to ``run`` (``SCM_RIGHTS``). ``run`` forks a child blocked on a gate pipe
and answers ``started`` with its pid (``failed`` when the interpreter or module changed on
disk -- ``stale`` -- or fork failed); ``go`` opens the gate, ``cancel`` closes it so the
child leaves without running anything. Each child reaped (``wait4``, on SIGCHLD) is reported
as ``exited`` with its raw wait status and rusage. When the socket closes, the zygote kills
its children and exits.

**An exec child** (the exec zygote: ``MODULE`` is ``""``, nothing is imported) does the same up
to the gate, closing every other descriptor, then sets the rlimits and umask, becomes the
job's uid, gid and supplementary groups, resets the signals Python and the zygote ignore, changes directory and ``execve``s.
Its CLOEXEC report pipe, watched by the zygote, closes on exec or carries
``[stage, errno, strerror]`` of what failed; the zygote sends that as ``exec`` before the
child's ``exited``.

**The child.** It starts a new session, asks for SIGKILL when the zygote dies
(``PR_SET_PDEATHSIG``), closes the zygote's descriptors and waits on its gate. Released, it
points fds 0/1/2 at the job's files, sets the rlimits and umask, replaces ``os.environ``,
``chdir``\\s to the sandbox, sets ``sys.argv`` and ``sys.path[0]`` as ``python -m`` would,
reseeds inherited random generators and runs the module with :func:`runpy.run_module` as
``__main__``. It leaves like the interpreter does: ``SystemExit`` codes (None: 0, an int,
anything else printed and 1), a traceback and 1 for an uncaught exception, non-daemon threads
joined, ``atexit`` handlers run, streams flushed.
"""

from __future__ import annotations

import functools
import inspect

from htc.daemons.starter import reaping
from htc.daemons.starter.reaping import drain, open_sigchld_wakeup, reap_exited

__all__ = ["BOOTSTRAP", "program", "zygote_main"]


# --- the zygote process (runs under the job's interpreter: stdlib only, Python 3.9+) --------------


def zygote_main(sock_fd, module):
    """The zygote's program; shipped as source on its stdin by :func:`program`."""
    import atexit
    import contextlib
    import ctypes
    import importlib
    import io
    import json
    import os
    import resource
    import selectors
    import signal
    import socket
    import sys
    import traceback

    sock = socket.socket(fileno=sock_fd)

    def send(msg):
        with contextlib.suppress(OSError):  # the startd is gone: nobody to tell
            sock.send(json.dumps(msg).encode())

    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    os.chdir("/")
    if sys.path and sys.path[0] in ("", "."):  # -c put the cwd first; a job's module is not found there
        del sys.path[0]
    try:
        if module:  # (the exec zygote, module "", imports nothing: its children exec)
            importlib.import_module(module)
            import runpy  # noqa: F401 - imported once, here
            import threading  # noqa: F401
        origin = getattr(sys.modules[module], "__file__", None) if module else None
    except BaseException:  # noqa: BLE001 - tell the startd why, then leave
        send({"op": "error", "message": traceback.format_exc(limit=-4)})
        return 1

    def fingerprint():
        out = []
        for path in (sys.executable, origin):
            try:
                st = os.stat(path) if path else None
                out.append((st.st_mtime_ns, st.st_size, st.st_ino) if st else None)
            except OSError:
                out.append(None)
        return out

    born = fingerprint()
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        prctl = None
    me = os.getpid()
    wake_r, wake_w = open_sigchld_wakeup()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    gates = {}  # child pid -> write end of its gate (None once opened)
    reports = {}  # exec child pid -> read end of its CLOEXEC report pipe (until it exec'd or failed)

    def exit_status(code):
        if code is None:
            return 0
        if isinstance(code, int):
            return code & 0xFF
        with contextlib.suppress(Exception):  # a closed stderr cannot take the message
            print(code, file=sys.stderr)
        return 1

    def through_gate(msg, gate_r):
        """In a child: wait until the startd has put us into the job's cgroup (or gave up),
        then take the job's rlimits and umask."""
        if os.read(gate_r, 1) != b"g":
            os._exit(1)
        os.close(gate_r)
        for which, value in ((resource.RLIMIT_CORE, msg["core"]), (resource.RLIMIT_DATA, msg["memory"])):
            if value is not None:
                hard = resource.getrlimit(which)[1]
                value = value if hard == resource.RLIM_INFINITY else min(value, hard)
                resource.setrlimit(which, (value, value))
        os.umask(msg["umask"])

    def detach():
        """In a new child: a session of its own, killed with the zygote, no wake-up fd."""
        os.setsid()
        if prctl is not None:
            prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != me:
            os._exit(1)
        signal.set_wakeup_fd(-1)

    def child(msg, fds, gate_r):
        code = 1
        interrupted = False
        try:
            detach()
            for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            sel.close()
            sock.close()
            for fd in [wake_r, wake_w, *(g for g in gates.values() if g is not None)]:
                os.close(fd)
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            for fd in set(fds):
                if fd > 2:
                    os.close(fd)
            if sys.stdin is not None:  # ours was made for the pipe our program came through
                old = sys.stdin
                sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.open(0, "rb", closefd=False), encoding=old.encoding,
                                                             errors=old.errors, line_buffering=old.line_buffering)
            through_gate(msg, gate_r)
            os.environ.clear()
            os.environ.update(msg["env"])
            os.chdir(msg["cwd"])
            sys.argv = ["-m", *msg["argv"][3:]]
            if not getattr(sys.flags, "safe_path", False):
                sys.path.insert(0, os.getcwd())
            if "numpy" in sys.modules:  # os.register_at_fork reseeds `random`; numpy's is ours to do
                with contextlib.suppress(Exception):  # a numpy without its random module
                    sys.modules["numpy"].random.seed()
            import runpy

            # As under ``python -m``, the module runs as __main__ and is not itself in sys.modules
            # (what it imported stays: that is the point); runpy warns otherwise.
            if not hasattr(sys.modules.get(msg["module"]), "__path__"):  # (a package stays; its __main__ runs)
                sys.modules.pop(msg["module"], None)
            try:
                runpy.run_module(msg["module"], run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as exc:
                code = exit_status(exc.code)
            except KeyboardInterrupt:
                traceback.print_exc()
                interrupted = True
            except BaseException:  # noqa: BLE001 - an uncaught exception, as the interpreter reports it
                sys.excepthook(*sys.exc_info())
                code = 1
            # As the interpreter does at exit; a failure there must not change the exit status.
            with contextlib.suppress(BaseException):
                import threading

                threading._shutdown()
            with contextlib.suppress(BaseException):
                atexit._run_exitfuncs()
        except BaseException:  # noqa: BLE001 - setting the job up failed; say so on its stderr
            with contextlib.suppress(BaseException):  # a closed stderr cannot take the traceback
                traceback.print_exc()
            code = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:  # noqa: BLE001
                    code = code or 120  # what the interpreter does when flushing stdout fails
            if interrupted:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGINT)
            os._exit(code)

    def exec_child(msg, fds, gate_r, report_w):
        stage = "prepare"
        try:
            detach()
            # What Python ignores at startup, and what the zygote ignores, must not reach the job
            # (ignored signals survive exec); subprocess resets the same ones.
            for name in ("SIGCHLD", "SIGTERM", "SIGHUP", "SIGINT", "SIGPIPE", "SIGXFZ", "SIGXFSZ"):
                if hasattr(signal, name):
                    signal.signal(getattr(signal, name), signal.SIG_DFL)
            sel.close()
            sock.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)  # (inheritable: the job keeps them)
            keep = sorted((gate_r, report_w))
            os.closerange(3, keep[0])
            os.closerange(keep[0] + 1, keep[1])
            os.closerange(keep[1] + 1, 1 << 20)
            through_gate(msg, gate_r)
            stage = "cgroup"
            for path in msg.get("cgroup_tasks") or ():
                # The job's cgroup(s), joined by this (only) thread itself, still root, before
                # anything of the job runs: "0" is the writer, whom the kernel moves without the
                # global lock that moving another process takes (an RCU grace period each time).
                fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)
            stage = "prepare"
            if msg.get("uid") is not None:
                os.setgroups(msg.get("groups") or [])  # the user's own groups: none of root's
                os.setgid(msg["gid"] if msg.get("gid") is not None else msg["uid"])
                os.setuid(msg["uid"])
                if prctl is not None:
                    prctl(1, signal.SIGKILL, 0, 0, 0)  # again: setuid cleared it
                if os.getppid() != me:
                    os._exit(1)
            stage = "exec"
            os.chdir(msg["cwd"])
            os.execve(msg["argv"][0], msg["argv"], msg["env"])
        except BaseException as exc:  # noqa: BLE001 - tell the zygote (the startd says what failed)
            with contextlib.suppress(BaseException):  # the zygote is gone: the exit status says it
                number = getattr(exc, "errno", None) or 0
                text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
                os.write(report_w, json.dumps([stage, number, text]).encode()[:4000])
        os._exit(127)

    def report(pid):
        """Send what the exec child ``pid`` said: nothing (it exec'd) or why it could not."""
        fd = reports.pop(pid, None)
        if fd is None:
            return
        try:
            data = os.read(fd, 8192)
        except OSError:
            data = b""
        with contextlib.suppress(KeyError, ValueError):  # not (or no longer) registered
            sel.unregister(fd)
        os.close(fd)
        answer = {"op": "exec", "pid": pid}
        if data:
            try:
                answer["stage"], answer["errno"], answer["error"] = json.loads(data)
            except ValueError:
                answer["stage"], answer["errno"], answer["error"] = "prepare", 0, "garbled report"
        send(answer)

    def run(msg, fds):
        if fingerprint() != born:
            send({"op": "failed", "id": msg["id"], "error": "stale: the interpreter or module changed on disk",
                  "stale": True})
            return
        gate_r, gate_w = os.pipe()
        exec_job = not msg["module"]
        report_r, report_w = os.pipe() if exec_job else (-1, -1)  # (os.pipe is CLOEXEC)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # the job closed it: nothing left to flush
                stream.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in (gate_r, gate_w, report_r, report_w):
                if fd >= 0:
                    os.close(fd)
            send({"op": "failed", "id": msg["id"], "error": f"fork: {exc}"})
            return
        if pid == 0:
            os.close(gate_w)
            if exec_job:
                exec_child(msg, fds, gate_r, report_w)
            child(msg, fds, gate_r)
        os.close(gate_r)
        gates[pid] = gate_w
        if exec_job:
            os.close(report_w)
            os.set_blocking(report_r, False)
            reports[pid] = report_r
            sel.register(report_r, selectors.EVENT_READ, pid)
        send({"op": "started", "id": msg["id"], "pid": pid})

    def reaped(pid, status, ru):
        gate = gates.pop(pid, None)
        if gate is not None:
            os.close(gate)
        report(pid)  # (before its exit: the startd hears why an exec failed first)
        send({"op": "exited", "pid": pid, "status": status, "utime": ru.ru_utime, "stime": ru.ru_stime,
              "maxrss": ru.ru_maxrss})

    send({"op": "ready", "pid": me, "python": list(sys.version_info[:3])})
    while True:
        for key, _ in sel.select():
            if key.fileobj == wake_r:
                drain(wake_r)
                reap_exited(reaped)
                continue
            if key.data is not None:  # an exec child's report pipe: it exec'd, or it says why not
                report(key.data)
                continue
            try:
                data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data, fds = b"", []
            if not data:  # the startd closed its end (or died): no job outlives it
                for pid in list(gates):
                    for kill in (os.killpg, os.kill):
                        with contextlib.suppress(OSError):  # already gone
                            kill(pid, signal.SIGKILL)
                while gates:
                    try:
                        gates.pop(os.wait4(-1, 0)[0], None)
                    except ChildProcessError:
                        break
                return 0
            msg = json.loads(data)
            try:
                if msg["op"] == "run":
                    run(msg, fds)
                elif msg["op"] in ("go", "cancel"):
                    gate = gates.get(msg["pid"])
                    if gate is not None:
                        gates[msg["pid"]] = None
                        try:
                            if msg["op"] == "go":
                                os.write(gate, b"g")
                        finally:
                            os.close(gate)
            finally:
                for fd in fds:
                    os.close(fd)


BOOTSTRAP = "import sys; exec(compile(open(0, 'rb', closefd=False).read(), '<htc starter zygote>', 'exec'))"


@functools.cache
def program() -> str:
    """The zygote's program as source: the reaping helpers (:mod:`htc.daemons.starter.reaping`),
    :func:`zygote_main` and the line that runs it."""
    return (inspect.getsource(reaping) + "\n\n" + inspect.getsource(zygote_main)
            + "\nraise SystemExit(zygote_main(int(sys.argv[1]), sys.argv[2]))\n")
