"""STARTD_ATTRS publishes config macros in every slot ad (HTCondor's startd does the same)."""

from __future__ import annotations

import pytest

from htc.classad import ClassAd
from htc.config import load_config
from htc.daemons.startd.ads import ad_text
from htc.daemons.startd.service import published_attrs
from htc.errors import UsageError
from tests.unit.test_startd_core import make


def _config(tmp_path, text):
    (tmp_path / "c").write_text(text)
    return load_config("STARTD", env={"HTC_CONFIG": str(tmp_path / "c"), "HTC_HOME": str(tmp_path)})


def test_listed_macros_become_expressions(tmp_path):
    attrs = published_attrs(_config(tmp_path, 'STARTD_ATTRS = Project, HasBigDisk, Unset\n'
                                              'Project = "genomics"\nHasBigDisk = TotalDisk > 1000\n'))
    assert sorted(attrs) == ["HasBigDisk", "Project"]
    assert str(attrs["Project"]) == '"genomics"'


def test_every_slot_ad_carries_them_and_the_startds_own_win(tmp_path):
    attrs = published_attrs(_config(tmp_path, 'STARTD_ATTRS = Project, Cpus\nProject = "genomics"\nCpus = 999\n'))
    startd = make(static=2, static_attrs=attrs)
    for slot in startd.slots.values():
        ad = ClassAd(ad_text(startd.slot_ad(slot, 0.0)))
        assert ad.eval("Project") == "genomics"
        assert ad.eval("Cpus") != 999


@pytest.mark.parametrize("text, words", [
    ("STARTD_ATTRS = 9lives\n", "not a ClassAd attribute name"),
    ("STARTD_ATTRS = Site\nSite = an unquoted (string\n", 'quote a string value: Site = "an unquoted'),
])
def test_bad_entries_are_named(tmp_path, text, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        published_attrs(_config(tmp_path, text))
