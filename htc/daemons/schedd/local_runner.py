"""The schedd service's part of scheduler- and local-universe jobs: their processes.

The core (:mod:`~htc.daemons.schedd.local_jobs`) decides; this module executes its
:class:`~.events.StartLocalJob` and :class:`~.events.SignalLocalJob` actions and feeds back
:class:`~.events.LocalJobStarted`, :class:`~.events.LocalJobFailed` and
:class:`~.events.LocalJobExited`.

Starting a job, as HTCondor's ``Scheduler::start_sched_universe_job`` does:

* **whom it runs as**: a schedd running as root runs it as the job's ``Owner`` (its uid, its
  primary group, its supplementary groups); an owner without an account here fails the start
  (``Unable to switch to user``, hold code 23). A schedd that is not root (a personal pool) runs it as
  itself;
* **the executable** must exist and be executable (else ``File '...' is missing or not executable``,
  hold code 6, subcode EACCES);
* **its files**: stdin read, stdout and stderr created and emptied, all with the owner's rights and
  never through a link to someone else's file (:mod:`htc.daemons.owner_files`);
* **its environment**: exactly what the core gives (the job's own and ``CONDOR_ID``), plus ``HTC_HOME``
  and ``HTC_CONFIG`` from the schedd's own environment when the job does not set them, so that a
  DAG manager finds this pool (HTCondor passes ``_condor_SCHEDD_ADDRESS_FILE`` for the same reason);
* **its process** leads a new session (its kill signal goes to the whole group) and is made to die
  with the schedd: ``PR_SET_PDEATHSIG`` = SIGKILL, set after the switch to the owner, since a change
  of credentials clears it. A schedd killed with SIGKILL takes the job's main process with it; the
  next schedd runs the job again (children the job left in the background are not covered -- they
  lose their parent, as a shell job's commands do). A schedd that exits cleanly SIGKILLs the
  jobs' whole process groups on its way out (:meth:`LocalRunner.kill_all`).

The process is reaped through a pidfd (no polling, no thread), with ``wait4`` for its CPU times.
It is forked from the event loop's thread, the one thread that lives as long as the schedd:
``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child ends.
"""

from __future__ import annotations

import ctypes
import errno
import os
import pwd
import signal
import stat
import subprocess
import sys

from htc.daemons import owner_files as ofs
from htc.daemons.run_as import supplementary_groups
from htc.daemons.service import process_gone
from htc.daemons.schedd.events import LocalJobExited, LocalJobFailed, LocalJobStarted, SignalLocalJob, StartLocalJob
from htc.jobqueue import HoldReasonCode

__all__ = ["LocalRunner"]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Looked up once here: the child must not call into the dynamic loader after the fork.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None
#: variables that lead a job (a DAG manager) back to this pool, passed on unless it sets them
_POOL_VARS = ("HTC_HOME", "HTC_CONFIG")


class StartFailed(Exception):
    """A local job's process could not be started (the message says why; ``code`` the hold code)."""

    def __init__(self, message: str, code: int = HoldReasonCode.FailedToCreateProcess, number: int = 0):
        super().__init__(message)
        self.code, self.number = code, number


