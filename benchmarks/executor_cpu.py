"""CPU per executor call, process by process, on a personal pool.

Run: ``python benchmarks/executor_cpu.py`` (``--rtt N`` sequential calls, ``--burst N`` calls
submitted then collected; ``--profile DIR`` also records py-spy profiles of the schedd and the
startd during the burst, when py-spy is installed).

Wall-clock figures on a shared machine say more about the machine than about the code; CPU
per call does not. This script starts a personal pool of 2 cpus (as executor_bench.py's pool
column does), runs ``HTCExecutor()`` in this process, and reads the CPU time of every process
of the pool from ``/proc`` (through psutil) before and after each phase:

* **rtt**: N sequential ``submit(noop).result()`` (the round trip's cost);
* **burst**: N no-op calls submitted in a loop, then all collected.

It prints, for each phase, milliseconds of CPU per call in the client (this process, all its
threads), the master, collector, negotiator, schedd, startd, the starters and the lane workers
(every other process under the master, grouped by what they run), with the load average
beside them: the figures to compare before and after a change to the per-call path.

Figures, 2026-11-28 08:20, the VM shared by seven other runs (load average 12-14), the code
before (int at 9340cc3) and after this script's first changes, run one after the other: the
schedd 9.15 -> 6.40 ms of CPU per sequential call and 1.53 -> 1.24 ms per call of the burst;
the client 2.45 -> 2.10 and 0.59 -> 0.56, the startd 1.80 -> 1.40 and 0.17 -> 0.13, the lane
workers 1.00 -> 0.85 and 0.32 -> 0.28 (the code of the last three did not change: that is
the load's noise, about 20 %; compare the schedd's share of the total, 64 % -> 59 %).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def noop(x):
    return x


def _role(proc: psutil.Process) -> str:
    """What a process of the pool is, from its command line."""
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return "gone"
    if "htc.daemons" in cmd:
        i = cmd.index("htc.daemons")
        return cmd[i + 1] if i + 1 < len(cmd) else "daemon"
    text = " ".join(cmd)
    if "lane" in text or "worker" in text:
        return "lane workers"
    return "other: " + os.path.basename(cmd[0]) if cmd else "other"


def _cpu(proc: psutil.Process) -> tuple[float, float]:
    times = proc.cpu_times()
    return times.user, times.system


def snapshot(master_pid: int) -> dict[int, tuple[str, tuple[float, float]]]:
    """CPU seconds (user, system) so far of the master and every process under it, keyed by pid."""
    out = {}
    try:
        master = psutil.Process(master_pid)
        procs = [master] + master.children(recursive=True)
    except psutil.Error:
        return out
    for proc in procs:
        try:
            out[proc.pid] = (_role(proc), _cpu(proc))
        except psutil.Error:
            continue  # ended between the listing and the read: its CPU is not counted
    return out


def diff(before: dict, after: dict) -> dict[str, tuple[float, float]]:
    """CPU seconds (user, system) spent between two snapshots, by role (processes that ended
    are lost)."""
    by_role: dict[str, tuple[float, float]] = {}
    for pid, (role, (user, system)) in after.items():
        user0, system0 = before.get(pid, (role, (0.0, 0.0)))[1]
        u, s = by_role.get(role, (0.0, 0.0))
        by_role[role] = (u + user - user0, s + system - system0)
    return by_role


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _phase(name: str, master_pid: int, n: float, body, unit: str = "call") -> dict[str, tuple[float, float]]:
    before = snapshot(master_pid)
    client0 = os.times()
    wall0 = time.perf_counter()
    body()
    wall = time.perf_counter() - wall0
    client1 = os.times()
    spent = diff(before, snapshot(master_pid))
    spent["client"] = (client1.user - client0.user, client1.system - client0.system)
    total = sum(u + s for u, s in spent.values())
    if unit == "call":
        print(f"{name}: {n} calls in {wall:.2f} s wall ({n / wall:,.0f} calls/s), load {_load()}")
    else:
        print(f"{name}: {wall:.2f} s wall, load {_load()}")
    order = ["client", "schedd", "startd", "lane workers", "collector", "negotiator", "master", "starter"]
    roles = order + sorted(r for r in spent if r not in order)
    for role in roles:
        if role in spent:
            user, system = spent[role]
            print(f"  {role:<14}{(user + system) * 1000 / n:8.3f} ms CPU/{unit}  (user {user * 1000 / n:.3f}, "
                  f"system {system * 1000 / n:.3f})")
    print(f"  {'total':<14}{total * 1000 / n:8.3f} ms CPU/{unit}")
    return spent


def _py_spy(pid: int, out: Path, seconds: int) -> subprocess.Popen | None:
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        print("py-spy not installed (pip install py-spy): no profiles")
        return None
    return subprocess.Popen([exe, "record", "-p", str(pid), "-d", str(seconds), "-r", "200", "-f", "raw",
                             "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt", type=int, default=300, help="sequential calls")
    parser.add_argument("--burst", type=int, default=3000, help="calls of the burst")
    parser.add_argument("--idle", type=float, default=3.0, help="seconds of no calls, for the pool's idle CPU")
    parser.add_argument("--profile", help="directory for py-spy profiles of the schedd and startd (burst)")
    parser.add_argument("--profile-rtt", action="store_true", help="profile the sequential calls instead")
    args = parser.parse_args(argv)

    from executor_bench import _personal_pool, _stop_pool

    with tempfile.TemporaryDirectory(prefix="htc-exec-cpu-") as tmp:
        env, extra = _personal_pool(Path(tmp))
        try:
            os.environ.clear()
            os.environ.update(env)
            from htc.client.pool import pool_status
            from htc.executors import HTCExecutor

            status = pool_status()
            pids = {d.name.lower(): d.pid for d in status.daemons}
            ex = HTCExecutor(progress=False, **extra)
            for i in range(30):  # warm up: lanes up, imports done
                ex.submit(noop, i).result()
            [f.result() for f in [ex.submit(noop, i) for i in range(200)]]

            def rtt():
                for i in range(args.rtt):
                    ex.submit(noop, i).result()

            def burst():
                futures = [ex.submit(noop, i) for i in range(args.burst)]
                for f in futures:
                    f.result()

            spies = []
            if args.profile:
                Path(args.profile).mkdir(parents=True, exist_ok=True)
                for role in ("schedd", "startd"):
                    spy = _py_spy(pids[role], Path(args.profile) / f"{role}.txt", 120)
                    if spy:
                        spies.append(spy)
                if spies:
                    time.sleep(1.0)  # py-spy attaches
            if not args.profile and args.idle > 0:
                _phase("idle", status.master_pid, args.idle, lambda: time.sleep(args.idle), unit="s")
            if args.profile_rtt or not args.profile:
                _phase("rtt", status.master_pid, args.rtt, rtt)
            if not args.profile_rtt:
                _phase("burst", status.master_pid, args.burst, burst)
            for spy in spies:
                spy.send_signal(signal.SIGINT)
                spy.wait()
            ex.shutdown(wait=True)
        finally:
            _stop_pool(env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
