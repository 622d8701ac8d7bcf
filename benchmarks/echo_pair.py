"""The set-up shared by the SSH benchmarks (ssh_bench.py, relay_hol_bench.py): two hosts, an echo daemon.

Theory of operation
-------------------
A benchmark script runs twice. Run by the user, it calls :func:`run_client`: that makes two
network namespaces (tests/ssh_netns.py), starts the real shared port and the stand-in daemon of
tests/ssh_echo_daemon.py (named ``echo``, optionally also on plain TCP) on host A, and runs the
same script with ``--client PARAMS`` on host B, whose last output line is the JSON of its
figures. Run with ``--client``, the script measures with :func:`ssh_factory` (SshTransports
logged in with a daemon token of the pool key, trusting the pool CA) and :func:`bulk`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

#: the trust domain of the benchmarks' pool
DOMAIN = "benchpool"


def ssh_factory(p: dict) -> tuple[str, Callable]:
    """The echo daemon's sinful address and a maker of fresh SshTransports to it, from the
    parameters :func:`run_client` passed (``host``, ``port``, ``key``)."""
    from htc.daemons.network import daemon_credentials
    from htc.wire.poolkey import read_pool_key
    from htc.wire.ssh_client import SshOptions, SshTransport
    from htc.wire.ssh_keys import pool_known_hosts

    key = read_pool_key(p["key"])

    def ssh() -> SshTransport:
        return SshTransport(daemon_credentials(key, DOMAIN), SshOptions(trusted=pool_known_hosts(key)))

    return f"<{p['host']}:{p['port']}?sock=echo>", ssh


async def bulk(conn, mib: int) -> float:
    """Send ``mib`` MiB as 1 MiB JobOutput frames with flow control, then learn from the echo
    daemon that it counted them all; the rate in MiB/s."""
    from htc.wire import messages as m

    chunk = os.urandom(1 << 20)
    t0 = time.perf_counter()
    for i in range(mib):
        await conn.send(m.JobOutput(claim_id="c", job_id="1.0", stream="stdout", offset=i << 20, data=chunk))
    ack = await conn.request(m.Reconfig(), timeout=600)
    elapsed = time.perf_counter() - t0
    assert int(ack.detail) == mib << 20, ack
    return mib / elapsed


def run_client(script: str, params: dict, *, tcp_port: int | None = None) -> dict | None:
    """Run ``script --client`` on host B against the shared port and echo daemon of host A (the
    echo daemon also on plain TCP at ``tcp_port`` when given); its figures, or None when it
    failed (its error output is printed). Needs root."""
    from ssh_netns import A_IP, NetnsPair
    from system.test_shared_port import ECHO, HostA

    pair = NetnsPair()
    a = HostA(pair, TRUST_DOMAIN=DOMAIN)
    try:
        a.start_shared_port()
        tcp = ["--tcp", f"{A_IP}:{tcp_port}"] if tcp_port else []
        echo = pair.spawn(pair.a, [sys.executable, ECHO, str(a.home / "sockets"), "echo", *tcp], env=a.env,
                          stdout=subprocess.PIPE, text=True)
        assert echo.stdout.readline().strip() == "ready"
        params = {"host": A_IP, "port": 9618, "key": str(a.key), **params}
        result = pair.run(pair.b, [sys.executable, script, "--client", json.dumps(params)], env=a.env,
                          timeout=3600)
        if result.returncode:
            print(result.stderr, file=sys.stderr)
            return None
        return json.loads(result.stdout.strip().splitlines()[-1])
    finally:
        pair.close()
        a.close()
