"""``htc sim``: the fixed JSON surface, scenario files, -plot."""

from __future__ import annotations

import importlib.util
import json

import pytest

from htc.cli.main import main
from htc.errors import UsageError
from htc.sim import plot as sim_plot
from htc.sim.engine import Simulation
from htc.sim.scenario import load

TINY = """
name = "tiny"
machines = 3
days = 1
drain_days = 3
[[users]]
name = "A"
class = "heavy"
batch = [6, 6]
period_hours = 30
first_batch_hours = 1
[[users]]
name = "L"
class = "light"
batch = [1, 1]
period_hours = 30
first_batch_hours = 10
[negotiator]
NEGOTIATOR_INTERVAL = 600
"""


@pytest.fixture()
def tiny(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def test_condor88_json_has_the_fixed_fields(capsys):
    assert main(["sim", "condor88", "-policy", "htcondor", "-seed", "2", "-days", "0.25",
                 "-json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("available_hours", "remote_hours", "jobs", "completed"):
        assert isinstance(out[key], (int, float))
    assert set(out["classes"]) == {"light", "heavy"}
    for cls in out["classes"].values():
        assert "mean_wait_ratio" in cls and "allocation_wait" in cls
    assert (out["scenario"], out["policy"], out["seed"], out["machines"]) == ("condor88", "HTCONDOR", 2, 23)


def test_a_scenario_file_runs_under_the_policy_given(tiny, capsys):
    assert main(["sim", str(tiny), "-policy", "FIFO", "-json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["scenario"], out["policy"], out["jobs"], out["completed"]) == ("tiny", "FIFO", 7, 7)
    assert out["classes"]["light"]["jobs"] == 1 and out["cpu_exact"] is True
    assert out["users"]["A"]["jobs"] == 6 and out["users"]["L"]["jobs"] == 1
    assert out["time_with_30_in_system"] == {"heavy": 0.0, "light": 0.0}


def test_text_output_names_the_classes(tiny, capsys):
    assert main(["sim", str(tiny)]) == 0
    out = capsys.readouterr().out
    assert "tiny policy=HTCONDOR seed=1" in out and "heavy" in out and "light" in out


def test_plots_are_written_or_the_missing_extra_is_named(tiny, tmp_path):
    sim = Simulation(load(tiny)).run()
    if importlib.util.find_spec("matplotlib") is None:
        with pytest.raises(UsageError, match="sim-plot"):
            sim_plot.plot(sim, tmp_path / "figs")
        return
    paths = sim_plot.plot(sim, tmp_path / "figs")
    assert sorted(p.name for p in paths) == ["moves.png", "queue.png", "wait_ratio.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths)


def test_the_cli_offers_exactly_the_simulators_policies(capsys):
    from htc.cli.sim import POLICY_NAMES
    from htc.sim.scenario import POLICIES

    assert sorted(POLICY_NAMES) == sorted(POLICIES)
    with pytest.raises(SystemExit):
        main(["sim", "condor88", "-policy", "LOTTERY"])
    assert "invalid choice" in capsys.readouterr().err
