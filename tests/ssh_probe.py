"""The client side of the SSH transport's tests, run inside the client's network namespace.

``python ssh_probe.py '<json>'``: the JSON names a ``scenario`` and its parameters (``host``,
``port``, ``key`` = the pool key file, ``who`` = ``pool`` | ``alice`` | ``wrong`` | ``anon`` | ``sshkey``
(with ``identity`` and ``client_keys``),
``keepalive``, ``count_max``, ``connect_timeout``). Each scenario prints JSON lines on stdout; a
line ``{"wait": ...}`` means "tell me on stdin (any line) when to go on". Errors are printed as
``{"error": "<class>", "text": ..., "after": seconds}`` rather than raised, so the test reads
what happened.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time

import asyncssh

from htc.daemons.network import daemon_credentials
from htc.wire import messages as m
from htc.wire import tokens
from htc.wire.framing import frame
from htc.wire.peers import PeerConnections
from htc.wire.poolkey import read_pool_key
from htc.wire.ssh_client import SshOptions, SshTransport
from htc.wire.ssh_keys import pool_known_hosts


def say(**fields) -> None:
    print(json.dumps(fields), flush=True)


async def wait_go(what: str) -> None:
    say(wait=what)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


def transport(p: dict) -> SshTransport:
    key = read_pool_key(p["key"])
    who = p.get("who", "pool")
    if who == "pool":
        creds = daemon_credentials(key, p.get("domain", "testpool"))
    elif who == "alice":
        token = tokens.mint(key, "alice@testpool", issuer=p.get("domain", "testpool"), now=time.time())
        creds = lambda: ("alice@testpool", token)  # noqa: E731
    elif who == "wrong":
        token = tokens.mint(os.urandom(64), "mallory@testpool", issuer="testpool", now=time.time())
        creds = lambda: ("mallory@testpool", token)  # noqa: E731
    elif who == "sshkey":
        creds = lambda: (p["identity"], None)  # noqa: E731
    else:
        creds = lambda: None  # noqa: E731
    opts = SshOptions(keepalive_interval=p.get("keepalive", 15.0), keepalive_count_max=p.get("count_max", 3),
                      connect_timeout=p.get("connect_timeout", 20.0), trusted=pool_known_hosts(key),
                      client_keys=tuple(p.get("client_keys", ())))
    return SshTransport(creds, opts)


def addr(p: dict, name: str = "echo") -> str:
    return f"<{p['host']}:{p['port']}?sock={name}>"


async def ping(p: dict) -> None:
    tr = transport(p)
    try:
        async with await tr.open_connection(addr(p, p.get("name", "echo")), timeout=p.get("timeout", 30)) as conn:
            pong = await conn.request(m.Ping())
            ssh = tr.cached(p["host"], p["port"])
        say(pong=pong.daemon, cipher=ssh.get_extra_info("send_cipher"))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        say(error=type(exc).__name__, text=str(exc))
    await tr.aclose()


async def reuse(p: dict) -> None:
    tr = transport(p)
    peers = PeerConnections(tr)
    for _ in range(20):
        await peers.request(addr(p), m.Ping())
    await asyncio.gather(*(peers.request(addr(p), m.Ping()) for _ in range(6)))
    for _ in range(10):
        await peers.request(addr(p), m.Ping())
    say(connections=tr.connections_opened, channels=tr.channels_opened, peer_conns=peers.opened)
    await wait_go("restart the shared port")
    async with asyncio.timeout(30):  # the dead port's FIN may still be on its way when "go" comes
        while tr.connected(p["host"], p["port"]):
            await asyncio.sleep(0.01)
    start = time.monotonic()
    try:
        pong = await peers.request(addr(p), m.Ping(), timeout=30)
        say(pong=pong.daemon, after=time.monotonic() - start, connections=tr.connections_opened)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        say(error=type(exc).__name__, text=str(exc), after=time.monotonic() - start)
    await peers.aclose()
    await tr.aclose()


async def cut(p: dict) -> None:
    tr = transport(p)
    conn = await tr.open_connection(addr(p))
    await conn.request(m.Ping())
    await wait_go("cut the link")
    start = time.monotonic()
    try:
        await conn.request(m.Ping(), timeout=60)
        say(pong=True, after=time.monotonic() - start)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        say(error=type(exc).__name__, text=str(exc), after=time.monotonic() - start,
            connected=tr.connected(p["host"], p["port"]))
    await tr.aclose()


async def connect_timeout(p: dict) -> None:
    tr = transport(p)
    start = time.monotonic()
    try:
        await tr.open_connection(addr(p), timeout=60)
        say(connected=True)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        say(error=type(exc).__name__, text=str(exc), after=time.monotonic() - start)
    await tr.aclose()


def own_peak_rss_mib() -> float:
    """This process's own peak resident size: ``VmHWM``, the high-water mark of the memory map
    that ``execve`` gave it. Not ``getrusage().ru_maxrss``: at ``execve`` Linux folds into that the
    high-water mark of the memory map being replaced, which for a child spawned by ``subprocess``
    (vforked, or forked) is its parent's, so a probe spawned by a pytest-xdist worker deep into the
    suite reported the worker's 290 MiB however little it held itself."""
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return kib / 1024


