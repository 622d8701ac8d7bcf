"""Benchmark: parse and validate DAG files of 10,000 nodes in three shapes.

The goal (issue 17) is well under one second for 10,000 nodes and about as many edges, where
HTCondor's DAGMan takes seconds. Shapes:

* ``chain``: A0 -> A1 -> ... (one PARENT line per edge);
* ``fanout``: one root, every other node its child, one more node joining them all
  (two PARENT lines with thousands of names each);
* ``lattice``: a 100 x 100 diamond lattice, each node the parent of its right and lower
  neighbours (about 20,000 edges);
* ``chain+vars``: the chain with a quoted ``VARS`` line and a RETRY per node (the slow path of
  the lexer).

Each DAG is written to a temporary directory, then parsed with ``htc.dag.parser.parse_dag``
(which validates, cycle check included) ``--repeat`` times; the best wall-clock time is
printed, and the best CPU time of the process beside it (on a busy machine the two differ). Usage::

    python benchmarks/dag_parse_bench.py [--nodes N] [--repeat R]
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
import timeit

from htc.dag.parser import parse_dag


def chain(n: int, with_vars: bool = False) -> str:
    """A chain of ``n`` nodes."""
    lines = []
    for i in range(n):
        lines.append(f"JOB A{i} node.sub")
        if with_vars:
            lines.append(f'VARS A{i} index="{i}" name="node \\"{i}\\""')
            lines.append(f"RETRY A{i} 2 UNLESS-EXIT 3")
        if i:
            lines.append(f"PARENT A{i - 1} CHILD A{i}")
    return "\n".join(lines) + "\n"


def fanout(n: int) -> str:
    """One root, ``n - 2`` children, one node joining them: about ``2 n`` edges."""
    kids = [f"K{i}" for i in range(n - 2)]
    lines = ["JOB root node.sub", "JOB join node.sub", *(f"JOB {k} node.sub" for k in kids),
             "PARENT root CHILD " + " ".join(kids), "PARENT " + " ".join(kids) + " CHILD join"]
    return "\n".join(lines) + "\n"


def lattice(n: int) -> str:
    """A square lattice of about ``n`` nodes, edges right and down."""
    side = int(math.isqrt(n))
    lines = [f"JOB N{r}_{c} node.sub" for r in range(side) for c in range(side)]
    for r in range(side):
        for c in range(side):
            kids = [f"N{r + 1}_{c}"] * (r + 1 < side) + [f"N{r}_{c + 1}"] * (c + 1 < side)
            if kids:
                lines.append(f"PARENT N{r}_{c} CHILD {' '.join(kids)}")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Write each shape, parse it, print the nodes, edges and best time."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    shapes = {"chain": chain(args.nodes), "fanout": fanout(args.nodes),
              "lattice": lattice(args.nodes), "chain+vars": chain(args.nodes, with_vars=True)}
    ref = min(timeit.repeat("sum(range(10**6))", number=1, repeat=5))
    print(f"machine speed: sum(range(10**6)) takes {ref * 1000:.0f} ms "
          "(about 15 ms on an idle core; scale the figures below by it on a busy machine)")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'shape':<12} {'nodes':>7} {'edges':>7} {'parse+validate':>15} {'(CPU)':>12}")
        for name, text in shapes.items():
            path = os.path.join(tmp, f"{name}.dag")
            with open(path, "w") as f:
                f.write(text)
            best = cpu = math.inf
            for _ in range(args.repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                dag = parse_dag(path)
                best = min(best, time.perf_counter() - t0)
                cpu = min(cpu, time.process_time() - c0)
            print(f"{name:<12} {len(dag.nodes):>7} {dag.graph.number_of_edges():>7} "
                  f"{best * 1000:>12.0f} ms {cpu * 1000:>9.0f} ms")


if __name__ == "__main__":
    main()
