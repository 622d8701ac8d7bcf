"""The schedd's CPU per job for a wide DAG's nodes against the same jobs as one cluster, in
process: no pool, no other daemon, so the DAG-specific extra is measured without the noise of a
loaded 2-core machine's wall clock.

Run: ``python benchmarks/dag_schedd_bench.py [--jobs 500] [--rounds 2] [--count] [--profile PREFIX]``.
One schedd core (the unit tests' ``Harness`` of tests/unit/test_schedd_core.py, a file-backed
job queue in a temporary directory) is fed, alternately:

* **plain**: one ``Submit`` of a description queueing ``--jobs`` ``/bin/true`` jobs (as
  ``dag_bench.py``'s part 2a);
* **dag**: the same number of nodes as the DAG manager sends them: each node's cluster built by
  :func:`htc.dag.manager.batches._cluster` (DAGMan's appends, its submission id, its nodes log)
  and sent in ``SubmitClusters`` of ``BATCH_NODES``;

then every job is run to its end on one claim: a match for the first, the claim granted, then
for each job its activation acknowledged and its exit reported, the schedd reusing the claim for
the next (as on the pool). After each message, what the schedd's service does at the end of its
turn is done too (``ScheddService._flush``: the user-log events written, the outbox entries
paid, the queue's fsync), each turn reading the queue under ``one_look`` as the service does.

Only the schedd is timed: the messages (the manager's expansion of each node, about 0.4 ms) are
built before the clock starts, and a job's id is read from its ``ActivateClaim`` ad with a
pattern, not by parsing the whole ad (1.5 ms a job, which the bench once counted as the
schedd's). It prints the CPU milliseconds (``time.process_time``) per job of the submission and
of the runs, for each way, with the load average. ``--count`` prints instead the Python function
calls (cProfile) and SQL statements per job: figures that do not move with the load. ``--profile
PREFIX`` writes a cProfile (CPU timer) of each part to ``PREFIX.WAY.PART``. Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "unit"))

TEXT = "executable = /bin/true\nrequest_memory = 16MB\nqueue\n"
_CLUSTER_ID, _PROC_ID = re.compile(r"\bClusterId = (\d+)"), re.compile(r"\bProcId = (\d+)")


def _node(i: int, cwd: str, dag_id: int):
    from htc.dag.manager.submitter import NodeSubmission

    return NodeSubmission(
        node=f"n{i}", submit_file=None, submit_text=TEXT, cwd=cwd,
        macros={"JOB": f"n{i}", "RETRY": "0", "DAGManJobId": str(dag_id), "DAG_STATUS": "0", "FAILED_COUNT": "0"},
        prepend={}, attrs={"DAGManJobId": str(dag_id), "DAGNodeName": f'"n{i}"', "DAGParentNodeNames": '""'},
        notes=f"DAG Node: n{i}", priority=0, retry=0, node_log=os.path.join(cwd, f"w{dag_id}.dag.nodes.log"),
        dag_id=dag_id)


def plain_messages(n: int, cwd: str) -> list:
    """One ``Submit`` of a description queueing ``n`` jobs."""
    from htc.daemons.schedd.requests import description_message

    return [description_message(TEXT.replace("queue", f"log = {cwd}/plain.log\nqueue {n}"), cwd, "plain.sub")]


def dag_messages(n: int, cwd: str, dag_id: int) -> list:
    """``n`` one-node clusters in SubmitClusters of BATCH_NODES, built as the manager builds them."""
    from htc.dag.manager.batches import BATCH_NODES, _cluster
    from htc.dag.manager.submitter import submission_id
    from htc.wire import messages as m

    subs = [_node(i, cwd, dag_id) for i in range(n)]
    msgs = []
    for k in range(0, n, BATCH_NODES):
        items = []
        for sub in subs[k:k + BATCH_NODES]:
            msg = _cluster(sub)
            items.append(m.ClusterSubmission(cluster_ad=msg.cluster_ad, proc_ads=msg.proc_ads,
                                             submission_id=submission_id(sub)))
        msgs.append(m.SubmitClusters(clusters=tuple(items)))
    return msgs


def _service(h, out: list) -> None:
    """What ScheddService does with a turn's actions: the user-log events written (one write per
    log), the outbox entries paid, the queue made durable."""
    from htc.daemons.schedd.events import Owed, WriteUserLog
    from htc.daemons.schedd.userlog import open_log

    logs, owed = {}, []
    for action in out:
        if isinstance(action, WriteUserLog):
            logs.setdefault((action.path, action.owner), []).extend(action.events)
        elif isinstance(action, Owed):
            owed.append(action.seq)
    for (path, owner), events in logs.items():
        with open_log(path, owner) as writer:
            writer.write(*events)
    if owed:
        h.queue.paid(owed)
    h.queue.sync()


def _turn(h, work, *args, **kwargs):
    """One turn of the service's loop: the core's answer to one event, then the service's writes."""
    with h.queue.one_look():
        before = len(h.actions)
        result = work(*args, **kwargs)
        out = h.actions[before:]
        _service(h, out)
    return result, out


