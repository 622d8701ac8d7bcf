"""Summarise ``py-spy record --format raw`` files per function, per job: compare two runs.

Run: ``python benchmarks/pyspy_summary.py A.txt:N [B.txt:M] [--top 40]`` where ``N`` is the
number of jobs the recording covered. For each function (``name (file)``, line numbers dropped)
it prints the samples per job that included it (inclusive) and that ended in it (self), for each
file side by side, ordered by the largest inclusive difference. ``dag_bench.py --profile DIR``
writes such files (50 samples/s: one sample is 20 ms of the process's time, on or off CPU --
``--nonblocking`` without ``--idle`` keeps only the threads that were running).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

_LINE = re.compile(r"^(.*) (\d+)$")
_FRAME = re.compile(r"^(.*?) \((.*?)(?::\d+)?\)$")


def _frame(text: str) -> str:
    match = _FRAME.match(text)
    return f"{match.group(1)} ({match.group(2)})" if match else text


def load(path: str) -> tuple[Counter, Counter, int]:
    """Inclusive and self sample counts per function of one raw file, and the total samples."""
    inclusive: Counter = Counter()
    own: Counter = Counter()
    total = 0
    with open(path) as fh:
        for line in fh:
            match = _LINE.match(line.rstrip("\n"))
            if not match:
                continue
            count = int(match.group(2))
            frames = [_frame(f) for f in match.group(1).split(";")]
            total += count
            for name in set(frames):
                inclusive[name] += count
            own[frames[-1]] += count
    return inclusive, own, total


def main(argv: list[str] | None = None) -> int:
    """Print the per-job comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="RAW.txt:JOBS")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--self", dest="by_self", action="store_true", help="order by self samples")
    args = parser.parse_args(argv)
    runs = []
    for spec in args.files:
        path, _, jobs = spec.rpartition(":")
        inclusive, own, total = load(path)
        runs.append((path, int(jobs), inclusive, own, total))
        print(f"{path}: {total} samples, {total / int(jobs):.3f} per job")
    names = set().union(*(r[3 if args.by_self else 2] for r in runs))

    def key(name: str) -> float:
        values = [r[3 if args.by_self else 2][name] / r[1] for r in runs]
        return max(values) - (min(values) if len(values) > 1 else 0)
    for name in sorted(names, key=key, reverse=True)[: args.top]:
        cells = "  ".join(f"{r[2][name] / r[1]:6.3f} {r[3][name] / r[1]:6.3f}" for r in runs)
        print(f"{cells}  {name[:150]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
