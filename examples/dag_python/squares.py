"""A DAG built in Python: a shell step, four Python function nodes, and a join fed by their values.

Run it with a pool running (``htc pool start``)::

    python examples/dag_python/squares.py [DIRECTORY]

It writes ``squares.dag`` (and the submit and call files it needs) into DIRECTORY (default: a
new temporary directory), submits it as ``htc dag submit`` would, waits for it, and prints each
node's state and the function nodes' results::

    prep ──> sq0, sq1, sq2, sq3 ──> total ──> report

``prep`` is an ordinary job (a submit description given as a dict); ``sq0``..``sq3`` and
``total`` run Python functions in the pool (the executor's worker); ``total`` receives the
return values of the ``sq`` nodes because they are its arguments; ``report`` formats the total.
"""

from __future__ import annotations

import sys
import tempfile

from htc.dag import DAG


def square(x: int) -> int:
    """One piece of work."""
    return x * x


def report(total: int, count: int) -> str:
    """A line about the result."""
    return f"the sum of {count} squares is {total}"


def build(**options) -> DAG:
    """The DAG, built but not yet written (``options``: DAG's, e.g. ``python=`` for the jobs)."""
    dag = DAG("squares", **options)
    prep = dag.job("prep", {"executable": "/bin/echo", "arguments": "preparing the squares",
                            "output": "prep.out", "request_memory": "32MB"})
    squares = [dag.function(f"sq{i}", square, i) for i in range(4)]
    prep >> squares
    total = dag.function("total", sum, squares)
    dag.function("report", report, total, len(squares))
    return dag


def main(argv: list[str], **options) -> int:
    """Build, submit, wait, print; the exit status is the DAG's."""
    directory = argv[0] if argv else tempfile.mkdtemp(prefix="squares-")
    dag = build(**options)
    handle = dag.submit(directory)
    print(f"submitted {dag} as {handle.dag_file} (manager job {handle.cluster})")
    code = handle.wait(timeout=900)
    for node, state in handle.status().items():
        print(f"  {node:8} {state}")
    if code == 0:
        print(handle.result("report"))
    print(f"DAG exit code {code}")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
