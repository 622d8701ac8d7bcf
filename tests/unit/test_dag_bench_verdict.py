"""benchmarks/dag_bench.py judges the wide DAG's goal on the median of its rounds' ratios, and
benchmarks/dag_schedd_bench.py runs (small; no timing asserted here), and benchmarks/dag_timeline.py
counts a user log's seconds right."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load(name: str):
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_the_goal_is_judged_on_the_median_of_the_rounds():
    bench = load("dag_bench")
    lines = bench.verdict_lines({("lifted", "2a"): [0.83, 0.70, 0.91], ("default", "2a"): [0.4, 0.5],
                                 ("unbatched", "2a"): [0.79, 0.95, 0.60]})
    assert lines[0] == "(2) lifted DAG / (2a), per round: 0.83, 0.70, 0.91; median 0.83 (goal >= 0.8: met)"
    assert lines[1].endswith("median 0.45")  # HTCondor's designed ceiling: no verdict
    assert lines[2].endswith("median 0.79 (goal >= 0.8: NOT met)")  # one good round does not decide it


def test_the_in_process_schedd_bench_runs_both_ways(capsys):
    load("dag_schedd_bench").main(["--jobs", "3", "--rounds", "1"])
    out = capsys.readouterr().out
    assert "plain: 3 jobs" in out and "dag: 3 jobs" in out and "CPU ms per job: submit" in out


def test_the_timeline_counts_starts_idle_and_stalls_per_second(tmp_path):
    from htc.eventlog import EventLogWriter
    from htc.eventlog import events as ev

    timeline = load("dag_timeline")
    log = tmp_path / "nodes.log"
    writer = EventLogWriter(log)
    t0 = 1_800_000_000.0
    for c in (1, 2, 3, 4):  # four jobs queued at once; one starts and ends each second, but none in second 3
        writer.write(ev.SubmitEvent(cluster=c, timestamp=t0))
    for c, s in ((1, 1), (2, 2), (3, 4), (4, 5)):
        writer.write(ev.ExecuteEvent(cluster=c, timestamp=t0 + s))
        writer.write(ev.JobTerminatedEvent(cluster=c, terminated_normally=True, return_value=0, timestamp=t0 + s))
    first, rows = timeline.per_second(log)
    assert first == t0
    assert [row[2] for row in rows] == [0, 1, 1, 0, 1, 1]  # starts per second
    assert [row[4] for row in rows] == [4, 3, 2, 2, 1, 0]  # idle at each second's end
    text = timeline.summary(rows)
    assert "submissions over the first 1 s; first start at 1 s" in text
    assert "seconds without a start while jobs were idle: 1" in text
