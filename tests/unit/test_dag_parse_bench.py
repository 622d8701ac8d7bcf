"""benchmarks/dag_parse_bench.py builds the DAG shapes it says (run small; no timing here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from htc.dag.parser import parse_dag_text

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "dag_parse_bench.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("dag_parse_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_shapes_parse_to_the_sizes_they_promise(tmp_path: Path) -> None:
    bench = load_bench()
    chain = parse_dag_text(bench.chain(300), tmp_path / "c.dag")
    assert (len(chain.nodes), chain.graph.number_of_edges()) == (300, 299)
    fan = parse_dag_text(bench.fanout(300), tmp_path / "f.dag")
    assert (len(fan.nodes), fan.graph.number_of_edges()) == (300, 596)
    lattice = parse_dag_text(bench.lattice(400), tmp_path / "l.dag")
    assert (len(lattice.nodes), lattice.graph.number_of_edges()) == (400, 2 * 20 * 19)
    vars_ = parse_dag_text(bench.chain(50, with_vars=True), tmp_path / "v.dag")
    assert {v.name: v.value for v in vars_.nodes["A7"].vars} == {"index": "7", "name": 'node "7"'}
    assert vars_.nodes["A7"].retry == 2
