"""DAGMan benchmarks: parsing big DAG files, and node throughput on a personal pool.

Run: ``python benchmarks/dag_bench.py`` (a few minutes on a 2-core machine; ``--parse-only``
skips the pool). Every DAG is made of ``/bin/true`` nodes sharing one submit file, in three
shapes:

* **chain**: ``n0 -> n1 -> ... -> nN-1`` (N-1 edges; nothing can run in parallel);
* **wide**: N independent nodes (a fan-out's children; all ready at once);
* **lattice**: a diamond lattice of rows of width W (``sqrt(N)``), each node a parent of the
  node below it and the one below-right (about 2N edges; DAGMan's stress shape).

It prints:

1. **parse**: :func:`htc.dag.parser.parse_dag` (lexing, both passes, validation: cycles and
   names) of a ``--parse-nodes`` (10,000) node file of each shape, best of 3 -- goal < 1 s;
2. **throughput** on a personal pool (``htc pool start`` in a temporary HTC_HOME, as
   benchmarks/pool_bench.py starts it): ``--wide`` (2,000; the size is printed) ``/bin/true``
   jobs submitted plainly, in two ways: (a) one ``queue N`` cluster (one ``Submit``, as ``htc submit`` of one file
   does), and (b) N clusters of one job each, submitted 4 at a time -- like for like with the
   DAG manager, which submits every node as a cluster of its own, 4 at a time
   (``PARALLEL_SUBMITS`` of dag/manager/submitter.py); then the same jobs as a wide DAG
   (``htc dag submit``: from the submit call to the DAG manager job's end in
   ``FILE.dag.dagman.log``), with the ratio to each baseline -- goal >= 0.8. The DAG runs
   twice: with the default throttle (``DAGMAN_MAX_SUBMITS_PER_INTERVAL`` = 100 submissions per
   ``DAGMAN_USER_LOG_SCAN_INTERVAL`` = 5 s, HTCondor's defaults: at most 20 nodes/s once the
   first 100 are out, whatever the pool can do: HTCondor's manual gives this as DAGMan's maximum
   rate, so that run prints no goal verdict), and with that throttle at its legal maximum in the
   DAG's ``CONFIG`` file (1,000 submissions per 5 s scan interval, 200 nodes/s, above what the
   pool runs: the manager's own pace, where the goal is judged). Each DAG figure is printed including the manager's
   start-up (from the submit call) and excluding it (from the moment the first node's submit
   event is in the nodes log, which the bench polls every 5 ms); then a ``--chain`` (200) node
   chain in nodes/s -- goal >= 20 nodes/s (the issue's 1,000-node chain: ``--chain 1000``).
   The wide DAG also runs a third time (``unbatched``) with the throttle lifted and
   ``DAGMAN_SUBMIT_BATCH_SIZE = 1`` (a ``Submit`` per node instead of ``SubmitClusters``
   batches), for a before/after in the same run. After each measurement a line gives the CPU
   milliseconds per job of the schedd, negotiator and startd (psutil, over the measurement)
   and of the DAG manager (from its job's terminated event: whole seconds, so coarse below a
   few thousand nodes), with the load average, and a line of what the daemon logs count per
   job (claim reuses, runs, negotiation cycles: whether the nodes, clusters of their own, reuse
   the claims as one cluster's procs do). ``--parts`` picks the measurements
   (``2a,2b,default,lifted,unbatched,chain``). ``--profile DIR`` records the schedd and the
   startd with ``py-spy record`` (``pip install py-spy``) during each measurement, into
   ``DIR/PART-DAEMON.txt`` (and the DAG manager, ``DIR/PART-manager.txt``);
   ``benchmarks/pyspy_summary.py`` compares such files per job. ``--repeat N`` runs the plain and
   DAG parts N times in turn (``--parts 2a,lifted --repeat 2``: 2a, lifted, 2a, lifted), prints
   each round's ratio and judges the goal on their median: on 2 cores one disturbed measurement
   moves a single ratio by 0.2. ``--keep DIR`` copies the user logs, the DAGs' folders and the
   daemon logs into ``DIR`` at the end, for ``benchmarks/dag_timeline.py`` (each shape second
   by second: submissions, starts, idle jobs).

Figures are printed, never asserted (the tests do not time anything).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: the wide DAG's default size: at ~30 jobs/s about a minute per measurement, so that the manager's
#: start-up (~2 s) is a few percent of it (docs/dagman.md "How fast"); the issue's 10,000 is
#: ``--wide 10000`` (about five minutes per measurement, four of them)
WIDE = 2000

SUBMIT = "executable = /bin/true\nrequest_memory = 16MB\nqueue\n"


def dag_text(shape: str, n: int, submit: str = "true.sub") -> str:
    """A DAG file of ``n`` ``/bin/true`` nodes in ``shape`` (chain, wide or lattice)."""
    lines = [f"JOB n{i} {submit}" for i in range(n)]
    if shape == "chain":
        lines += [f"PARENT n{i} CHILD n{i + 1}" for i in range(n - 1)]
    elif shape == "lattice":
        width = max(1, round(math.sqrt(n)))
        for i in range(n):
            below = [j for j in (i + width, i + width + 1) if j < n and (j == i + width or (i + 1) % width)]
            if below:
                lines.append(f"PARENT n{i} CHILD {' '.join(f'n{j}' for j in below)}")
    elif shape != "wide":
        raise ValueError(f"unknown shape {shape!r}")
    return "\n".join(lines) + "\n"


def bench_parse(n: int, directory: Path) -> dict[str, float]:
    """Seconds to parse and validate an ``n``-node DAG of each shape (best of 3)."""
    from htc.dag.parser import parse_dag

    (directory / "true.sub").write_text(SUBMIT)
    times = {}
    for shape in ("chain", "wide", "lattice"):
        path = directory / f"{shape}.dag"
        path.write_text(dag_text(shape, n))
        best = math.inf
        for _ in range(3):
            t0 = time.perf_counter()
            dag = parse_dag(path)
            best = min(best, time.perf_counter() - t0)
        times[shape] = best
        verdict = "met" if best < 1 else "NOT met"
        print(f"(1) parse+validate {shape:>7}: {len(dag.nodes):,} nodes, {dag.graph.number_of_edges():,} edges "
              f"in {best:.3f} s (goal < 1 s: {verdict})", flush=True)
    return times


def _plain(work: Path, n: int, tag: str = "") -> float:
    """Seconds from submitting ``n`` jobs as one cluster to the last one's end in the user log."""
    from htc.client import submit, wait_for_jobs

    log = work / f"plain{tag}.log"
    t0 = time.monotonic()
    result = submit(SUBMIT.replace("queue", f"log = {log}\nqueue {n}"), cwd=work)
    deadline = time.monotonic() + 600
    while not log.exists():  # the schedd writes the submit events just after it answers
        if time.monotonic() > deadline:
            raise SystemExit(f"dag_bench: {log} did not appear in 600 s")
        time.sleep(0.01)
    outcome = wait_for_jobs(log, str(result.cluster_id), timeout=3600, poll=0.02)
    elapsed = time.monotonic() - t0
    if not outcome.done or outcome.completed != n:
        raise SystemExit(f"dag_bench: the plain cluster did not finish: {outcome.message}")
    return elapsed


