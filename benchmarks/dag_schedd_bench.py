"""The schedd's CPU per job for a wide DAG's nodes against the same jobs as one cluster, in
process: no pool, no other daemon, so the DAG-specific extra is measured without the noise of a
loaded 2-core machine's wall clock.

Run: ``python benchmarks/dag_schedd_bench.py [--jobs 500] [--rounds 2]``. One schedd core (the
unit tests' ``Harness`` of tests/unit/test_schedd_core.py, a file-backed job queue in a
temporary directory) is fed, alternately:

* **plain**: one ``Submit`` of a description queueing ``--jobs`` ``/bin/true`` jobs (as
  ``dag_bench.py``'s part 2a);
* **dag**: the same number of nodes as the DAG manager sends them: each node's cluster built by
  :func:`htc.dag.manager.batches._cluster` (DAGMan's appends, its submission id, its nodes log)
  and sent in ``SubmitClusters`` of ``BATCH_NODES``;

then every job is run to its end on one claim: a match for the first, the claim granted, then
for each job its activation acknowledged and its exit reported, the schedd reusing the claim for
the next (as on the pool). It prints the CPU milliseconds (``time.process_time``) per job of the
submission and of the runs, for each, with the load average. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "unit"))

TEXT = "executable = /bin/true\nrequest_memory = 16MB\nqueue\n"


def _node(i: int, cwd: str, dag_id: int):
    from htc.dag.manager.submitter import NodeSubmission

    return NodeSubmission(
        node=f"n{i}", submit_file=None, submit_text=TEXT, cwd=cwd,
        macros={"JOB": f"n{i}", "RETRY": "0", "DAGManJobId": str(dag_id), "DAG_STATUS": "0", "FAILED_COUNT": "0"},
        prepend={}, attrs={"DAGManJobId": str(dag_id), "DAGNodeName": f'"n{i}"', "DAGParentNodeNames": '""'},
        notes=f"DAG Node: n{i}", priority=0, retry=0, node_log=os.path.join(cwd, f"w{dag_id}.dag.nodes.log"),
        dag_id=dag_id)


def submit_plain(h, n: int, cwd: str) -> list[int]:
    """One cluster of ``n`` jobs; its id."""
    from htc.daemons.schedd.requests import description_message

    text = TEXT.replace("queue", f"log = {cwd}/plain.log\nqueue {n}")
    return [h.request(description_message(text, cwd, "plain.sub")).cluster_id]


def submit_dag(h, n: int, cwd: str, dag_id: int) -> list[int]:
    """``n`` one-node clusters in SubmitClusters of BATCH_NODES, built as the manager builds them."""
    from htc.dag.manager.batches import BATCH_NODES, _cluster
    from htc.dag.manager.submitter import submission_id
    from htc.wire import messages as m

    ids = []
    subs = [_node(i, cwd, dag_id) for i in range(n)]
    for k in range(0, n, BATCH_NODES):
        items = []
        for sub in subs[k:k + BATCH_NODES]:
            msg = _cluster(sub)
            items.append(m.ClusterSubmission(cluster_ad=msg.cluster_ad, proc_ads=msg.proc_ads,
                                             submission_id=submission_id(sub)))
        reply = h.request(m.SubmitClusters(clusters=tuple(items)))
        ids += [r.cluster_id for r in reply.results]
    return ids


def run_all(h, n: int, claim: int) -> None:
    """Run ``n`` idle jobs to their ends on one claim, as the startd would report them."""
    from test_schedd_core import SLOT_AD

    from htc.classad import ClassAd
    from htc.wire import messages as m

    reqs = h.request(m.GetResourceRequests(submitter="alice@localhost", significant_attributes=("RequestMemory",)))
    before = len(h.actions)
    h.request(m.MatchNotify(claim_id=f"slot1@exec#1#{claim}", submitter="alice@localhost", slot_name="slot1@exec",
                            startd_address="startd", slot_ad=SLOT_AD,
                            autocluster_id=reqs.requests[0].autocluster_id))
    [call] = h.calls(m.RequestClaim, h.actions[before:])
    out = h.grant(call, new_id=f"slot1_1@exec#2#{claim}")
    for _ in range(n):
        [activate] = h.calls(m.ActivateClaim, out)
        h.ack(activate)
        job_id = ClassAd(activate.msg.job_ad)
        before = len(h.actions)
        h.exited(activate.msg.claim_id, f"{job_id['ClusterId']}.{job_id['ProcId']}", exit_code=0)
        out = h.actions[before:]
        h.now += 0.05
        del h.actions[:]  # the bench keeps no history of actions


def main(argv: list[str] | None = None) -> int:
    """Submit and run ``--jobs`` jobs each way, ``--rounds`` times, and print the CPU per job."""
    from test_schedd_core import Harness

    from htc.jobqueue import JobQueue

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500, help="jobs per measurement (500)")
    parser.add_argument("--rounds", type=int, default=2, help="measurements of each way (2)")
    args = parser.parse_args(argv)
    n = args.jobs
    with tempfile.TemporaryDirectory(prefix="dagsch-") as tmp:
        for rnd in range(args.rounds):
            for way in ("plain", "dag"):
                h = Harness(JobQueue.open(f"{tmp}/{way}{rnd}.db"))
                h.start()
                t0 = time.process_time()
                if way == "plain":
                    submit_plain(h, n, tmp)
                else:
                    submit_dag(h, n, tmp, 100 + rnd)
                t1 = time.process_time()
                run_all(h, n, rnd)
                t2 = time.process_time()
                h.queue.close()
                load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                print(f"round {rnd + 1}, {way:>5}: {n} jobs; schedd CPU ms per job: submit {1000 * (t1 - t0) / n:.3f}, "
                      f"run {1000 * (t2 - t1) / n:.3f}, total {1000 * (t2 - t0) / n:.3f} (load {load})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
