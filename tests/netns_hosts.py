"""Simulated hosts for multi-host tests: network, UTS, mount and PID namespaces on one machine.

Theory of operation
-------------------
A :class:`Network` is a *switch* -- a network namespace holding a bridge ``br0`` -- and the
:class:`Host` objects plugged into it. Each host is a set of fresh namespaces held open by one
long-lived *anchor* process, started as::

    unshare --fork --pid --kill-child --mount-proc --net --uts --propagation private  python3 -c ANCHOR

so the anchor is PID 1 of the host's own PID namespace, with

* its own network namespace: ``lo`` up (a new namespace starts with it down) and ``eth0``, one end
  of a veth pair whose other end ``p-<name>`` is a port of the switch's bridge, at
  ``10.200.N.<i>/24`` (N counts the networks of this process, i the hosts of the network);
* its own UTS namespace, whose host name is the host's short name; ``/etc/hosts`` is bind-mounted
  from the network's generated file (``10.200.N.i name.DOMAIN name``), so ``name`` resolves to
  the canonical ``name.DOMAIN`` on every host of the network and nothing is written under ``/etc``;
* its own mount namespace with private tmpfs on ``/tmp`` (where its ``HTC_HOME``, ``/tmp/htc``,
  and ``HOME``, ``/tmp/home``, live) and on ``/var/lib/htc`` (a root startd's shared execute
  root), so hosts share nothing but the network and the read-only rest of the file system.

:meth:`Host.run` and :meth:`Host.popen` enter all four namespaces with ``nsenter`` and run the
command there with the host's environment (its own ``HTC_HOME``; the test's ``HTC_*`` and
``_HTC_*`` variables dropped). :meth:`Host.path` reaches a file of the host from the test through
``/proc/<anchor>/root``.

Nothing has a name outside the namespaces -- no ``ip netns`` entry, no interface in the machine's
own namespace -- so parallel test runs (pytest-xdist workers) cannot collide, and everything goes
away with the anchors: :meth:`Network.close` kills them, and if the test process itself is
SIGKILLed, its death kills each ``unshare`` (``PR_SET_PDEATHSIG``), whose death kills the anchor
(``--kill-child``), whose death as PID 1 kills every process of the host; the last process gone
frees the namespaces, and with them the veths, the bridge and the tmpfs.

Faults: :meth:`Network.cut` takes a host off the network (its switch port down, or with
``keep_carrier`` an nftables drop-all in the host, a broken switch or firewall), :meth:`Network.
restore` brings it back (and flushes the hosts' neighbour tables, whose stale entries would delay
the first connect), and :meth:`Network.loss` drops a share of the host's packets at random (nft
``numgen random``, segmentation offload off so the share counts real packets). The kernel here has
no ``netem``: see ../shared/reference/netns-harness.md.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

__all__ = ["Host", "HostProcess", "Network", "copy_pool_key", "netns_unavailable", "network", "networks",
           "pool_config"]

#: where every host keeps its pool, and its user's home (both on its private /tmp)
HTC_HOME = "/tmp/htc"
HOME = "/tmp/home"
#: a root startd's execute root (htc.config.execute): private per host too
SHARED_EXECUTE_PARENT = "/var/lib/htc"
#: where a host's pool key is with pool_config (SEC_TOKEN_POOL_SIGNING_KEY_FILE's default)
POOL_KEY = f"{HTC_HOME}/passwords.d/POOL"

_NETWORKS = itertools.count(0)
_NAME = re.compile(r"[a-z][a-z0-9-]{0,12}\Z")
_PR_SET_PDEATHSIG = 1

def _kept_paths() -> list[str]:
    """What every host must still see under its private tmpfs: this checkout and the test's Python
    (CI clones under /tmp, which a host covers with its own)."""
    paths = {Path(__file__).resolve().parents[1], Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    return sorted(str(p) for p in paths)


# PID 1 of a host (or of the switch): set the host up, say "ready", then reap orphans until killed.
_ANCHOR = r"""
import json, os, signal, socket, subprocess, sys
spec = json.loads(sys.argv[1])
def sh(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
if spec.get("hostname"):
    socket.sethostname(spec["hostname"])
if spec.get("hosts_file"):
    sh("mount", "--bind", spec["hosts_file"], "/etc/hosts")
for target, mode in spec.get("tmpfs", []):
    # the test's code and Python stay visible where a tmpfs covers them (a checkout under /tmp)
    kept = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in spec.get("keep", [])
            if path.startswith(target.rstrip("/") + "/") and os.path.isdir(path)]
    sh("mount", "-t", "tmpfs", "-o", f"mode={mode}", "htc-host", target)
    for path, fd in kept:
        os.makedirs(path, exist_ok=True)
        # the anchor's fd (not mount's), taken as it is: canonicalized, it would name the tmpfs
        sh("mount", "--no-canonicalize", "--bind", f"/proc/{os.getpid()}/fd/{fd}", path)
        os.close(fd)