def _plain_clusters(work: Path, n: int, parallel: int = 4, tag: str = "") -> float:
    """Seconds from submitting ``n`` one-job clusters (``parallel`` submissions in flight, as the
    DAG manager submits nodes) to the last one's end in the user log."""
    from concurrent.futures import ThreadPoolExecutor

    from htc.client import submit, wait_for_jobs

    log = work / f"clusters{tag}.log"
    description = SUBMIT.replace("queue", f"log = {log}\nqueue")
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        for _ in pool.map(lambda _: submit(description, cwd=work), range(n)):
            pass  # every job of the log is one of these: wait_for_jobs follows them all
    while not log.exists():  # the schedd writes the submit events just after it answers
        time.sleep(0.01)
    outcome = wait_for_jobs(log, timeout=3600, num=n, poll=0.02)
    elapsed = time.monotonic() - t0
    if not outcome.done or outcome.completed != n:
        raise SystemExit(f"dag_bench: the {n} one-job clusters did not finish: {outcome.message}")
    return elapsed


def _daemon_cpu() -> dict[str, float]:
    """CPU seconds (user + system) each daemon of the pool under ``$HTC_HOME`` has used so far."""
    import psutil

    from htc.client.pool import pool_status

    cpu = {}
    for daemon in pool_status().daemons:
        if daemon.pid:
            try:
                times = psutil.Process(daemon.pid).cpu_times()
            except psutil.NoSuchProcess:
                continue  # it restarted meanwhile: its figure is lost
            cpu[daemon.name.lower()] = times.user + times.system
    return cpu


