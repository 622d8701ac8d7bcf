"""The schedd's side of a standard-universe job's forwarded file calls when its starter cannot
see the job's Iwd.

Theory of operation
-------------------
The starter of a standard-universe job in another FileSystemDomain sends ``RelayJobIO``
(:mod:`htc.daemons.job_io_relay` has the whole path). :meth:`JobIOService.relay` serves it only
for the run the schedd follows -- the claim id must be the one the job runs on, as for
FetchCheckpoint -- and only for a job whose owner has an account here. It then starts the
runtime's file server, ``python -m htc.runtime.remote_io --fd N --root IWD --uid U --gid G``,
on one end of a socket pair: the server drops to the owner's uid/gid before it opens anything,
so every call is checked by the kernel as the owner's, and it resolves every path beneath the
Iwd (:mod:`htc.runtime.fileserver`). The schedd answers Ack and relays bytes between the
connection and the other end until either closes; then it waits for the server to exit
(killing it after :data:`SERVER_EXIT_WAIT` seconds) and logs how many bytes went each way.
Meanwhile, every :data:`CHARGE_INTERVAL` seconds and once at the end, the server's CPU and the
relay's own are charged to the run's ``SubmitSideCpu`` (:mod:`htc.daemons.schedd.leverage`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from htc.daemons import owner_files as ofs
from htc.daemons.job_io_relay import RelayCounts, pump
from htc.daemons.schedd.leverage import charge, pid_cpu
from htc.daemons.schedd.shadow import ad_text, ad_values, parse_job_id
from htc.errors import HTCError
from htc.wire import messages as m

__all__ = ["CHARGE_INTERVAL", "SERVER_EXIT_WAIT", "JobIOService"]

#: seconds a file server gets to exit once its job's relay has ended
SERVER_EXIT_WAIT = 10.0
#: seconds between two charges of a relay's CPU to its run (htc.daemons.schedd.leverage)
CHARGE_INTERVAL = 5.0


class _Meter:
    """Charges a relay's CPU (its file server's and its own) to the run it serves, in steps."""

    def __init__(self, core, msg: m.RelayJobIO, pid: int, counts: RelayCounts):
        self.core, self.msg, self.pid, self.counts = core, msg, pid, counts
        self.server = self.relay = 0.0  # what was charged so far

    def charge(self) -> None:
        """Charge what was used since the last call, while the run still has its shadow."""
        shadow = self.core.shadows.get(parse_job_id(self.msg.job_id))
        if shadow is None or shadow.claim_id != self.msg.claim_id:
            return
        server = pid_cpu(self.pid)
        server = self.server if server is None else server
        charge(shadow, "job_io", (server - self.server) + (self.counts.cpu - self.relay))
        self.server, self.relay = server, self.counts.cpu


class JobIOService:
    """Serves RelayJobIO for the schedd's service (see the module docstring)."""

    def __init__(self, service):
        self.service = service

    def _run(self, msg: m.RelayJobIO) -> tuple[Path, ofs.Identity]:
        """The job's Iwd and owner, when ``msg``'s claim runs it.

        Raises:
            LookupError: no run of the job on that claim (text: why).
            ofs.OwnerFileError: the owner has no account here.
        """
        core = self.service.core
        job_id = parse_job_id(msg.job_id)
        shadow = core.shadows.get(job_id)
        job = core.job(job_id)
        if shadow is None or shadow.claim_id != msg.claim_id or job is None:
            raise LookupError(f"no run of job {msg.job_id} on that claim; its file calls are not served")
        ad = ad_values(ad_text(job))
        iwd = ad.get("Iwd")
        if not isinstance(iwd, str) or not iwd.startswith("/"):
            raise LookupError(f"job {msg.job_id} has no absolute Iwd to serve its file calls in")
        return Path(iwd), ofs.Identity.owner(ad.get("Owner"))

    async def relay(self, conn, msg: m.RelayJobIO, peer=None) -> None:
        """Serve the job's forwarded file calls as its owner in its Iwd until either side closes."""
        log = self.service.log
        try:
            iwd, owner = self._run(msg)
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            with theirs:
                server = _start_server(theirs.fileno(), iwd, owner)
        except (LookupError, ofs.OwnerFileError, OSError) as exc:
            log.warning("job %s: forwarded file calls refused: %s", msg.job_id, exc)
            code = "not_found" if isinstance(exc, LookupError) else "bad_request"
            with contextlib.suppress(HTCError):
                await conn.send_error(code, f"job {msg.job_id}: {exc}")
            return
        counts = RelayCounts()
        meter = _Meter(self.service.core, msg, server.pid, counts)
        charging = self.service.start_task(self._charge_forever(meter), f"charge job {msg.job_id}'s relay CPU")
        try:
            await conn.send(m.Ack(detail=f"serving the file calls of job {msg.job_id} in {iwd}"))
            log.info("job %s: serving its forwarded file calls in %s as %s (file server pid %d)", msg.job_id, iwd,
                     owner.name, server.pid)
            await pump(conn, ours, counts)
            meter.charge()  # at once: the run's end may be reported soon after the job's socket closed
        except HTCError as exc:
            log.warning("job %s: relay of forwarded file calls broke: %s", msg.job_id, exc)
        finally:
            ours.close()
            charging.cancel()
            await asyncio.to_thread(_await_exit, server)
            meter.charge()  # (the server's final CPU: it is not reaped yet)
            await asyncio.to_thread(_reap, server)
        log.info("job %s: forwarded file calls ended: %d bytes of requests, %d bytes of replies",
                 msg.job_id, counts.into, counts.out)


    async def _charge_forever(self, meter: _Meter) -> None:
        while True:
            await self.service.clock.sleep(CHARGE_INTERVAL)
            meter.charge()


def _await_exit(server: subprocess.Popen) -> None:
    """Wait up to :data:`SERVER_EXIT_WAIT` seconds for the file server to exit, without reaping it
    (a zombie's /proc times are its final ones)."""
    deadline = time.monotonic() + SERVER_EXIT_WAIT
    while time.monotonic() < deadline:
        try:
            if os.waitid(os.P_PID, server.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:  # already reaped
            return
        time.sleep(0.01)


def _reap(server: subprocess.Popen) -> None:
    """Reap the file server, killing it if it has not exited (its socket is closed)."""
    try:
        server.wait(0 if server.poll() is not None else SERVER_EXIT_WAIT / 10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def _start_server(fd: int, iwd: Path, owner: ofs.Identity) -> subprocess.Popen:
    """The runtime's file server on ``fd``, as the owner (when we are root) with ``iwd`` as root."""
    cmd = [sys.executable, "-m", "htc.runtime.remote_io", "--fd", str(fd), "--root", str(iwd),
           "--blocking"]  # one job per server: a plain loop (docs/remote-io.md, "Speed")
    if os.geteuid() == 0 and owner.uid is not None:
        cmd += ["--uid", str(owner.uid), "--gid", str(owner.gid if owner.gid is not None else owner.uid)]
    return subprocess.Popen(cmd, pass_fds=(fd,), stdin=subprocess.DEVNULL, start_new_session=True)
