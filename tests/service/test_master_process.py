"""A real master with its real collector child, in a temporary HTC_HOME, over Unix sockets.

These tests start ``python -m htc.daemons master``, talk to it and to the collector it starts
through the client library, kill the collector with SIGKILL to see the master restart it, and
check with psutil that nothing is left running afterwards -- even when an assertion fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from htc.client import ping, query_collector, query_master, send_command
from htc.wire import messages as m
from htc.wire.errors import DaemonUnreachable, PeerError
from htc.wire.transport import UnixTransport

pytestmark = pytest.mark.slow


def wait_for(condition, timeout=15.0, what="condition"):
    """Poll ``condition`` (another process's state has no event we could await here)."""
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
        time.sleep(0.05)


class Pool:
    """A master started in its own HTC_HOME; ``stop()`` leaves no process behind."""

    def __init__(self, home: Path, **knobs):
        self.home = home
        self.transport = UnixTransport(home / "sockets")
        self.env = dict(os.environ, HTC_HOME=str(home))
        # Configure through environment overrides (_HTC_NAME, like HTCondor's _CONDOR_NAME).
        knobs = {"DAEMON_LIST": "MASTER, COLLECTOR", "MASTER_BACKOFF_CONSTANT": "0",
                 "MASTER_UPDATE_INTERVAL": "1", "CONDOR_ADMIN": "", **knobs}
        for knob, value in knobs.items():
            self.env[f"_HTC_{knob}"] = value
        self.proc: subprocess.Popen | None = None
        self.seen: set[int] = set()

    def start(self) -> subprocess.Popen:
        self.proc = subprocess.Popen([sys.executable, "-m", "htc.daemons", "master", "-home", str(self.home)],
                                     env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.seen.add(self.proc.pid)
        return self.proc

    def status(self, name="COLLECTOR") -> m.DaemonStatus:
        reply = query_master(transport=self.transport, timeout=5)
        [status] = [d for d in reply.daemons if d.name == name]
        if status.pid:
            self.seen.add(status.pid)
        return status

    def running_pid(self, name="COLLECTOR", other_than=None) -> int:
        """Wait until the master runs ``name`` as a new process and that process answers Ping."""
        def check():
            st = self.status(name)
            return st.pid if st.state == "Running" and st.pid and st.pid != other_than else None
        pid = wait_for(check, what=f"{name} running")
        wait_for(lambda: ping(name.lower(), transport=self.transport).pid == pid, what=f"{name} serving")
        return pid

    def log(self, name="MasterLog") -> str:
        path = self.home / "log" / name
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        """Stop the master gracefully if it runs, then kill whatever is still alive."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        procs = []
        for pid in self.seen:
            try:
                p = psutil.Process(pid)
                procs += [p, *p.children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
        live = []
        for p in procs:
            try:
                if p.status() != psutil.STATUS_ZOMBIE:  # a zombie is dead; only its reaper is slow
                    p.kill()
                    live.append(p)
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(live, timeout=5)
        if self.proc is not None:
            self.proc.communicate(timeout=5)


@pytest.fixture
def pool():
    home = Path(tempfile.mkdtemp(prefix="htcm-", dir="/tmp"))
    p = Pool(home)
    try:
        yield p
    finally:
        p.stop()
        shutil.rmtree(home, ignore_errors=True)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_master_restarts_a_killed_collector_and_shuts_down_cleanly(pool):
    master = pool.start()
    pid = pool.running_pid()
    assert psutil.Process(pid).ppid() == master.pid

    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    new_pid = pool.running_pid(other_than=pid)
    assert time.monotonic() - killed_at >= 0.9, "MASTER_BACKOFF_CONSTANT 0 still waits ceil(2^0) = 1 s"
    assert pool.status().restarts == 1
    assert "died due to signal 9 (SIGKILL); restarting it in 1 seconds" in pool.log()

    # The restarted collector serves queries, and the master advertises itself in it.
    ads = wait_for(lambda: query_collector(m.AdType.Master, transport=pool.transport), what="the Master ad")
    assert ads[0]["MasterPid"] == master.pid
    # condor_status -master's columns: the machine's size from the configuration, the uptime
    assert ads[0]["DetectedCpus"] == os.cpu_count() and ads[0]["DetectedMemory"] > 0
    assert ads[0]["DaemonStartTime"] <= time.time()
    assert ads[0]["Collector_State"] == "Running"

    master.send_signal(signal.SIGTERM)
    assert master.wait(timeout=15) == 0
    assert not alive(new_pid)
    assert not list((pool.home / "sockets").glob("*.sock")), "daemons remove their sockets"
    log = pool.log()
    assert "stopping COLLECTOR" in log and "master exiting" in log
    assert "collector shutting down" in pool.log("CollectorLog")


def test_off_on_restart_and_off_including_the_master(pool):
    master = pool.start()
    pid = pool.running_pid()
    t = pool.transport

    assert send_command("master", m.DaemonsOff(daemons=("collector",)), transport=t) == \
        m.Ack(detail="COLLECTOR: off")
    wait_for(lambda: pool.status().state == "Off", what="COLLECTOR off")
    assert not alive(pid)
    with pytest.raises(DaemonUnreachable):
        ping("collector", transport=t)

    send_command("master", m.DaemonsOn(), transport=t)
    pid2 = pool.running_pid(other_than=pid)
    send_command("master", m.DaemonsRestart(daemons=("COLLECTOR",)), transport=t)
    pid3 = pool.running_pid(other_than=pid2)
    assert pool.status().restarts == 0, "a restart by command is not a crash"
    assert pid3 != pid2

    send_command("master", m.DaemonsOff(include_master=True, how="fast"), transport=t)
    assert master.wait(timeout=15) == 0
    assert not alive(pid3)


def test_reconfig_reaches_the_children(pool):
    pool.start()
    pool.running_pid()
    assert send_command("master", m.Reconfig(), transport=pool.transport) == m.Ack(detail="configuration re-read")
    wait_for(lambda: "SIGHUP: configuration re-read" in pool.log("CollectorLog"), what="collector reconfig")


def test_children_follow_a_master_that_dies(pool):
    master = pool.start()
    pid = pool.running_pid()
    master.kill()
    master.wait(timeout=5)
    wait_for(lambda: not alive(pid), what="the orphaned collector to exit")
    assert "the master (pid" in pool.log("CollectorLog")


def test_a_second_master_on_the_same_home_refuses(pool):
    pool.start()
    pool.running_pid()
    second = subprocess.run([sys.executable, "-m", "htc.daemons", "master", "-home", str(pool.home)],
                            env=pool.env, capture_output=True, text=True, timeout=30)
    assert second.returncode == 4
    assert "another master daemon is already listening" in second.stderr
