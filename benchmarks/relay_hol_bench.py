"""Benchmark: a small request's round trip across hosts while a bulk stream goes to the same host.

A standard-universe job on another host forwards its file calls over one channel to the schedd
(RelayJobIO) while its starter streams checkpoint images (tens of MiB) over another. An SSH
connection is one TCP byte stream, so on one connection a relayed call waits behind whatever
image data was sent before it (up to a channel window, 8 MiB, plus the socket's buffer);
:class:`htc.wire.ssh_client.SshTransport` therefore opens bulk conversations
(``open_bulk_connection``: file transfers, checkpoint images) on a second SSH connection to the
host. This measures the head-of-line wait.

Host A runs the real shared port and the stand-in daemon of tests/ssh_echo_daemon.py; host B (this
script with ``--client``) measures the Ping round trip (median, p99) on one channel:

* idle: nothing else goes to the host;
* bulk, same connection: while ``--mib`` MiB of 1 MiB frames go out on a second channel of the
  same SSH connection (``open_connection``: what a starter did before the bulk lane);
* bulk lane: while they go out on ``open_bulk_connection`` of the same SshTransport (what a
  starter does now: its own SSH connection, reused).

Prints the round trips (median, p99 and mean: a ping that waits long is one sample however
long it waits, so the mean, not the median, says how long the calls of a job waited in all),
the bulk rate, the client's CPU and the load average. Needs root. Usage::

    sudo python benchmarks/relay_hol_bench.py [--mib 128] [--pings 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

from echo_pair import bulk, run_client, ssh_factory


async def client(p: dict) -> dict:
    from htc.wire import messages as m

    sinful, ssh = ssh_factory(p)

    async def pings(conn, stop: asyncio.Event | None) -> list[float]:
        times: list[float] = []
        while len(times) < p["pings"] if stop is None else not stop.is_set():
            t0 = time.perf_counter()
            await conn.request(m.Ping())
            times.append(time.perf_counter() - t0)
            await asyncio.sleep(0.002)  # a job computing between its calls
        return times

    async def stream(conn, stop: asyncio.Event) -> float:
        try:
            return await bulk(conn, p["mib"])
        finally:
            stop.set()

    def figures(times: list[float]) -> list[float]:
        times = sorted(times)
        return [statistics.median(times) * 1e3, times[int(len(times) * 0.99)] * 1e3, statistics.fmean(times) * 1e3,
                len(times)]

    out: dict = {}
    calls = ssh()
    async with await calls.open_connection(sinful) as conn:
        await pings(conn, None)  # (warm up)
        out["idle"] = figures(await pings(conn, None))
        for case, opener in (("same", calls.open_connection), ("lane", calls.open_bulk_connection)):
            async with await opener(sinful) as channel:
                stop = asyncio.Event()
                cpu = time.process_time()
                rate, times = await asyncio.gather(stream(channel, stop), pings(conn, stop))
                out[case] = figures(times) + [rate, time.process_time() - cpu]
        out["connections"] = calls.connections_opened
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

    load = os.getloadavg()[0]
    r = run_client(__file__, {"mib": args.mib, "pings": args.pings})
    if r is None:
        return 1
    print(f"Ping round trip across two network namespaces while {args.mib} MiB stream on another channel "
          f"(load average {load:.1f} before, {os.getloadavg()[0]:.1f} after; {os.cpu_count()} CPUs)")
    print(f"{'':30}{'median ms':>10}{'p99 ms':>10}{'mean ms':>10}{'pings':>8}{'bulk MiB/s':>12}{'client CPU s':>14}")
    print(f"{'idle':30}{r['idle'][0]:10.2f}{r['idle'][1]:10.2f}{r['idle'][2]:10.2f}{r['idle'][3]:8d}")
    for case, label in (("same", "bulk on the same connection"), ("lane", "bulk lane (own connection)")):
        med, p99, mean, n, rate, cpu = r[case]
        print(f"{label:30}{med:10.2f}{p99:10.2f}{mean:10.2f}{int(n):8d}{rate:12.1f}{cpu:14.2f}")
    print(f"SSH connections opened by the client: {r['connections']} (one per lane, reused)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