class LocalRunner:
    """The processes of one schedd's local jobs.

    Args:
        service: the schedd's service (``feed``, ``start_task``, ``log``).
    """

    def __init__(self, service):
        self.service = service
        self.pids: dict[tuple[int, int], int] = {}

    def start(self, action: StartLocalJob) -> None:
        """Execute :class:`StartLocalJob`: start the process and feed what happened."""
        try:
            pid = self._spawn(action)
        except StartFailed as exc:
            self.service.feed(LocalJobFailed(action.job_id, str(exc), exc.number, int(exc.code)))
            return
        self.pids[action.job_id] = pid
        self.service.start_task(self._reap(action.job_id, pid), f"local job {action.job_id[0]}.{action.job_id[1]}")
        self.service.feed(LocalJobStarted(action.job_id, pid))

    def signal(self, action: SignalLocalJob) -> None:
        """Execute :class:`SignalLocalJob`: signal the job's process group (gone: nothing to do)."""
        pid = self.pids.get(action.job_id)
        if pid is None:
            return
        try:
            os.killpg(pid, action.signal)
        except ProcessLookupError:
            try:  # the group is gone but the leader may still be a zombie we have not reaped
                os.kill(pid, action.signal)
            except ProcessLookupError:
                return  # it is gone: its exit is being fed
        except PermissionError as exc:
            self.service.log.error("cannot signal local job %d.%d (pid %d): %s", *action.job_id, pid, exc)

    def kill_all(self) -> None:
        """The schedd is going away: SIGKILL every local job's process group (its background
        children too, which the death signal alone would leave running). The next schedd runs the
        jobs again."""
        for job_id, pid in list(self.pids.items()):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue  # gone already (or no longer ours to signal)
            self.service.log.info("local job %d.%d (pid %d) killed: the schedd is stopping", *job_id, pid)

    def _spawn(self, action: StartLocalJob) -> int:
        who = self._user(action.owner)
        executable = action.argv[0]
        try:
            info = os.stat(executable)
            runnable = stat.S_ISREG(info.st_mode) and bool(info.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
        except OSError:
            runnable = False
        if not executable or not runnable:
            raise StartFailed(f"File '{executable}' is missing or not executable", number=errno.EACCES)
        try:
            identity = ofs.Identity.owner(action.owner)
        except ofs.OwnerFileError as exc:
            raise StartFailed(str(exc), HoldReasonCode.FailedToAccessUserAccount) from None
        streams = self._open_streams(action, identity)
        env = dict(action.env)
        for name in _POOL_VARS:
            if name not in env and os.environ.get(name):
                env[name] = os.environ[name]
        schedd_pid = os.getpid()

        def child() -> None:  # in the child, between fork and exec
            if who is not None:
                os.setgroups(list(who.groups))
                os.setgid(who.gid)
                os.setuid(who.uid)
            if _PRCTL is not None:  # after setuid, which clears it
                _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                if os.getppid() != schedd_pid:  # the schedd died before the request took effect
                    os.kill(os.getpid(), signal.SIGKILL)

        try:
            popen = subprocess.Popen(list(action.argv), stdin=streams[0], stdout=streams[1], stderr=streams[2],
                                     cwd=action.cwd, env=env, preexec_fn=child, start_new_session=True,
                                     close_fds=True)
        except OSError as exc:
            raise StartFailed(f"cannot start '{executable}' in {action.cwd}: {exc.strerror or exc}",
                              number=exc.errno or 0) from None
        except subprocess.SubprocessError as exc:
            raise StartFailed(f"cannot prepare the process of '{executable}' (becoming its owner "
                              f"{action.owner} failed: {exc})", HoldReasonCode.FailedToAccessUserAccount) from None
        finally:
            for stream in streams:
                os.close(stream)
        popen.returncode = 0  # reaped by _reap (wait4), never by Popen
        return popen.pid

    @staticmethod
    def _user(owner: str | None):
        """The owner's account when this schedd is root (None: run as the schedd)."""
        if os.geteuid() != 0:
            return None
        try:
            entry = pwd.getpwnam(owner or "")
        except (KeyError, ValueError):
            raise StartFailed(f"Unable to switch to user: {owner} (no such account here)",
                              HoldReasonCode.FailedToAccessUserAccount) from None
        if entry.pw_uid == 0:
            return None  # a root-owned job (a personal pool run as root) runs as root
        return _Who(entry.pw_uid, entry.pw_gid, supplementary_groups(entry))

    @staticmethod
    def _open_streams(action: StartLocalJob, identity) -> list[int]:
        fds: list[int] = []
        try:
            for path, write in ((action.stdin, False), (action.stdout, True), (action.stderr, True)):
                if path == os.devnull:
                    fds.append(os.open(os.devnull, os.O_WRONLY if write else os.O_RDONLY))
                elif write:
                    fds.append(ofs.open_write(path, identity, what="output file", append=True, truncate=True))
                else:
                    fds.append(ofs.open_read(path, identity, what="input")[0])
        except (ofs.OwnerFileError, OSError) as exc:
            for fd in fds:
                os.close(fd)
            reason = exc if isinstance(exc, ofs.OwnerFileError) else exc.strerror or exc
            raise StartFailed(f"cannot open the job's files: {reason}", number=getattr(exc, "errno", 0) or 0) from None
        return fds

    async def _reap(self, job_id: tuple[int, int], pid: int) -> None:
        await process_gone(pid)
        try:
            _, status, usage = os.wait4(pid, 0)
        except ChildProcessError:  # reaped by someone else: how it ended is unknown
            self.pids.pop(job_id, None)
            self.service.log.error("local job %d.%d (pid %d) was reaped elsewhere; recorded as killed",
                                   *job_id, pid)
            self.service.feed(LocalJobExited(job_id, None, int(signal.SIGKILL)))
            return
        self.pids.pop(job_id, None)
        if os.WIFSIGNALED(status):
            code, sig, core = None, os.WTERMSIG(status), os.WCOREDUMP(status)
        else:
            code, sig, core = os.waitstatus_to_exitcode(status), None, False
        self.service.feed(LocalJobExited(job_id, code, sig, core, usage.ru_utime, usage.ru_stime))


class _Who:
    """Whom a job's process becomes: uid, primary gid, every group."""

    def __init__(self, uid: int, gid: int, groups: tuple[int, ...]):
        self.uid, self.gid, self.groups = uid, gid, groups
