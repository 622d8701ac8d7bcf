"""The schedd core's cost per lane call (no sockets, no service): submit N calls with a user
log, start one lane, and answer CallsDone for them one at a time against a queue file.

Run: ``python benchmarks/lane_core_bench.py [N]`` (prints microseconds per call).

Figures on the project's standard machine (2 shared cores, load about 2), 2026-11-27, 2,000
calls, three runs each: before the user-log events went into the outbox 742-1028 us of CPU
per call (median 799), after 865-1063 (median 894) -- within the machine's noise. A profile
puts the whole outbox step (encoding the entry, inserting its row) at about 3.5% of the
core's time per call; encoding a one-call entry takes 1.1 us with the call files alone and
4.7 us with its TERMINATED and the next call's EXECUTE (895 bytes).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))


def main(n: int = 2000) -> float:
    from test_schedd_core import Harness
    from test_schedd_lanes import _read, done, lane_job, start_lane

    from htc.jobqueue import JobQueue

    with tempfile.TemporaryDirectory() as tmp:
        h = Harness(JobQueue.open(str(Path(tmp) / "q.db")))
        h.core.read_input = _read
        h.start()
        h.submit(lane_job(f"log = {tmp}/calls.log\n", queue=f"queue {n}"))
        claim_id, runs = start_lane(h)
        sent = [call.job_id for run in runs for call in run.calls]
        began, cpu = time.perf_counter(), time.process_time()
        count = 0
        while sent and count < n:
            job_id = sent.pop(0)
            out = done(h, claim_id, job_id)
            count += 1
            sent += [call.job_id for a in out if hasattr(a, "msg") and type(a.msg).__name__ == "MoreCalls"
                     for call in a.msg.calls]
        took, cpu = time.perf_counter() - began, time.process_time() - cpu
        h.queue.close()
    per, per_cpu = took / max(count, 1), cpu / max(count, 1)
    print(f"{count} lane calls through the schedd core: {per * 1e6:.0f} us per call ({per_cpu * 1e6:.0f} us of CPU)")
    return per


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
