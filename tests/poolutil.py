"""Real daemons for the tests: a personal pool under a real master, in a temporary HTC_HOME.

:class:`Pool` starts ``python -m htc.daemons master`` with the daemons a test names and
guarantees that no process it started survives the test, even when an assertion fails:
:meth:`Pool.stop` stops the master, then kills every process of the pool it can find (the
master's children, their children, anything whose command line names the pool's home or whose
working directory is inside it) and fails the test if one is still alive.

A test that needs a daemon the master cannot run for it -- a second startd with its own name
and sensor override file, a schedd listening under another address -- starts it with
:meth:`Pool.spawn`: the same service classes ``python -m htc.daemons`` builds, in a process of
its own, with a *local name* (HTCondor's ``-local-name``: ``STARTD2.EXECUTE`` beats
``STARTD.EXECUTE``) and an address of its own.

Waiting is for events -- a daemon answering Ping, an event in a user log read by
``htcondor2.JobEventLog`` (the real HTCondor reader, a test-only oracle) -- polled with short
intervals under a deadline, never a fixed sleep.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import htcondor2
import psutil

from htc.classad import ClassAd
from htc.client import ping, query_collector, query_master, send_command
from htc.daemons.starter.limits import detect_cgroups
from htc.daemons.schedd.requests import description_message
from htc.wire import messages as m
from htc.wire.errors import DaemonUnreachable, PeerError
from htc.wire.transport import UnixTransport

#: knobs that make a pool react in seconds rather than minutes
FAST = {"MASTER_BACKOFF_CONSTANT": "0", "MASTER_BACKOFF_FACTOR": "1", "MASTER_UPDATE_INTERVAL": "5",
        "CONDOR_ADMIN": "", "SCHEDD_MIN_INTERVAL": "0", "SCHEDD_INTERVAL": "5", "NEGOTIATOR_INTERVAL": "2",
        "NEGOTIATOR_CYCLE_DELAY": "0", "NEGOTIATOR_MIN_INTERVAL": "0", "UPDATE_INTERVAL": "2",
        "STARTER_INITIAL_UPDATE_INTERVAL": "1", "STARTER_UPDATE_INTERVAL": "2", "POLLING_INTERVAL": "1",
        "ALIVE_INTERVAL": "2", "PERIODIC_EXPR_INTERVAL": "1", "NUM_CPUS": "2"}


def wait_for(condition, timeout: float = 20.0, what: str = "condition", interval: float = 0.05):
    """Poll another process's state until ``condition()`` is truthy; return its value.

    A daemon coming up, or a job changing state in another process, has no event this process
    could await; a daemon that does not answer yet counts as "not yet".
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except (DaemonUnreachable, PeerError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# The launcher of Pool.spawn: build one daemon's service as python -m htc.daemons does, but with
# a local name and an address of its own, and run it.
_SPAWN = r"""
import sys
from pathlib import Path
from htc.config import load_config
from htc.daemons.service import DaemonPaths, run_service

home, daemon, address, local = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] or None
paths = DaemonPaths(home)
log = paths.log / f"{address.capitalize()}Log"
if daemon == "startd":
    from htc.daemons.startd.service import StartdService, settings_from_config

    def settings():
        return settings_from_config(load_config("STARTD", local_name=local), home, address=address)

    service = StartdService(settings(), paths.transport(), log_file=log, reload_settings=settings)
elif daemon == "schedd":
    from htc.daemons.schedd.core import Schedd
    from htc.daemons.schedd.service import ScheddService, settings_from_config
    from htc.jobqueue import JobQueue

    def settings():
        return settings_from_config(load_config("SCHEDD", local_name=local), address=address)

    config = load_config("SCHEDD", local_name=local)
    queue_path = Path(str(config.param("JOB_QUEUE_DB")))
    queue_path.parent.mkdir(parents=True, exist_ok=True)
    service = ScheddService(Schedd(settings(), JobQueue.open(str(queue_path))), paths, settings)
    service.address = address
    service.log_file = log
else:
    sys.exit(f"cannot spawn a {daemon}")
sys.exit(run_service(service))
"""


class Pool:
    """A master and its daemons in a fresh HTC_HOME; :meth:`stop` leaves no process behind.

    Args:
        daemons: the DAEMON_LIST after MASTER (``"COLLECTOR, SCHEDD"``).
        config: configuration text written to ``config.d/50-test.conf`` (a metaknob, macros).
        knobs: ``_HTC_`` overrides on top of :data:`FAST` (``NUM_CPUS="16"``).

    The home is world-traversable: when the tests run as root, jobs run as ``nobody`` and must
    reach their sandboxes under EXECUTE. ``work`` is a world-writable directory for submit
    files, outputs and user logs.
    """

    def __init__(self, daemons: str = "COLLECTOR, SCHEDD", *, config: str = "", **knobs: str):
        self.root = Path(tempfile.mkdtemp(prefix="htc-pool-"))
        self.root.chmod(0o755)
        self.home = self.root / "home"
        self.home.mkdir()
        self.home.chmod(0o755)
        self.work = self.root / "work"
        self.work.mkdir()
        self.work.chmod(0o777)
        if config:
            (self.home / "config.d").mkdir()
            (self.home / "config.d" / "50-test.conf").write_text(config)
        self.transport = UnixTransport(self.home / "sockets")
        self.env = {k: v for k, v in os.environ.items() if not k.upper().startswith("_HTC_")}
        self.env.pop("HTC_CONFIG", None)
        self.env["HTC_HOME"] = str(self.home)
        settings = {"DAEMON_LIST": f"MASTER, {daemons}", **FAST, **knobs}
        for knob, value in settings.items():
            self.env[f"_HTC_{knob}"] = value
        self.master: subprocess.Popen | None = None
        self.spawned: list[subprocess.Popen] = []
        self.seen: set[int] = set()
        self.daemons = [d.strip().upper() for d in daemons.split(",") if d.strip()]

    # -- life ------------------------------------------------------------------------------------

    def start(self) -> Pool:
        """Start the master and wait until each of its daemons answers Ping."""
        with open(self.root / "master.stderr", "ab") as err:
            self.master = subprocess.Popen([sys.executable, "-m", "htc.daemons", "master", "-home", str(self.home)],
                                           env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=err)
        self.seen.add(self.master.pid)
        for daemon in self.daemons:
            self.running_pid(daemon)
        return self

    def spawn(self, daemon: str, address: str, local_name: str = "", hostname: str = "") -> subprocess.Popen:
        """Run one more ``daemon`` (``startd`` or ``schedd``) serving as ``address``, outside the master.

        Its configuration is read with ``local_name``, so ``<LOCAL_NAME>.KNOB`` in the pool's
        configuration sets it apart from its twin. With ``hostname`` it runs in a UTS namespace
        of its own under that host name -- another machine, as far as its ads and slot names go,
        that shares this one's file system and sockets (root only). Returns once it answers Ping.
        """
        argv = [sys.executable, "-c", _SPAWN, str(self.home), daemon, address, local_name]
        if hostname:
            argv = ["unshare", "--uts", "sh", "-c", f'hostname {hostname} && exec "$@"', "sh", *argv]
        with open(self.root / f"{address}.stderr", "ab") as err:
            proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err)
        self.spawned.append(proc)
        self.seen.add(proc.pid)

        def serving():
            if proc.poll() is not None:
                raise AssertionError(f"{daemon} {address!r} exited with {proc.returncode}: "
                                     f"{(self.root / f'{address}.stderr').read_text()[-2000:]}")
            return ping(address, transport=self.transport, timeout=5).pid == proc.pid
        wait_for(serving, what=f"{address} serving")
        return proc

    def status(self, name: str) -> m.DaemonStatus:
        """The master's record of daemon ``name`` (``"SCHEDD"``)."""
        reply = query_master(transport=self.transport, timeout=5)
        [status] = [d for d in reply.daemons if d.name == name]
        if status.pid:
            self.seen.add(status.pid)
        return status

    def running_pid(self, name: str, other_than: int | None = None, timeout: float = 20.0) -> int:
        """Wait until the master runs ``name`` as a new process that answers Ping."""
        def check():
            st = self.status(name)
            return st.pid if st.state == "Running" and st.pid and st.pid != other_than else None
        pid = wait_for(check, timeout, what=f"{name} running")
        wait_for(lambda: ping(name.lower(), transport=self.transport).pid == pid, timeout, what=f"{name} serving")
        return pid

    def _family(self) -> list[psutil.Process]:
        procs = []
        for pid in list(self.seen):
            try:
                proc = psutil.Process(pid)
                procs.append(proc)
                procs += proc.children(recursive=True)
            except psutil.NoSuchProcess:
                continue
        # ... and whatever names the home, or runs inside the pool (a job's leftover child)
        # (not this process, which a test may have moved into the pool's work directory)
        for proc in psutil.process_iter(["cmdline", "cwd"]):
            cwd = proc.info["cwd"] or ""
            if proc.pid != os.getpid() and (str(self.home) in " ".join(proc.info["cmdline"] or ())
                                            or cwd.startswith(f"{self.root}/")):
                procs.append(proc)
        return procs

    def stop(self) -> None:
        """Stop the master (it stops its daemons) and kill whatever is left; remove the home."""
        try:
            for proc in self._family():
                self.seen.add(proc.pid)
            for proc in self.spawned:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGQUIT)  # a fast stop: its jobs are killed
            if self.master is not None and self.master.poll() is None:
                self.master.send_signal(signal.SIGTERM)
                try:
                    self.master.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass
            for proc in self.spawned:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            for proc in self._family():
                try:
                    proc.kill()
                except psutil.NoSuchProcess:
                    pass
            for proc in [self.master, *self.spawned]:
                if proc is not None:
                    try:
                        proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        pass
            left = []
            for proc in self._family():
                try:
                    if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                        left.append(proc)
                except psutil.NoSuchProcess:
                    pass
            self._remove_job_cgroups()
            shutil.rmtree(self.root, ignore_errors=True)
            assert not left, f"processes survived the pool: {left}"

    def _remove_job_cgroups(self) -> None:
        """Remove the cgroups of sandboxes a killed startd left behind (``kill -9`` tests).

        A startd killed with SIGKILL cannot remove its jobs' cgroups. A restarted startd sweeps
        what its predecessor left, but a test may stop the pool before one restarts; the sandboxes
        go with the home, their cgroups must go here.
        """
        layout = detect_cgroups()
        parents = [layout.base] if layout.version == 2 else [p for _, p in layout.v1] if layout.version == 1 else []
        for sandbox in self.home.glob("execute*/dir_*"):
            for parent in parents:
                path = parent / f"htc_{sandbox.name}"
                if path.is_dir():
                    for pid in (path / "cgroup.procs").read_text().split():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(pid), signal.SIGKILL)
                    with contextlib.suppress(OSError, AssertionError):  # the process check reports leftovers
                        wait_for(lambda: not (path / "cgroup.procs").read_text().split(), 5, f"{path} to empty")
                        path.rmdir()

    # -- talking to it -----------------------------------------------------------------------------

    def send(self, msg: m.Message, address: str = "schedd", timeout: float = 20.0) -> m.Message:
        """Send one request to a daemon of the pool; return its reply."""
        return send_command(address, msg, transport=self.transport, timeout=timeout)

    def submit(self, text: str, filename: str = "job.sub") -> m.SubmitReply:
        """Submit a description (expanded by the schedd, with ``work`` as the submit directory)."""
        return self.send(description_message(text, self.work, filename))

    def jobs(self, constraint: str = "", *attrs: str, address: str = "schedd") -> list[ClassAd]:
        """The schedd's job ads (QueryJobs)."""
        reply = self.send(m.QueryJobs(constraint=constraint, projection=attrs), address=address)
        return [ClassAd(text) for text in reply.ads]

    def slots(self, constraint: str = "") -> list[ClassAd]:
        """The slot ads in the collector."""
        return query_collector(m.AdType.Startd, constraint, transport=self.transport, timeout=5)

    def advertise(self, ad: ClassAd, ad_type: m.AdType = m.AdType.Startd, lifetime: int = 600) -> None:
        """Put ``ad`` in the collector with UpdateAd, as a daemon advertises itself."""
        self.send(m.UpdateAd(ad_type=ad_type, name=str(ad["Name"]), ad_text=str(ad), lifetime=lifetime),
                  address="collector")

    def log_events(self, log: Path, count: int | None = None, *, until=None, timeout: float = 25.0) -> list:
        """Follow ``log`` with htcondor2 until it holds ``count`` events, or until ``until(events)``
        is true; return the events read."""
        def done(events: list) -> bool:
            return (count is not None and len(events) >= count) or (until is not None and until(events))

        deadline = time.monotonic() + timeout
        wait_for(log.exists, timeout, f"{log} to appear")
        events: list = []
        reader = htcondor2.JobEventLog(str(log))
        try:
            while not done(events):
                for event in reader.events(stop_after=1):  # waits at most a second for the next event
                    events.append(event)
                    if done(events):
                        break
                if not done(events) and time.monotonic() > deadline:
                    raise AssertionError(f"{log} has {len(events)} events, expected "
                                         f"{count if count is not None else 'more'}: "
                                         f"{[str(e.type) for e in events[-10:]]} (the last ten)")
        finally:
            reader.close()
        return events


