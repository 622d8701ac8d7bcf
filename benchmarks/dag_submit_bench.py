"""The DAG manager's cost per node submission, without a pool: its submitter against a stand-in
schedd that answers every ``Submit`` at once.

Run: ``python benchmarks/dag_submit_bench.py [--nodes 400] [--rounds 2]``. The stand-in is the
real Unix-socket server of tests/unit/test_dag_submit_link.py (``FakeSchedd``) on a thread of
this process. Nodes are submitted 4 at a time (``PARALLEL_SUBMITS``), the way the manager sends
a round of ready nodes, in two ways, alternately: each submission with a new event loop and a
new connection (``submit_many`` without a link), and over kept connections (``ScheddLink``).
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


def main(argv: list[str] | None = None) -> int:
    """Submit ``--nodes`` nodes each way, ``--rounds`` times, and print the cost per node."""
    from test_dag_submit_link import FakeSchedd, _node

    from htc.dag.manager.submitter import PARALLEL_SUBMITS, ScheddLink, submit_many

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=400, help="nodes per measurement (400)")
    parser.add_argument("--rounds", type=int, default=2, help="measurements of each way (2)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dagsb-") as tmp, FakeSchedd(Path(tmp) / "sockets") as schedd:
        for rnd in range(args.rounds):
            for label, link in (("a new event loop and connection per node", None),
                                ("kept connections (ScheddLink)", ScheddLink(schedd.transport))):
                subs = [_node(f"r{rnd}{'k' if link else 'n'}{i}", tmp) for i in range(args.nodes)]
                cpu0, wall0 = time.process_time(), time.perf_counter()
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
