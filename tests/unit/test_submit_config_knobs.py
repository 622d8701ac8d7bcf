"""Submit-side knobs reach the jobs htc submit makes (as condor_config reaches condor_submit's)."""

from __future__ import annotations

import pytest

from htc import client
from htc.config import load_config
from htc.errors import UsageError
from htc.submit.settings import KNOBS, settings_from_config

CONFIG = """\
JOB_DEFAULT_REQUESTMEMORY = 512
JOB_DEFAULT_REQUESTCPUS = 2
UID_DOMAIN = users.example
FILESYSTEM_DOMAIN = files.example
APPEND_REQUIREMENTS = TARGET.HasBigDisk =?= true
DEFAULT_RANK = TARGET.Memory
SUBMIT_ATTRS = Project, +Site, Missing
Project = "genomics"
Site = 7 * 6
"""


@pytest.fixture
def configured(tmp_path, monkeypatch):
    (tmp_path / "htc.cfg").write_text(CONFIG)
    monkeypatch.setenv("HTC_CONFIG", str(tmp_path / "htc.cfg"))
    monkeypatch.setenv("HTC_HOME", str(tmp_path / "home"))
    return tmp_path


def _job(tmp_path, text):
    (tmp_path / "run.sh").write_text("#!/bin/sh\ntrue\n")
    cluster = client.build_cluster(text, cwd=str(tmp_path), filename="job.sub")
    return next(iter(cluster.job_ads()))


def test_every_mapped_knob_is_declared():
    from htc.config import params

    for knob in KNOBS.values():
        assert params.lookup(knob) is not None, knob


def test_htc_submit_uses_the_configured_defaults(configured):
    ad = _job(configured, "executable = run.sh\nqueue\n")
    assert ad["RequestMemory"] == "512" and ad["RequestCpus"] == "2"
    assert ad["FileSystemDomain"] == '"files.example"'
    assert "HasBigDisk" in ad["Requirements"]
    assert ad["Rank"] == "TARGET.Memory"
    assert ad["Project"] == '"genomics"' and ad["Site"] == "7 * 6"
    assert "Missing" not in ad


def test_the_description_overrides_the_configuration(configured):
    ad = _job(configured, 'executable = run.sh\nrequest_memory = 64\n+Project = "physics"\nqueue\n')
    assert ad["RequestMemory"] == "64"
    assert ad["Project"] == '"physics"'


def test_without_configuration_the_defaults_are_htcondors(tmp_path, monkeypatch):
    (tmp_path / "htc.cfg").write_text("")
    monkeypatch.setenv("HTC_CONFIG", str(tmp_path / "htc.cfg"))
    monkeypatch.setenv("HTC_HOME", str(tmp_path / "home"))
    ad = _job(tmp_path, "executable = run.sh\nqueue\n")
    assert ad["RequestCpus"] == "1"
    assert ad["RequestMemory"] == "128"


def test_a_bad_submit_attrs_entry_is_named(tmp_path):
    (tmp_path / "c").write_text("SUBMIT_ATTRS = 9lives\n")
    config = load_config(env={"HTC_CONFIG": str(tmp_path / "c"), "HTC_HOME": str(tmp_path)})
    with pytest.raises(UsageError, match="SUBMIT_ATTRS names '9lives'"):
        settings_from_config(config)


def test_the_schedd_expands_descriptions_with_its_configuration(tmp_path):
    from htc.daemons.schedd.service import settings_from_config as schedd_settings

    (tmp_path / "c").write_text("JOB_DEFAULT_REQUESTMEMORY = 300\nSUBMIT_ATTRS = Tag\nTag = 1\n")
    config = load_config("SCHEDD", env={"HTC_CONFIG": str(tmp_path / "c"), "HTC_HOME": str(tmp_path)})
    settings = schedd_settings(config)
    assert settings.submit.default_request_memory == "300"
    assert settings.submit.submit_attrs == (("Tag", "1"),)
