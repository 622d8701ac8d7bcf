"""The sandbox's ad files (starter/ad_files.py): the text ClassAd.printOld writes, line by line."""

from __future__ import annotations

import pytest

from htc.classad import ClassAd, ClassAdValueError, Value
from htc.daemons.starter import ad_files
from htc.daemons.starter.ad_files import ad_file_text

ADS = [
    {"ClusterId": 7, "ProcId": 0, "Cmd": "/bin/true", "Owner": "alice", "DAGNodeName": "n0"},
    {"A": 1, "B": True, "C": 1.0, "D": -0.0, "E": 0.0, "F": "quote \" and \\ and\nnewline", "G": [1, "x", 2.5]},
    {"A": Value.Undefined, "B": Value.Error, "C": None, "D": 2 ** 40, "E": float("inf")},
    {"a": 1, "A": 2},
    {"odd name": 1, "x": 3},
    {},
]


@pytest.mark.parametrize("ad", ADS)
def test_the_text_is_what_print_old_writes(ad):
    expected = ClassAd(dict(ad)).printOld().encode()
    assert ad_file_text(ad) == expected
    assert ad_file_text(ad) == expected  # again, from the remembered lines


def test_equal_values_of_other_types_print_their_own_lines():
    assert ad_file_text({"A": 1}) == b"A = 1\n"
    assert ad_file_text({"A": True}) == b"A = true\n"
    assert ad_file_text({"A": 1.0}) == ClassAd({"A": 1.0}).printOld().encode()
    assert ad_file_text({"A": 0.0}) != ad_file_text({"A": -0.0})


def test_a_value_with_no_classad_equivalent_is_refused_as_before():
    with pytest.raises(ClassAdValueError):
        ad_file_text({"A": object()})


def test_a_line_seen_before_is_not_printed_again(monkeypatch):
    ad_file_text({"Owner": "carol", "ProcId": 1})
    printed = []
    real = ad_files.ClassAd
    monkeypatch.setattr(ad_files, "ClassAd", lambda source=None: printed.append(dict(source)) or real(source))
    assert ad_file_text({"Owner": "carol", "ProcId": 2}) == b'Owner = "carol"\nProcId = 2\n'
    assert printed == [{"ProcId": 2}]
