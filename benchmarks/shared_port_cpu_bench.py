"""CPU per small round trip through the shared port: the client's and the shared port's, user and system.

Run (root): ``python benchmarks/shared_port_cpu_bench.py [--pings 3000]``. Two network
namespaces as in ``ssh_bench.py`` (echo_pair.py): host A runs the real shared port and the echo
daemon, host B a client that sends ``Ping`` over one open SSH channel and waits for each
``Pong``. The client reports its own ``time.process_time()``; the shared port's user and system
CPU are read from ``/proc/<pid>/stat`` (with its children) around the same pings. Each round trip
is two relayed messages, the smallest unit of an executor call's traffic (a sequential remote
call is one request, its reply and one push of news). CPU per operation is much steadier than
wall-clock on a shared machine; the load average is printed beside the figures.

Figures (2026-11-28 13:37-13:46, 2-core VM shared with four other helpers, load 5.7-7.1;
``--pings 3000``, alternating runs), CPU ms per round trip, before and after the SSH connections
stopped sending asyncssh's empty ``SSH_MSG_IGNORE`` before each packet (htc/wire/ssh_tuning.py):

=============  =============  =============
               before         after
=============  =============  =============
shared port    0.27 (user)    0.19 (user)
client         0.35-0.39      0.27-0.29
=============  =============  =============
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from echo_pair import DOMAIN, ssh_factory

_TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of ``pid`` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    user = system = 0.0
    todo = [pid]
    while todo:
        one = todo.pop()
        todo += children.get(one, [])
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user += int(fields[11]) / _TICK
        system += int(fields[12]) / _TICK
    return user, system


async def _client(p: dict) -> None:
    """On host B: warm up, then ``pings`` round trips when the parent says so."""
    from htc.wire import messages as m

    sinful, ssh = ssh_factory(p)
    transport = ssh()
    conn = await transport.open_connection(sinful)
    for _ in range(100):
        await conn.request(m.Ping())
    print("ready", flush=True)
    sys.stdin.readline()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(p["pings"]):
        await conn.request(m.Ping())
    print(json.dumps({"client_ms": (time.process_time() - cpu) / p["pings"] * 1e3,
                      "rtt_ms": (time.perf_counter() - wall) / p["pings"] * 1e3}), flush=True)
    sys.stdin.readline()
    await conn.aclose()
    await transport.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pings", type=int, default=3000)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        asyncio.run(_client(json.loads(args.client)))
        return 0
    from ssh_netns import A_IP, NetnsPair
    from system.test_shared_port import ECHO, HostA

    pair = NetnsPair()
    host = HostA(pair, TRUST_DOMAIN=DOMAIN)
    try:
        host.start_shared_port()
        echo = pair.spawn(pair.a, [sys.executable, ECHO, str(host.home / "sockets"), "echo"], env=host.env,
                          stdout=subprocess.PIPE, text=True)
        assert echo.stdout.readline().strip() == "ready"
        params = {"host": A_IP, "port": 9618, "key": str(host.key), "pings": args.pings}
        client = pair.spawn(pair.b, [sys.executable, __file__, "--client", json.dumps(params)], env=host.env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if client.stdout.readline().strip() != "ready":
            raise SystemExit("the client on host B did not start")
        load = os.getloadavg()[0]
        before = _tree_cpu(host.shared_port.pid)
        client.stdin.write("\n")
        client.stdin.flush()
        figures = json.loads(client.stdout.readline())
        after = _tree_cpu(host.shared_port.pid)
        client.stdin.write("\n")
        client.stdin.flush()
        client.wait(60)
        n = args.pings
        print(f"{n} Ping round trips through the shared port (load average {load:.1f} at the start, "
              f"{os.getloadavg()[0]:.1f} at the end)")
        print(f"  round trip          {figures['rtt_ms']:.3f} ms (wall-clock, the machine's)")
        print(f"  client CPU          {figures['client_ms']:.3f} ms")
        print(f"  shared port CPU     {(after[0] - before[0]) / n * 1e3:.3f} ms user, "
              f"{(after[1] - before[1]) / n * 1e3:.3f} ms system")
    finally:
        pair.close()
        host.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
