"""The DAG manager's CPU per node for expanding node submit descriptions, fresh and reused.

Run: ``python benchmarks/dag_expand_bench.py [--nodes 1000]`` (a few seconds; no pool). Every
node shares one submit description (``/bin/true``, 16 MB, ``output = $(JOB).out``) and gets
DAGMan's appends (``JOB``, ``RETRY``, ``+DAGNodeName``, ``submit_event_notes``, ``dagman_log``,
...), as :func:`htc.dag.manager.batches._cluster` builds them. It prints the CPU milliseconds
(``time.process_time``) per node of

* **fresh**: the description parsed and every submit command run for each node (what
  ``submit_message`` did before ``htc.submit.reuse``);
* **reused**: ``_cluster`` as the manager runs it: the first node of each second analysed, the
  others running only the commands that read their appended values;

with the load average, since the machine's other work slows both alike. Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from htc.client import submission
from htc.dag.manager.batches import _cluster
from htc.dag.manager.submitter import NodeSubmission, describe

TEXT = "executable = /bin/true\nrequest_memory = 16MB\noutput = $(JOB).out\nqueue\n"


def node(i: int, cwd: str) -> NodeSubmission:
    """Node ``n<i>`` of a wide DAG run by manager job 12."""
    return NodeSubmission(
        node=f"n{i}", submit_file=None, submit_text=TEXT, cwd=cwd,
        macros={"JOB": f"n{i}", "RETRY": "0", "DAGManJobId": "12", "DAG_STATUS": "0", "FAILED_COUNT": "0"},
        prepend={}, attrs={"DAGManJobId": "12", "DAGNodeName": f'"n{i}"', "DAGParentNodeNames": '""'},
        notes=f"DAG Node: n{i}", priority=0, retry=0, node_log=os.path.join(cwd, "w.dag.nodes.log"), dag_id=12)


def fresh(sub: NodeSubmission) -> None:
    """One node expanded with no reuse (parse, every command), as before htc.submit.reuse."""
    text, append, filename = describe(sub)
    s = submission._prepare(text, cwd=sub.cwd, filename=filename, append=append, queue=None)
    s.check_file = submission._sentinel_check(s)
    c = s.cluster(submission._SENTINEL_CLUSTER, check=submission._per_submission_limit)
    list(c.proc_ads())


def per_node(fn, nodes: list[NodeSubmission]) -> float:
    """CPU ms per node of ``fn`` over ``nodes`` (one warm-up call first)."""
    fn(nodes[0])
    t = time.process_time()
    for n in nodes:
        fn(n)
    return (time.process_time() - t) / len(nodes) * 1000


def main() -> None:
    """Print the fresh and reused CPU per node, alternately, twice."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as cwd:
        nodes = [node(i, cwd) for i in range(args.nodes)]
        for _ in range(2):
            a = per_node(fresh, nodes)
            b = per_node(_cluster, nodes)
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"CPU ms per node: fresh {a:.3f}, reused {b:.3f} ({a / b:.1f}x) (load {load})")


if __name__ == "__main__":
    main()
