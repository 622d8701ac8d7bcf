"""A kill -9 campaign: the schedd killed with SIGKILL during executor bursts (issue 14).

Run: ``python benchmarks/kill9_campaign.py [--trials N] [--calls 2000] [--kills 3]``. Each trial
starts a personal pool of 2 cpus (the test suite's fast knobs: the master restarts a daemon
after about a second), submits a burst of ``--calls`` calls from one :class:`HTCExecutor`, and
kills the schedd with SIGKILL ``--kills`` times during the burst: once the first calls have
run, then when about 1/3 and 2/3 of the results have reached their futures (each kill waits
for the master to have restarted the schedd before the next). Every call leaves a file of
its own each time it runs (a side effect), which counts the runs of each call. It prints, per
trial and in total:

* **calls**, **delivered** (futures whose result is the call's own value), **lost** (futures
  that failed, or gave no result within the deadline);
* **run twice**: calls that ran more than once (the runs a restarted schedd cannot know had
  happened: see docs/executor.md, "What is guaranteed").

``tests/system/test_durable_promises.py`` runs one trial of this in the test suite. When run as root,
the calls run as the slots' accounts (``htc-slot<N>``, docs/startd.md) and use a Python prepared
as the tests do (tests/executor_pool.py).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(_TESTS) not in sys.path:
    sys.path.insert(0, str(_TESTS))


@dataclass
class Trial:
    """What one trial saw."""

    calls: int
    delivered: int = 0
    lost: int = 0
    run_twice: int = 0
    kills: list[str] = field(default_factory=list)  # when each kill happened (what had been delivered)
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)  # the first few failures, for the report

    def line(self) -> str:
        return (f"calls {self.calls}, delivered {self.delivered}, lost {self.lost}, run twice {self.run_twice}, "
                f"kills at {', '.join(self.kills) or 'none'}, {self.seconds:.1f} s")


def _wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except Exception:  # a daemon coming back does not answer yet
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.01)


def kill_schedd(pool) -> int:
    """SIGKILL the pool's schedd; return once the master runs a new one that answers."""
    old = pool.status("SCHEDD").pid
    os.kill(old, signal.SIGKILL)
    return pool.running_pid("SCHEDD", other_than=old, timeout=120)


def trial(executor_pool, calls: int = 2000, kills: int = 3, deadline: float = 900.0) -> Trial:
    """One burst of ``calls`` calls with ``kills`` kill -9s of the schedd (see the module docstring)."""
    from durable_jobs import mark_run, runs

    from htc.executors import HTCExecutor

    marks = Path(tempfile.mkdtemp(dir=executor_pool.pool.work))
    marks.chmod(0o777)
    result = Trial(calls)
    started = time.monotonic()
    ex = HTCExecutor(**executor_pool.executor_args())
    try:
        futures = [ex.submit(mark_run, str(marks), i) for i in range(calls)]
        moments = [0.0] + [k / kills for k in range(1, kills)]
        for moment in moments[:kills]:
            if moment == 0.0:
                _wait(lambda: any(marks.iterdir()), deadline, "the first calls to run")
            else:
                _wait(lambda: sum(f.done() for f in futures) >= moment * calls, deadline,
                      f"{moment:.0%} of the results")
            done = sum(f.done() for f in futures)
            kill_schedd(executor_pool.pool)
            result.kills.append(f"{done}")
        for i, future in enumerate(futures):
            left = max(1.0, deadline - (time.monotonic() - started))
            try:
                value = future.result(timeout=left)
            except Exception as exc:  # counted as lost, and the first few shown
                result.lost += 1
                if len(result.errors) < 3:
                    result.errors.append(f"call {i}: {type(exc).__name__}: {exc}")
                continue
            if value == i:
                result.delivered += 1
            else:
                result.lost += 1
                result.errors.append(f"call {i} gave {value!r}")
        counts = runs(str(marks))
        result.run_twice = sum(1 for n in counts.values() if n > 1)
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
        result.seconds = time.monotonic() - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("HTC_HOME", tempfile.mkdtemp(prefix="htc-kill9-client-"))
    from executor_pool import ExecutorPool

    total = Trial(0)
    for n in range(1, args.trials + 1):
        pool = ExecutorPool().start()
        try:
            t = trial(pool, args.calls, args.kills)
        finally:
            pool.stop()
        print(f"trial {n}: {t.line()}", flush=True)
        for error in t.errors:
            print(f"    {error}", flush=True)
        total.calls += t.calls
        total.delivered += t.delivered
        total.lost += t.lost
        total.run_twice += t.run_twice
        total.kills += t.kills
    print(f"trials {args.trials}, kills {len(total.kills)}, calls {total.calls}, delivered {total.delivered}, "
          f"lost {total.lost}, run twice {total.run_twice}")
    return 0 if total.lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
