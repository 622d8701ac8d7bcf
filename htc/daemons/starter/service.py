"""The starter's service: runs one job in a sandbox, under limits, as its owner or the slot's
account, and cleans up.

This is the starter's asyncio program (it owns the job's processes, files and cgroup); the
decisions about the job -- when to suspend, vacate or kill it -- are the startd's
(:mod:`htc.daemons.startd.states`), and the package docstring says why the starter has no core
of its own.

Theory of operation
-------------------
``Starter(job_ad, execute_dir, settings)`` then, inside an event loop:

1. ``await start()`` -- resolve who runs the job (when we are root: its owner when the startd
   trusts it, else the slot's account -- :mod:`htc.daemons.run_as`; else us),
   make the sandbox, bring the input in (:mod:`htc.daemons.starter.sandbox`; every file outside the
   sandbox -- inputs, outputs, ``output``/``error``/``input`` on a shared file system -- is
   opened with the rights of the job's ``Owner``, never through a link:
   :mod:`htc.daemons.owner_files`), write ``.job.ad`` and
   ``.machine.ad``, make the job's cgroup (:mod:`htc.daemons.starter.limits`), and spawn the executable
   with HTCondor's argument vector and environment (:mod:`htc.daemons.starter.env`). The child
   joins the cgroup, sets rlimits and drops to that user -- its uid, its primary group and its
   supplementary groups, nothing of root's -- before ``exec``; it leads a new
   session so the starter can find its family (:mod:`htc.daemons.starter.spawn`, which also
   says why the set-up and the fork happen in one worker thread). A function job (``python -m
   htc.executors.worker``) is instead forked by a pre-imported *zygote* of the startd's
   :class:`~htc.daemons.starter.zygote.ZygotePool` when the starter has one (same user, cgroup,
   limits, files and environment; fork+exec whenever the zygote cannot serve); any other job
   is forked and exec'd by the pool's *exec zygote* (the same steps, in a small separate
   process, so the startd neither forks nor waits for the exec).
2. While it runs: ``suspend()``/``resume()`` send SIGSTOP/SIGCONT to every process of the job;
   ``usage()`` measures it (``RemoteUserCpu``, ``RemoteSysCpu``, ``ImageSize`` and
   ``ResidentSetSize`` in KiB, ``DiskUsage`` in KiB).
3. ``await vacate(grace)`` sends the job's ``KillSig`` (default SIGTERM) to every process (and
   SIGCONT, so a suspended job can act on it), waits up to ``grace`` seconds, then kills;
   ``await kill()`` kills at once.
4. ``await wait()`` returns an :class:`ExitRecord` once the main process has exited: leftover
   processes are killed, output is transferred (:mod:`htc.daemons.starter.output`; per
   ``WhenToTransferOutput``: a vacated job sends nothing back unless ``ON_EXIT_OR_EVICT``; a
   streamed stdout/stderr is never sent at the end, the startd sent it while the job ran --
   :mod:`htc.daemons.starter.stream`), and the sandbox and cgroup are removed.

A *call lane* (``Starter(..., lane=True)``, :mod:`htc.executors.lane`) is started the same way
but for its channel: the starter makes a socket pair, gives the job one end as its stdin
(``HTC_LANE_FD=0``) and keeps :attr:`Starter.lane_socket` for the startd
(:mod:`htc.daemons.startd.lanes`); it brings no input in (calls bring their own), keeps the
lane's stdout/stderr in the sandbox, and sends nothing back at the end.

The soft kill goes to the whole job, not only its main process, the way systemd's
``KillMode=control-group`` does: a shell-script job's children get the chance to clean up too.

Every wait -- the vacate grace, the kill and cgroup removal retries -- goes through the
starter's clock (:mod:`htc.daemons.clock`; ``Starter(..., clock=...)``, real by default).

Its settings and what it reports (:class:`StarterSettings`, :class:`ExitRecord`,
:class:`Usage`) live in :mod:`htc.daemons.starter.records`, re-exported here. The same program
runs as a process of its own with ``python -m htc.daemons.starter``
(:mod:`htc.daemons.starter.standalone`).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from htc.daemons import owner_files as ofs
from htc.daemons.clock import REAL, Clock
from htc.daemons.execute_dir import unreachable_parent
from htc.daemons.run_as import JobUser
from htc.daemons.starter import sandbox as sb
from htc.daemons.starter.ad_files import ad_file_text
from htc.daemons.starter.env import build_environment, job_arguments
from htc.daemons.starter.limits import JobCgroup
from htc.daemons.starter.output import path_attr, send_output, sends_output
from htc.daemons.starter.procs import JobProcesses, Reaped, watch_exit
from htc.daemons.starter.records import (ExitRecord, StarterError, StarterSettings, Usage, cannot_start, kill_signal,
                                         resolve_user)
from htc.daemons.starter.standard import STANDARD_FILES, StandardJob
from htc.daemons.starter.spawn import exec_job, off_loop, open_streams
from htc.daemons.starter import self_checkpoint, wire_files
from htc.daemons.starter.wire_files import SandboxSink, WireTransfer, fetch_input, output_source
from htc.daemons.starter.zygote import JobStartError, ZygotePool
from htc.daemons.starter.zygote_keys import ZygoteKey, eligible_module
from htc.errors import UsageError
from htc.wire.lane_frames import CHANNEL_ENV

__all__ = ["ExitRecord", "Starter", "StarterError", "StarterSettings", "Usage", "kill_signal", "resolve_user"]


def _check_reachable(path: Path, user: JobUser) -> None:
    """Fail early, and say where, when the job's user cannot get to its sandbox."""
    blocked = unreachable_parent(path.parent, user.uid, user.gid, user.groups)
    if blocked is not None:
        parent, mode = blocked
        raise StarterError(f"the job's user {user.name!r} cannot reach its sandbox {path}: {parent} is mode "
                           f"{mode:04o}; put EXECUTE where every user may traverse (chmod o+x)")