def submit_all(h, msgs: list) -> None:
    for msg in msgs:
        _turn(h, h.request, msg)


def run_all(h, n: int, claim: int, user: str) -> None:
    """Run ``n`` idle jobs to their ends on one claim, as the startd would report them."""
    from test_schedd_core import SLOT_AD

    from htc.wire import messages as m

    reqs = h.request(m.GetResourceRequests(submitter=f"{user}@localhost", significant_attributes=("RequestMemory",)))
    before = len(h.actions)
    h.request(m.MatchNotify(claim_id=f"slot1@exec#1#{claim}", submitter=f"{user}@localhost", slot_name="slot1@exec",
                            startd_address="startd", slot_ad=SLOT_AD,
                            autocluster_id=reqs.requests[0].autocluster_id))
    [call] = h.calls(m.RequestClaim, h.actions[before:])
    _, out = _turn(h, h.grant, call, f"slot1_1@exec#2#{claim}")
    for _ in range(n):
        [activate] = h.calls(m.ActivateClaim, out)
        _turn(h, h.ack, activate)
        ad = activate.msg.job_ad
        job_id = f"{_CLUSTER_ID.search(ad).group(1)}.{_PROC_ID.search(ad).group(1)}"
        _, out = _turn(h, h.exited, activate.msg.claim_id, job_id, exit_code=0)
        h.now += 0.05
        del h.actions[:]  # the bench keeps no history of actions


def main(argv: list[str] | None = None) -> int:
    """Submit and run ``--jobs`` jobs each way, ``--rounds`` times, and print the CPU per job."""
    import pwd

    import test_schedd_core
    from test_schedd_core import ALICE

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500, help="jobs per measurement (500)")
    parser.add_argument("--rounds", type=int, default=2, help="measurements of each way (2)")
    parser.add_argument("--count", action="store_true",
                        help="print Python function calls and SQL statements per job instead of CPU")
    parser.add_argument("--profile", metavar="PREFIX",
                        help="write a cProfile (CPU timer) of each part to PREFIX.WAY.PART")
    args = parser.parse_args(argv)
    # the jobs' owner is whoever runs this (their user logs are written with its rights); the
    # harness's name for ALICE is given back at the end: tests that run after this one in the same
    # process (tests/unit/test_dag_bench_verdict.py) build Harnesses whose submitter is "alice"
    saved = test_schedd_core.USERS[ALICE]
    user = test_schedd_core.USERS[ALICE] = pwd.getpwuid(os.getuid()).pw_name
    try:
        _measure(args, user)
    finally:
        test_schedd_core.USERS[ALICE] = saved
    return 0


def _measure(args, user: str) -> None:
    from test_schedd_core import Harness

    from htc.jobqueue import JobQueue

    n = args.jobs
    with tempfile.TemporaryDirectory(prefix="dagsch-") as tmp:
        for rnd in range(args.rounds):
            for way in ("plain", "dag"):
                h = Harness(JobQueue.open(f"{tmp}/{way}{rnd}.db"))
                h.start()
                msgs = plain_messages(n, tmp) if way == "plain" else dag_messages(n, tmp, 100 + rnd)
                statements = [0]
                if args.count:
                    h.queue._conn.set_trace_callback(lambda _sql: statements.__setitem__(0, statements[0] + 1))
                cpu, counts = [], []
                for part, work in (("submit", lambda: submit_all(h, msgs)), ("run", lambda: run_all(h, n, rnd, user))):
                    prof = None
                    if args.count:
                        prof = cProfile.Profile()
                    elif args.profile:
                        prof = cProfile.Profile(time.process_time)
                    before = statements[0]
                    if prof:
                        prof.enable()
                    t0 = time.process_time()
                    work()
                    cpu.append(1000 * (time.process_time() - t0) / n)
                    if prof:
                        prof.disable()
                        if args.profile:
                            prof.dump_stats(f"{args.profile}.{way}.{part}")
                        if args.count:
                            counts.append((pstats.Stats(prof).total_calls / n, (statements[0] - before) / n))
                h.queue.close()
                if args.count:
                    print(f"round {rnd + 1}, {way:>5}: {n} jobs; per job: submit {counts[0][0]:,.0f} Python calls, "
                          f"{counts[0][1]:.2f} SQL statements; run {counts[1][0]:,.0f} calls, "
                          f"{counts[1][1]:.2f} statements", flush=True)
                    continue
                load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                print(f"round {rnd + 1}, {way:>5}: {n} jobs; schedd CPU ms per job: submit {cpu[0]:.3f}, "
                      f"run {cpu[1]:.3f}, total {cpu[0] + cpu[1]:.3f} (load {load})", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