for path, mode in spec.get("dirs", []):
    os.makedirs(path, mode=mode, exist_ok=True)
    os.chmod(path, mode)
sh("ip", "link", "set", "lo", "up")
os.chdir(spec.get("cwd", "/"))
watched = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}
signal.pthread_sigmask(signal.SIG_BLOCK, watched)
print("ready", flush=True)
while True:
    if signal.sigwait(watched) != signal.SIGCHLD:
        sys.exit(0)
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
"""


def netns_unavailable() -> str | None:
    """Why namespaced hosts cannot be built here, or None when they can."""
    if os.geteuid() != 0:
        return "simulated hosts need root (network namespaces): run the tests as root, as CI does"
    missing = [tool for tool in ("unshare", "nsenter", "ip", "mount") if shutil.which(tool) is None]
    if missing:
        return f"simulated hosts need {', '.join(missing)} (util-linux, iproute2): install them"
    probe = subprocess.run(["unshare", "--net", "--uts", "--mount", "--pid", "--fork", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return (f"cannot create namespaces ({probe.stderr.strip()}): run the tests as root, "
                "as CI does")
    return None


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the test process dies, however it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class _Anchor:
    """A process holding fresh namespaces open (PID 1 of its own PID namespace)."""

    def __init__(self, spec: dict, log: Path, *, net: bool = True, uts: bool = False, timeout: float = 60.0):
        flags = ["--net"] + (["--uts"] if uts else [])
        argv = ["unshare", "--fork", "--pid", "--kill-child", "--mount-proc", "--propagation", "private",
                *flags, sys.executable, "-I", "-c", _ANCHOR, json.dumps(spec)]
        self.log = log
        with open(log, "ab") as err:
            self.unshare = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                            preexec_fn=_die_with_parent)
        try:
            self._await_ready(timeout)
            self.pid = self._child_pid(timeout)
        except BaseException:
            self.kill()
            raise

    def _await_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.unshare.stdout], [], [], left)[0]:
                raise RuntimeError(f"a namespace anchor did not get ready in {timeout:g} s: {self._log_tail()}")
            chunk = os.read(self.unshare.stdout.fileno(), 64)
            if not chunk:
                raise RuntimeError(f"a namespace anchor exited while setting up: {self._log_tail()}")
            line += chunk
        self.unshare.stdout.close()

    def _child_pid(self, timeout: float) -> int:
        """The anchor's pid as this process sees it (unshare's only child)."""
        children = Path(f"/proc/{self.unshare.pid}/task/{self.unshare.pid}/children")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = children.read_text().split()
            if pids:
                return int(pids[0])
            time.sleep(0.01)
        raise RuntimeError(f"unshare {self.unshare.pid} has no child: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:].strip() or "(no output)"
        except OSError:
            return "(no log)"

    def nsenter(self, *namespaces: str) -> list[str]:
        """The argv prefix that runs a command in this anchor's ``namespaces`` (``"-n"``, ...)."""
        return ["nsenter", "-t", str(self.pid), *namespaces, "--"]

    def ip(self, *args: str) -> None:
        """Run ``ip ARGS`` in this anchor's network namespace."""
        self.net("ip", *args)

    def net(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``argv`` in this anchor's network namespace only (a tool like ip, nft, ethtool)."""
        done = subprocess.run(self.nsenter("-n") + list(argv), capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed in namespace of pid {self.pid}: {done.stderr.strip()}")
        return done

    def kill(self) -> None:
        """SIGKILL the anchor (so every process of its PID namespace) and reap unshare."""
        pid = getattr(self, "pid", None)
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)  # PID 1 of its namespace: the kernel kills the rest
            except ProcessLookupError:
                pass  # already gone
        if self.unshare.poll() is None:
            self.unshare.kill()  # (and --kill-child passes it on, had the anchor not started yet)
        self.unshare.wait()
        if self.unshare.stdout and not self.unshare.stdout.closed:
            self.unshare.stdout.close()
        if pid is not None:
            deadline = time.monotonic() + 60
            while _running(pid) and time.monotonic() < deadline:  # the namespace's teardown takes a moment
                time.sleep(0.01)


class HostProcess(subprocess.Popen):
    """A process started in a host; signals go to its whole process group (``nsenter`` forks to
    enter the PID namespace, so the command itself is nsenter's child)."""

    def send_signal(self, sig: int) -> None:
        """Signal the process group (the nsenter and the command it runs)."""
        if self.returncode is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass  # already gone between poll and kill


class Host:
    """One simulated machine of a :class:`Network` (made by :meth:`Network.add_host`)."""

    def __init__(self, network: Network, name: str, ip: str):
        self.network, self.name, self.ip = network, name, ip
        self.fqdn = f"{name}.{network.domain}"
        self.home = HTC_HOME
        self.processes: list[HostProcess] = []
        self._anchor = _Anchor(
            {"hostname": name, "hosts_file": str(network.hosts_file), "cwd": HOME,
             "tmpfs": [["/tmp", "1777"], [SHARED_EXECUTE_PARENT, "0755"]], "keep": _kept_paths(),
             "dirs": [[HOME, 0o700], [HTC_HOME, 0o755]]},
            network.dir / f"{name}.anchor.log", uts=True)

    @property
    def pid(self) -> int:
        """The anchor's pid (in the test's PID namespace): ``nsenter -t`` target, ``/proc/<pid>/ns``."""
        return self._anchor.pid

    def __repr__(self) -> str:
        return f"<Host {self.fqdn} {self.ip} anchor {self.pid}>"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of commands on this host: the test's, without its htc settings, with
        this host's HTC_HOME and HOME, and the test's Python first on PATH (``htc`` works)."""
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("HTC_", "_HTC_"))}
        env.update(HTC_HOME=HTC_HOME, HOME=HOME, TMPDIR="/tmp",
                   PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        env.update(extra or {})
        return env

    def _argv(self, argv: list[str], cwd: str | None) -> list[str]:
        chdir = ["env", f"--chdir={cwd}"] if cwd else []
        return ["nsenter", "-t", str(self.pid), "-n", "-u", "-m", "-p", "-w", "--", *chdir, *map(str, argv)]

    def run(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
            input: str | None = None, timeout: float = 120.0, check: bool = False) -> subprocess.CompletedProcess:
        """Run ``argv`` on this host and wait for it (text output captured).

        ``env`` adds to :meth:`env`; ``cwd`` is a path as the host sees it (default: its HOME, ``/tmp/home``).

        Raises:
            subprocess.CalledProcessError: with ``check``, the command failed.
        """
        done = subprocess.run(self._argv(argv, cwd), env=self.env(env), input=input, capture_output=True,
                              text=True, timeout=timeout, start_new_session=True)
        if check and done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, done.stderr)
        return done

    def popen(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
              **kwargs) -> HostProcess:
        """Start ``argv`` on this host; it is killed with the host at the latest."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = HostProcess(self._argv(argv, cwd), env=self.env(env), start_new_session=True, **kwargs)
        self.processes.append(proc)
        return proc

    def path(self, path: str) -> Path:
        """``path`` on this host (absolute, as the host sees it), reachable from the test."""
        return Path(f"/proc/{self.pid}/root") / path.lstrip("/")

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        """Write ``text`` to ``path`` on this host, creating its directories."""
        target = self.path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)

    def net(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a network tool (``ip``, ``nft``, ``ethtool``) in this host's network namespace."""
        return self._anchor.net(*argv, check=check)

    def close(self) -> None:
        """Kill everything on this host and free its namespaces."""
        self._anchor.kill()
        for proc in self.processes:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Network:
    """A switch and the hosts plugged into it, at ``10.200.N.0/24``; :meth:`close` removes all.

    Args:
        domain: the hosts' domain (``cm`` is ``cm.<domain>``).
    """

    def __init__(self, domain: str = "test"):
        self.index = next(_NETWORKS) % 250
        self.domain = domain
        self.hosts: dict[str, Host] = {}
        self.dir = Path(tempfile.mkdtemp(prefix="htc-net-"))
        self.hosts_file = self.dir / "hosts"
        self._write_hosts()
        os.makedirs(SHARED_EXECUTE_PARENT, mode=0o755, exist_ok=True)  # a host's tmpfs goes over it
        try:
            self._switch = _Anchor({}, self.dir / "switch.anchor.log")
            self._switch.ip("link", "add", "br0", "type", "bridge")
            self._switch.ip("link", "set", "br0", "up")
        except BaseException:
            self.close()
            raise

    @property
    def subnet(self) -> str:
        """``10.200.N.0/24``."""
        return f"10.200.{self.index}.0/24"

    def _write_hosts(self) -> None:
        lines = ["127.0.0.1 localhost"]
        lines += [f"{h.ip} {h.fqdn} {h.name}" for h in self.hosts.values()]
        with open(self.hosts_file, "r+" if self.hosts_file.exists() else "w") as f:  # same inode: bind mounts see it
            f.seek(0)
            f.truncate()
            f.write("\n".join(lines) + "\n")
        self.hosts_file.chmod(0o644)

    def add_host(self, name: str) -> Host:
        """A new host ``name`` (a short lower-case name) at the next address, on the switch."""
        if not _NAME.match(name) or name in self.hosts:
            raise ValueError(f"host name {name!r}: use a new short name of [a-z0-9-], at most 13 characters")
        ip = f"10.200.{self.index}.{len(self.hosts) + 1}"
        host = Host(self, name, ip)
        self.hosts[name] = host
        self._write_hosts()
        try:
            port = f"p-{name}"
            self._switch.ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", str(host.pid))
            self._switch.ip("link", "set", port, "master", "br0", "up")
            host.net("ip", "addr", "add", f"{ip}/24", "dev", "eth0")
            host.net("ip", "link", "set", "eth0", "up")
        except BaseException:
            host.close()
            del self.hosts[name]
            raise
        return host

    def add_hosts(self, *names: str) -> list[Host]:
        """:meth:`add_host` for each name."""
        return [self.add_host(n) for n in names]

    # -- faults ----------------------------------------------------------------------------------

    def cut(self, host: Host, *, keep_carrier: bool = False) -> None:
        """Take ``host`` off the network: its switch port down, or (``keep_carrier``) every packet
        but loopback dropped in the host, its link staying up (needs nftables)."""
        if keep_carrier:
            rules = ("table inet htc_cut {\n"
                     " chain i { type filter hook input priority -10; policy drop; iifname \"lo\" accept; }\n"
                     " chain o { type filter hook output priority -10; policy drop; oifname \"lo\" accept; }\n}\n")
            _nft(host, rules)
        else:
            self._switch.ip("link", "set", f"p-{host.name}", "down")

    def restore(self, host: Host) -> None:
        """Undo :meth:`cut` (either kind) and flush every host's neighbour table."""
        self._switch.ip("link", "set", f"p-{host.name}", "up")
        host.net("nft", "delete", "table", "inet", "htc_cut", check=False)
        for other in self.hosts.values():
            other.net("ip", "neigh", "flush", "all", check=False)

    def loss(self, host: Host, percent: int) -> None:
        """Drop ``percent`` % of ``host``'s packets each way at random (0: stop); needs nftables
        and ethtool (segmentation offload goes off, so each real packet is a draw)."""
        host.net("nft", "delete", "table", "inet", "htc_loss", check=False)
        if percent <= 0:
            return
        host.net("ethtool", "-K", "eth0", "tso", "off", "gso", "off", "gro", "off", check=False)
        draw = "" if percent >= 100 else f"numgen random mod 100 < {percent} "
        rules = ("table inet htc_loss {\n"
                 f" chain i {{ type filter hook input priority -5; iifname \"eth0\" {draw}drop; }}\n"
                 f" chain o {{ type filter hook output priority -5; oifname \"eth0\" {draw}drop; }}\n}}\n")
        _nft(host, rules)

    # -- life ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill every host and the switch; nothing of the network is left."""
        for host in reversed(list(self.hosts.values())):
            host.close()
        self.hosts.clear()
        switch = getattr(self, "_switch", None)
        if switch is not None:
            switch.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _nft(host: Host, rules: str) -> None:
    if shutil.which("nft") is None:
        raise RuntimeError("this fault needs nftables: apt-get install nftables (.ci/run installs it)")
    done = subprocess.run(host._anchor.nsenter("-n") + ["nft", "-f", "-"], input=rules, capture_output=True,
                          text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"nft in {host.name} refused the rules: {done.stderr.strip()}")


# -- htc on the hosts ------------------------------------------------------------------------------


def pool_config(*roles: str, condor_host: str = "cm.test", **knobs: str) -> str:
    """A host's ``htc_config`` (write it to ``HTC_HOME/htc_config`` before ``htc pool start``):
    its roles (``"CentralManager"``, ``"Submit"``, ``"Execute"``), CONDOR_HOST, its state under
    its HTC_HOME as a generated personal configuration has it, then ``knobs``."""
    lines = [f"use ROLE : {role}" for role in roles] + [f"CONDOR_HOST = {condor_host}"]
    lines += ["LOCAL_DIR = $(HTC_HOME)", "SPOOL = $(LOCAL_DIR)/spool", "EXECUTE = $(LOCAL_DIR)/execute",
              "LOG = $(LOCAL_DIR)/log", "LOCK = $(LOG)", "LOCAL_CONFIG_DIR = $(LOCAL_DIR)/config.d"]
    lines += [f"{name} = {value}" for name, value in knobs.items()]
    return "\n".join(lines) + "\n"


def copy_pool_key(source: Host, *targets: Host) -> None:
    """Copy the pool key from ``source`` to the same place on ``targets`` (mode 0600), as an
    administrator copies it with scp."""
    key = source.path(POOL_KEY).read_bytes()
    for target in targets:
        path = target.path(POOL_KEY)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_bytes(key)


# -- pytest fixtures -------------------------------------------------------------------------------


@pytest.fixture
def networks():
    """A factory of :class:`Network` objects, all closed at the end of the test (pass or fail).
    Skips (saying why) where namespaces cannot be made: run the tests as root, as CI does."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    made: list[Network] = []

    def make(domain: str = "test") -> Network:
        net = Network(domain)
        made.append(net)
        return net

    yield make
    for net in reversed(made):
        net.close()


@pytest.fixture
def network(networks) -> Network:
    """One :class:`Network` for the test (hosts added with ``network.add_host("cm")``)."""
    return networks()
