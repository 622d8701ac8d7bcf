"""Finding, signalling, measuring and reaping every process of one job.

Theory of operation
-------------------
A job is its main process plus whatever it forks. The starter must stop, continue, kill and
measure *all* of them, including children that daemonize or call ``setsid``. Membership is
decided, strongest first, by:

1. the job's cgroup (``cgroup.procs``) when there is one -- nothing escapes it;
2. otherwise the session the main process leads (the starter starts it with ``setsid``) plus any
   process whose environment carries the job's ancestry marker (``_CONDOR_ANCESTOR_<starter
   pid>=<token>``, HTCondor's own trick): a child that leaves the session keeps its environment.

The main process is reaped with ``wait4`` so its exit status and its ``rusage`` (CPU time of it
and every descendant it waited for, and its peak RSS) are exact. The exit is awaited without a
thread where the kernel has pidfds (``pidfd_open`` + the event loop's reader); else a worker
thread blocks in ``wait4``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass

import psutil

from htc.daemons.clock import REAL, Clock
from htc.daemons.starter.limits import JobCgroup


@dataclass(frozen=True)
class Reaped:
    """The main process's end: raw wait status and resource usage."""

    status: int
    rusage: object

    @property
    def signal(self) -> int | None:
        """The signal that killed it, or None when it exited."""
        return os.WTERMSIG(self.status) if os.WIFSIGNALED(self.status) else None

    @property
    def exit_code(self) -> int | None:
        """Its exit code, or None when a signal killed it."""
        return os.WEXITSTATUS(self.status) if os.WIFEXITED(self.status) else None

    @property
    def core_dumped(self) -> bool:
        """True when the killing signal dumped core."""
        return os.WIFSIGNALED(self.status) and os.WCOREDUMP(self.status)


def watch_exit(pid: int) -> asyncio.Future[Reaped]:
    """A future that resolves with the :class:`Reaped` record when child ``pid`` exits.

    Must be called from the event loop's thread; the child must be ours and not yet reaped.
    """
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        # Old kernel: a worker thread blocks in wait4. The future keeps the thread's result.
        return asyncio.ensure_future(asyncio.to_thread(_wait4_blocking, pid))
    future: asyncio.Future[Reaped] = loop.create_future()

    def ready() -> None:
        done, status, rusage = os.wait4(pid, os.WNOHANG)
        if done == 0:
            return  # not a real exit yet
        loop.remove_reader(fd)
        os.close(fd)
        if not future.done():
            future.set_result(Reaped(status, rusage))

    loop.add_reader(fd, ready)
    return future


def _wait4_blocking(pid: int) -> Reaped:
    _, status, rusage = os.wait4(pid, 0)
    return Reaped(status, rusage)


class JobProcesses:
    """The processes of one job (see the module docstring for how membership is decided).

    Args:
        cgroup: the job's cgroup (None: find the processes by session and marker).
        marker: the ancestry variable (name, value) the job's environment carries.
        clock: how :meth:`kill_all` waits (:mod:`htc.daemons.clock`).
    """

    def __init__(self, cgroup: JobCgroup | None, marker: tuple[str, str], clock: Clock = REAL):
        self.cgroup = cgroup
        self.marker = marker
        self.clock = clock
        self.main_pid: int | None = None
        self.main_alive = False
        self.peak_rss = 0  # bytes, summed over the job's processes
        self.peak_vms = 0

    def started(self, pid: int) -> None:
        """Record the main process (session leader)."""
        self.main_pid, self.main_alive = pid, True

    def pids(self) -> set[int]:
        """Every live process of the job (zombies excluded)."""
        if self.cgroup is not None:
            found = self.cgroup.pids()
        else:
            found = set()
            name, token = self.marker
            for proc in psutil.process_iter():
                try:
                    if self.main_pid is not None and os.getsid(proc.pid) == self.main_pid:
                        found.add(proc.pid)
                    elif proc.pid != os.getpid() and proc.environ().get(name) == token:
                        found.add(proc.pid)
                except (psutil.Error, OSError):
                    continue  # gone, or not ours to inspect
        if self.main_alive and self.main_pid is not None:
            found.add(self.main_pid)
        return {pid for pid in found if not _is_zombie(pid) or pid == self.main_pid}

    def signal(self, sig: int) -> int:
        """Send ``sig`` to every process of the job; returns how many were signalled."""
        count = 0
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
                count += 1
        return count

    def signal_main(self, sig: int) -> None:
        """Send ``sig`` to the main process only."""
        if self.main_alive and self.main_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.main_pid, sig)

    async def kill_all(self, timeout: float = 10.0) -> bool:
        """SIGKILL every process of the job and wait until none is left.

        Returns:
            True when the job is gone; False when processes survived ``timeout`` seconds
            (stuck in the kernel), which the caller should report.
        """
        deadline = self.clock.monotonic() + timeout
        while True:
            if self.cgroup is not None:
                self.cgroup.kill_all()
            self.signal(signal.SIGKILL)
            left = self.pids() - ({self.main_pid} if self.main_alive else set())
            if not left and not self.main_alive:
                return True
            if self.clock.monotonic() >= deadline:
                return False
            await self.clock.sleep(0.01)  # the kernel needs a moment to tear processes down

    def sample(self) -> tuple[float, float, int, int]:
        """(user cpu s, system cpu s, rss bytes, vms bytes) of the live processes, with peaks kept.

        CPU includes children the processes have already waited for.
        """
        user = system = 0.0
        rss = vms = 0
        for pid in self.pids():
            try:
                proc = psutil.Process(pid)
                with proc.oneshot():
                    times = proc.cpu_times()
                    mem = proc.memory_info()
            except psutil.Error:
                continue
            user += times.user + times.children_user
            system += times.system + times.children_system
            rss += mem.rss
            vms += mem.vms
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_vms = max(self.peak_vms, vms)
        return user, system, rss, vms


def _is_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True  # gone counts as dead
