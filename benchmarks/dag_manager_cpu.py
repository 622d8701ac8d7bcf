"""The DAG manager's own CPU per node of a wide ``/bin/true`` DAG, without a pool.

Run: ``python benchmarks/dag_manager_cpu.py [--wide 1000] [--rate 100]`` (``wide / rate``
seconds plus start-up; no pool). The manager (:func:`htc.dag.manager.launch.run_manager`, as
its job runs it: ``dagman.out``, the lock file, the nodes log, the engine and the loop) runs in
this process, with the schedd replaced at the one place the manager reaches it
(``submit_batch`` / ``submit_many`` of :mod:`htc.dag.manager.runner`): each node's description
is still expanded and made into its ``ClusterSubmission`` by the manager's own code
(:func:`htc.dag.manager.batches._cluster`), then a thread playing the schedd writes the node's
submit event to the nodes log at once and its execute and terminated events ``--rate`` nodes a
second later on (so the manager wakes for the job ends as it does on a pool, a few at a time).

It prints the manager's CPU milliseconds per node (``time.process_time`` of the run less the
``time.thread_time`` of the thread playing the schedd), of which the expansion (``_cluster``)
takes how much, the CPU seconds of importing the manager's modules (a fresh interpreter), and
the load average. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SUBMIT = "executable = /bin/true\nrequest_memory = 16MB\nqueue\n"
IMPORTS = "from htc.dag.manager import launch, batches; import htc.client.submission, htc.submit.reuse"


def import_cpu() -> float:
    """CPU seconds (user + system) of a fresh interpreter importing the manager's modules."""
    code = f"import os, time; t = os.times(); {IMPORTS}; u = os.times(); print(u[0] + u[1] - t[0] - t[1])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return float(out)


def run(wide: int, rate: float, work: Path) -> tuple[float, float, int]:
    """Run a ``wide``-node DAG; returns (manager CPU s, expansion CPU s, exit code)."""
    from htc.dag.manager import batches
    from htc.dag.manager import runner as runner_module
    from htc.dag.manager.launch import run_manager
    from htc.dag.manager.submitter import Submitted
    from htc.eventlog import EventLogWriter
    from htc.eventlog import events as ev

    (work / "true.sub").write_text(SUBMIT)
    (work / "lifted.config").write_text("DAGMAN_MAX_SUBMITS_PER_INTERVAL = 1000\n")
    dag = work / "wide.dag"
    dag.write_text("CONFIG lifted.config\n" + "".join(f"JOB n{i} true.sub\n" for i in range(wide)))
    node_log = str(dag) + ".nodes.log"
    todo: queue.Queue = queue.Queue()
    clusters = iter(range(1, 10 ** 9))
    expand = [0.0]
    schedd_cpu = [0.0]

    def fake(subs, **kw):
        out = []
        t = time.process_time()
        for sub in subs:
            batches._cluster(sub)
        expand[0] += time.process_time() - t
        for _ in subs:
            out.append(Submitted(cluster=next(clusters), procs=1))
        todo.put([r.cluster for r in out])
        return out

    def schedd() -> None:
        t0 = time.thread_time()
        writer = None
        ends: list[int] = []
        gap = 1.0 / rate
        nxt = time.monotonic()
        done = 0
        while done < wide:
            try:
                batch = todo.get(timeout=gap)
            except queue.Empty:
                batch = None
            if batch:
                if writer is None:  # (not before: a fresh manager removes an old nodes log first)
                    writer = EventLogWriter(node_log)
                writer.write(*(ev.SubmitEvent(cluster=c, log_notes=f"DAG Node: n{c - 1}") for c in batch))
                ends.extend(batch)
            now = time.monotonic()
            while ends and now >= nxt:
                c = ends.pop(0)
                writer.write(ev.ExecuteEvent(cluster=c),
                             ev.JobTerminatedEvent(cluster=c, terminated_normally=True, return_value=0))
                done += 1
                nxt = max(nxt + gap, now - 1.0)
        if writer is not None:
            writer.close()
        schedd_cpu[0] = time.thread_time() - t0

    runner_module.submit_batch = fake
    runner_module.submit_many = fake
    os.environ.setdefault("HTC_CONFIG", "ONLY_ENV")
    os.environ.setdefault("HTC_HOME", str(work / "home"))
    thread = threading.Thread(target=schedd, daemon=True)
    thread.start()
    t = time.process_time()
    code = run_manager(str(dag), dag_id=0)
    total = time.process_time() - t
    thread.join(10)
    return total - schedd_cpu[0], expand[0], code


def main() -> None:
    """Print the manager's CPU per node (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wide", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=100.0, help="node ends per second the fake schedd writes")
    args = ap.parse_args()
    imports = import_cpu()
    with tempfile.TemporaryDirectory() as tmp:
        manager, expand, code = run(args.wide, args.rate, Path(tmp))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"wide DAG of {args.wide} nodes at {args.rate:g} ends/s (exit {code}): manager CPU "
          f"{manager / args.wide * 1000:.3f} ms/node, of which expanding {expand / args.wide * 1000:.3f}; "
          f"imports {imports:.2f} s CPU ({imports / args.wide * 1000:.3f} ms/node) (load {load})")


if __name__ == "__main__":
    main()