class _Profiler:
    """``py-spy record`` (raw collapsed stacks, ``--nonblocking --gil``) on the schedd and startd for one
    measurement, and on the DAG manager of a DAG part once it starts, when ``--profile DIR`` asks:
    ``DIR/PART-DAEMON.txt``, summarised per function by ``benchmarks/pyspy_summary.py``. ``--gil``
    keeps only the samples of the thread holding the GIL: a daemon blocked in a system call (or
    preempted in one by the process its write woke, which on a loaded machine is most of an
    ``os.write``'s samples) releases it, so the files show CPU spent in Python, not waiting. A
    no-op without a directory."""

    def __init__(self, directory: Path | None, part: str) -> None:
        self.directory, self.part, self.procs = directory, part, []
        self._stop = None
        self._watcher = None

    def _record(self, pid: int, name: str) -> None:
        import subprocess

        out = self.directory / f"{self.part}-{name}.txt"
        self.procs.append(subprocess.Popen(
            [self._spy, "record", "--pid", str(pid), "--format", "raw", "--nonblocking", "--gil",
             "--rate", "50", "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def _watch_manager(self, schedd_pid: int) -> None:
        """Record the DAG manager (the schedd's child running ``htc.dag.manager``) once it runs."""
        import psutil

        while not self._stop.is_set():
            try:
                for child in psutil.Process(schedd_pid).children(recursive=True):
                    if "htc.dag.manager" in " ".join(child.cmdline()):
                        self._record(child.pid, "manager")
                        return
            except psutil.Error:
                pass  # a child left between the listing and its command line: look again
            time.sleep(0.05)

    def __enter__(self) -> "_Profiler":
        import shutil
        import threading

        from htc.client.pool import pool_status

        if self.directory is None:
            return self
        self._spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(self._spy).exists():
            raise SystemExit("dag_bench: --profile needs py-spy (pip install py-spy) on PATH or beside this python")
        for daemon in pool_status().daemons:
            if daemon.pid and daemon.name.lower() in ("schedd", "startd"):
                self._record(daemon.pid, daemon.name.lower())
                if daemon.name.lower() == "schedd" and self.part not in ("2a", "2b"):
                    self._stop = threading.Event()
                    self._watcher = threading.Thread(target=self._watch_manager, args=(daemon.pid,), daemon=True)
                    self._watcher.start()
        return self

    def __exit__(self, *exc) -> None:
        import signal

        if self._watcher is not None:
            self._stop.set()
            self._watcher.join()
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT (or its target's exit)
        for proc in self.procs:
            proc.wait(timeout=60)


#: what the daemon logs say per job: (log file, what its lines contain, the figure's name)
_COUNTED = (("SchedLog", " reused for job ", "claim reuses"), ("SchedLog", ": run ended (", "runs"),
            ("NegotiatorLog", " match(es) for ", "negotiation cycles"))


def _log_counts() -> dict[str, int]:
    """How many of each :data:`_COUNTED` line the pool's daemon logs (``$HTC_HOME/log``) hold so
    far: a run of N jobs on claims kept from one match has N runs, N - slots reuses and a cycle
    or two; one needing a new claim per job has no reuses and a cycle per few jobs."""
    home = Path(os.environ.get("HTC_HOME", ""))
    counts = dict.fromkeys((name for _, _, name in _COUNTED), 0)
    for file, needle, name in _COUNTED:
        try:
            with open(home / "log" / file, errors="replace") as fh:
                counts[name] = sum(1 for line in fh if needle in line)
        except OSError:
            continue  # no such log: the figure stays 0
    return counts


def _counts_line(n: int, before: dict[str, int], after: dict[str, int]) -> str:
    """The counts of :func:`_log_counts` over one measurement, per job."""
    return "    per job: " + ", ".join(f"{name} {(after[name] - before.get(name, 0)) / n:.3f}" for name in after)


def _cpu_line(label: str, n: int, before: dict[str, float], after: dict[str, float], manager: float | None) -> str:
    """CPU milliseconds per job of the schedd, negotiator and startd (and the DAG manager)."""
    parts = [f"{name} {1000 * (after[name] - before.get(name, 0.0)) / n:.2f}"
             for name in ("schedd", "negotiator", "startd") if name in after]
    if manager is not None:
        parts.append(f"DAG manager {1000 * manager / n:.2f}")
    return f"    CPU ms per job, {label}: {', '.join(parts)} (load {' '.join(f'{x:.2f}' for x in os.getloadavg())})"


def _manager_cpu(dagman_log: Path) -> float | None:
    """The DAG manager job's CPU seconds, from the terminated event the schedd wrote (wait4's)."""
    from htc.eventlog import events as ev
    from htc.eventlog import read_events

    for event in read_events(dagman_log):
        if isinstance(event, ev.JobTerminatedEvent):
            usage = max((event.run_local_usage, event.run_remote_usage), key=lambda u: u.user + u.system)
            return usage.user + usage.system
    return None


def _first_submit(nodes_log: Path, stop) -> float | None:
    """The monotonic time at which ``nodes_log`` first holds a submit event (the DAG manager's
    first node submission answered), polled every 5 ms until ``stop`` is set; None if never."""
    while not stop.is_set():
        try:
            with open(nodes_log, "rb") as fh:
                if b"000 (" in fh.read(4096):
                    return time.monotonic()
        except FileNotFoundError:
            pass  # the manager has not created it yet
        time.sleep(0.005)
    return None


def _dag(work: Path, shape: str, n: int, config: str | None = None,
         tag: str = "") -> tuple[float, float, float | None]:
    """Seconds from ``htc dag submit`` of an ``n``-node DAG (with ``config`` as its CONFIG file's
    text) to its manager job's end, and the part of them before the first node's submit event
    reached the nodes log (the manager job's start: queued, started by the schedd, its imports,
    parsing, recovery checks, the first submission), and the manager's CPU seconds."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from htc.dag.handle import submit_dag_file

    directory = work / f"{shape}{n}{tag or ('-config' if config else '')}"
    directory.mkdir()
    (directory / "true.sub").write_text(SUBMIT)
    path = directory / f"{shape}.dag"
    text = dag_text(shape, n)
    if config:
        (directory / "dagman.config").write_text(config)
        text = f"CONFIG {directory / 'dagman.config'}\n" + text
    path.write_text(text)
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        t0 = time.monotonic()
        first = pool.submit(_first_submit, Path(f"{path}.nodes.log"), stop)
        handle = submit_dag_file(path)
        code = handle.wait(timeout=3600)
        elapsed = time.monotonic() - t0
        stop.set()
        first_at = first.result()
    if code != 0:
        raise SystemExit(f"dag_bench: the {shape} DAG failed (exit {code}); see {path}.dagman.out")
    startup = (first_at - t0) if first_at is not None else 0.0
    return elapsed, startup, _manager_cpu(Path(f"{path}.dagman.log"))


#: the pool measurements, each skippable with --parts
PARTS = ("2a", "2b", "default", "lifted", "unbatched", "chain")


def bench_pool(wide: int, chain: int, cpus: int, parts: tuple[str, ...] = PARTS,
               profile: Path | None = None, repeat: int = 1, keep: Path | None = None) -> None:
    """Throughput of plain submission, a wide DAG and a chain on one personal pool, with the
    daemons' (and the DAG manager's) CPU per job; the plain and DAG parts run ``repeat`` times
    in turn (2a, lifted, 2a, lifted, ...), each round's ratios printed and the goal judged on
    their median, so that one disturbed measurement does not decide it either way. ``keep``:
    the work directory (the user logs, each DAG's folder) and the daemon logs are copied there
    before the pool's directory is removed, for ``benchmarks/dag_timeline.py``."""
    from pool_bench import personal_pool, settle

    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    ratios: dict[tuple[str, str], list[float]] = {}
    with personal_pool(cpus) as (home, work, _master):
        settle(home)
        for rnd in range(1, repeat + 1):
            if repeat > 1:
                print(f"-- round {rnd} of {repeat}", flush=True)
            _round(work, wide, parts, profile, rnd, repeat, ratios)
        if "chain" in parts:
            seconds, startup, _ = _dag(work, "chain", chain)
            rate = chain / seconds
            print(f"(3) chain DAG:       {chain} nodes in {seconds:.1f} s = {rate:.1f} nodes/s including the "
                  f"manager's start-up (goal >= 20 nodes/s: {'met' if rate >= 20 else 'NOT met'}); "
                  f"{chain / (seconds - startup):.1f} nodes/s excluding its {startup:.2f} s", flush=True)
        if keep is not None:
            import shutil

            shutil.copytree(work, keep / "work", dirs_exist_ok=True)
            shutil.copytree(home / "log", keep / "log", dirs_exist_ok=True)
            logs = sorted(str(p) for p in (*(keep / "work").glob("*.log"), *(keep / "work").glob("*/*.nodes.log")))
            print(f"logs kept in {keep}: benchmarks/dag_timeline.py {' '.join(logs)}", flush=True)
    if repeat > 1:
        for line in verdict_lines(ratios):
            print(line, flush=True)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


def verdict_lines(ratios: dict[tuple[str, str], list[float]]) -> list[str]:
    """One line per (DAG part, baseline): each round's ratio, their median and, except for the
    default throttle (HTCondor's designed ceiling), the goal's verdict on the median."""
    import statistics

    lines = []
    for (key, base), values in ratios.items():
        median = statistics.median(values)
        verdict = "" if key == "default" else f" (goal >= 0.8: {'met' if median >= 0.8 else 'NOT met'})"
        lines.append(f"(2) {key} DAG / ({base}), per round: {', '.join(f'{v:.2f}' for v in values)}; "
                     f"median {median:.2f}{verdict}")
    return lines


def _round(work: Path, wide: int, parts: tuple[str, ...], profile: Path | None, rnd: int, repeat: int,
           ratios: dict[tuple[str, str], list[float]]) -> None:
    """One round of the plain and wide-DAG measurements; appends each DAG's ratios to ``ratios``."""
    suffix = f"-r{rnd}" if repeat > 1 else ""
    bases = {}
    if "2a" in parts:
        cpu0, counts0 = _daemon_cpu(), _log_counts()
        with _Profiler(profile, f"2a{suffix}"):
            plain = bases["2a"] = _plain(work, wide, tag=suffix)
        print(f"(2a) plain, one cluster of {wide} procs:  {plain:.1f} s = {wide / plain:.1f} jobs/s", flush=True)
        print(_cpu_line("(2a)", wide, cpu0, _daemon_cpu(), None), flush=True)
        print(_counts_line(wide, counts0, _log_counts()), flush=True)
    if "2b" in parts:
        cpu0, counts0 = _daemon_cpu(), _log_counts()
        clusters = bases["2b"] = _plain_clusters(work, wide, tag=suffix)
        print(f"(2b) plain, {wide} one-job clusters, 4 submits in flight: {clusters:.1f} s = "
              f"{wide / clusters:.1f} jobs/s", flush=True)
        print(_cpu_line("(2b)", wide, cpu0, _daemon_cpu(), None), flush=True)
        print(_counts_line(wide, counts0, _log_counts()), flush=True)
    # the count at its legal maximum: 1,000 submissions per 5 s scan interval (200 nodes/s)
    lifted = "DAGMAN_MAX_SUBMITS_PER_INTERVAL = 1000\n"
    for key, label, config in (("default", "default throttle (100 per 5 s)", None),
                               ("lifted", "throttle lifted (1000 per 5 s)", lifted),
                               ("unbatched", "throttle lifted, a Submit per node (DAGMAN_SUBMIT_BATCH_SIZE = 1)",
                                lifted + "DAGMAN_SUBMIT_BATCH_SIZE = 1\n")):
        if key not in parts:
            continue
        cpu0, counts0 = _daemon_cpu(), _log_counts()
        with _Profiler(profile, f"{key}{suffix}"):
            dag, startup, manager = _dag(work, "wide", wide, config, tag=f"-{key}{suffix}")
        for k, base in bases.items():
            ratios.setdefault((key, k), []).append(base / dag)
        if key == "default":  # HTCondor's designed ceiling, not the manager's pace: no goal verdict
            verdicts = "; ".join(f"ratio to ({k}) {base / dag:.2f}" for k, base in bases.items()) + \
                " (HTCondor's documented maximum rate with these defaults: 100 / 5 s = 20 nodes/s)"
        elif repeat > 1:  # judged on the median of the rounds, at the end
            verdicts = "; ".join(f"ratio to ({k}) {base / dag:.2f}" for k, base in bases.items())
        else:
            verdicts = "; ".join(f"ratio to ({k}) {base / dag:.2f} (goal >= 0.8: "
                                 f"{'met' if base / dag >= 0.8 else 'NOT met'})" for k, base in bases.items())
        print(f"(2) wide DAG of {wide} nodes, {label}: including the manager's start-up {dag:.1f} s = "
              f"{wide / dag:.1f} nodes/s; {verdicts}", flush=True)
        after = dag - startup
        shares = ", ".join(f"to ({k}) {base / after:.2f}" for k, base in bases.items())
        print(f"    excluding it (from the first node's submit event, {startup:.2f} s after the submit "
              f"call): {after:.1f} s = {wide / after:.1f} nodes/s; ratio {shares}", flush=True)
        print(_cpu_line(f"wide DAG, {label}", wide, cpu0, _daemon_cpu(), manager), flush=True)
        print(_counts_line(wide, counts0, _log_counts()), flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks the flags ask for and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parse-nodes", type=int, default=10_000, help="nodes of each parsed DAG (10,000)")
    parser.add_argument("--wide", type=int, default=WIDE,
                        help=f"jobs of the plain cluster and the wide DAG ({WIDE:,}; the issue's size is 10,000)")
    parser.add_argument("--chain", type=int, default=200, help="nodes of the chain DAG (200)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="cores the startd offers")
    parser.add_argument("--parse-only", action="store_true", help="skip the personal pool")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"the pool measurements to make, comma-separated (default: all of {','.join(PARTS)})")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="py-spy record the schedd and startd during each measurement into DIR")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="copy the user logs, DAG folders and daemon logs into DIR for dag_timeline.py")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run the plain and DAG parts N times in turn; the goal is judged on the median ratio")
    args = parser.parse_args(argv)
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"--parts: unknown {', '.join(sorted(unknown))}; choose from {', '.join(PARTS)}")
    with tempfile.TemporaryDirectory(prefix="dagb-") as tmp:
        bench_parse(args.parse_nodes, Path(tmp))
    if not args.parse_only:
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
        bench_pool(args.wide, args.chain, args.cpus, parts, args.profile, max(1, args.repeat), args.keep)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
