"""Personal-pool benchmarks: submit-to-start latency, job throughput, an idle pool's CPU.

Run: ``python benchmarks/pool_bench.py`` (about three minutes on a 2-core machine; ``--jobs``,
``--latency-jobs`` and ``--idle-seconds`` shorten it). It starts a real personal pool --
``htc pool start`` in a temporary HTC_HOME: master, collector, negotiator, startd, schedd --
submits through the job tools' library (``htc.client.submit``, what ``htc submit``
calls), follows the user log with htc's reader, and prints three figures against their goals:

1. **submit-to-start latency** on an idle pool, median and p95 over ``--latency-jobs`` (30)
   single-job submits, one at a time, each after the previous one has finished and its slot is
   Unclaimed again (for this figure the schedd releases claims at once: SCHEDD_CLAIM_LINGER = 0
   through a drop-in file and ``htc reconfig``; then, as (1b), the same with the default kept
   claim, each submit right after the previous job ended). *Start* is when the job's own process began: the job is
   ``/bin/date +%s.%N``, whose output is its start time to the nanosecond (the user log's
   EXECUTE event has 1-second stamps). The client's clock is read just before the submit call,
   so the figure includes expanding the description, the schedd's commit, a negotiation
   cycle, the claim, the activation and the starter -- goal: median under 100 ms;
2. **throughput**: one ``queue N`` cluster of ``/bin/true`` (``--jobs``, 2,000), in jobs/s from
   just before the submit to the moment the last JOB_TERMINATED event is in the user log; every
   job's SUBMIT, EXECUTE and JOB_TERMINATED (return value 0) is checked -- goal: at least 100 jobs/s;
3. **idle CPU**: the CPU time (user + system) of the master and every process under it over
   ``--idle-seconds`` (60) of a pool with nothing to do, as a percentage of one core -- goal:
   under 1%. Measured first, on the fresh pool, once it has settled (the slots are in the
   collector and the negotiator has finished a cycle).

The pool runs the personal configuration as a user gets it (``use ROLE : Personal`` and htc's
defaults: a submit makes the schedd ask for a negotiation cycle at once); ``--knob NAME=VALUE``
changes a knob, and the startd offers ``--cpus`` cores (default: this machine's). Everything the
pool started is stopped and killed at the end, and its home removed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import psutil

#: knobs changed from the personal configuration (printed with the figures); ``--knob NAME=VALUE`` adds
KNOBS: dict[str, str] = {}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def wait_until(condition, what: str, timeout: float, poll: float = 0.01):
    """Poll another process's state (the daemons offer nothing to await from here)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"pool_bench: timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)


@contextmanager
def personal_pool(cpus: int):
    """``htc pool start`` in a temporary HTC_HOME; stopped, and every process of it killed, after."""
    root = Path(tempfile.mkdtemp(prefix="htcb-", dir="/tmp"))
    root.chmod(0o755)  # as root, jobs run as 'nobody' and must reach their sandboxes
    work = root / "work"
    work.mkdir()
    work.chmod(0o777)
    home = root / "home"
    saved = dict(os.environ)
    os.environ["HTC_HOME"] = str(home)
    os.environ.pop("HTC_CONFIG", None)
    for knob, value in {**KNOBS, "NUM_CPUS": str(cpus)}.items():
        os.environ[f"_HTC_{knob}"] = value
    from htc.client.pool import pool_status, start_pool, stop_pool

    pids: set[int] = set()
    try:
        status = start_pool(timeout=60)
        pids.update(p for p in (status.master_pid, *(d.pid for d in status.daemons)) if p)
        yield home, work, status.master_pid
    finally:
        try:
            status = pool_status()
            pids.update(p for p in (status.master_pid, *(d.pid for d in status.daemons)) if p)
            stop_pool(fast=True, timeout=30)
        except Exception as exc:  # the kill below is the safety net
            log(f"pool_bench: stopping the pool: {exc}")
        procs = []
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):  # already gone
                proc = psutil.Process(pid)
                procs += [proc, *proc.children(recursive=True)]
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(procs, timeout=10)
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)


def _family(master_pid: int) -> list[psutil.Process]:
    master = psutil.Process(master_pid)
    return [master, *master.children(recursive=True)]


