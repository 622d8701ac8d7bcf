"""Two network namespaces joined by a veth pair, for the SSH transport's tests and benchmark.

A stop-gap until the multi-host harness (tests/netns_hosts.py) lands: :class:`NetnsPair` creates
``<prefix>a`` and ``<prefix>b`` (unique per run: pid and random letters), a veth pair ``eth0`` in
each with 10.201.0.1/24 and 10.201.0.2/24, and ``lo`` up in both (a new namespace's loopback is
down: netns-harness.md §1). :meth:`NetnsPair.spawn` starts a process inside one namespace
(``ip netns exec`` execs in place, so the Popen's pid is the process); :meth:`close` kills every
process it started (its process group) and deletes both namespaces, which removes the veths,
whatever happened in the test. Everything needs root; :func:`netns_available` probes for it.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time

A_IP = "10.201.0.1"
B_IP = "10.201.0.2"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def netns_available() -> str | None:
    """None if namespaces can be made here, else why not (for a skip reason)."""
    if os.geteuid() != 0:
        return "network namespaces need root: run the tests as root, as CI does"
    name = f"htcprobe{os.getpid()}"
    try:
        _ip("netns", "add", name)
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"cannot create a network namespace ({exc}): run the tests as root, as CI does"
    _ip("netns", "del", name, check=False)
    return None


class NetnsPair:
    """Namespaces ``a`` (10.201.0.1) and ``b`` (10.201.0.2) joined by a veth (module header)."""

    def __init__(self):
        self.prefix = f"htcs{os.getpid() % 100000}{secrets.token_hex(2)}"
        self.a = self.prefix + "a"
        self.b = self.prefix + "b"
        self.procs: list[subprocess.Popen] = []
        try:
            _ip("netns", "add", self.a)
            _ip("netns", "add", self.b)
            _ip("link", "add", "eth0", "netns", self.a, "type", "veth", "peer", "name", "eth0", "netns", self.b)
            for ns, addr in ((self.a, A_IP), (self.b, B_IP)):
                _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def spawn(self, ns: str, argv: list[str], *, env: dict | None = None, **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside namespace ``ns`` (in a session of its own, killed at close)."""
        proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv], env=env, start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def run(self, ns: str, argv: list[str], *, timeout: float = 120, env: dict | None = None
            ) -> subprocess.CompletedProcess:
        """Run ``argv`` inside ``ns`` to completion; its output is captured as text."""
        return subprocess.run(["ip", "netns", "exec", ns, *argv], env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def python(self, ns: str, script: str, *args: str, **kwargs) -> subprocess.Popen:
        """Start ``python script args`` inside ``ns`` with stdin/stdout pipes (text)."""
        return self.spawn(ns, [sys.executable, script, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True, **kwargs)

    def link(self, ns: str, up: bool) -> None:
        """Bring ``ns``'s end of the veth up or down (a cut the other side does not see at once)."""
        _ip("-n", ns, "link", "set", "eth0", "up" if up else "down")

    def blackhole(self, ns: str, on: bool) -> None:
        """Drop every packet in and out of ``ns`` except on ``lo`` (nft), or stop dropping."""
        if on:
            rules = ("table inet htcdrop {\n"
                     " chain i { type filter hook input priority 0; policy drop; iifname \"lo\" accept; }\n"
                     " chain o { type filter hook output priority 0; policy drop; oifname \"lo\" accept; }\n"
                     "}\n")
            subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, check=True)
        else:
            subprocess.run(["ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "htcdrop"], check=False)

    def close(self) -> None:
        """Kill every process started here and delete both namespaces (idempotent)."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # already gone between poll and kill
        deadline = time.monotonic() + 10
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass  # a process stuck in the kernel; the namespaces are removed anyway
        self.procs.clear()
        for ns in (self.a, self.b):
            _ip("netns", "del", ns, check=False)

    def __enter__(self) -> NetnsPair:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
