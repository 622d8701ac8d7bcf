"""The schedd's CPU per executor call, in one process: the core and the service's writes, no sockets.

Run: ``python benchmarks/schedd_call_cpu.py [--calls N] [--burst N] [--rounds R] [--profile FILE]``.

What the personal pool's schedd does for one ``HTCExecutor().submit(f).result()`` on a call
lane, replayed against a queue file in a temporary directory: the executor's ``Submit`` (its
real template job ad, one proc ad, a submission id), the startd's answer to the ``RunCalls``
that follows, and the ``CallsDone`` of the result with its ``MoreCalls`` answer; then what the
schedd's service does at the end of each turn (the SUBMIT, EXECUTE and TERMINATED events
written to the session's event log, the result's files written, the outbox entries paid, the
queue's fsync). ``--burst N`` submits N calls in one ``Submit`` instead and answers them in
batches as a busy lane does. The figure printed is CPU microseconds per call
(``time.process_time``), the least and the median of ``--rounds``: on a shared machine the
CPU time of the same work still grows with the load (other processes take the caches and
the cores' shared units), by a third at a load average of 10, so compare runs made side by
side, alternately, and look at the least figure. This is the figure for a change to the
schedd's per-call path (benchmarks/executor_cpu.py measures the whole pool, process by
process).

Figures, 2026-11-28, ``--count``: a sequential call cost the schedd 4,087 Python function calls
and 74 SQL statements before the changes of that day, 3,616 and 53 after; a call of a burst
1,705 and 7.9, then 1,618 and 7.6. CPU at load 9-15: 5.3-7.3 ms per sequential call and
0.8-1.7 ms per burst call either way (the load's noise is larger than the change). Later that
day (the outbox paid in the next commit, the cluster id taken in the cluster's commit, the
cluster kept cached when a proc sets a new attribute, ``exists`` for "any idle job?", no
savepoint around a lane's feed): 3,558 and 39 per sequential call, 1,620 and 9.3 per burst
call; CPU at load 7-10, side by side with
the code before: 3.8-4.5 ms (before 6.0-6.4) and 0.8-1.0 ms (before 1.8-2.1). The third wave
(written entries taken out by one DELETE, the submitted cluster cached, a submission one
statement, no savepoint, no idle count for calls lanes took, texts checked once; this script
now takes the written entries out at once, as the service does): 3,276 and 44.0 before, 2,745
and 31.0 after per sequential call; 1,420 and 8.4, then 1,395 and 8.3 per burst call (CPU at
load 13: noise larger than the change). The fourth wave (written entries taken out by the next
commit, as the service now does; ``--count`` prints commits too): 4.00 commits per sequential
call before, 2.00 after, 0.10 and 0.05 per burst call.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit"))


def _template(tmp: Path) -> str:
    from htc.executors.options import CallOptions
    from htc.executors.pool_ads import ad_text, job_template

    spool = SimpleNamespace(name="anon-bench-1", calls=tmp / "calls", path=tmp)
    spool.calls.mkdir()
    return ad_text(job_template(CallOptions(), spool, tmp / "jobs.log", sys.executable))


def _proc(i: int) -> str:
    from htc.executors.pool_ads import ad_text
    from htc.jobqueue.ads import quote

    cid = f"c{i:06d}"
    return ad_text({"HTCCallId": quote(cid), "HTCFunction": quote("noop"), "Out": quote(f"{cid}.out"),
                    "Err": quote(f"{cid}.err"), "TransferOutputRemaps": quote(f"htc_result.pkl={cid}.result"),
                    "TransferInput": quote(f"{cid}.call")})


class Bench:
    """A schedd core with a lane up, fed the executor's messages, and the service's writes done."""

    def __init__(self, tmp: Path):
        import pwd

        import test_schedd_core
        from test_schedd_core import ALICE, Harness

        from htc.daemons import core as c
        from htc.daemons.calls import Call, CallDone
        from htc.daemons.schedd.callfiles import write_call_files
        from htc.daemons.schedd.events import Owed, WriteCallFiles, WriteUserLog
        from htc.daemons.schedd.userlog import open_log
        from htc.jobqueue import JobQueue
        from htc.wire import messages as m

        self.c, self.m, self.Call, self.CallDone = c, m, Call, CallDone
        self.Owed, self.WriteCallFiles, self.WriteUserLog = Owed, WriteCallFiles, WriteUserLog
        self.write_call_files, self.open_log = write_call_files, open_log
        self.tmp = tmp
        # the calls' owner is whoever runs this (their files and logs are written with its rights)
        user = test_schedd_core.USERS[ALICE] = pwd.getpwuid(os.getuid()).pw_name
        self.template = _template(tmp)
        self.h = Harness(JobQueue.open(str(tmp / "q.db")), claim_linger=10.0)
        self.h.core.read_input = lambda path, owner=None: b"CALL"
        self.h.start()
        self.seq = 0
        self.in_flight: list[str] = []
        first = self._submit(1)
        self._service(first)
        # the negotiator's match, the startd's claim and the lane's activation, acknowledged
        out = self.h.grant(self.h.match(submitter=f"{user}@localhost"))
        [activate] = self.h.calls(m.ActivateClaim, out)
        self.claim_id = activate.msg.claim_id
        self._service(self.h.ack(activate))
        self.h.actions.clear()
        self._finish()

    def _submit(self, n: int) -> list:
        m = self.m
        procs = tuple(_proc(self.seq + i) for i in range(n))
        self.seq += n
        msg = m.Submit(cluster_ad=self.template, proc_ads=procs, submission_id=f"htcx-bench-{self.seq}")
        before = len(self.h.actions)
        reply = self.h.request(msg)
        assert isinstance(reply, m.SubmitReply), reply
        return self.h.actions[before:]

    def _service(self, out: list) -> None:
        """What ScheddService does with the actions: answer the calls it would send (the
        startd's Ack), write the logs and files, pay the outbox."""
        m = self.m
        logs, owed = {}, []
        for action in list(out):
            if isinstance(action, self.Call) and isinstance(action.msg, m.RunCalls):
                self.in_flight += [call.job_id for call in action.msg.calls]
                out += self.h.feed(self.CallDone(action.to, action.msg, m.Ack(), action.cookie))
            elif isinstance(action, self.c.Reply) and isinstance(action.msg, m.MoreCalls):
                self.in_flight += [call.job_id for call in action.msg.calls]
        for action in out:
            if isinstance(action, self.WriteCallFiles):
                self.write_call_files(action)
            elif isinstance(action, self.WriteUserLog):
                logs.setdefault((action.path, action.owner), []).extend(action.events)
            elif isinstance(action, self.Owed):
                owed.append(action.seq)
        for (path, owner), events in logs.items():
            with self.open_log(path, owner) as writer:
                writer.write(*events)
        if owed:
            self.h.queue.paid(owed, later=True)  # as the service does: taken out by the next commit
        self.h.queue.sync()

    def _done(self, job_ids: list[str]) -> list:
        m = self.m
        results = tuple(m.LaneResult(job_id=j, exit_code=0, files={"htc_result.pkl": b"R" * 40}, started=10.0,
                                     finished=10.0001, user_cpu=0.0001) for j in job_ids)
        before = len(self.h.actions)
        assert isinstance(self.h.request(m.CallsDone(claim_id=self.claim_id, results=results)), m.MoreCalls)
        return self.h.actions[before:]

    def _finish(self) -> None:
        while self.in_flight:
            batch, self.in_flight = self.in_flight, []
            self._turn(self._done, batch)
            self.h.actions.clear()

    def _turn(self, work, *args) -> None:
        """One turn of the service's loop (ScheddService.feed): the core's answer to one
        message and the service's writes, its reads of the queue asking once whether another
        process changed the file."""
        with self.h.queue.one_look():
            self._service(work(*args))

    def sequential(self, n: int) -> None:
        """``n`` calls one after another: Submit, RunCalls' answer, CallsDone."""
        for _ in range(n):
            self.h.now += 0.003
            self._turn(self._submit, 1)
            self.h.now += 0.001
            self._finish()

    def burst(self, n: int) -> None:
        """``n`` calls in one Submit, answered in batches of up to 20 as a busy lane does."""
        self.h.now += 0.003
        self._turn(self._submit, n)
        while self.in_flight:
            self.h.now += 0.001
            batch, self.in_flight = self.in_flight[:20], self.in_flight[20:]
            self._turn(self._done, batch)
            self.h.actions.clear()

    def close(self) -> None:
        self.h.queue.close()


def _count(bench: Bench, calls: int, burst: int) -> None:
    """Print the Python function calls and the SQL statements per call: figures that do not
    move with the load (each run does the same work), to set beside the CPU time."""
    import pstats

    for name, n, run in (("sequential", calls, bench.sequential), ("burst", burst, bench.burst)):
        if n <= 0:
            continue
        statements = [0]

        def count(_sql: str) -> None:
            statements[0] += 1

        bench.h.queue._conn.set_trace_callback(count)
        commits = bench.h.queue._commits
        prof = cProfile.Profile()
        prof.enable()
        run(n)
        prof.disable()
        bench.h.queue.pay_now()  # (what the service's timer takes out when no commit came)
        commits = bench.h.queue._commits - commits
        bench.h.queue._conn.set_trace_callback(None)
        functions = pstats.Stats(prof).total_calls
        print(f"{name}: {functions / n:,.0f} Python function calls, {statements[0] / n:.1f} SQL statements and "
              f"{commits / n:.2f} commits per call")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="sequential calls")
    parser.add_argument("--burst", type=int, default=2000, help="calls of one Submit (0: none)")
    parser.add_argument("--rounds", type=int, default=3, help="measure this many times (min and median shown)")
    parser.add_argument("--count", action="store_true",
                        help="also count Python function calls and SQL statements per call (load-proof figures)")
    parser.add_argument("--profile", help="write a cProfile of the measured part here (CPU timer)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="htc-schedd-cpu-") as tmp:
        bench = Bench(Path(tmp))
        bench.sequential(20)  # warm up
        prof = cProfile.Profile(time.process_time) if args.profile else None
        load = "/".join(f"{x:.1f}" for x in os.getloadavg())
        figures: dict[str, list[float]] = {"sequential": [], "burst": []}
        for _ in range(args.rounds):
            for name, n, run in (("sequential", args.calls, bench.sequential), ("burst", args.burst, bench.burst)):
                if n <= 0:
                    continue
                if prof:
                    prof.enable()
                cpu = time.process_time()
                run(n)
                figures[name].append((time.process_time() - cpu) * 1e6 / n)
                if prof:
                    prof.disable()
        if args.count:
            _count(bench, args.calls, args.burst)
        for name, n in (("sequential", args.calls), ("burst", args.burst)):
            if figures[name]:
                each = sorted(figures[name])
                print(f"{name}: {args.rounds} x {n} calls, us of schedd CPU per call: min {each[0]:,.0f}, "
                      f"median {each[len(each) // 2]:,.0f} (load {load})")
        bench.close()
    if prof:
        prof.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
