"""DAGMan's submit throttle fitted to a changed idle limit, as HTCondor's dagman_main.cpp does:
DAGMAN_MAX_JOBS_IDLE other than 1000 makes a default DAGMAN_MAX_SUBMITS_PER_INTERVAL
max(1, maxidle / 10) and a default DAGMAN_USER_LOG_SCAN_INTERVAL no larger than that."""

from __future__ import annotations

import os

import pytest

from htc.dag.manager.settings import load_settings


@pytest.fixture
def env(tmp_path):
    return {"HTC_CONFIG": "ONLY_ENV", "HTC_HOME": str(tmp_path / "home"), "PATH": os.environ.get("PATH", "")}


def test_the_default_idle_limit_leaves_the_throttle_alone(env):
    s = load_settings(env=env)
    assert (s.max_submits_per_interval, s.user_log_scan_interval, s.notes) == (100, 5, [])


def test_a_lower_idle_limit_lowers_the_default_submits_per_interval(env):
    s = load_settings(flags={"DAGMAN_MAX_JOBS_IDLE": 50}, env=env)
    assert (s.max_submits_per_interval, s.user_log_scan_interval) == (5, 5)
    assert any("DAGMAN_MAX_SUBMITS_PER_INTERVAL has been changed to 5" in n for n in s.notes)
    assert s.engine_options(dag_id=0, node_log="x").max_submits_per_interval == 5


def test_and_the_default_scan_interval_when_it_is_larger_than_the_submits(env):
    s = load_settings(flags={"DAGMAN_MAX_JOBS_IDLE": 20}, env=env)
    assert (s.max_submits_per_interval, s.user_log_scan_interval) == (2, 2)
    assert s.engine_options(dag_id=0, node_log="x").submit_interval == 2.0
    assert any("DAGMAN_USER_LOG_SCAN_INTERVAL has been changed to 2" in n for n in s.notes)


def test_values_set_away_from_their_defaults_are_kept_with_a_warning(tmp_path, env):
    conf = tmp_path / "dagman.conf"
    conf.write_text("DAGMAN_MAX_SUBMITS_PER_INTERVAL = 40\nDAGMAN_USER_LOG_SCAN_INTERVAL = 60\n")
    s = load_settings(dag_config=str(conf), flags={"DAGMAN_MAX_JOBS_IDLE": 30}, env=env)
    assert (s.max_submits_per_interval, s.user_log_scan_interval) == (40, 60)
    assert sum(n.startswith("Warning:") for n in s.notes) == 2


def test_no_idle_limit_at_all_is_one_submission_a_second_as_in_htcondor(env):
    s = load_settings(flags={"DAGMAN_MAX_JOBS_IDLE": 0}, env=env)
    assert (s.max_submits_per_interval, s.user_log_scan_interval) == (1, 1)


@pytest.mark.parametrize(("given", "used"), [(0, 1), (-5, 1), (1000, 1000), (1000000, 1000)])
def test_max_submits_per_interval_is_held_to_its_legal_range(env, tmp_path, given, used):
    """HTCondor's manual: legal range 1 to 1000; below 1 gives 1, above 1000 gives 1000."""
    conf = tmp_path / "dag.config"
    conf.write_text(f"DAGMAN_MAX_SUBMITS_PER_INTERVAL = {given}\n")
    s = load_settings(config_file=str(conf), env=env)
    assert s.max_submits_per_interval == used
    assert any("outside its legal range" in n for n in s.notes) == (given != used)
