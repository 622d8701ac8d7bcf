"""The starter zygote: a pre-imported Python that forks one process per function job.

A function job is ``python -m htc.executors.worker``: starting the interpreter and importing
the worker costs tens of milliseconds of CPU per job, where forking a process that has already
done so costs about one. The startd keeps such processes -- *zygotes* -- and the starter asks
one for the job's process instead of exec'ing a fresh interpreter.

Theory of operation
-------------------
**When.** A job is eligible when the starter would run ``[PYTHON, "-m", MODULE, args...]`` with
``MODULE`` in ``StarterSettings.zygote_modules`` (default: the executor's worker), the
interpreter was not transferred into the sandbox, and ``StarterSettings.use_zygote`` is on
(:mod:`htc.daemons.starter.zygote_keys` decides which jobs, and which zygote serves them).
Anything else -- and any zygote trouble: it cannot start, cannot import the module, times out,
or refuses a request -- falls back to the ordinary fork+exec (logged once per zygote); the
zygote never makes a job fail.

**Which zygote.** :class:`ZygotePool` (one per startd) keeps one zygote per
:class:`ZygoteKey`: the interpreter path, the module, the job user's uid, gid and groups, and the job
environment's variables that decide what a Python imports and how it starts (``PYTHON*``,
``LANG``/``LC_*``, ``HOME``). It starts lazily, on the first eligible job, as
``PYTHON -c <bootstrap>`` whose program (:mod:`htc.daemons.starter.zygote_program`, stdlib only,
shipped on its stdin so the interpreter needs no access to htc) imports ``MODULE`` once. It
runs as the job's user (root startd: the job's owner or the slot's account, see
:mod:`htc.daemons.run_as`; so jobs of different users never share a zygote), in its own session, with
``PR_SET_PDEATHSIG`` so it dies with the startd, and talks over a ``SOCK_SEQPACKET`` socket pair: one JSON message each way per
request (the startd never unpickles what a process of the job's user sends).

**Per job** (:meth:`ZygotePool.run`):

1. The starter opens the job's stdin/stdout/stderr itself (as root, exactly as for exec) and
   sends ``run`` with argv, environment, cwd, memory rlimit, core size and umask, the three
   descriptors attached (``SCM_RIGHTS``).
2. The zygote forks. The child starts a new session, asks for SIGKILL when the zygote dies,
   closes the zygote's descriptors, and *blocks on a gate pipe*. The zygote answers
   ``started`` with the pid.
3. The startd checks the pid really is a child of that zygote running as the job's user, writes
   it into the job's cgroup when there is one (:meth:`JobCgroup.add`), and sends ``go``; the
   zygote opens the gate. So no instruction of the job runs outside its cgroup.
4. The child sets the job up and runs the module as ``__main__``, and leaves, as ``python -m``
   would (:mod:`htc.daemons.starter.zygote_program`).
5. The zygote reaps it with ``wait4`` and reports ``exited`` with the raw wait status and
   rusage; the starter gets a :class:`~htc.daemons.starter.procs.Reaped` through a future
   instead of reaping the (not its own) child.

Signalling and measuring are unchanged (:class:`~htc.daemons.starter.procs.JobProcesses`):
the job's cgroup, or its session plus the ancestry marker its environment carries.

**Failures.** When a zygote dies (or stops answering: it is then killed), each job it was
running is reported as killed by SIGKILL -- its children were killed by ``PR_SET_PDEATHSIG``
-- and the next eligible job starts a new zygote. A zygote whose interpreter or module file
changed on disk refuses new jobs (``stale``): it is retired once its jobs end, and the next job
gets a fresh one. :meth:`ZygotePool.close` (the startd's exit) ends every zygote; a zygote
whose socket closes kills its children and exits.

**The exec zygote.** Every other job (a plain executable, a script) may be forked by the
pool's one exec zygote (:meth:`ZygoteKey.for_exec`, module :data:`EXEC_MODULE` = ``""``,
``StarterSettings.use_exec_zygote``): the startd's own interpreter run with ``-I -S``, importing
nothing, as root (it must become any slot user), in its own session, with
``PR_SET_PDEATHSIG``. The request also carries the uid, gid and groups to become. Steps 1-3 are as above,
but for the cgroup: under cgroup v1 the request names the ``tasks`` file of each of the job's
cgroups (:meth:`JobCgroup.self_join_files`) and the child, released and still root, writes
``0`` to each -- it joins them itself before anything of the job runs -- since the kernel moves
a thread that moves itself without the global lock that moving another process by pid takes
(an RCU grace period: milliseconds per job, tens of them on a busy host, which the startd's
event loop spent blocked in ``cgroup.procs``); a child that cannot join ends with stage
``cgroup`` and the job is exec'd the ordinary way, as when the startd cannot move it. Then the
child sets rlimits and umask, drops to the user (and asks for SIGKILL again:
setuid cleared it), restores default signal dispositions, changes directory and ``execve``s; a
``CLOEXEC`` pipe to the zygote carries the errno of a failed step, or closes on exec. The
zygote reports ``exec`` (with ``stage``/``errno``/``error`` on failure) before the child's
``exited``, and :meth:`ZygotePool.run` returns only after it: a failure raises
:class:`JobStartError`, which the starter turns into the same ``StarterError`` as a failed
fork+exec. The startd so never forks a job itself, and two slots' spawns no longer queue
behind each other in its spawn thread.

**Time.** How long a key that could not start a zygote uses exec before trying again
(:data:`RETRY_AFTER`) is measured by the pool's clock (:mod:`htc.daemons.clock`); the bounds on
a live zygote's answers (:data:`READY_TIMEOUT`, :data:`REQUEST_TIMEOUT`,
:data:`EXIT_REPORT_GRACE`) guard against a stuck process and are the event loop's own timers.

**Security.** The zygote runs as the job's user, like the jobs it forks, and holds no
privilege a job lacks; the startd validates every pid it is told about before acting on it.
The exec zygote is root but runs no job code and reads only the startd's socket; its children
drop privilege before exec exactly as the startd's fork+exec does.
The zygote's own environment has only the variables of the key, so nothing of one job's
environment reaches another's. Jobs of one zygote share its hash-randomisation seed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from htc.daemons.clock import REAL, Clock
from htc.daemons.starter.procs import Reaped
from htc.daemons.starter.spawn import SPAWNER, die_with_parent
from htc.daemons.starter.zygote_keys import ZygoteKey
from htc.daemons.starter.zygote_program import BOOTSTRAP, program

if TYPE_CHECKING:
    from htc.daemons.starter.limits import JobCgroup

__all__ = ["JobStartError", "ZygotePool", "ZygoteStarted"]

log = logging.getLogger("htc.daemons.starter.zygote")

#: How long a new zygote may take to import its module and say it is ready.
READY_TIMEOUT = 30.0
#: How long the zygote may take to answer a request (it answers at once unless it is stuck).
REQUEST_TIMEOUT = 10.0
#: After a zygote could not be started, how long its key uses exec before trying again.
RETRY_AFTER = 60.0
#: How long a job's exit may go unreported by its zygote after the process is gone.
EXIT_REPORT_GRACE = 5.0

_KILLED = Reaped(signal.SIGKILL, SimpleNamespace(ru_utime=0.0, ru_stime=0.0, ru_maxrss=0))
_MAX_MESSAGE = 1 << 20


@dataclass(frozen=True)
class ZygoteStarted:
    """A job process a zygote forked: its pid, the future of its end, and the zygote's pid."""

    pid: int
    exit: asyncio.Future[Reaped]
    zygote_pid: int


