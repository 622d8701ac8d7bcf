"""The shared port and the SSH transport between two network namespaces (issue #18, "Transport").

Host A (10.201.0.1) runs the real shared_port daemon (``python -m htc.daemons shared_port``) and
a stand-in daemon (tests/ssh_echo_daemon.py) behind it; the client runs in host B (10.201.0.2)
as tests/ssh_probe.py, which prints what happened as JSON lines. Every namespace and process is
removed at the end, pass or fail (tests/ssh_netns.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from htc.wire.ssh_client import SshOptions
from ssh_netns import A_IP, NetnsPair, netns_available
from waiting import wait_until

HERE = Path(__file__).resolve().parents[1]
PROBE = str(HERE / "ssh_probe.py")
ECHO = str(HERE / "ssh_echo_daemon.py")
PORT = 9618

_why_not = netns_available()
pytestmark = pytest.mark.skipif(_why_not is not None, reason=_why_not or "")


class HostA:
    """Host A's home, configuration and daemons."""

    def __init__(self, pair: NetnsPair, **knobs):
        self.pair = pair
        self.home = Path(tempfile.mkdtemp(prefix="htcsp"))
        os.chmod(self.home, 0o755)
        self.key = self.home / "pool_key"
        self.key.write_bytes(os.urandom(64))
        os.chmod(self.key, 0o600)
        self.config = self.home / "htc.cfg"
        settings = {"COLLECTOR_HOST": f"{A_IP}:{PORT}", "SHARED_PORT_PORT": str(PORT),
                    "SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(self.key), "TRUST_DOMAIN": "testpool",
                    "SSH_KEEPALIVE_INTERVAL": "0.5", "SSH_KEEPALIVE_COUNT_MAX": "3", "SSH_CONNECT_TIMEOUT": "5",
                    **knobs}
        self.config.write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))
        self.env = dict(os.environ, HTC_HOME=str(self.home), HTC_CONFIG=str(self.config))
        self.shared_port = None
        self.echo = None

    @property
    def log(self) -> Path:
        return self.home / "log" / "SharedPortLog"

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def start_shared_port(self):
        before = self.log_text().count("accepting SSH")
        self.shared_port = self.pair.spawn(
            self.pair.a, [sys.executable, "-m", "htc.daemons", "shared_port", "-home", str(self.home)],
            env=self.env, stderr=open(self.home / "shared_port.stderr", "ab"))
        wait_until(lambda: self.log_text().count("accepting SSH") > before or self.shared_port.poll() is not None,
                   what="the shared port to listen")
        assert self.shared_port.poll() is None, (self.home / "shared_port.stderr").read_text()

    def start_echo(self, name: str = "echo", **env):
        proc = self.pair.spawn(self.pair.a, [sys.executable, ECHO, str(self.home / "sockets"), name],
                               env=dict(self.env, **env), stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        self.echo = proc
        return proc

    def close(self):
        shutil.rmtree(self.home, ignore_errors=True)


@pytest.fixture
def hosts():
    pair = NetnsPair()
    a = HostA(pair)
    try:
        a.start_shared_port()
        a.start_echo()
        yield pair, a
    finally:
        pair.close()
        a.close()


class Probe:
    """tests/ssh_probe.py running in host B."""

    def __init__(self, pair: NetnsPair, a: HostA, scenario: str, **params):
        p = {"scenario": scenario, "host": A_IP, "port": PORT, "key": str(a.key), **params}
        self.proc = pair.python(pair.b, PROBE, json.dumps(p), env=a.env)

    def line(self) -> dict:
        text = self.proc.stdout.readline()
        assert text, f"the probe ended early (status {self.proc.wait()})"
        return json.loads(text)

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()


def run_probe(pair, a, scenario, **params) -> dict:
    probe = Probe(pair, a, scenario, **params)
    line = probe.line()
    probe.proc.wait(timeout=120)
    return line


def test_request_reaches_the_daemon_with_the_peers_identity(hosts):
    pair, a = hosts
    assert run_probe(pair, a, "ping", who="pool")["pong"] == "10.201.0.2|condor_pool@testpool|pool"
    assert run_probe(pair, a, "ping", who="alice")["pong"] == "10.201.0.2|alice@testpool|token"
    assert run_probe(pair, a, "ping", who="anon")["pong"] == "10.201.0.2|None|"


def test_aes_gcm_is_preferred_and_ssh_ciphers_is_honoured(hosts):
    pair, a = hosts
    assert run_probe(pair, a, "ping")["cipher"] == "aes128-gcm@openssh.com"
    other = HostA(pair, SSH_CIPHERS="aes256-gcm@openssh.com", SHARED_PORT_PORT="9619")
    try:
        other.start_shared_port()
        echo = other.start_echo()
        out = run_probe(pair, other, "ping", port=9619)
        assert out["cipher"] == "aes256-gcm@openssh.com", out
        assert echo.poll() is None
    finally:
        other.close()


def test_wrong_pool_key_is_refused_and_logged_with_the_address(hosts):
    pair, a = hosts
    out = run_probe(pair, a, "ping", who="wrong")
    assert out["error"] == "LoginRefused", out
    assert "refused our credentials" in out["text"]
    line = wait_until(lambda: [l for l in a.log_text().splitlines() if "PERMISSION DENIED" in l],
                      what="the refusal in SharedPortLog")[0]
    assert "10.201.0.2" in line and "mallory@testpool" in line and "signature" in line


def test_a_daemon_not_running_is_reported_by_name(hosts):
    pair, a = hosts
    out = run_probe(pair, a, "ping", name="negotiator")
    assert out["error"] == "DaemonUnreachable" and "no negotiator daemon" in out["text"], out


def test_connections_and_channels_are_reused_and_reconnect_after_a_restart(hosts):
    pair, a = hosts
    probe = Probe(pair, a, "reuse")
    counts = probe.line()
    assert counts["connections"] == 1, counts          # one SSH connection for 36 requests
    assert counts["channels"] == counts["peer_conns"] <= 7, counts  # a channel per concurrent request
    assert probe.line()["wait"]
    a.shared_port.kill()
    a.shared_port.wait()
    probe.go()                                          # the probe's next request meets a dead port...
    time.sleep(0.5)                                     # ...for a while (what is tested: it retries)
    a.start_shared_port()
    out = probe.line()
    assert out.get("pong", "").endswith("|pool"), out   # ...and gets through once the port is back
    assert out["connections"] == 2, out


@pytest.mark.parametrize("how", ["link down", "blackhole"])
def test_keepalive_notices_a_cut_link_within_seconds(hosts, how):
    pair, a = hosts
    if how == "blackhole" and shutil.which("nft") is None:
        pytest.skip("nft (Debian package nftables) is not installed")
    probe = Probe(pair, a, "cut", keepalive=0.5, count_max=3)
    assert probe.line()["wait"]
    if how == "link down":
        pair.link(pair.a, False)
    else:
        pair.blackhole(pair.a, True)
    probe.go()
    out = probe.line()
    assert out["error"] in ("ConnectionClosed", "DaemonUnreachable"), out
    assert out["after"] < 8, out                         # 0.5 s x (3 + 1) = 2 s, with room for load
    assert out["connected"] is False
    # the shared port's own keepalives (SSH_KEEPALIVE_* of its configuration) noticed it too
    wait_until(lambda: "not responding to keepalive" in a.log_text(), timeout=20,
               what="the shared port to notice the cut")


def test_connect_timeout_is_honoured(hosts):
    pair, a = hosts
    pair.blackhole(pair.a, True) if shutil.which("nft") else pair.link(pair.a, False)
    out = run_probe(pair, a, "connect_timeout", connect_timeout=1.5)
    assert out["error"] == "HostSilent", out  # a DaemonUnreachable whose host may still be up (no answer)
    assert 1.0 < out["after"] < 6, out


#: the bulk payload (MiB): far above the SSH windows and socket buffers a streaming relay holds
MIB = 192


def test_bulk_payload_streams_with_flow_control(hosts):
    pair, a = hosts
    a.echo.kill()
    a.start_echo(SLOW="0.01")                            # a slow reader: the sender must wait for it

    def peak_kib() -> int:
        status = Path(f"/proc/{a.shared_port.pid}/status").read_text().splitlines()
        return int(next(line.split()[1] for line in status if line.startswith("VmHWM")))

    before = peak_kib()  # the shared port with its imports and a connection or two: its own size
    warm = run_probe(pair, a, "bulk", mib=MIB // 2)
    assert warm["counted"] == MIB // 2 * 1024 * 1024, warm
    first = peak_kib() - before
    out = run_probe(pair, a, "bulk", mib=MIB)
    assert out["counted"] == MIB * 1024 * 1024, out
    more = peak_kib() - before - first
    # a relay holds at most two SSH windows per channel (8 MiB each, htc.wire.ssh_server "Flow
    # control") plus what the allocator keeps: the first transfer may grow the peak by that much,
    # and a second, twice as large, must not grow it again. Before the drained-resume rule the
    # buffered bytes grew with the transfer (+46 MiB for the second, 71-105 MiB in all).
    assert first < 32 * 1024, f"the shared port's peak memory grew by {first} KiB for {MIB // 2} MiB passed through"
    assert more < 16 * 1024, f"the shared port's peak memory grew by {more} KiB more for {MIB} MiB more"
    # The client held at most a window and a few chunks: counted as the bytes queued in it (the
    # channel's send buffer and the SSH connection's socket transport: 8 MiB in flight at most,
    # the window htc.wire.ssh_client.SshOptions asks of the shared port, plus the frame being
    # written), and as its own peak RSS (~60 MiB, nearly all of it the interpreter with htc and
    # asyncssh imported). A Connection.send that does not wait for drain() queues 132 MiB and
    # peaks at 184 MiB: both fail. Not ru_maxrss: Linux counts in it the memory of the process
    # the probe was spawned from (ssh_probe.own_peak_rss_mib), and a pytest-xdist worker deep
    # into the suite is ~290 MiB (the CI failure of 2026-11-29).
    assert out["max_queued_mib"] <= SshOptions().window / 2 ** 20 + 2, out
    assert out["peak_rss_mib"] < MIB // 2, out


def test_bad_frames_on_an_authenticated_channel_end_only_that_channel(hosts):
    pair, a = hosts
    out = run_probe(pair, a, "garbage")
    assert "malformed" in out["garbage"] or "undecodable" in out["garbage"], out
    assert "too_large" in out["oversized"], out
    assert "malformed" in out["truncated"], out
    assert "invalid" in out["not_a_message"] or "malformed" in out["not_a_message"], out
    assert out["after"].endswith("|pool")
    assert a.shared_port.poll() is None and a.echo.poll() is None


def test_garbage_on_the_raw_port_is_refused_and_the_port_serves_on(hosts):
    pair, a = hosts
    script = ("import socket,sys\n"
              "for data in (b'GET / HTTP/1.0\\r\\n\\r\\n', b'\\x00' * 70000, b'SSH-2.0-x\\r\\n' + b'\\xff' * 40000,"
              " b'SSH-2.0-x\\r\\n\\x00\\x00'):\n"
              f"    s = socket.create_connection(('{A_IP}', {PORT}), timeout=20)\n"
              "    s.sendall(data)\n"
              "    s.shutdown(socket.SHUT_WR)\n"
              "    try:\n"
              "        while s.recv(65536): pass\n"
              "    except OSError: pass\n"
              "    s.close()\n"
              "print('done')\n")
    result = pair.run(pair.b, [sys.executable, "-c", script], env=a.env)
    assert result.stdout.strip() == "done", result.stderr
    assert run_probe(pair, a, "ping")["pong"].endswith("|pool")
    assert a.shared_port.poll() is None


def test_the_master_runs_the_shared_port_in_network_mode_and_real_daemons_answer_through_it():
    pair = NetnsPair()
    a = HostA(pair, DAEMON_LIST="MASTER, COLLECTOR", MASTER_UPDATE_INTERVAL="5")
    try:
        master = pair.spawn(pair.a, [sys.executable, "-m", "htc.daemons", "master", "-home", str(a.home)],
                            env=a.env, stderr=open(a.home / "master.stderr", "ab"))
        wait_until(lambda: "accepting SSH" in a.log_text() or master.poll() is not None,
                   what="the master to start the shared port")
        assert master.poll() is None, (a.home / "master.stderr").read_text()
        wait_until(lambda: (a.home / "sockets" / "collector.sock").exists(), what="the collector")
        out = run_probe(pair, a, "ping", name="collector")
        assert out.get("pong") == "collector", out
    finally:
        pair.close()
        a.close()


def test_an_ssh_key_listed_for_an_identity_logs_in_as_it():
    import asyncssh

    pair = NetnsPair()
    keys = Path(tempfile.mkdtemp(prefix="htcsk"))
    a = None
    try:
        bob, eve = asyncssh.generate_private_key("ssh-ed25519"), asyncssh.generate_private_key("ssh-ed25519")
        for name, key in (("bob", bob), ("eve", eve)):
            (keys / name).write_bytes(key.export_private_key())
            os.chmod(keys / name, 0o600)
        listed = keys / "authorized"
        listed.write_text(f"# who may log in with a key\nbob@testpool {bob.export_public_key().decode()}")
        a = HostA(pair, SHARED_PORT_AUTHORIZED_KEYS=str(listed))
        a.start_shared_port()
        a.start_echo()
        out = run_probe(pair, a, "ping", who="sshkey", identity="bob@testpool", client_keys=[str(keys / "bob")])
        assert out["pong"] == "10.201.0.2|bob@testpool|ssh-key", out
        out = run_probe(pair, a, "ping", who="sshkey", identity="bob@testpool", client_keys=[str(keys / "eve")])
        assert out["error"] == "LoginRefused", out
        assert wait_until(lambda: "public key not listed" in a.log_text(), what="the refusal logged")
    finally:
        pair.close()
        shutil.rmtree(keys, ignore_errors=True)
        if a is not None:
            a.close()


def test_a_client_that_never_logs_in_is_dropped_after_ssh_connect_timeout(hosts):
    pair, a = hosts
    script = ("import socket, time\n"
              f"s = socket.create_connection(('{A_IP}', {PORT}), timeout=60)\n"
              "start = time.monotonic()\n"
              "s.sendall(b'SSH-2.0-silent\\r\\n')\n"
              "while s.recv(65536): pass\n"
              "print(time.monotonic() - start)\n")
    result = pair.run(pair.b, [sys.executable, "-c", script], env=a.env)
    assert result.returncode == 0, result.stderr
    assert 4.5 < float(result.stdout) < 30, result.stdout   # SSH_CONNECT_TIMEOUT = 5 on host A


@pytest.mark.parametrize("which", ["pool key", "host key"])
def test_shared_port_refuses_a_key_others_can_read(which):
    pair = NetnsPair()
    a = HostA(pair)
    try:
        if which == "host key":
            a.start_shared_port()                       # creates the host key, 0600
            a.shared_port.kill()
            a.shared_port.wait()
            path = a.home / "ssh" / "host_key"
            assert path.stat().st_mode & 0o777 == 0o600
        else:
            path = a.key
        os.chmod(path, 0o644)
        proc = pair.spawn(pair.a, [sys.executable, "-m", "htc.daemons", "shared_port", "-home", str(a.home)],
                          env=a.env, stderr=subprocess.PIPE, text=True)
        err = proc.communicate(timeout=60)[1]
        assert proc.returncode == 4, err
        assert str(path) in err and "0644" in err, err
    finally:
        pair.close()
        a.close()

