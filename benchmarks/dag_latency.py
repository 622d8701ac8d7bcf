"""Where one step of a DAG chain spends its time: the breakdown behind dag_bench's chain figure.

Run: ``python benchmarks/dag_latency.py [--nodes 40]`` (under a minute). A personal pool is
started (as benchmarks/pool_bench.py starts it) and a chain of ``/bin/true`` nodes runs with the
DAG manager *in this process* (``run_manager`` with no job id, as ``python -m htc.dag.manager``
run by hand), so that its steps can be timed from inside: the manager's functions are wrapped
with timers, and a thread follows the nodes log with inotify, noting when each event reaches
the file (the events' own times have whole seconds only).

For each step from node i's end to node i+1's end it prints the median and the 90th percentile
of:

* ``log -> manager``: node i's terminate event in the file -> the manager read it;
* ``manager``: the manager read it -> it starts submitting node i+1 (the engine, dagman.out);
* ``expand``: the node's description expanded in the manager (``htc.client.submit`` before
  the wire);
* ``submit rpc``: the ``Submit`` sent -> the schedd's answer (the schedd commits the cluster);
* ``rpc -> submit event``: the answer -> the submit event in the file (negative: the event
  came first);
* ``submit -> execute``: submit event -> execute event (the schedd's claim reuse or match, the
  shadow, the starter, the spawn);
* ``execute -> terminate``: the job runs ``/bin/true``, exits, and the schedd records its end.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

SUBMIT = "executable = /bin/true\nrequest_memory = 16MB\nqueue\n"
_IN_MODIFY, _IN_CREATE = 0x2, 0x100


class LogWatcher(threading.Thread):
    """Notes when each event of the nodes log reaches the file (inotify on its folder)."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        from htc.eventlog import EventLogReader

        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_CLOEXEC)
        if self.fd < 0 or self.libc.inotify_add_watch(self.fd, str(path.parent).encode(), _IN_MODIFY | _IN_CREATE) < 0:
            raise SystemExit(f"dag_latency: inotify on {path.parent}: {os.strerror(ctypes.get_errno())}")
        self.reader = EventLogReader(path)
        #: (time.monotonic(), event) as each event appeared
        self.seen: list[tuple[float, object]] = []
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            os.read(self.fd, 65536)
            now = time.monotonic()
            self.seen.extend((now, event) for event in self.reader.read_nowait())


def _wrap(owner, name: str, record):
    """Replace ``owner.name`` with a timed call that hands (start, end, args, result) to ``record``."""
    inner = getattr(owner, name)

    def timed(*args, **kwargs):
        t0 = time.monotonic()
        result = inner(*args, **kwargs)
        record(t0, time.monotonic(), args, result)
        return result
    setattr(owner, name, timed)


def run_chain(work: Path, nodes: int) -> dict[str, list[float]]:
    """Run a ``nodes``-node chain with the manager here; the phases of each step, in ms."""
    from htc.client import submission
    from htc.dag.manager import runner
    from htc.dag.manager.launch import run_manager
    from htc.eventlog import events as ev

    from dag_bench import dag_text

    directory = work / f"chain{nodes}"
    directory.mkdir()
    (directory / "true.sub").write_text(SUBMIT)
    dag_file = directory / "chain.dag"
    dag_file.write_text(dag_text("chain", nodes))
    watcher = LogWatcher(Path(str(dag_file) + ".nodes.log"))
    watcher.start()

    reads: list[tuple[float, list]] = []          # (time the manager read, events)
    submits: list[tuple[float, float, list]] = []  # submit_many: start, end, node names
    rpcs: list[tuple[float, float, int]] = []      # the Submit message: start, end, cluster
    _wrap(runner.NodeLog, "read", lambda t0, t1, args, result: reads.append((t1, result)) if result else None)
    _wrap(runner, "submit_many", lambda t0, t1, args, result: submits.append((t0, t1, [s.node for s in args[0]])))
    _wrap(submission, "_send_submission", lambda t0, t1, args, result: rpcs.append((t0, t1, result.cluster_id)))
    code = run_manager(str(dag_file), dag_id=0, argv=["dag_latency"])
    time.sleep(0.2)
    watcher.stop = True
    if code != 0:
        raise SystemExit(f"dag_latency: the chain failed (exit {code}); see {dag_file}.dagman.out")

    def first(kind, cluster):
        return next(t for t, event in watcher.seen if isinstance(event, kind) and event.cluster == cluster)

    def read_at(cluster):
        return next(t for t, events in reads for event in events
                    if isinstance(event, ev.JobTerminatedEvent) and event.cluster == cluster)

    phases: dict[str, list[float]] = {k: [] for k in (
        "log -> manager", "manager", "expand", "submit rpc", "rpc -> submit event", "submit -> execute",
        "execute -> terminate", "whole step")}
    ms = 1000.0
    for (s0, _s1, _names), (r0, r1, cluster), (_p0, _p1, prev) in zip(submits[1:], rpcs[1:], rpcs[:-1]):
        ended = first(ev.JobTerminatedEvent, prev)
        read = read_at(prev)
        sub_event, execute, term = (first(ev.SubmitEvent, cluster), first(ev.ExecuteEvent, cluster),
                                    first(ev.JobTerminatedEvent, cluster))
        for name, value in (("log -> manager", read - ended), ("manager", s0 - read), ("expand", r0 - s0),
                            ("submit rpc", r1 - r0), ("rpc -> submit event", sub_event - r1),
                            ("submit -> execute", execute - sub_event), ("execute -> terminate", term - execute),
                            ("whole step", term - ended)):
            phases[name].append(value * ms)
    return phases


def main(argv: list[str] | None = None) -> int:
    """Run the chain and print each phase's median and 90th percentile."""
    from pool_bench import personal_pool, settle

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=40, help="nodes of the chain (40)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="cores the startd offers")
    parser.add_argument("--logs", type=Path, help="copy the pool's daemon logs here before it stops")
    args = parser.parse_args(argv)
    with personal_pool(args.cpus) as (home, work, _master):
        settle(home)
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            os.chmod(tmp, 0o777)
            phases = run_chain(Path(tmp), args.nodes)
        if args.logs:
            shutil.copytree(home / "log", args.logs, dirs_exist_ok=True)
    print(f"chain of {args.nodes} nodes, {len(phases['whole step'])} steps; ms per step:")
    for name, values in phases.items():
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        print(f"  {name:<22} median {statistics.median(values):7.1f}   p90 {p90:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
