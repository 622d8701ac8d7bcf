"""The client reads the SUBMIT configuration once per process, and again when it changed."""

from __future__ import annotations

import os

import pytest

import htc.config
from htc.client import submission
from htc.errors import UsageError


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """A config file of our own, an empty cache, and a count of the configuration reads."""
    cfg = tmp_path / "htc_config"
    cfg.write_text("MAX_JOBS_PER_SUBMISSION = 5\n")
    monkeypatch.setenv("HTC_CONFIG", str(cfg))
    monkeypatch.setattr(submission, "_CONFIG_CACHE", [])
    reads = []
    real = htc.config.load_config

    def load_config(*args, **kwargs):
        reads.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(htc.config, "load_config", load_config)
    return cfg, reads


def test_the_limit_is_read_once_for_many_submissions(counted):
    _cfg, reads = counted
    for _ in range(20):
        submission._per_submission_limit(5)
    with pytest.raises(UsageError, match="limit is 5"):
        submission._per_submission_limit(6)
    assert len(reads) == 1


def test_a_changed_config_file_is_seen(counted):
    cfg, reads = counted
    with pytest.raises(UsageError, match="limit is 5"):
        submission._per_submission_limit(6)
    cfg.write_text("MAX_JOBS_PER_SUBMISSION = 50\n")
    stat = cfg.stat()
    os.utime(cfg, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a coarse clock
    submission._per_submission_limit(6)
    assert len(reads) == 2


def test_a_file_added_to_the_config_folder_is_seen(counted, monkeypatch):
    cfg, reads = counted
    local = cfg.parent / "config.d"
    local.mkdir()
    cfg.write_text(f"LOCAL_CONFIG_DIR = {local}\nMAX_JOBS_PER_SUBMISSION = 5\n")
    submission._per_submission_limit(5)
    (local / "10-limit").write_text("MAX_JOBS_PER_SUBMISSION = 3\n")
    stat = local.stat()
    os.utime(local, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with pytest.raises(UsageError, match="limit is 3"):
        submission._per_submission_limit(5)


def test_another_htc_environment_is_another_config(counted, monkeypatch, tmp_path):
    _cfg, reads = counted
    submission._per_submission_limit(5)
    other = tmp_path / "other_config"
    other.write_text("MAX_JOBS_PER_SUBMISSION = 2\n")
    monkeypatch.setenv("HTC_CONFIG", str(other))
    with pytest.raises(UsageError, match="limit is 2"):
        submission._per_submission_limit(5)
