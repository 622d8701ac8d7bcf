"""Benchmark: a small request's round trip across hosts while a bulk stream shares the SSH connection.

A standard-universe job on another host forwards its file calls over one channel to the schedd
(RelayJobIO) while its starter streams checkpoint images (tens of MiB) over another channel --
of the same SSH connection: :class:`htc.wire.ssh_client.SshTransport` keeps one per host:port.
The SSH stream is one TCP byte stream, so a relayed call waits behind whatever image data was
sent before it (up to a channel window, 8 MiB). This measures that head-of-line wait.

Host A runs the real shared port and the stand-in daemon of tests/ssh_echo_daemon.py; host B (this
script with ``--client``) measures the Ping round trip (median, p99) on one channel:

* idle: nothing else on the connection;
* bulk, same connection: while ``--mib`` MiB of 1 MiB frames go out on a second channel of the
  same SshTransport (what a starter does today);
* bulk, own connection: while they go out over a second SshTransport (its own SSH connection).

Prints the round trips, the bulk rate and the load average. Needs root. Usage::

    sudo python benchmarks/relay_hol_bench.py [--mib 128] [--pings 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


async def client(p: dict) -> dict:
    from htc.daemons.network import daemon_credentials
    from htc.wire import messages as m
    from htc.wire.poolkey import read_pool_key
    from htc.wire.ssh_client import SshOptions, SshTransport
    from htc.wire.ssh_keys import pool_known_hosts

    key = read_pool_key(p["key"])
    sinful = f"<{p['host']}:{p['port']}?sock=echo>"

    def ssh() -> SshTransport:
        return SshTransport(daemon_credentials(key, "benchpool"), SshOptions(trusted=pool_known_hosts(key)))

    async def pings(conn, stop: asyncio.Event | None) -> list[float]:
        times: list[float] = []
        while len(times) < p["pings"] if stop is None else not stop.is_set():
            t0 = time.perf_counter()
            await conn.request(m.Ping())
            times.append(time.perf_counter() - t0)
            await asyncio.sleep(0.002)  # a job computing between its calls
        return times

    async def bulk(conn, stop: asyncio.Event) -> float:
        chunk = os.urandom(1 << 20)
        t0 = time.perf_counter()
        for i in range(p["mib"]):
            await conn.send(m.JobOutput(claim_id="c", job_id="1.0", stream="stdout", offset=i << 20, data=chunk))
        await conn.request(m.Reconfig(), timeout=600)
        stop.set()
        return p["mib"] / (time.perf_counter() - t0)

    def figures(times: list[float]) -> list[float]:
        times = sorted(times)
        return [statistics.median(times) * 1e3, times[int(len(times) * 0.99)] * 1e3, len(times)]

    out: dict = {}
    calls = ssh()
    async with await calls.open_connection(sinful) as conn:
        await pings(conn, None)  # (warm up)
        out["idle"] = figures(await pings(conn, None))
        for case in ("same", "own"):
            transport = calls if case == "same" else ssh()
            async with await transport.open_connection(sinful) as stream:
                stop = asyncio.Event()
                cpu = time.process_time()
                rate, times = await asyncio.gather(bulk(stream, stop), pings(conn, stop))
                out[case] = figures(times) + [rate, time.process_time() - cpu]
            if transport is not calls:
                await transport.aclose()
    await calls.aclose()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=128, help="bulk size in MiB (default 128)")
    parser.add_argument("--pings", type=int, default=300, help="idle round trips measured (default 300)")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        print(json.dumps(asyncio.run(client(json.loads(args.client)))))
        return 0

    from ssh_netns import A_IP, NetnsPair
    from system.test_shared_port import ECHO, HostA

    pair = NetnsPair()
    a = HostA(pair, TRUST_DOMAIN="benchpool")
    try:
        a.start_shared_port()
        echo = pair.spawn(pair.a, [sys.executable, ECHO, str(a.home / "sockets"), "echo"], env=a.env,
                          stdout=subprocess.PIPE, text=True)
        assert echo.stdout.readline().strip() == "ready"
        params = {"host": A_IP, "port": 9618, "key": str(a.key), "mib": args.mib, "pings": args.pings}
        result = pair.run(pair.b, [sys.executable, __file__, "--client", json.dumps(params)], env=a.env,
                          timeout=3600)
        if result.returncode:
            print(result.stderr, file=sys.stderr)
            return 1
        r = json.loads(result.stdout.strip().splitlines()[-1])
    finally:
        pair.close()
        a.close()
    print(f"Ping round trip across two network namespaces while {args.mib} MiB stream on another channel "
          f"(load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs)")
    print(f"{'':30}{'median ms':>10}{'p99 ms':>10}{'pings':>8}{'bulk MiB/s':>12}{'client CPU s':>14}")
    print(f"{'idle':30}{r['idle'][0]:10.2f}{r['idle'][1]:10.2f}{r['idle'][2]:8d}")
    for case, label in (("same", "bulk on the same connection"), ("own", "bulk on its own connection")):
        med, p99, n, rate, cpu = r[case]
        print(f"{label:30}{med:10.2f}{p99:10.2f}{int(n):8d}{rate:12.1f}{cpu:14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
