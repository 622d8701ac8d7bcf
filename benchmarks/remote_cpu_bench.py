"""CPU per executor call, by process, for a client on the pool host and for one on another host.

Run (root): ``python benchmarks/remote_cpu_bench.py`` (``--calls 200 --burst 1000``). Two
simulated hosts (tests/netns_hosts.py) as in ``executor_bench.py --pool host``: a pool on
``cm`` and a client on ``laptop`` holding only a token (``HTCExecutor(pool="cm")``, calls,
results and events over SSH), and the same client on ``cm`` itself for comparison.

Wall-clock figures on a loaded machine are the machine's, not the code's; CPU time per call is
much steadier. The client reports its own ``time.process_time()`` for each phase; the pool
host's processes (found under the host's PID namespace, read from ``/proc/<pid>/stat`` before
and after each phase) are summed by kind: ``schedd``, ``shared_port``, ``startd`` (with its
starters and lane workers), and ``other`` (master, collector, negotiator). Phases:

* **seq**: ``--calls`` sequential ``submit(noop).result()`` (the round trip);
* **burst**: ``--burst`` no-op calls submitted in a loop, then all collected.

Each figure is milliseconds of CPU per call, with the wall-clock median round trip and the
burst's calls/s beside them, and the load average at the start and the end. ``--py-spy DIR``
also records the client, the schedd and the shared port during each phase (raw flame graphs).

Figures (2026-11-28 08:05-08:15, the 2-core VM shared with six other runs, load average 12-14;
``--calls 100 --burst 500 --only remote``, two alternating runs each), the remote client's
calls before and after a batch became one ``SubmitCalls`` and a short call's news one push:

=================  =========  ==========  ===========  ========  ==========
CPU ms per call    client     schedd      shared port  startd    all
=================  =========  ==========  ===========  ========  ==========
sequential before  7.6-8.0    14.9-16.9   3.2-3.3      2.7       32.4-33.6
sequential after   4.0-5.9    9.5-14.3    1.3-1.9      2.2-3.0   19.1-27.6
burst before       0.60-0.67  2.22-2.26   0.04         0.52-0.58 3.74-3.77
burst after        0.44-0.51  1.54-1.88   0.04         0.42-0.52 2.68-3.15
=================  =========  ==========  ===========  ========  ==========

The same client on the pool host (07:38, load 9): sequential 2.5 ms client, 9.1 schedd; burst
0.35 and 1.02. (The sequential figures carry the daemons' periodic work over the calls' wall
time, which the load stretches.)

Where a remote call's round trip goes (2026-11-28 10:24, load average 6; timestamps written
along the path by a temporary probe, 35 sequential no-op calls, medians in ms): the client's
submit to the schedd's receipt (caller -> executor thread -> I/O loop thread -> SSH -> shared
port -> schedd) 4.1; the pickle written as the owner, the cluster queued and the lane fed 3.5;
the lane (startd, worker, CallsDone) 12.5; the end committed and its result and event written
4.5; inotify 0.2; the news planned (log and result read as the owner) 0.5; schedd -> shared
port -> SSH -> the client's I/O loop 2.2; the mirror written 0.3; the executor thread woken by
the mirror's log 1.4; the future to the caller 0.3 (total 36.4). The same client on the pool
host, at load 5-8: submit to the lane fed 5.8, lane 21.9, end written 8.2, the executor thread
woken 1.6, the caller 0.3 (39.4). So the remote legs cost the two relays through the shared
port and the I/O loop thread each way (about 2 ms each at that load) plus the session's own
work; the lane and the schedd's commit are the same. Since then the session's news sends a
lane call's outputs from what the schedd's flush wrote (no second read as the owner) and an
ending event wakes it directly: ``benchmarks/session_news_bench.py`` measures that step's CPU
(0.45-0.50 ms a call before, 0.20-0.25 after, load 11).

The client's CPU by thread (the last lines of the output) shows where a sequential remote call's
client time goes: its I/O loop (``htc-pool``), the executor's service thread, the caller. Five
alternating runs (2026-11-28 13:48-14:16, load 5-11, ``--only remote``; int = main b43041f,
then the SSH connections without asyncssh's ignore packets, requests as plain callbacks and the
session's messages pushed, htc/wire/ssh_tuning.py and ssh_push.py), CPU ms per sequential call:
I/O loop thread 1.30-1.95 before, 1.05-1.65 after (each pair 10-33 % lower); whole client
2.34-3.71 before, 2.19-3.18 after; shared port 0.95-1.40 before, 0.95-1.15 after; per burst
call, client 0.32-0.58 before, 0.29-0.48 after. At that load the run-to-run spread (the same
local client code: 1.34 and 1.72) is as large as the change; ``shared_port_cpu_bench.py``
measures the relay alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_TICK = os.sysconf("SC_CLK_TCK")


def noop(x):
    return x


def _child(extra: dict, calls: int, burst: int) -> None:
    """Runs on a host: the executor's phases, paced by the parent over stdin/stdout."""
    import concurrent.futures as cf

    from htc.executors import HTCExecutor

    ex = HTCExecutor(progress=False, **extra)
    for i in range(20):  # warm: lanes claimed, connections open
        ex.submit(noop, i).result()

    def phase(name: str, work) -> None:
        print(json.dumps({"phase": name, "state": "ready"}), flush=True)
        sys.stdin.readline()
        threads = _thread_cpu()
        cpu, wall = time.process_time(), time.perf_counter()
        figure = work()
        out = {"phase": name, "state": "done", "client_cpu": time.process_time() - cpu,
               "wall": time.perf_counter() - wall, **figure,
               "threads": {k: v - threads.get(k, 0.0) for k, v in _thread_cpu().items()}}
        print(json.dumps(out), flush=True)
        sys.stdin.readline()

    def seq():
        samples = []
        for i in range(calls):
            t = time.perf_counter()
            ex.submit(noop, i).result()
            samples.append(time.perf_counter() - t)
        return {"rtt_ms": statistics.median(samples) * 1000}

    def many():
        t = time.perf_counter()
        futures = [ex.submit(noop, i) for i in range(burst)]
        cf.wait(futures)
        return {"per_s": burst / (time.perf_counter() - t)}

    phase("seq", seq)
    phase("burst", many)
    ex.shutdown(wait=True)


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process so far, by Python thread name (the main thread,
    the executor's service thread, its I/O loop, ...), from ``/proc/self/task/<tid>/stat``."""
    import threading

    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = names.get(int(tid), "other")
        name = name.split("-")[0] + "-" + name.split("-")[1] if name.count("-") > 1 else name
        out[name] = out.get(name, 0.0) + sum(int(f) for f in fields[11:13]) / _TICK
    return out


def _descendants(anchor: int) -> list[int]:
    """Every process under ``anchor`` (the host's PID 1, seen from this namespace)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [anchor]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _kind(pid: int) -> str:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    text = b" ".join(args).decode(errors="replace")
    for name in ("schedd", "shared_port", "startd", "starter"):
        if f"htc.daemons {name}" in text:
            return "startd" if name == "starter" else name
    if "htc.daemons" in text:
        return "other"
    if "htc.executors" in text or "lane" in text or "worker" in text:
        return "startd"
    return "client" if "remote_cpu_bench" in text and not text.startswith("nsenter") else "other"


def _cpu(anchor: int) -> dict[str, float]:
    """CPU seconds so far of the host's processes, by kind (exited children count in their
    parent's cumulative fields)."""
    out: dict[str, float] = {}
    for pid in _descendants(anchor):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        kind = _kind(pid)
        out[kind] = out.get(kind, 0.0) + ticks / _TICK
    return out


def _spy(pids: dict[str, int], phase: str, where: Path | None) -> list:
    """``py-spy record`` of each process for one phase (``--py-spy DIR``: flame graphs there)."""
    import subprocess

    if where is None:
        return []
    spy = Path(sys.executable).with_name("py-spy")
    return [subprocess.Popen([str(spy), "record", "-p", str(pid), "-r", "200", "-f", "raw", "-o",
                              str(where / f"{phase}-{name}.txt")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
            for name, pid in pids.items()]


def _drive(host, pool_host, extra: dict, calls: int, burst: int, spy_dir: Path | None = None,
           label: str = "") -> dict:
    """Run the child on ``host`` and measure ``pool_host``'s processes around each phase."""
    import signal
    import subprocess

    cmd = [sys.executable, __file__, "--child", json.dumps(extra), "--calls", str(calls), "--burst", str(burst)]
    proc = host.popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    figures = {}
    try:
        for line in proc.stdout:
            msg = json.loads(line)
            if msg["state"] == "ready":
                before = _cpu(pool_host.pid)
                pids = {"client": next(p for p in _descendants(proc.pid) if _kind(p) == "client")}
                pids.update({k: p for p in _descendants(pool_host.pid) if (k := _kind(p)) in ("schedd", "shared_port")})
                spies = _spy(pids, f"{label}-{msg['phase']}", spy_dir)
            else:
                for spy in spies:
                    spy.send_signal(signal.SIGINT)
                    spy.wait(timeout=60)
                after = _cpu(pool_host.pid)
                n = calls if msg["phase"] == "seq" else burst
                per = {k: (after.get(k, 0.0) - before.get(k, 0.0)) * 1000 / n for k in after}
                per.pop("client", None)
                per["client"] = msg["client_cpu"] * 1000 / n
                msg["threads"] = {k: v * 1000 / n for k, v in msg["threads"].items()}
                figures[msg["phase"]] = {"cpu_ms": per, **{k: v for k, v in msg.items() if k not in ("phase",
                                                                                                        "state")}}
            proc.stdin.write("\n")
            proc.stdin.flush()
        if proc.wait(timeout=600):
            raise SystemExit(f"the client on {host.name} failed:\n{proc.stderr.read()[-3000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--only", default="local,remote", help="local, remote or both")
    parser.add_argument("--py-spy", type=Path, help="record the client, schedd and shared port with py-spy "
                        "(pip install py-spy) into this directory, one raw flame graph per phase")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(json.loads(args.child), args.calls, args.burst)
        return 0
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from executor_bench import two_host_pool

    load_before = os.getloadavg()
    results = {}
    with two_host_pool("htc-cpu-bench-py-") as (cm, laptop, extra):
        kinds = [k.strip() for k in args.only.split(",")]
        for kind, host, more in (("local", cm, {}), ("remote", laptop, {"pool": "cm", "schedd": cm.fqdn})):
            if kind in kinds:
                results[kind] = _drive(host, cm, {**extra, **more}, args.calls, args.burst, args.py_spy, kind)
    load_after = os.getloadavg()
    columns = ("client", "schedd", "shared_port", "startd", "other")
    print(f"CPU ms per call (load average {load_before[0]:.1f} at the start, {load_after[0]:.1f} at the end)")
    print(f"{'':16}" + "".join(f"{c:>12}" for c in (*columns, "total")) + f"{'wall':>14}")
    threads: list[str] = []
    for kind, phases in results.items():
        for phase, fig in phases.items():
            cpu = fig["cpu_ms"]
            wall = f"{fig['rtt_ms']:.2f} ms" if phase == "seq" else f"{fig['per_s']:.0f}/s"
            print(f"{kind + ' ' + phase:16}" + "".join(f"{cpu.get(c, 0.0):12.3f}" for c in columns)
                  + f"{sum(cpu.get(c, 0.0) for c in columns):12.3f}{wall:>14}")
            threads.append(f"  {kind + ' ' + phase:16}" + ", ".join(
                f"{name} {ms:.2f}" for name, ms in sorted(fig["threads"].items(), key=lambda kv: -kv[1]) if ms > 0))
    print("the client's CPU ms per call by thread:")
    print("\n".join(threads))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
