"""PERIODIC_CHECKPOINT: evaluated against the slot ad (with LastPeriodicCheckpoint) and the job
ad; true -> CheckpointJob for a running standard-universe job, and the period restarts."""

from __future__ import annotations

from types import SimpleNamespace

from htc.config import load_config
from htc.daemons.startd import events as ev
from htc.daemons.startd.periodic_checkpoint import PeriodicCheckpoints
from htc.daemons.startd.policy import ClassAdPolicy


def _startd(expression: str, universe: int = 1):
    claim = SimpleNamespace(id="slot1@h#1#x", job_ad={"JobUniverse": universe, "ImageSize": 4000})
    slot = SimpleNamespace(name="slot1@h", claim=claim)
    return SimpleNamespace(slots={slot.name: slot}, policy=ClassAdPolicy({"PERIODIC_CHECKPOINT": expression}),
                           slot_ad=lambda s, now: {"Name": s.name, "Memory": 512})


def _periodic(started: float = 1000.0) -> PeriodicCheckpoints:
    periodic = PeriodicCheckpoints()
    periodic.started("slot1@h#1#x", started)  # StarterStarted
    return periodic


def _run(periodic: PeriodicCheckpoints, startd, now: float, running=("slot1@h#1#x",)) -> list:
    out: list = []
    periodic.evaluate(startd, set(running), now, out)
    return out


def test_it_fires_once_the_expression_is_true_and_then_counts_from_the_checkpoint():
    startd = _startd("(time() - LastPeriodicCheckpoint) > 60")
    periodic = PeriodicCheckpoints()
    assert _run(periodic, startd, 1050.0) == []  # not started yet: nothing to checkpoint
    periodic.started("slot1@h#1#x", 1000.0)
    assert _run(periodic, startd, 1050.0) == []  # 50 s since the job started
    assert _run(periodic, startd, 1061.0) == [ev.CheckpointJob("slot1@h", "slot1@h#1#x", why="PERIODIC_CHECKPOINT")]
    assert _run(periodic, startd, 1100.0) == []  # LastPeriodicCheckpoint is now 1061
    assert len(_run(periodic, startd, 1122.0)) == 1


def test_it_sees_the_job_ad_as_target_and_htc_checkpoint_restarts_the_period():
    startd = _startd("TARGET.ImageSize > 1000 && MY.Memory >= 512 && (time() - LastPeriodicCheckpoint) > 10")
    periodic = _periodic()
    periodic.checkpointed("slot1@h#1#x", 1008.0)  # htc checkpoint
    assert _run(periodic, startd, 1015.0) == []
    assert len(_run(periodic, startd, 1019.0)) == 1


def test_only_running_standard_universe_jobs_are_checkpointed():
    periodic = _periodic()
    assert _run(periodic, _startd("True", universe=5), 2000.0) == []  # vanilla
    assert _run(periodic, _startd("True"), 2000.0, running=()) == []  # starter not running
    assert periodic.last == {}  # (claims no longer running are forgotten)


def test_the_default_is_htcondors_two_and_a_half_to_three_and_a_half_hours(tmp_path):
    (tmp_path / "c").write_text("")
    config = load_config("STARTD", env={"HTC_CONFIG": str(tmp_path / "c"), "HTC_HOME": str(tmp_path)})
    text = str(config.param("PERIODIC_CHECKPOINT"))
    assert text.startswith("((time() - LastPeriodicCheckpoint)/60.0) > (180.0 + ")  # $RANDOM_INTEGER expanded
    startd = _startd(text)
    assert _run(_periodic(0.0), startd, 149 * 60.0) == []
    assert len(_run(_periodic(0.0), startd, 211 * 60.0)) == 1
