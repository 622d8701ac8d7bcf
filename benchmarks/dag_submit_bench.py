"""The DAG manager's cost per node submission, without a pool: its submitter against a stand-in
schedd that answers every ``Submit`` at once.

Run: ``python benchmarks/dag_submit_bench.py [--nodes 400] [--rounds 2]``. The stand-in is the
real Unix-socket server of tests/unit/test_dag_submit_link.py (``FakeSchedd``) on a thread of
this process. Nodes are submitted in three ways, alternately: 4 at a time (``PARALLEL_SUBMITS``)
each with a new event loop and a new connection (``submit_many`` without a link), 4 at a time
over kept connections (``ScheddLink``), and all at once as ``SubmitClusters`` batches of
``BATCH_NODES`` (``submit_batch``, the way the manager now sends a round of ready nodes).
It prints wall-clock and CPU milliseconds per node (the CPU includes the stand-in's, which is
the same for both). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "unit"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # (stand_in_schedd)


def main(argv: list[str] | None = None) -> int:
    """Submit ``--nodes`` nodes each way, ``--rounds`` times, and print the cost per node."""
    from test_dag_submit_link import FakeSchedd, _node

    from htc.dag.manager.batches import BATCH_NODES, submit_batch
    from htc.dag.manager.submitter import PARALLEL_SUBMITS, ScheddLink, submit_many

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=400, help="nodes per measurement (400)")
    parser.add_argument("--rounds", type=int, default=2, help="measurements of each way (2)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dagsb-") as tmp, FakeSchedd(Path(tmp) / "sockets") as schedd:
        for rnd in range(args.rounds):
            for label, link, batched in (("a new event loop and connection per node", None, False),
                                         ("kept connections (ScheddLink)", ScheddLink(schedd.transport), False),
                                         (f"SubmitClusters of {BATCH_NODES} over kept connections",
                                          ScheddLink(schedd.transport), True)):
                way = "b" if batched else "k" if link else "n"
                subs = [_node(f"r{rnd}{way}{i}", tmp) for i in range(args.nodes)]
                cpu0, wall0 = time.process_time(), time.perf_counter()
                if batched:   # a round of ready nodes, as the manager now sends it
                    submit_batch(subs, transport=schedd.transport, link=link)
                else:
                    for k in range(0, len(subs), PARALLEL_SUBMITS):
                        submit_many(subs[k:k + PARALLEL_SUBMITS], transport=schedd.transport, link=link)
                wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
                if link is not None:
                    link.close()
                print(f"round {rnd + 1}, {label}: {args.nodes} nodes, {1000 * wall / args.nodes:.2f} ms wall "
                      f"and {1000 * cpu / args.nodes:.2f} ms CPU per node", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