class ZygoteError(Exception):
    """The zygote cannot serve this request; the starter falls back to exec."""


class JobStartError(Exception):
    """The exec zygote's child could not become the job: ``stage`` ``"prepare"`` (limits, user)
    or ``"exec"`` (chdir, execve), with the errno and its text -- the job did not start."""

    def __init__(self, stage: str, errno: int, strerror: str):
        super().__init__(f"{stage}: {strerror}")
        self.stage, self.errno, self.strerror = stage, errno, strerror


# --- the startd's side ---------------------------------------------------------------------------


def _proc_status(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status") as f:
            return dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    except OSError:
        return {}


def _is_child(pid: int, parent: int, uid: int | None) -> bool:
    """True when ``pid`` is a live child of ``parent`` (running as ``uid`` when given)."""
    if pid <= 0:
        return False
    status = _proc_status(pid)
    if status.get("PPid", "").strip() != str(parent):
        return False
    return uid is None or status.get("Uid", "").split()[:1] == [str(uid)]


@dataclass(eq=False)
class _Zygote:
    """One zygote process and the startd's bookkeeping for it."""

    key: ZygoteKey
    popen: subprocess.Popen
    sock: socket.socket
    loop: asyncio.AbstractEventLoop
    ready: asyncio.Future[int]
    pid: int = 0
    alive: bool = True
    retired: bool = False
    requests: dict[int, asyncio.Future[tuple[int, asyncio.Future[Reaped]]]] = field(default_factory=dict)
    jobs: dict[int, asyncio.Future[Reaped]] = field(default_factory=dict)  # pid -> its end
    watchers: dict[int, int] = field(default_factory=dict)  # pid -> pidfd
    execs: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)  # pid -> its exec report
    error: str | None = None


