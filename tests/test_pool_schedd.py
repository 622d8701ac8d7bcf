"""A real schedd under a real master: the job queue over the wire, with no job running yet.

The :class:`Pool` here starts ``python -m htc.daemons master`` in a temporary HTC_HOME (the
other pool tests use it too) and guarantees that no process it started survives the test,
even when an assertion fails. Waiting is for events -- a daemon answering, an event in a user
log read by ``htcondor2.JobEventLog`` -- never for a fixed time.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import htcondor2
import msgspec
import psutil
import pytest

from htc.classad import ClassAd
from htc.daemons.client import ping, query_collector, query_master, send_command
from htc.daemons.schedd_requests import description_message
from htc.wire import messages as m
from htc.wire.errors import DaemonUnreachable, PeerError, RemoteError
from htc.wire.transport import UnixTransport

pytestmark = pytest.mark.slow


def wait_for(condition, timeout: float = 20.0, what: str = "condition"):
    """Poll another process's state (a daemon coming up has no event we could await)."""
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
    """A master and its daemons in a fresh HTC_HOME; :meth:`stop` leaves no process behind.

    The home is world-traversable: when the tests run as root, jobs run as ``nobody`` and must
    reach their sandboxes under EXECUTE.
    """

    def __init__(self, daemons: str = "COLLECTOR, SCHEDD", **knobs: str):
        self.root = Path(tempfile.mkdtemp(prefix="htc-pool-"))
        self.root.chmod(0o755)
        self.home = self.root / "home"
        self.home.mkdir()
        self.home.chmod(0o755)
        self.work = self.root / "work"
        self.work.mkdir()
        self.work.chmod(0o777)
        self.transport = UnixTransport(self.home / "sockets")
        self.env = dict(os.environ, HTC_HOME=str(self.home))
        settings = {"DAEMON_LIST": f"MASTER, {daemons}", "MASTER_BACKOFF_CONSTANT": "0",
                    "MASTER_BACKOFF_FACTOR": "1", "MASTER_UPDATE_INTERVAL": "5", "CONDOR_ADMIN": "",
                    "SCHEDD_MIN_INTERVAL": "0", "SCHEDD_INTERVAL": "5", "NEGOTIATOR_INTERVAL": "2",
                    "NEGOTIATOR_CYCLE_DELAY": "0", "NEGOTIATOR_MIN_INTERVAL": "0", "UPDATE_INTERVAL": "2",
                    "STARTER_INITIAL_UPDATE_INTERVAL": "1", "STARTER_UPDATE_INTERVAL": "2",
                    "POLLING_INTERVAL": "1", "ALIVE_INTERVAL": "2", "PERIODIC_EXPR_INTERVAL": "1",
                    "NUM_CPUS": "2", **knobs}
        for knob, value in settings.items():
            self.env[f"_HTC_{knob}"] = value
        self.master: subprocess.Popen | None = None
        self.seen: set[int] = set()
        self.daemons = [d.strip().upper() for d in daemons.split(",")]

    # -- life ------------------------------------------------------------------------------------

    def start(self) -> Pool:
        self.master = subprocess.Popen([sys.executable, "-m", "htc.daemons", "master", "-home", str(self.home)],
                                       env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        self.seen.add(self.master.pid)
        for daemon in self.daemons:
            self.running_pid(daemon)
        return self

    def status(self, name: str) -> m.DaemonStatus:
        reply = query_master(transport=self.transport, timeout=5)
        [status] = [d for d in reply.daemons if d.name == name]
        if status.pid:
            self.seen.add(status.pid)
        return status

    def running_pid(self, name: str, other_than: int | None = None) -> int:
        """Wait until the master runs ``name`` as a new process that answers Ping."""
        def check():
            st = self.status(name)
            return st.pid if st.state == "Running" and st.pid and st.pid != other_than else None
        pid = wait_for(check, what=f"{name} running")
        wait_for(lambda: ping(name.lower(), transport=self.transport).pid == pid, what=f"{name} serving")
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
        for proc in psutil.process_iter(["cmdline"]):
            if str(self.home) in " ".join(proc.info["cmdline"] or ()):
                procs.append(proc)
        return procs

    def stop(self) -> None:
        """Stop the master (it stops its daemons) and kill whatever is left; remove the home."""
        try:
            if self.master is not None and self.master.poll() is None:
                for proc in self._family():
                    self.seen.add(proc.pid)
                self.master.send_signal(signal.SIGTERM)
                try:
                    self.master.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            for proc in self._family():
                try:
                    proc.kill()
                except psutil.NoSuchProcess:
                    pass
            if self.master is not None:
                try:
                    self.master.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            left = [p for p in self._family() if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
            shutil.rmtree(self.root, ignore_errors=True)
            assert not left, f"processes survived the pool: {left}"

    # -- talking to it -----------------------------------------------------------------------------

    def send(self, msg: m.Message, address: str = "schedd", timeout: float = 20.0) -> m.Message:
        return send_command(address, msg, transport=self.transport, timeout=timeout)

    def submit(self, text: str, filename: str = "job.sub") -> m.SubmitReply:
        return self.send(description_message(text, self.work, filename))

    def jobs(self, constraint: str = "", *attrs: str) -> list[ClassAd]:
        reply = self.send(m.QueryJobs(constraint=constraint, projection=attrs))
        return [ClassAd(text) for text in reply.ads]

    def log_events(self, log: Path, count: int, timeout: float = 25.0) -> list:
        """Read ``log`` with htcondor2 until ``count`` events are there (following the file)."""
        deadline = time.monotonic() + timeout
        wait_for(log.exists, timeout, f"{log} to appear")
        events = []
        stream = iter(htcondor2.JobEventLog(str(log)).events(stop_after=1))
        while len(events) < count:
            try:
                events.append(next(stream))
            except StopIteration:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{log} has {len(events)} events, expected {count}: "
                                         f"{[str(e.type) for e in events]}") from None
                stream = iter(htcondor2.JobEventLog(str(log)).events(stop_after=1))
                events = []
        return events


@pytest.fixture(scope="module")
def pool():
    p = Pool()
    try:
        yield p.start()
    finally:
        p.stop()


def echo_job(pool: Pool, extra: str = "", queue: str = "queue") -> str:
    return (f"executable = /bin/echo\narguments = $(Cluster).$(Process)\n"
            f"output = {pool.work}/out.$(Cluster).$(Process)\n"
            f"log = {pool.work}/job.$(Cluster).log\n{extra}\n{queue}\n")


def test_submit_query_and_act_over_the_wire(pool):
    reply = pool.submit(echo_job(pool, queue="queue 3"))
    cluster = reply.cluster_id
    assert reply.num_procs == 3
    ads = pool.jobs(f"ClusterId == {cluster}", "ProcId", "Args", "JobStatus", "Owner")
    assert [(a["ProcId"], a["Args"], a["JobStatus"]) for a in ads] == [(p, f"{cluster}.{p}", 1) for p in range(3)]
    assert pool.send(m.ActOnJobs(action=m.JobAction.Hold, ids=(f"{cluster}.1",), reason="by test")).success == 1
    assert pool.send(m.EditJobs(attributes={"JobPrio": "7"}, ids=(f"{cluster}.2",))).matched == 1
    assert pool.send(m.ActOnJobs(action=m.JobAction.Remove, ids=(f"{cluster}.0",))).success == 1
    events = pool.log_events(pool.work / f"job.{cluster}.log", 6)
    kinds = [(e.type, e.proc) for e in events]
    assert kinds == [(htcondor2.JobEventType.SUBMIT, 0), (htcondor2.JobEventType.SUBMIT, 1),
                     (htcondor2.JobEventType.SUBMIT, 2), (htcondor2.JobEventType.JOB_HELD, 1),
                     (htcondor2.JobEventType.ATTRIBUTE_UPDATE, 2), (htcondor2.JobEventType.JOB_ABORTED, 0)]
    assert events[3]["HoldReason"] == "by test" and events[3]["HoldReasonCode"] == 1
    # The submitter's ad reaches the collector with its counts.
    def submitter():
        ads = query_collector(m.AdType.Submitter, transport=pool.transport, timeout=5)
        return [a for a in ads if a.get("IdleJobs") == 1 and a.get("HeldJobs") == 1]
    [ad] = wait_for(submitter, what="the Submitter ad")
    assert ad["ScheddName"].startswith("schedd@") and ad["MyAddress"] == "schedd"
    # History is the queue file's history table, readable without the schedd.
    from htc.schedd_client import history
    rows = history(f"ClusterId == {cluster}", path=pool.home / "spool" / "job_queue.db")
    assert [r["ProcId"] for r in rows] == [0] and rows[0]["JobStatus"] == 3


def test_a_malformed_submit_file_gets_a_clear_error_and_queues_nothing(pool):
    before = len(pool.jobs())
    with pytest.raises(RemoteError) as err:
        pool.submit("executable = /bin/echo\nrequest_memory = 12 XB\nqueue\n", filename="bad.sub")
    assert err.value.code == "bad_request"
    assert "submit file bad.sub" in err.value.remote_message and "request_memory" in err.value.remote_message
    assert len(pool.jobs()) == before
    with pytest.raises(RemoteError, match="is not a valid ClassAd expression"):
        pool.send(m.QueryJobs(constraint="Owner == == 3"))


def test_malformed_wire_messages_get_errors_and_the_schedd_keeps_serving(pool):
    path = pool.home / "sockets" / "schedd.sock"

    def raw(payload: bytes) -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(path))
            sock.sendall(payload)
            header = sock.recv(4, socket.MSG_WAITALL)
            (size,) = struct.unpack(">I", header)
            return sock.recv(size, socket.MSG_WAITALL)

    garbage = raw(struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1")
    reply = m.decode(garbage)
    assert isinstance(reply, m.ErrorReply) and reply.code == "malformed"
    wrong = msgspec.msgpack.encode({"type": "ActOnJobs", "action": "Explode", "ids": ["1.0"]})
    reply = m.decode(raw(struct.pack(">I", len(wrong)) + wrong))
    assert isinstance(reply, m.ErrorReply) and "action" in reply.message
    unknown = msgspec.msgpack.encode({"type": "QueryAds", "ad_type": "Machine"})
    reply = m.decode(raw(struct.pack(">I", len(unknown)) + unknown))
    assert isinstance(reply, m.ErrorReply) and reply.code == "unknown_request"
    assert pool.send(m.QueryJobs(limit=1)) is not None  # still serving
    assert pool.status("SCHEDD").restarts == 0


def test_the_job_tools_library_works_against_the_real_schedd(pool, monkeypatch):
    from htc import schedd_client as tools

    monkeypatch.setenv("HTC_HOME", str(pool.home))
    result = tools.submit("executable = /bin/echo\narguments = hello\nqueue 2\n", cwd=pool.work,
                          transport=pool.transport)
    assert result.num_procs == 2
    ads = tools.query(f"ClusterId == {result.cluster_id}", ("ProcId", "Args"), transport=pool.transport)
    assert [(a["ProcId"], a["Args"]) for a in ads] == [(0, "hello"), (1, "hello")]
    done = tools.act("Hold", tools.parse_selection([str(result.cluster_id)]), transport=pool.transport)
    assert done.ok
    held = tools.query(f"ClusterId == {result.cluster_id} && JobStatus == 5", ("ProcId",), transport=pool.transport)
    assert len(held) == 2