class Starter:
    """Runs one job. See the module docstring.

    Args:
        job_ad: the job (Cmd, Arguments/Args, Environment/Env, Iwd, In/Out/Err, TransferInput,
            TransferOutput, TransferOutputRemaps, WhenToTransferOutput, KillSig, RequestMemory).
        execute_dir: where sandboxes are made.
        settings: slot, limits and user.
        zygotes: the startd's zygotes, which fork eligible function jobs (None: always exec).
        lane: the job is a call lane (:mod:`htc.executors.lane`): its stdin is a socket whose
            other end is :attr:`lane_socket`; no input but the executable is brought in, its
            stdout/stderr stay in the sandbox, and no output is sent back.
        clock: how long waits take (:mod:`htc.daemons.clock`; the startd's service passes its own).
        transfer: the job's files travel over connections to its shadow, never through its Iwd
            (:mod:`htc.daemons.starter.wire_files`; the startd passes it when the job's
            FileSystemDomain is not the machine's). None: the direct path.
        checkpoints: how a self-checkpointing job's checkpoints reach its shadow, whatever
            path its other files take (:mod:`htc.daemons.starter.self_checkpoint`). None: the
            job's checkpoint exits are plain exits.
    """

    def __init__(self, job_ad: Mapping[str, Any], execute_dir: Path, settings: StarterSettings | None = None,
                 zygotes: ZygotePool | None = None, *, lane: bool = False, clock: Clock = REAL,
                 transfer: WireTransfer | None = None, checkpoints: WireTransfer | None = None,
                 standard: StandardJob | None = None):
        self.job_ad = dict(job_ad)
        self.standard = standard  # a standard-universe run (htc.daemons.starter.standard)
        self.clock = clock
        self.lane = lane
        self.transfer = transfer if not lane else None
        self.checkpoints = checkpoints if not lane else None
        self._launch: tuple[dict[str, Any], int | None, int | None] | None = None  # to run the job again
        self._cgroup_args: tuple[str, int | None, int | None] = ("", None, None)
        self.lane_socket: socket.socket | None = None  # the startd's end of a lane's channel
        self._lane_child: socket.socket | None = None  # the job's end, until it has started
        self.execute_dir = Path(execute_dir)
        self.settings = settings or StarterSettings()
        self.zygotes = zygotes
        self.zygote_pid: int | None = None  # the zygote that forked the job, when one did
        self.sandbox: sb.Sandbox | None = None
        self.cgroup: JobCgroup | None = None
        self.procs: JobProcesses | None = None
        self.pid: int | None = None
        self.suspended = False
        self._exit: asyncio.Future[Reaped] | None = None
        self._finisher: asyncio.Future[ExitRecord] | None = None
        self._vacated = False
        self._ended = False  # the job's own final exit is known (a vacate from then on changes nothing)
        self._baseline: dict[str, tuple[float, int]] = {}
        self._exe_name: str | None = None
        self._owner: ofs.Identity | None = None  # whose rights move the job's files (htc.daemons.owner_files)
        iwd = self.job_ad.get("Iwd")
        self.iwd = Path(iwd) if isinstance(iwd, str) and iwd else None
        self.user: JobUser | None = None  # who runs the job (None: this process's user)
        self._user_known = False

    def resolve_user(self) -> JobUser | None:
        """Decide who runs the job (once; :meth:`start` does it when nobody did before).

        The startd's service calls it first (in a thread: the slot's account may be made with
        ``useradd``), to clear a slot account another owner used before the job starts.

        Raises:
            StarterError: the slot's account cannot be used.
        """
        if not self._user_known:
            self.user = resolve_user(self.settings, self.job_ad)
            self._user_known = True
        return self.user

    # ---------------------------------------------------------------------------- start
    async def start(self) -> None:
        """Set up the sandbox and spawn the job.

        Raises:
            StarterError: the user, executable or spawn failed (nothing is left behind).
            TransferError: an input could not be brought in.
            UsageError: the job ad is malformed (arguments, environment, KillSig).
        """
        if self.pid is not None:
            raise UsageError("Starter.start() was already called; make a new Starter for the next job")
        user = self.resolve_user()
        uid, gid = (user.uid, user.gid) if user else (None, None)
        if self.lane:
            self.lane_socket, self._lane_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # Sandbox, input files, ad files and cgroup are milliseconds of file system work per
            # job: done in the spawn thread, they leave the event loop free for other slots.
            if self.transfer is not None:
                await off_loop(self._make_sandbox, user, uid, gid)
                assert self.sandbox is not None
                await fetch_input(self.transfer, SandboxSink(self.sandbox.path, uid, gid))
                plan = await off_loop(self._prepare, uid, gid)
            else:
                plan = await off_loop(self._set_up, user, uid, gid)
            assert self.sandbox is not None
            await self_checkpoint.restore(self.checkpoints, self.job_ad, SandboxSink(self.sandbox.path, uid, gid))
            if self.standard is not None:
                plan = await self._standard_plan(plan, uid, gid)
            self._launch = (plan, uid, gid)
            await self._spawn_job(plan, uid, gid)
        except BaseException:
            if self.standard is not None:
                await self.standard.close()
            await self._cleanup()
            if self.lane_socket is not None:
                self.lane_socket.close()
            raise
        finally:
            if self._lane_child is not None:
                self._lane_child.close()  # the job has its copy: the channel ends when the job does
                self._lane_child = None
        assert self._exit is not None
        self._exit.add_done_callback(self._main_gone)
        if self.standard is not None:
            self.standard.started(self.pid)

    async def _standard_plan(self, plan: dict[str, Any], uid: int | None, gid: int | None) -> dict[str, Any]:
        """The plan that runs (or resumes) a standard-universe job under the runtime."""
        assert self.standard is not None and self.sandbox is not None
        owner = self._job_owner()
        return await self.standard.prepare(plan, self.sandbox.path, self.iwd or Path.cwd(), (uid, gid),
                                           (owner.uid, owner.gid))

    async def _spawn_job(self, plan: dict[str, Any], uid: int | None, gid: int | None) -> None:
        # (a standard-universe job is always exec'd: it runs under the runtime's loader)
        if self.standard is not None or not await self._spawn_by_zygote(plan, uid, gid):
            await off_loop(self._spawn, plan, uid, gid)
            self._exit = watch_exit(self.pid)

    async def relaunch(self) -> None:
        """Run the job's executable again in its sandbox, as :meth:`start` ran it (a
        self-checkpointing job's restart: :mod:`htc.daemons.starter.self_checkpoint`)."""
        assert self._launch is not None and self.procs is not None
        if self.cgroup is not None and not all(path.is_dir() for path in self.cgroup.dirs.values()):
            # emptied between two runs, the cgroup may be swept (by a startd that takes it for
            # a dead one's): make it again
            self.cgroup = self.procs.cgroup = JobCgroup.create(*self._cgroup_args)
        await self._spawn_job(*self._launch)
        assert self._exit is not None
        self._exit.add_done_callback(self._main_gone)

    def exit_future(self) -> asyncio.Future[Reaped]:
        """The end of the job's current main process."""
        assert self._exit is not None
        return self._exit

    @property
    def vacated(self) -> bool:
        """Whether the job was asked to leave (vacate or kill)."""
        return self._vacated

    @property
    def ended(self) -> bool:
        """Whether the job's final exit is known (after its checkpoint exits, if it makes any)."""
        return self._ended

    def evict(self) -> None:
        """Report the job as evicted when it ends (it could not be restarted after a checkpoint)."""
        self._vacated = True

    def output_names(self) -> list[str]:
        """The top-level sandbox entries the output transfer would send now."""
        assert self.sandbox is not None
        return self.sandbox.output_names(self.job_ad, self._baseline, {self._exe_name} if self._exe_name else set())

    def job_label(self) -> str:
        """``cluster.proc``."""
        return self._job_label()

    async def _spawn_by_zygote(self, plan: dict[str, Any], uid: int | None, gid: int | None) -> bool:
        """Have a zygote fork an eligible job (see :mod:`htc.daemons.starter.zygote`); False: exec it."""
        if self.zygotes is None:
            return False
        module = None
        if self.settings.use_zygote and self._exe_name is None:
            # (a transferred interpreter lives in this job's sandbox: no zygote can share it)
            module = eligible_module(plan["argv"], self.settings.zygote_modules)
        if module is not None:
            key = ZygoteKey.for_job(plan["argv"], module, uid, gid, plan["env"], self._groups())
        elif self.settings.use_exec_zygote:
            key = ZygoteKey.for_exec()
            plan = {**plan, "uid": uid, "gid": gid, "groups": list(self._groups())}
        else:
            return False
        streams = open_streams(plan, self._stdio_owner(), self._job_label())
        try:
            started = await self.zygotes.run(key, plan, [s.fileno() for s in streams], self.cgroup)
        except JobStartError as exc:
            if exc.stage == "exec":
                raise cannot_start(plan["argv"][0], exc.errno, exc.strerror) from exc
            raise StarterError(f"cannot prepare the job's process for {plan['argv'][0]} (setting limits or "
                               f"becoming the job's user failed: {exc.strerror}); check the starter's "
                               "privileges and EXECUTE") from exc
        finally:
            for stream in streams:
                stream.close()
        if started is None:
            return False
        self.pid, self._exit, self.zygote_pid = started.pid, started.exit, started.zygote_pid
        assert self.procs is not None
        self.procs.started(started.pid)
        return True

    def _groups(self) -> tuple[int, ...]:
        """The job user's groups (its primary one first); () when we are not root."""
        return self.user.groups if self.user is not None else ()

    def _set_up(self, user: JobUser | None, uid: int | None, gid: int | None) -> dict[str, Any]:
        self._make_sandbox(user, uid, gid)
        return self._prepare(uid, gid)

    def _make_sandbox(self, user: JobUser | None, uid: int | None, gid: int | None) -> None:
        self.sandbox = sb.Sandbox.create(self.execute_dir, uid, gid)
        if user is not None:
            _check_reachable(self.sandbox.path, user)

    def _prepare(self, uid: int | None, gid: int | None) -> dict[str, Any]:
        box, job = self.sandbox, self.job_ad
        assert box is not None
        # A lane runs in its sandbox whatever the job says: its calls bring their own files.
        shared_fs = str(job.get("ShouldTransferFiles", "")).upper() == "NO" and not self.lane
        base = self.iwd or Path.cwd()
        cmd = job.get("Cmd")
        if not isinstance(cmd, str) or not cmd:
            raise UsageError("the job ad has no Cmd; it needs the executable's path")
        exe = Path(cmd) if Path(cmd).is_absolute() else base / cmd
        owner, label = self._job_owner(), self._job_label()
        wire = self.transfer is not None  # the input is in the sandbox already (fetch_input)
        if wire and job.get("TransferExecutable", True) is not False:
            exe, self._exe_name = box.path / sb.CONDOR_EXEC, sb.CONDOR_EXEC
        elif not shared_fs and job.get("TransferExecutable", True) is not False:
            exe = box.bring_in(str(exe), base, executable=True, owner=owner, job=label)
            self._exe_name = exe.name
        if not shared_fs and not self.lane and not wire:
            for item in sb.split_list(job.get("TransferInput")):
                box.bring_in(item, base, owner=owner, job=label)
        stdin = path_attr(job, "In") if not self.lane else None
        if stdin and wire and job.get("TransferIn", True) is not False:
            stdin = str(box.path / Path(stdin).name)
        elif stdin and not shared_fs and job.get("TransferIn", True) is not False:
            stdin = str(box.bring_in(stdin, base, owner=owner, job=label))
        elif stdin:
            stdin = str(Path(stdin) if Path(stdin).is_absolute() else base / stdin)
        # (made afresh: an input may have brought a link of the same name)
        job_ad_file = box.fresh_file(sb.JOB_AD_NAME, ad_file_text(job))
        machine_ad_file = box.fresh_file(sb.MACHINE_AD_NAME, ad_file_text(self.settings.machine_ad))
        self._baseline = box.snapshot()
        cpus = self.settings.cpus
        memory_mb = self.settings.memory_mb or job.get("RequestMemory")
        memory = int(memory_mb) * 1024 * 1024 if isinstance(memory_mb, int | float) and memory_mb > 0 else None
        self._cgroup_args = (box.path.name, memory, cpus)
        if self.settings.use_cgroups:
            self.cgroup = JobCgroup.create(box.path.name, memory, cpus)
        marker = (f"_CONDOR_ANCESTOR_{os.getpid()}", secrets.token_hex(8))
        self.procs = JobProcesses(self.cgroup, marker, clock=self.clock)
        extra = dict([marker, (CHANNEL_ENV, "0")] if self.lane else [marker])
        env = build_environment(job, scratch_dir=box.path, slot_name=self.settings.slot_name, cpus=cpus,
                                job_ad_file=job_ad_file, machine_ad_file=machine_ad_file, extra=extra)
        cwd = base if shared_fs else box.path
        out = self._capture("Out", sb.STDOUT_NAME, shared_fs, base)
        err = out if job.get("Err") == job.get("Out") and path_attr(job, "Out") else \
            self._capture("Err", sb.STDERR_NAME, shared_fs, base)
        for path in {p for p in (out, err) if Path(p).parent == box.path}:
            box.fresh_file(Path(path).name, own=True)  # a fresh, empty file the job's user owns
        # (a file outside the sandbox -- shared file system, transfer_output = false -- is
        # opened, and emptied, with its owner's rights by open_streams: htc.daemons.starter.spawn)
        return {"argv": [str(exe), *job_arguments(job)], "env": env, "cwd": cwd, "stdin": stdin or os.devnull,
                "stdin_fd": self._lane_child.fileno() if self._lane_child is not None else None,
                "stdout": out, "stderr": err,
                "append_output": self_checkpoint.appends_output(job),
                "rlimit_memory": None if self.cgroup and self.cgroup.memory_limited else memory,
                "core": int(job.get("CoreSize", 0) or 0)}

    def _job_owner(self) -> ofs.Identity:
        """Whose rights the job's files outside the sandbox are opened with: its ``Owner``'s
        (one without an account here: the account the job runs as).

        Raises:
            TransferError: we are root and the owner has no account here.
        """
        if self._owner is None:
            box = self.sandbox
            fallback = ofs.Identity.account(box.uid, box.gid) if box is not None and box.uid is not None else None
            try:
                self._owner = ofs.Identity.owner(self.job_ad.get("Owner"), fallback)
            except ofs.OwnerFileError as exc:
                raise sb.TransferError(f"job {self._job_label()}: {exc}") from None
        return self._owner

    def _job_label(self) -> str:
        return f"{self.job_ad.get('ClusterId', 0)}.{self.job_ad.get('ProcId', 0)}"

    def _capture(self, attr: str, name: str, shared_fs: bool, base: Path) -> str:
        assert self.sandbox is not None
        target = path_attr(self.job_ad, attr)
        if self.lane:  # the lane's own output (its calls' is captured per call) dies with the sandbox
            return str(self.sandbox.path / name)
        if target is None:
            return os.devnull
        if shared_fs or self.job_ad.get("Transfer" + attr, True) is False:
            return str(Path(target) if Path(target).is_absolute() else base / target)
        return str(self.sandbox.path / name)

    def _spawn(self, plan: dict[str, Any], uid: int | None, gid: int | None) -> None:
        """Fork and exec the job (in the spawn thread) and note its main process there, so that a
        cancelled start still knows what to clean up."""
        self.pid = exec_job(plan, self.cgroup, uid, gid, self._groups(), self._stdio_owner(), self._job_label())
        assert self.procs is not None
        self.procs.started(self.pid)

    def _stdio_owner(self) -> tuple[Path | None, ofs.Identity | None]:
        """The sandbox (files there: opened as the starter) and the owner (files elsewhere)."""
        return (self.sandbox.path if self.sandbox else None), self._owner

    def _main_gone(self, _future: asyncio.Future) -> None:
        if self.procs is not None:
            self.procs.main_alive = False

    # ---------------------------------------------------------------------------- control
    def _require_running(self, what: str) -> JobProcesses:
        if self.procs is None or self._exit is None:
            raise UsageError(f"Starter.{what}() before start(); start the job first")
        return self.procs

    def suspend(self) -> None:
        """Stop every process of the job (SIGSTOP); CPU use stops until :meth:`resume`."""
        procs = self._require_running("suspend")
        procs.signal(signal.SIGSTOP)
        self.suspended = True

    def resume(self) -> None:
        """Continue a suspended job (SIGCONT to every process)."""
        procs = self._require_running("resume")
        procs.signal(signal.SIGCONT)
        self.suspended = False

    async def vacate(self, grace: float) -> ExitRecord:
        """Ask the job to leave (its KillSig), kill it after ``grace`` seconds, and finish up.

        Returns:
            The job's :class:`ExitRecord` (``vacated`` is True).
        """
        procs = self._require_running("vacate")
        assert self._exit is not None
        if self._ended:  # it ended by itself before the vacate came: its exit stands (not requeued)
            return await self.wait()
        self._vacated = True
        if not self._exit.done():
            # SIGCONT first: a stopped process cannot act on the soft kill, and a SIGCONT sent
            # after it would discard a pending stop signal (SIGTSTP, a standard job's vacate)
            procs.signal(signal.SIGCONT)
            procs.signal(self.standard.vacate_signal() if self.standard is not None else kill_signal(self.job_ad))
            self.suspended = False
            if not await self._wait_exit(max(0.0, grace)):
                await procs.kill_all(self.settings.kill_timeout)
        return await self.wait()

    async def _wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds, by the clock, for the main process to exit; True when it has."""
        assert self._exit is not None
        if self._exit.done():
            return True
        gone = asyncio.Event()
        self._exit.add_done_callback(lambda _future: gone.set())
        return await self.clock.wait_for(gone, timeout)

    async def kill(self) -> ExitRecord:
        """Kill every process of the job now and finish up."""
        procs = self._require_running("kill")
        self._vacated = True
        await procs.kill_all(self.settings.kill_timeout)
        return await self.wait()

    def usage(self) -> Usage:
        """Measure the job now (peaks are kept across calls)."""
        procs = self._require_running("usage")
        user, system, _, _ = procs.sample()
        cg = self.cgroup.cpu_seconds() if self.cgroup else None
        if cg is not None:
            user, system = max(user, cg[0]), max(system, cg[1])
        disk = self.sandbox.disk_usage_kib() if self.sandbox and self.sandbox.path.exists() else 0
        return Usage(user, system, procs.peak_vms // 1024, procs.peak_rss // 1024, disk)

    # ---------------------------------------------------------------------------- finish
    async def wait(self) -> ExitRecord:
        """Wait for the job to end; then kill leftovers, transfer output and clean up.

        Any number of callers may wait (a vacate and the service, say): one task finishes the
        job and every caller gets its result.

        Returns:
            The :class:`ExitRecord` (the same one on every call).
        """
        self._require_running("wait")
        if self._finisher is None:
            self._finisher = asyncio.ensure_future(self._finish())
        return await asyncio.shield(self._finisher)

    async def _finish(self) -> ExitRecord:
        procs, exit_future = self.procs, self._exit
        assert procs is not None and exit_future is not None
        reaped = await exit_future
        reaped, user, system = await self_checkpoint.keep_checkpointing(self, reaped)
        self._ended = True
        gone = await procs.kill_all(self.settings.kill_timeout)
        ru = reaped.rusage
        user, system = user + ru.ru_utime, system + ru.ru_stime
        cg = self.cgroup.cpu_seconds() if self.cgroup else None
        if cg is not None:
            user, system = max(user, cg[0]), max(system, cg[1])
        rss_kib = max(procs.peak_rss // 1024, ru.ru_maxrss)  # ru_maxrss is KiB on Linux
        assert self.sandbox is not None
        usage = Usage(user, system, max(procs.peak_vms // 1024, rss_kib), rss_kib, self.sandbox.disk_usage_kib())
        oom = bool(self.cgroup and self.cgroup.oom_killed())
        kept = await self.standard.finish(reaped.exit_code) if self.standard is not None else None
        if self.transfer is not None:
            outputs, error = await self._send_output_over_wire(reaped)
        else:
            outputs, error = await off_loop(self._transfer_output, reaped)  # file copies: off the loop
        if not gone:
            error = (error + "; " if error else "") + "some job processes could not be killed"
        record = ExitRecord(reaped.exit_code, reaped.signal, reaped.core_dumped, oom, self._vacated, usage,
                            tuple(outputs), error, self.standard.vacate_checkpointed if self.standard else None, kept)
        await self._cleanup()
        return record

    def _transfer_output(self, reaped: Reaped) -> tuple[list[Path], str | None]:
        """Send the job's output back as HTCondor would (:mod:`htc.daemons.starter.output`)."""
        job, box = self.job_ad, self.sandbox
        assert box is not None
        if not sends_output(job, vacated=self._vacated, exit_code=reaped.exit_code, lane=self.lane):
            return [], None
        try:
            owner = self._job_owner()
        except sb.TransferError as exc:
            return [], str(exc)
        skip = ({self._exe_name} if self._exe_name else set()) | (STANDARD_FILES if self.standard else set())
        return send_output(job, box, self.iwd or Path.cwd(), baseline=self._baseline, skip=skip, owner=owner,
                           job=self._job_label())

    async def _send_output_over_wire(self, reaped: Reaped) -> tuple[list[Path], str | None]:
        """Send the job's output to its shadow (:mod:`htc.daemons.starter.wire_files`), which
        writes it into the Iwd; nothing comes back to list."""
        assert self.transfer is not None and self.sandbox is not None
        if not sends_output(self.job_ad, vacated=self._vacated, exit_code=reaped.exit_code, lane=self.lane):
            return [], None
        skip = ({self._exe_name} if self._exe_name else set()) | (STANDARD_FILES if self.standard else set())
        source = output_source(self.job_ad, self.sandbox, baseline=self._baseline, skip=skip, job=self._job_label())
        _, error = await wire_files.send_output(self.transfer, source)
        return [], error

    async def _cleanup(self) -> None:
        if self.procs is not None and self.procs.main_alive:
            await self.procs.kill_all(self.settings.kill_timeout)
        if self.cgroup is not None:
            for _ in range(100):  # the kernel frees an emptied cgroup a moment after the last exit
                if self.cgroup.remove():
                    break
                await self.clock.sleep(0.01)
        if self.sandbox is not None:
            await off_loop(self.sandbox.remove)
