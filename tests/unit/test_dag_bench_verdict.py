"""benchmarks/dag_bench.py judges the wide DAG's goal on the median of its rounds' ratios, and
benchmarks/dag_schedd_bench.py runs (small; no timing asserted here)."""

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
