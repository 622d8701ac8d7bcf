"""Forking and exec'ing a job's process, in the starters' one spawn thread.

Theory of operation
-------------------
The parent of a fork waits until the child has exec'd (to hear of a failed exec), and a child
with setup to do before exec (cgroup, limits, user) takes milliseconds -- tens of them on a busy
machine -- in which the startd's event loop, and every other slot, would stand still. So the
starter forks, and does the file system work of setting a job up, in a worker thread
(:func:`off_loop`). Forking from a thread is safe for what the child does before exec: Python
resets its own locks in the child, and the one libc function it calls through ctypes was
resolved before any fork (:func:`die_with_parent`).

There is *one* such thread (:data:`SPAWNER`). A child forked while the event loop copies
another job's executable into its sandbox holds that file open for writing until it execs;
with two spawning threads the other job could exec meanwhile and fail with "Text file busy"
(ETXTBSY). With one, the next exec waits for the previous child's, and since the copying happens
in the same thread (the starter's set-up), no copy is ever open during a fork. (The exec zygote,
a separate process, never holds the startd's descriptors, so the copies stay here and its spawns
need not queue in this thread.)

:func:`exec_job` is the fork+exec itself: the child joins the job's cgroup, sets its rlimits and
umask, drops to the job's user -- its uid, its primary group and its supplementary groups,
nothing of root's -- and asks to die with its starter before ``exec``; it leads a new session so
the starter can find its family (:mod:`htc.daemons.starter.procs`). :func:`open_streams` opens
the job's stdin, stdout and stderr for it, and for a zygote to pass on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from htc.daemons import owner_files as ofs
from htc.daemons.starter.limits import child_rlimits
from htc.daemons.starter.records import StarterError, cannot_start

if TYPE_CHECKING:
    from htc.daemons.starter.limits import JobCgroup

__all__ = ["SPAWNER", "die_with_parent", "exec_job", "off_loop", "open_streams"]

_T = TypeVar("_T")

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Looked up once, here: the child (forked from a thread, see off_loop) must not call into the
# dynamic loader, whose lock another thread may have held at the fork.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None

#: The thread that forks and execs jobs, one at a time (see the module docstring for why
#: there must be exactly one).
SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="htc-starter-spawn")


def die_with_parent(parent: int) -> None:
    """In the job's child before exec: have the kernel SIGKILL it when its starter is gone.

    The starter runs inside the startd, so a startd killed with SIGKILL cannot kill its jobs;
    without this the job would run on unseen while the schedd runs it again elsewhere (HTCondor's
    starter likewise ends its job when its startd disappears). Only the main process is covered:
    a shell job dies before it can run its next command.
    """
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the starter died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)


async def off_loop(fn: Callable[..., _T], *args: Any) -> _T:
    """Run ``fn(*args)`` -- setting a job up, or forking and exec'ing it -- in :data:`SPAWNER`,
    and return its result.

    Cancelling the caller does not cancel ``fn``: it waits for ``fn`` to end (so the caller
    knows whether the job, or its sandbox, exists before it cleans up), then is cancelled.
    """
    loop = asyncio.get_running_loop()
    working = loop.run_in_executor(SPAWNER, fn, *args)
    try:
        return await asyncio.shield(working)
    except asyncio.CancelledError:
        await asyncio.wait([working])  # know whether the job (or its sandbox) exists before cleaning up
        raise


def give_fds(fds: Mapping[int, int]) -> None:
    """In a child before exec: put each source descriptor at its number (``{number: source}``)
    and close every other inheritable descriptor above 2, as ``close_fds`` would (which cannot
    keep a number the parent does not have open). Close-on-exec ones close by themselves."""
    for number, source in fds.items():
        os.dup2(source, number)  # (inheritable)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in fds:
            try:
                if not fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC:
                    os.close(fd)
            except OSError:  # the listing's own descriptor, gone by now
                continue


def exec_job(plan: Mapping[str, Any], cgroup: JobCgroup | None, uid: int | None, gid: int | None,
             groups: Sequence[int], where: tuple[Path | None, ofs.Identity | None], job: str) -> int:
    """Fork and exec the job of ``plan`` (the starter's spawn plan); run it in :data:`SPAWNER`.

    Args:
        plan: argv, env, cwd, stdin/stdout/stderr (and stdin_fd), rlimit_memory, core.
        cgroup: the job's cgroup, which the child joins before exec (None: none).
        uid, gid, groups: whom the child becomes (None: stay this process's user).
        where: the sandbox and the job's owner, for :func:`open_streams`.
        job: the job's ``cluster.proc``, for messages.

    Returns:
        The pid of the job's main process (ours to reap: nothing else waits for it).

    Raises:
        StarterError: a stream could not be opened, the child could not be prepared (cgroup,
            limits, user) or the executable could not be exec'd; nothing runs.
    """
    memory, core = plan["rlimit_memory"], plan["core"]
    starter_pid = os.getpid()
    groups = list(groups)
    # descriptors the job gets at fixed numbers (a standard-universe job's file server
    # connection): given by give_fds in the child, which closes the rest as close_fds would
    job_fds = dict(plan.get("job_fds") or {})

    def child() -> None:  # runs in the child between fork and exec
        if job_fds:
            give_fds(job_fds)
        if cgroup is not None:
            cgroup.enter()
        child_rlimits(memory, core)
        os.umask(0o022)
        if uid is not None:
            os.setgroups(groups)  # the job user's groups: none of root's survive
            os.setgid(gid)
            os.setuid(uid)
        die_with_parent(starter_pid)  # after setuid, which clears the setting

    streams = []
    try:
        streams = open_streams(plan, where, job)
        popen = subprocess.Popen(plan["argv"], stdin=streams[0], stdout=streams[1], stderr=streams[2],
                                 cwd=plan["cwd"], env=plan["env"], preexec_fn=child, start_new_session=True,
                                 close_fds=not job_fds)
    except OSError as exc:
        raise cannot_start(plan["argv"][0], exc.errno or 0, exc.strerror or str(exc)) from exc
    except subprocess.SubprocessError as exc:  # child() failed: cgroup, rlimit or user switch
        raise StarterError(f"cannot prepare the job's process for {plan['argv'][0]} (joining its cgroup, "
                           f"setting limits or becoming the job's user failed: {exc}); check the starter's "
                           "privileges and EXECUTE") from exc
    finally:
        for stream in streams:
            stream.close()
    # We reap the child ourselves (wait4, for its rusage); stop Popen from trying too.
    popen.returncode = 0
    return popen.pid


def open_streams(plan: Mapping[str, Any], where: tuple[Path | None, ofs.Identity | None] = (None, None),
                 job: str | None = None) -> list[Any]:
    """The job's stdin, stdout and stderr, opened by the starter (root: before dropping privilege).

    ``where`` is (the sandbox, the job's owner): a file in the sandbox is the starter's to open
    (it made it, without following a link); any other -- ``output``/``error``/``input`` on a
    shared file system -- is opened with the owner's rights (:mod:`htc.daemons.owner_files`),
    never writing through a link, and an output one is emptied first as HTCondor does -- but
    for a plan with ``append_output`` (a self-checkpointing job, or
    ``erase_output_and_error_on_restart = false``: HTCondor's VanillaProc appends then).

    Raises:
        StarterError: one cannot be opened.
    """
    sandbox, owner = where
    streams: list[Any] = []
    try:
        for key, mode in (("stdin", "rb"), ("stdout", "ab"), ("stderr", "ab")):
            if key == "stdin" and plan.get("stdin_fd") is not None:  # a lane's channel (a copy to pass on)
                streams.append(open(os.dup(plan["stdin_fd"]), "rb", buffering=0))
                continue
            path = plan[key]
            inside = sandbox is not None and Path(path).parent == sandbox
            if path == os.devnull:
                streams.append(open(path, mode))
            elif key == "stdin":
                fd, _ = ofs.open_read(path, None if inside else owner, what="input", job=job, follow=not inside)
                streams.append(open(fd, mode))
            else:
                fd = ofs.open_write(path, None if inside else owner, what=f"{key} file", job=job, append=True,
                                    truncate=not inside and not plan.get("append_output"))
                streams.append(open(fd, mode))
    except ofs.OwnerFileError as exc:
        for stream in streams:
            stream.close()
        raise StarterError(str(exc)) from None
    except OSError as exc:
        for stream in streams:
            stream.close()
        raise StarterError(f"cannot open the job's {key} {plan[key]}: {exc.strerror or exc}") from exc
    return streams