class ZygotePool:
    """The startd's zygotes, one per :class:`ZygoteKey` (see the module docstring).

    Use from one event loop; :meth:`close` when the startd stops.

    Args:
        clock: when a zygote that could not start may be tried again (:mod:`htc.daemons.clock`).
    """

    def __init__(self, clock: Clock = REAL) -> None:
        self._clock = clock
        self._zygotes: dict[ZygoteKey, _Zygote] = {}
        self._retired: list[_Zygote] = []
        self._failed: dict[ZygoteKey, float] = {}  # key -> when starting it last failed
        self._launching: dict[ZygoteKey, asyncio.Task[_Zygote]] = {}
        self._warned: set[ZygoteKey] = set()
        self._ids = itertools.count(1)

    def pids(self) -> dict[ZygoteKey, int]:
        """The live zygotes' pids, by key (for tests and diagnostics)."""
        return {key: z.pid for key, z in self._zygotes.items() if z.alive and z.pid}

    def pids_of(self, uid: int) -> set[int]:
        """The pids of every zygote (live or retired) running as ``uid``."""
        return {z.popen.pid for z in [*self._zygotes.values(), *self._retired] if z.key.uid == uid and z.alive}

    def stop_user(self, uid: int) -> None:
        """End every zygote running as ``uid`` (a slot account handed to another owner's job:
        nothing of the previous owner's may stay under it)."""
        for zygote in [*self._zygotes.values(), *self._retired]:
            if zygote.key.uid == uid:
                self._stop(zygote, kill=True)

    def _warn(self, key: ZygoteKey, what: str) -> None:
        if key in self._warned:
            log.debug("zygote for %s: %s", key.what, what)
            return
        self._warned.add(key)
        log.warning("zygote for %s (%s, uid %s): %s; such jobs start by fork+exec instead", key.what,
                    key.python, key.uid, what)

    # ----------------------------------------------------------------- per job
    async def run(self, key: ZygoteKey, plan: Mapping[str, Any], streams: Sequence[int],
                  cgroup: JobCgroup | None, umask: int = 0o022, *, retry: bool = True) -> ZygoteStarted | None:
        """Have a zygote fork the job of ``plan`` (the starter's spawn plan); None: use exec.

        Args:
            key: which zygote (:meth:`ZygoteKey.for_job`).
            plan: argv, env, cwd, rlimit_memory, core (and, for the exec zygote, uid, gid and
                groups: whom the child becomes).
            streams: the job's stdin, stdout and stderr, opened by the starter (they are passed,
                the caller still closes its copies).
            cgroup: the job's cgroup, which the process joins before it runs anything.
            umask: the job's umask.
            retry: ask a fresh zygote once when this one is stale.

        Raises:
            JobStartError: (exec zygote) the child could not become the job: the job failed to
                start, as a failed exec would.
        """
        zygote = await self._get(key)
        if zygote is None:
            return None
        request = next(self._ids)
        msg = {"op": "run", "id": request, "module": key.module, "argv": list(plan["argv"]),
               "env": dict(plan["env"]), "cwd": str(plan["cwd"]), "memory": plan["rlimit_memory"],
               "core": plan["core"], "umask": umask}
        joins = cgroup.self_join_files() if cgroup is not None and key.is_exec else None
        if key.is_exec:
            msg["uid"], msg["gid"] = plan.get("uid"), plan.get("gid")
            msg["groups"] = [int(g) for g in plan.get("groups") or ()]
            if joins:  # the child joins the job's cgroup itself, past the gate (see the module docstring)
                msg["cgroup_tasks"] = [str(p) for p in joins]
        answer = zygote.loop.create_future()
        zygote.requests[request] = answer
        try:
            socket.send_fds(zygote.sock, [json.dumps(msg).encode()], list(streams))
        except OSError as exc:
            zygote.requests.pop(request, None)
            self._warn(key, f"cannot send it the job: {exc}")
            self._broken(zygote, f"send failed: {exc}")
            return None
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                pid, ended = await answer
        except TimeoutError:
            self._warn(key, f"no answer within {REQUEST_TIMEOUT:g} s")
            self._broken(zygote, "it stopped answering")
            return None
        except ZygoteError as exc:
            if "stale" in str(exc):
                log.info("zygote pid %s for %s: its interpreter or module changed on disk; retiring it",
                         zygote.pid, key.what)
                self._retire(zygote)
                if retry:
                    return await self.run(key, plan, streams, cgroup, umask, retry=False)
                return None
            self._warn(key, str(exc))
            return None
        # The child exists, blocked on its gate: release it, or make sure it ends without running.
        if not _is_child(pid, zygote.pid, key.uid):
            if zygote.alive:
                self._warn(key, f"it named pid {pid}, which is not its child running as uid {key.uid}")
            self._broken(zygote, "a pid it named is not its child")
            return None
        try:
            if cgroup is not None and not joins:
                cgroup.add(pid)
        except OSError as exc:
            self._send(zygote, {"op": "cancel", "pid": pid})
            self._warn(key, f"cannot move its process into the job's cgroup: {exc}")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(REQUEST_TIMEOUT):
                    await asyncio.shield(ended)
            return None
        self._send(zygote, {"op": "go", "pid": pid})
        if key.is_exec:  # hear whether it exec'd (the zygote reads its CLOEXEC pipe)
            execd = zygote.execs.get(pid)
            if execd is None:
                self._broken(zygote, "it lost a job process")
                return None
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT):
                    report = await asyncio.shield(execd)
            except TimeoutError:
                self._warn(key, f"no exec report within {REQUEST_TIMEOUT:g} s")
                self._broken(zygote, "it stopped answering")
                return None
            except ZygoteError as exc:
                self._warn(key, str(exc))
                return None
            if report.get("error") is not None and report.get("stage") == "cgroup":
                # It could not join the job's cgroup and ended without running anything: as
                # when the startd cannot move it there, the job is exec'd the ordinary way.
                self._warn(key, f"its process cannot join the job's cgroup: {report['error']}")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(REQUEST_TIMEOUT):
                        await asyncio.shield(ended)
                return None
            if report.get("error") is not None:
                raise JobStartError(str(report.get("stage", "exec")), int(report.get("errno") or 0),
                                    str(report["error"]))
        return ZygoteStarted(pid, ended, zygote.pid)

    def _send(self, zygote: _Zygote, msg: dict[str, Any]) -> None:
        if not zygote.alive:
            return
        try:
            zygote.sock.send(json.dumps(msg).encode())
        except OSError as exc:
            self._broken(zygote, f"send failed: {exc}")

    # ----------------------------------------------------------------- zygotes
    async def _get(self, key: ZygoteKey) -> _Zygote | None:
        loop = asyncio.get_running_loop()
        zygote = self._zygotes.get(key)
        if zygote is not None and (zygote.loop is not loop or not zygote.alive or zygote.retired):
            if zygote.loop is not loop:  # a new event loop (tests): the old zygote's reader is gone
                self._stop(zygote)
            self._zygotes.pop(key, None)
            zygote = None
        if zygote is None:
            failed = self._failed.get(key)
            if failed is not None and self._clock.monotonic() - failed < RETRY_AFTER:
                return None
            launching = self._launching.get(key)
            if launching is None or launching.get_loop() is not loop:  # one launch for concurrent jobs
                launching = self._launching[key] = loop.create_task(self._launch(key, loop))
            try:
                zygote = await asyncio.shield(launching)
            except (OSError, subprocess.SubprocessError) as exc:
                self._failed[key] = self._clock.monotonic()
                self._warn(key, f"cannot start {key.python}: {exc}")
                return None
            finally:
                if launching.done() and self._launching.get(key) is launching:
                    del self._launching[key]
        try:
            async with asyncio.timeout(READY_TIMEOUT):
                await asyncio.shield(zygote.ready)
        except (TimeoutError, ZygoteError) as exc:
            self._failed[key] = self._clock.monotonic()
            self._warn(key, str(exc) or f"not ready within {READY_TIMEOUT:g} s")
            self._broken(zygote, "it did not start")
            return None
        return zygote if zygote.alive and not zygote.retired else None

    async def _launch(self, key: ZygoteKey, loop: asyncio.AbstractEventLoop) -> _Zygote:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            popen = await loop.run_in_executor(SPAWNER, _spawn_zygote, key, theirs.fileno())
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        zygote = _Zygote(key, popen, ours, loop, loop.create_future())
        zygote.ready.add_done_callback(lambda f: f.exception() if not f.cancelled() else None)
        loop.add_reader(ours.fileno(), self._readable, zygote)
        self._zygotes[key] = zygote
        return zygote

    def _readable(self, zygote: _Zygote) -> None:
        while zygote.alive:
            try:
                data = zygote.sock.recv(_MAX_MESSAGE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._broken(zygote, "it exited" if zygote.ready.done() else "it exited before it was ready")
                return
            try:
                msg = json.loads(data)
                self._answer(zygote, msg)
            except (ValueError, KeyError, TypeError) as exc:
                self._broken(zygote, f"malformed answer: {exc}")
                return

    def _answer(self, zygote: _Zygote, msg: dict[str, Any]) -> None:
        op = msg["op"]
        if op == "ready":
            zygote.pid = int(msg["pid"])
            if zygote.pid != zygote.popen.pid:
                raise ValueError(f"ready from pid {zygote.pid}, started as {zygote.popen.pid}")
            if not zygote.ready.done():
                zygote.ready.set_result(zygote.pid)
            log.info("zygote pid %s ready for %s (%s, uid %s)", zygote.pid, zygote.key.what, zygote.key.python,
                     zygote.key.uid)
        elif op == "error":
            zygote.error = str(msg["message"]).strip()
            if not zygote.ready.done():
                last = zygote.error.splitlines()
                zygote.ready.set_exception(ZygoteError(f"it cannot import {zygote.key.module}: "
                                                       f"{last[-1] if last else '?'}"))
        elif op == "started":
            pid, request = int(msg["pid"]), int(msg["id"])
            ended = zygote.jobs[pid] = zygote.loop.create_future()
            self._watch(zygote, pid)
            if zygote.key.is_exec:
                zygote.execs[pid] = zygote.loop.create_future()
            answer = zygote.requests.pop(request, None)
            if answer is not None and not answer.done():
                answer.set_result((pid, ended))
            else:  # the starter gave up waiting: the child must not run
                self._send(zygote, {"op": "cancel", "pid": pid})
        elif op == "failed":
            answer = zygote.requests.pop(int(msg["id"]), None)
            if answer is not None and not answer.done():
                answer.set_exception(ZygoteError(str(msg["error"])))
        elif op == "exec":
            future = zygote.execs.pop(int(msg["pid"]), None)
            if future is not None and not future.done():
                future.set_result(msg)
        elif op == "exited":
            pid = int(msg["pid"])
            execd = zygote.execs.pop(pid, None)
            if execd is not None and not execd.done():  # gone before it could exec (never released)
                execd.set_result({"stage": "prepare", "errno": 0, "error": "the process exited before exec"})
            rusage = SimpleNamespace(ru_utime=float(msg["utime"]), ru_stime=float(msg["stime"]),
                                     ru_maxrss=int(msg["maxrss"]))
            self._unwatch(zygote, pid)
            future = zygote.jobs.pop(pid, None)
            if future is not None and not future.done():
                future.set_result(Reaped(int(msg["status"]), rusage))
            if zygote.retired and not zygote.jobs:
                self._stop(zygote)
        else:
            raise ValueError(f"unknown answer {op!r}")

    def _watch(self, zygote: _Zygote, pid: int) -> None:
        """Should the zygote never report ``pid``'s end, report it killed a while after it is gone."""
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return
        zygote.watchers[pid] = fd

        def gone() -> None:
            self._unwatch(zygote, pid)
            zygote.loop.call_later(EXIT_REPORT_GRACE, self._assume_killed, zygote, pid)

        zygote.loop.add_reader(fd, gone)

    def _unwatch(self, zygote: _Zygote, pid: int) -> None:
        fd = zygote.watchers.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(Exception):
                zygote.loop.remove_reader(fd)
            os.close(fd)

    def _assume_killed(self, zygote: _Zygote, pid: int) -> None:
        future = zygote.jobs.pop(pid, None)
        if future is not None and not future.done():
            log.warning("zygote pid %s never reported the end of job process %s; reporting it killed",
                        zygote.pid, pid)
            future.set_result(_KILLED)

    def _retire(self, zygote: _Zygote) -> None:
        zygote.retired = True
        if self._zygotes.get(zygote.key) is zygote:
            del self._zygotes[zygote.key]
        if zygote.jobs:
            self._retired.append(zygote)
        else:
            self._stop(zygote)

    def _broken(self, zygote: _Zygote, why: str) -> None:
        """The zygote is gone or unusable: kill it and report its jobs killed."""
        if zygote.alive:
            log.info("zygote pid %s for %s: %s", zygote.pid or zygote.popen.pid, zygote.key.what, why)
        self._stop(zygote, kill=True)

    def _stop(self, zygote: _Zygote, kill: bool = False, timeout: float = 5.0) -> None:
        """End one zygote (its jobs too) and reap it."""
        if self._zygotes.get(zygote.key) is zygote:
            del self._zygotes[zygote.key]
        if zygote in self._retired:
            self._retired.remove(zygote)
        was_alive, zygote.alive = zygote.alive, False
        if was_alive:
            with contextlib.suppress(Exception):  # the loop may be closed already
                zygote.loop.remove_reader(zygote.sock.fileno())
            zygote.sock.close()  # the zygote kills its children and exits
            if kill:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(zygote.popen.pid, signal.SIGKILL)
        for pid in list(zygote.watchers):
            self._unwatch(zygote, pid)
        loop_open = not zygote.loop.is_closed()
        for future in [*zygote.requests.values(), *zygote.execs.values(), zygote.ready]:
            if loop_open and not future.done():
                future.set_exception(ZygoteError(f"the zygote {'was stopped' if not kill else 'died'}"))
        zygote.requests.clear()
        zygote.execs.clear()
        for future in zygote.jobs.values():
            if loop_open and not future.done():
                future.set_result(_KILLED)  # PR_SET_PDEATHSIG killed it with the zygote
        zygote.jobs.clear()
        if not was_alive:
            return
        try:
            zygote.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            zygote.popen.kill()
            zygote.popen.wait()

    def close(self) -> None:
        """Stop every zygote (each kills the jobs it still runs) and reap them."""
        for zygote in [*self._zygotes.values(), *self._retired]:
            self._stop(zygote)
        self._zygotes.clear()
        self._retired.clear()


def _spawn_zygote(key: ZygoteKey, sock_fd: int) -> subprocess.Popen:
    """Start the zygote process (in the starters' spawn thread: :mod:`htc.daemons.starter.spawn`)."""
    startd = os.getpid()
    uid, gid, groups = key.uid, key.gid, list(key.groups)

    def child() -> None:
        if uid is not None and os.geteuid() == 0:
            os.setgroups(groups)  # the user's own groups: none of root's survive
            os.setgid(gid if gid is not None else uid)
            os.setuid(uid)
        die_with_parent(startd)  # after setuid, which clears the setting

    # The exec zygote runs no job code: isolated (-I) and without site (-S), it stays small.
    flags = ["-I", "-S"] if key.is_exec else []
    popen = subprocess.Popen([key.python, *flags, "-c", BOOTSTRAP, str(sock_fd), key.module], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/", env=dict(key.env),
                             pass_fds=(sock_fd,), preexec_fn=child, start_new_session=True)
    assert popen.stdin is not None
    try:
        popen.stdin.write(program().encode())
        popen.stdin.close()
    except OSError:
        with contextlib.suppress(OSError):
            popen.stdin.close()
        # it died at once (not a Python?); its socket closes and the reader says so
    return popen
