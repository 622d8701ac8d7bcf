"""Benchmark: the SSH transport between two network namespaces, against plain TCP on the same veth.

Host A runs the real shared_port daemon and a stand-in daemon (tests/ssh_echo_daemon.py) that
also listens on plain TCP; the client runs in host B (this script with ``--client``). Each figure
is measured over the full htc path -- frames and messages, SshTransport, the shared port, the
daemon's Unix socket -- and over plain TCP with the same frames and messages:

* round trip: Ping -> Pong over an open connection (median and p99 of ``--rtt`` requests);
* connection setup: a new connection (SSH: TCP + key exchange + token login + channel) and its
  first request (median of ``--setups``);
* bulk: ``--mib`` MiB as 1 MiB frames sent with ``drain()``, then one request to learn they were
  all counted (MiB/s).

Then, in the same run, the executor across hosts (``executor_bench.py --pool host``): a pool
on one simulated host used with ``HTCExecutor(pool="cm")`` from another holding only a token,
next to the same pool used from its own host -- round trip and calls/s (``--no-executor``
skips it; ``--executor-full`` measures as many calls as executor_bench.py without ``--quick``).

Goals (issue #18): bulk at least half of TCP; small round trip under 1 ms; the executor across
hosts under 10 ms round trip and at least 1,000 calls/s. Needs root.
Usage::

    sudo python benchmarks/ssh_bench.py [--mib 1024] [--rtt 2000] [--setups 20] [--no-executor]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

from echo_pair import ROOT, bulk, run_client, ssh_factory

TCP_PORT = 9700


async def client(p: dict) -> dict:
    from htc.wire import messages as m
    from htc.wire.transport import Connection

    sinful, ssh = ssh_factory(p)

    async def tcp_open() -> Connection:
        reader, writer = await asyncio.open_connection(p["host"], TCP_PORT, limit=2 ** 20)
        return Connection(reader, writer, label="tcp")

    async def rtt(conn) -> tuple[float, float]:
        for _ in range(50):
            await conn.request(m.Ping())
        times = []
        for _ in range(p["rtt"]):
            t0 = time.perf_counter()
            await conn.request(m.Ping())
            times.append(time.perf_counter() - t0)
        times.sort()
        return statistics.median(times) * 1e3, times[int(len(times) * 0.99)] * 1e3

    out: dict = {}
    tr = ssh()
    async with await tr.open_connection(sinful) as conn:
        out["ssh_rtt"] = await rtt(conn)
    async with await tcp_open() as conn:
        out["tcp_rtt"] = await rtt(conn)
    await tr.aclose()

    setups = {"ssh": [], "tcp": []}
    for _ in range(p["setups"]):
        t0 = time.perf_counter()
        tr = ssh()
        async with await tr.open_connection(sinful) as conn:
            await conn.request(m.Ping())
        setups["ssh"].append(time.perf_counter() - t0)
        await tr.aclose()
        t0 = time.perf_counter()
        async with await tcp_open() as conn:
            await conn.request(m.Ping())
        setups["tcp"].append(time.perf_counter() - t0)
    out["ssh_setup"] = statistics.median(setups["ssh"]) * 1e3
    out["tcp_setup"] = statistics.median(setups["tcp"]) * 1e3

    tr = ssh()
    async with await tr.open_connection(sinful) as conn:
        out["ssh_bulk"] = await bulk(conn, p["mib"])
    await tr.aclose()
    async with await tcp_open() as conn:
        out["tcp_bulk"] = await bulk(conn, p["mib"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="bulk size in MiB (default 1024)")
    parser.add_argument("--rtt", type=int, default=2000, help="round trips measured (default 2000)")
    parser.add_argument("--setups", type=int, default=20, help="connections set up (default 20)")
    parser.add_argument("--no-executor", action="store_true", help="skip the executor across hosts")
    parser.add_argument("--executor-full", action="store_true", help="the executor with 5,000-call bursts")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        print(json.dumps(asyncio.run(client(json.loads(args.client)))))
        return 0

    r = run_client(__file__, {"mib": args.mib, "rtt": args.rtt, "setups": args.setups}, tcp_port=TCP_PORT)
    if r is None:
        return 1
    print(f"SSH transport vs plain TCP between two network namespaces (veth), {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'':28}{'ssh':>12}{'tcp':>12}{'ssh/tcp':>10}")
    print(f"{'round trip median (ms)':28}{r['ssh_rtt'][0]:12.3f}{r['tcp_rtt'][0]:12.3f}"
          f"{r['ssh_rtt'][0] / r['tcp_rtt'][0]:10.2f}")
    print(f"{'round trip p99 (ms)':28}{r['ssh_rtt'][1]:12.3f}{r['tcp_rtt'][1]:12.3f}"
          f"{r['ssh_rtt'][1] / r['tcp_rtt'][1]:10.2f}")
    print(f"{'connection setup (ms)':28}{r['ssh_setup']:12.2f}{r['tcp_setup']:12.2f}"
          f"{r['ssh_setup'] / r['tcp_setup']:10.1f}")
    print(f"{f'bulk {args.mib} MiB (MiB/s)':28}{r['ssh_bulk']:12.1f}{r['tcp_bulk']:12.1f}"
          f"{r['ssh_bulk'] / r['tcp_bulk']:10.2f}")
    print(f"goals: bulk >= 0.5 x tcp: {'met' if r['ssh_bulk'] >= 0.5 * r['tcp_bulk'] else 'NOT met'}; "
          f"round trip < 1 ms: {'met' if r['ssh_rtt'][0] < 1 else 'NOT met'}")
    if not args.no_executor:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import executor_bench

        print()
        executor_bench.print_across_hosts(*executor_bench.across_hosts(quick=not args.executor_full))
    return 0


if __name__ == "__main__":
    sys.exit(main())