@contextlib.contextmanager
def open_pool(daemons: str = "COLLECTOR, SCHEDD", **kwargs):
    """A started :class:`Pool` for a ``with`` block (or a fixture); stopped, its processes killed, after."""
    pool = Pool(daemons, **kwargs)
    try:
        yield pool.start()
    finally:
        pool.stop()


def echo_job(pool: Pool, extra: str = "", queue: str = "queue") -> str:
    """An ``/bin/echo $(Cluster).$(Process)`` description writing to ``pool.work``."""
    return (f"executable = /bin/echo\narguments = $(Cluster).$(Process)\n"
            f"output = {pool.work}/out.$(Cluster).$(Process)\n"
            f"log = {pool.work}/job.$(Cluster).log\n{extra}\n{queue}\n")


def stop_pool_and_reap(root: Path, pids: set[int], timeout: float = 20.0) -> None:
    """Stop the pool under ``root`` through ``htc pool stop``, then kill whatever of ``pids``
    (and their children) is left, and remove ``root``: a failing test never leaks daemons."""
    from htc.client.pool import pool_status, stop_pool

    status = pool_status()
    pids = set(pids) | {status.master_pid, *(d.pid for d in status.daemons)}
    pids.discard(None)
    with contextlib.suppress(Exception):  # the kill below is the safety net
        stop_pool(fast=True, timeout=timeout)
    procs = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            procs += [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(procs, timeout=5)
    shutil.rmtree(root, ignore_errors=True)
