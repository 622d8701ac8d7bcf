"""A wide DAG's pace against plain submission, second by second, from the user logs.

Run: ``python benchmarks/dag_timeline.py LOG [LOG ...] [--dagman-out FILE] [--table]``, e.g. on
the logs of a ``dag_bench.py --parts 2b,lifted`` run kept on disk: ``WORK/clusters.log`` (the
one-job clusters submitted plainly) and ``WORK/wideN-lifted/wide.dag.nodes.log`` (the DAG's
nodes). For each log it counts, per second from its first event, the jobs submitted, started
(execute event) and ended, and how many were queued idle and running at the end of each second;
then it sums up what decides whether the pool waited for the submitter:

* how long the submissions went on, and the start rate while they did and after;
* the fewest jobs queued idle once the first ones ran and before the last 5% ended (0 means a
  slot may have waited for a submission: the submitter, not the pool, set the pace then);
* the seconds without a start while jobs were idle (the pool itself stalled);
* with ``--dagman-out``, the DAG manager's ``Submitting N nodes together`` lines and its
  ``max_idle`` holds, in seconds from the same origin, so the batches line up with the starts.

The events carry whole seconds (as HTCondor writes them), so this shows seconds-long shapes
(a timer, a hold, a burst that stalls the starts), not per-job latency. Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import collections
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: dagman.out lines worth placing on the timeline
_DAGMAN_LINE = re.compile(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d) (Submitting \d+ nodes together.*|max_\w+ \(\d+\) limit "
                          r"reached.*|.*STARTING UP|.*EXITING WITH STATUS.*)$")


def per_second(path: Path) -> tuple[float, list[tuple[int, int, int, int, int, int]]]:
    """The log's first event time and one row per second from it: (second, submitted, started,
    ended, idle at its end, running at its end)."""
    from htc.eventlog import events as ev
    from htc.eventlog import read_events

    events = read_events(path)
    if not events:
        raise SystemExit(f"dag_timeline: {path} holds no events")
    t0 = min(event.timestamp for event in events)
    counts = {kind: collections.Counter() for kind in ("sub", "exe", "end")}
    for event in events:
        kind = ("sub" if isinstance(event, ev.SubmitEvent) else "exe" if isinstance(event, ev.ExecuteEvent)
                else "end" if isinstance(event, ev.JobTerminatedEvent) else None)
        if kind:
            counts[kind][int(event.timestamp - t0)] += 1
    last = max(max(c, default=0) for c in counts.values())
    rows, idle, running = [], 0, 0
    for s in range(last + 1):
        sub, exe, end = counts["sub"][s], counts["exe"][s], counts["end"][s]
        idle += sub - exe
        running += exe - end
        rows.append((s, sub, exe, end, idle, running))
    return t0, rows


def summary(rows: list[tuple[int, int, int, int, int, int]]) -> str:
    """The lines of the module docstring's summary for one log's rows."""
    submitting = max(s for s, sub, *_ in rows if sub) + 1
    first_start = min((s for s, _, exe, *_ in rows if exe), default=0)
    starts = [exe for _, _, exe, *_ in rows]
    during = sum(starts[:submitting]) / submitting
    after = sum(starts[submitting:]) / max(1, len(rows) - submitting)
    total, ended, settled = sum(r[3] for r in rows), 0, []
    for s, _, _, end, idle, _ in rows:
        ended += end
        if s > first_start and ended < 0.95 * total:  # the last 5% drain the queue whatever submits
            settled.append(idle)
    settled = settled or [0]
    stalls = sum(1 for s, _, exe, _, idle, _ in rows[first_start + 1:] if exe == 0 and rows[s - 1][4] > 0)
    return (f"  {len(rows)} s, {sum(r[3] for r in rows)} jobs ended; submissions over the first {submitting} s; "
            f"first start at {first_start} s\n"
            f"  starts/s while submitting {during:.1f}, after {after:.1f}; idle once running: fewest "
            f"{min(settled)}, median {statistics.median(settled):.0f}; seconds without a start while jobs "
            f"were idle: {stalls}")


def dagman_marks(path: Path, t0: float) -> list[str]:
    """The dagman.out lines of :data:`_DAGMAN_LINE`, each with its second from ``t0``."""
    marks = []
    with open(path, errors="replace") as fh:
        for line in fh:
            found = _DAGMAN_LINE.match(line.rstrip("\n"))
            if found:
                at = datetime.strptime(found.group(1), "%m/%d/%y %H:%M:%S").timestamp()
                marks.append(f"  {at - t0:+5.0f} s  {found.group(2).strip()}")
    return marks


def main(argv: list[str] | None = None) -> int:
    """Print each log's summary (and its table with ``--table``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", nargs="+", type=Path, help="user logs (a DAG's nodes log, a plain job log)")
    parser.add_argument("--dagman-out", type=Path,
                        help="the DAG's FILE.dag.dagman.out, placed on the last log's timeline")
    parser.add_argument("--table", action="store_true", help="print the per-second rows too")
    args = parser.parse_args(argv)
    t0 = 0.0
    for path in args.logs:
        t0, rows = per_second(path)
        print(f"{path}:")
        if args.table:
            print("   sec  sub  exe  end  idle  run")
            for row in rows:
                print("  %4d %4d %4d %4d %5d %4d" % row)
        print(summary(rows))
    if args.dagman_out:
        print(f"{args.dagman_out} (seconds from the first event of {args.logs[-1]}):")
        print("\n".join(dagman_marks(args.dagman_out, t0)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