async def bulk(p: dict) -> None:
    """Send ``mib`` 1 MiB ``JobOutput`` messages, then a ``Reconfig`` whose ``Ack`` counts the
    bytes the daemon took. Reports the rate, this process's own peak RSS and the most bytes ever
    queued in the client: in the channel's send buffer plus the SSH connection's socket transport
    (asyncssh hands a packet to that transport as soon as the channel window allows; the window is
    what bounds it), read at each write to the socket transport."""
    tr = transport(p)
    chunk = os.urandom(1024 * 1024)
    total = p.get("mib", 64)
    async with await tr.open_connection(addr(p)) as conn:
        channel = conn._writer._writer.channel  # the asyncssh SSHWriter's channel (htc.wire.ssh_client._Writer)
        socket_side = channel.get_connection()._transport  # asyncssh keeps the asyncio transport there
        queued = 0
        write = socket_side.write

        def counted_write(data) -> None:
            nonlocal queued
            write(data)
            queued = max(queued, channel.get_write_buffer_size() + socket_side.get_write_buffer_size())

        socket_side.write = counted_write
        start = time.monotonic()
        for i in range(total):
            await conn.send(m.JobOutput(claim_id="c", job_id="1.0", stream="stdout", offset=i * len(chunk),
                                        data=chunk))
        ack = await conn.request(m.Reconfig(), timeout=120)
        elapsed = time.monotonic() - start
    say(counted=int(ack.detail), mib_per_s=total / elapsed, peak_rss_mib=own_peak_rss_mib(),
        max_queued_mib=queued / 2 ** 20, ru_maxrss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    await tr.aclose()


async def garbage(p: dict) -> None:
    """Bad frames on an authenticated channel: each is refused and ends only that channel."""
    tr = transport(p)
    conn = await tr._connection((p["host"], p["port"]), None)
    results = {}
    cases = {"garbage": b"\x00\x00\x00\x05\xc1\xc1\xc1\xc1\xc1",
             "oversized": (2 ** 31).to_bytes(4, "big") + b"xxxx",
             "truncated": frame(m.encode(m.Ping()))[:-1] + b"",
             "not_a_message": frame(b"\x93\x01\x02\x03")}
    for name, data in cases.items():
        writer, reader, _ = await conn.open_session(subsystem="echo", encoding=None)
        writer.write(data)
        if name == "truncated":
            writer.write_eof()
        try:
            async with asyncio.timeout(20):
                reply = await reader.read()
        except (asyncssh.Error, TimeoutError) as exc:
            reply = repr(exc).encode()
        results[name] = reply[4:].decode("latin-1") if reply else ""
        writer.close()
    async with await tr.open_connection(addr(p)) as c2:
        results["after"] = (await c2.request(m.Ping())).daemon
    say(**results)
    await tr.aclose()


async def main() -> None:
    p = json.loads(sys.argv[1])
    await {"ping": ping, "reuse": reuse, "cut": cut, "connect_timeout": connect_timeout, "bulk": bulk,
           "garbage": garbage}[p["scenario"]](p)


if __name__ == "__main__":
    asyncio.run(main())
