"""The simulated-host harness itself (tests/netns_hosts.py): hosts talk TCP to each other by name,
share nothing else, can be cut off and brought back, and leave nothing behind -- not even when the
test process is SIGKILLed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from netns_hosts import HTC_HOME, Network, netns_unavailable, network, networks  # noqa: F401 (fixtures)
from waiting import wait_until

# An echo server on port 7000: prints "listening" once bound, answers each connection with what it read.
SERVER = textwrap.dedent("""
    import socket
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 7000)); s.listen(8)
    print("listening", flush=True)
    while True:
        c, peer = s.accept()
        c.sendall(c.recv(100) + b" from " + socket.gethostname().encode() + b" to " + peer[0].encode())
        c.close()
""")

# Connect to argv[1]:7000 within argv[2] seconds, send "hello", print the answer (exit 3 on failure).
CLIENT = textwrap.dedent("""
    import socket, sys
    try:
        with socket.create_connection((sys.argv[1], 7000), timeout=float(sys.argv[2])) as c:
            c.sendall(b"hello"); print(c.recv(200).decode())
    except OSError as exc:
        print(type(exc).__name__, exc); sys.exit(3)
""")


def serve(host):
    proc = host.popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "listening"
    return proc


def talk(client, server_name: str, timeout: float = 5.0) -> subprocess.CompletedProcess:
    return client.run([sys.executable, "-c", CLIENT, server_name, str(timeout)])


def test_hosts_talk_tcp_by_name(network):
    cm, exec1 = network.add_hosts("cm", "exec1")
    serve(cm)
    done = talk(exec1, "cm")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"hello from cm to {exec1.ip}"
    names = exec1.run([sys.executable, "-c", "import socket; print(socket.getaddrinfo('cm', None, "
                       "flags=socket.AI_CANONNAME)[0][3], socket.gethostbyname('exec1.test'))"])
    assert names.stdout.split() == ["cm.test", exec1.ip]


def test_hosts_share_nothing_but_the_network(network):
    a, b = network.add_hosts("alpha", "beta")
    assert [h.run(["hostname"]).stdout.strip() for h in (a, b)] == ["alpha", "beta"]
    a.run(["sh", "-c", 'mkdir -p "$HTC_HOME/spool" && echo secret > "$HTC_HOME/spool/f" && echo t > /tmp/t'],
          check=True)
    assert a.run(["cat", f"{HTC_HOME}/spool/f"]).stdout == "secret\n"
    assert b.run(["cat", f"{HTC_HOME}/spool/f"]).returncode != 0
    assert not b.path("/tmp/t").exists() and a.path("/tmp/t").read_text() == "t\n"
    assert not Path("/tmp/t").exists() or Path("/tmp/t").read_text() != "t\n"
    # each host sees its own processes only, and its own network namespace
    sleeper = a.popen(["sleep", "300"])
    wait_until(lambda: "sleep" in a.run(["ps", "-eo", "comm"]).stdout, what="sleep on alpha")
    assert "sleep" not in b.run(["ps", "-eo", "comm"]).stdout
    assert os.stat(f"/proc/{a.pid}/ns/net").st_ino != os.stat(f"/proc/{b.pid}/ns/net").st_ino
    assert os.stat(f"/proc/{a.pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
    sleeper.terminate()
    assert sleeper.wait(timeout=30) != 0


@pytest.mark.parametrize("keep_carrier", [False, True], ids=["unplugged", "blackholed"])
def test_cut_and_restore(network, keep_carrier):
    if keep_carrier and shutil.which("nft") is None:
        pytest.skip("the blackhole cut needs nftables: apt-get install nftables, as .ci/run does")
    cm, exec1 = network.add_hosts("cm", "exec1")
    serve(cm)
    assert talk(exec1, "cm").returncode == 0
    network.cut(exec1, keep_carrier=keep_carrier)
    cut = talk(exec1, "cm", timeout=1.0)
    assert cut.returncode == 3, cut.stdout
    network.restore(exec1)
    back = talk(exec1, "cm", timeout=10.0)
    assert back.returncode == 0, back.stdout
    assert back.stdout.strip() == f"hello from cm to {exec1.ip}"


def test_loss(network):
    if shutil.which("nft") is None or shutil.which("ethtool") is None:
        pytest.skip("loss needs nftables: apt-get install nftables ethtool, as .ci/run does")
    cm, exec1 = network.add_hosts("cm", "exec1")
    serve(cm)
    network.loss(exec1, 100)
    assert talk(exec1, "cm", timeout=1.0).returncode == 3
    network.loss(exec1, 0)
    assert talk(exec1, "cm", timeout=10.0).returncode == 0


def _namespaces_in_use() -> set[int]:
    """Network-namespace inodes of every process of this machine."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.add(os.stat(entry / "ns" / "net").st_ino)
            except OSError:
                continue  # (the process ended while we looked)
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_close_leaves_nothing():
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    net = Network()
    hosts = net.add_hosts("cm", "exec1")
    sleepers = [h.popen(["sleep", "300"]) for h in hosts]
    # a detached daemon: its own session, re-parented to the host's PID 1, as `htc pool start` leaves one
    hosts[0].run(["sh", "-c", "setsid sleep 301 </dev/null >/dev/null 2>&1 &"], check=True)
    anchors = [h.pid for h in hosts] + [net._switch.pid]
    inodes = {os.stat(f"/proc/{pid}/ns/net").st_ino for pid in anchors}
    directory = net.dir
    net.close()
    # (the veths and the bridge lived only in these namespaces: nothing was ever made in the machine's own)
    wait_until(lambda: not inodes & _namespaces_in_use(), what="the hosts' network namespaces to go")
    assert not any(_alive(pid) for pid in anchors)
    assert all(p.returncode is not None for p in sleepers)
    assert "sleep 301" not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert not directory.exists()


# A test process that builds a network, starts work on it, reports what to look for, then waits to be killed.
VICTIM = textwrap.dedent("""
    import json, os, sys, time
    sys.path.insert(0, sys.argv[1])
    from netns_hosts import Network
    net = Network()
    hosts = net.add_hosts("cm", "exec1")
    for h in hosts:
        h.popen(["sleep", "300"])
    hosts[1].run(["sh", "-c", "setsid sleep 302 </dev/null >/dev/null 2>&1 &"], check=True)
    print(json.dumps({"inodes": [os.stat(f"/proc/{h.pid}/ns/net").st_ino for h in hosts],
                      "anchors": [h.pid for h in hosts] + [net._switch.pid], "dir": str(net.dir)}), flush=True)
    time.sleep(300)
""")


def test_sigkilled_test_process_leaves_nothing():
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    victim = subprocess.Popen([sys.executable, "-c", VICTIM, str(Path(__file__).parents[1])],
                              stdout=subprocess.PIPE, text=True)
    try:
        facts = json.loads(victim.stdout.readline())
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()
    inodes = set(facts["inodes"])
    wait_until(lambda: not inodes & _namespaces_in_use(), what="the namespaces of a killed test to go")
    wait_until(lambda: not any(_alive(pid) for pid in facts["anchors"]), what="the anchors to die")
    assert "sleep 302" not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    Path(facts["dir"], "hosts").unlink(missing_ok=True)  # only the temp dir stays: no process can clean it
    for leftover in Path(facts["dir"]).iterdir():
        leftover.unlink()
    Path(facts["dir"]).rmdir()