def _cpu_seconds(procs: list[psutil.Process]) -> dict[int, float]:
    out = {}
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):  # a daemon that exited uses no CPU
            t = proc.cpu_times()
            out[proc.pid] = t.user + t.system
    return out


def settle(home: Path) -> None:
    """Wait until the startd's slots are in the collector and a negotiation cycle has finished."""
    from htc.client import AdType, query_collector
    from htc.wire.transport import UnixTransport

    transport = UnixTransport(home / "sockets")

    def settled():
        slots = query_collector(AdType.Startd, transport=transport)
        cycles = [ad.get("NumNegotiationCycles", 0) for ad in query_collector(AdType.Negotiator, transport=transport)]
        return slots and cycles and max(cycles) >= 1
    wait_until(settled, "the slots in the collector and a first negotiation cycle", 120, poll=0.2)


def bench_idle(master_pid: int, seconds: float) -> float:
    procs = _family(master_pid)
    before = _cpu_seconds(procs)
    start = time.monotonic()
    time.sleep(seconds)  # the measurement itself: a pool left alone for this long
    wall = time.monotonic() - start
    after = _cpu_seconds(procs)
    used = sum(after[pid] - before[pid] for pid in after if pid in before)
    percent = 100.0 * used / wall
    names = ", ".join(sorted({" ".join(p.cmdline()[2:4]) or p.name() for p in procs if p.is_running()}))
    print(f"(3) idle pool: {used:.3f} CPU s in {wall:.0f} s over {len(procs)} processes ({names}) "
          f"= {percent:.2f}% of one core (goal < 1%: {'met' if percent < 1 else 'NOT met'})")
    return percent


def _start_latency(work: Path, transport, name: str) -> float:
    """Submit one ``/bin/date`` job, wait for it to end, return submit-to-start in seconds."""
    from htc.eventlog import EventLogReader, EventType
    from htc.client import submit

    description = f"executable = /bin/date\narguments = +%s.%N\noutput = {name}.out\nlog = {name}.log\nqueue\n"
    t0 = time.time()
    result = submit(description, cwd=work, transport=transport)
    reader = EventLogReader(work / f"{name}.log")
    # generous: a job a negotiation cycle missed waits for the next periodic one (NEGOTIATOR_INTERVAL)
    wait_until(lambda: any(e.type == EventType.JOB_TERMINATED for e in reader.read_nowait(cluster=result.cluster_id)),
               f"job {result.cluster_id}.0 to terminate", 300)
    return float((work / f"{name}.out").read_text()) - t0


def _spread(latencies: list[float]) -> tuple[float, float]:
    latencies.sort()
    return statistics.median(latencies), latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]


def bench_latency(home: Path, work: Path, count: int) -> tuple[float, float]:
    from htc.client import AdType, query_collector
    from htc.wire.transport import UnixTransport

    transport = UnixTransport(home / "sockets")
    latencies = []
    for i in range(count):
        latencies.append(_start_latency(work, transport, f"latency.{i}"))
        # the next submit finds an idle pool: no slot claimed any more
        wait_until(lambda: not query_collector(AdType.Startd, 'State == "Claimed"', ("Name",), transport=transport),
                   "the slot to be released", 60)
    median, p95 = _spread(latencies)
    slow = sum(latency > 10 for latency in latencies)
    print(f"(1) submit-to-start latency over {count} single-job submits: median {median * 1000:.0f} ms, "
          f"p95 {p95 * 1000:.0f} ms, min {latencies[0] * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
          f"{f', {slow} over 10 s' if slow else ''} (goal median < 100 ms: {'met' if median < 0.1 else 'NOT met'})")
    return median, p95


def set_claim_linger(home: Path, seconds: int | None) -> None:
    """Set SCHEDD_CLAIM_LINGER with a drop-in file and tell the schedd (None: the default)."""
    from htc.client import reconfig

    drop_in = home / "config.d" / "99-pool-bench"
    if seconds is None:
        drop_in.unlink(missing_ok=True)
    else:
        drop_in.write_text(f"SCHEDD_CLAIM_LINGER = {seconds}\n")
    reconfig(["schedd"])


def bench_warm_latency(home: Path, work: Path, count: int) -> float:
    """Submit-to-start when the same user's previous job has just finished and its claim is kept
    (SCHEDD_CLAIM_LINGER): what a client submitting one job after another sees."""
    from htc.wire.transport import UnixTransport

    transport = UnixTransport(home / "sockets")
    _start_latency(work, transport, "warm.first")  # finds no kept claim; leaves one
    median, p95 = _spread([_start_latency(work, transport, f"warm.{i}") for i in range(count)])
    print(f"(1b) submit-to-start latency with the user's claim kept (SCHEDD_CLAIM_LINGER), {count} submits: "
          f"median {median * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms")
    return median


def bench_throughput(home: Path, work: Path, jobs: int) -> float:
    from htc.eventlog import EventLogReader, EventType
    from htc.client import submit
    from htc.wire.transport import UnixTransport

    transport = UnixTransport(home / "sockets")
    description = f"executable = /bin/true\nlog = true.log\nqueue {jobs}\n"
    reader = EventLogReader(work / "true.log")
    seen: dict[int, list] = {}
    terminated = 0
    t0 = time.time()
    result = submit(description, cwd=work, transport=transport, timeout=120)
    deadline = time.monotonic() + max(600.0, jobs)
    while terminated < jobs:
        for event in reader.wait_events(timeout=5, poll=0.02, cluster=result.cluster_id):
            seen.setdefault(event.proc, []).append(event)
            terminated += event.type == EventType.JOB_TERMINATED
        if time.monotonic() > deadline:
            raise SystemExit(f"pool_bench: only {terminated} of {jobs} jobs terminated")
    elapsed = time.time() - t0
    wanted = [EventType.SUBMIT, EventType.EXECUTE, EventType.JOB_TERMINATED]
    bad = [proc for proc in range(jobs)
           if [e.type for e in seen.get(proc, ()) if e.type != EventType.IMAGE_SIZE] != wanted
           or seen[proc][-1].return_value != 0]
    if bad:
        raise SystemExit(f"pool_bench: {len(bad)} jobs lack SUBMIT/EXECUTE/JOB_TERMINATED(0) in the log, "
                         f"e.g. {result.cluster_id}.{bad[0]}: {[e.type.name for e in seen.get(bad[0], ())]}")
    rate = jobs / elapsed
    print(f"(2) throughput: {jobs:,} /bin/true jobs, submit to last JOB_TERMINATED in {elapsed:.1f} s "
          f"= {rate:.1f} jobs/s, every job's three events checked "
          f"(goal >= 100 jobs/s: {'met' if rate >= 100 else 'NOT met'})")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-jobs", type=int, default=30, help="single-job submits to time (30)")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs of the throughput cluster (2000)")
    parser.add_argument("--idle-seconds", type=float, default=60.0, help="how long to measure the idle pool (60)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="NUM_CPUS of the startd")
    parser.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                        help="set a configuration knob of the pool (repeatable)")
    args = parser.parse_args()
    for setting in args.knob:
        name, sep, value = setting.partition("=")
        if not sep or not name.strip():
            parser.error(f"--knob {setting!r}: write NAME=VALUE")
        KNOBS[name.strip()] = value.strip()
    changed = ", ".join(f"{k} = {v}" for k, v in KNOBS.items()) or "none (the personal pool's defaults)"
    print(f"machine: {os.cpu_count()} cores; startd NUM_CPUS = {args.cpus} (one partitionable slot); "
          f"knobs changed: {changed}")
    with personal_pool(args.cpus) as (home, work, master_pid):
        settle(home)
        bench_idle(master_pid, args.idle_seconds)
        if "SCHEDD_CLAIM_LINGER" not in KNOBS:
            set_claim_linger(home, 0)  # each submit finds an idle pool: negotiation, claim, start
        bench_latency(home, work, args.latency_jobs)
        if "SCHEDD_CLAIM_LINGER" not in KNOBS:
            set_claim_linger(home, None)
            bench_warm_latency(home, work, args.latency_jobs)
        bench_throughput(home, work, args.jobs)


if __name__ == "__main__":
    main()
