"""The per-node shortcuts of expanding a DAG node's description: the environment snapshot
decoded once while ``os.environ`` stays the same, and plain literals (``+DAGNodeName = "n17"``)
taken as their own canonical text without the ClassAd parser -- each giving what the long way
gives."""

from __future__ import annotations

import os

import pytest

from htc.submit import exprtext, macros


def test_environ_snapshot_decodes_again_only_after_a_change(monkeypatch):
    decoded = []
    real = os.environ.decodevalue
    monkeypatch.setattr(os.environ, "decodevalue", lambda v: decoded.append(v) or real(v))
    first = macros.environ_snapshot(None)
    decoded.clear()
    second = macros.environ_snapshot(None)
    assert decoded == []            # nothing decoded again: os.environ did not change
    assert second == first == dict(os.environ)
    second["HTC_TEST_SNAPSHOT"] = "mutated"
    assert "HTC_TEST_SNAPSHOT" not in macros.environ_snapshot(None)   # each caller gets its own copy
    monkeypatch.setenv("HTC_TEST_SNAPSHOT", "one")
    assert macros.environ_snapshot(None)["HTC_TEST_SNAPSHOT"] == "one"
    monkeypatch.setenv("HTC_TEST_SNAPSHOT", "two")
    assert macros.environ_snapshot(None)["HTC_TEST_SNAPSHOT"] == "two"
    monkeypatch.delenv("HTC_TEST_SNAPSHOT")
    assert "HTC_TEST_SNAPSHOT" not in macros.environ_snapshot(None)
    assert macros.environ_snapshot({"A": "1"}) == {"A": "1"}


SIMPLE = ['"n17"', '""', '"DAG Node: n0"', '"a-b_c.d:e+f/g@h,i"', "0", "7", "123456789012345678"]
NOT_SIMPLE = ['"a\\"b"', '"tab\there"', "007", "-5", "1234567890123456789012", '"x" ', ' "x"', "true",
              '"caf\u00e9"', '"a\\\\b"', '"unterminated', "1.5"]


@pytest.mark.parametrize("text", SIMPLE + NOT_SIMPLE)
def test_canonical_is_what_the_parser_gives(text):
    assert exprtext.canonical(text) == exprtext._canonical_parsed(text)


def test_plain_literals_skip_the_parser(monkeypatch):
    def refuse(text):
        raise AssertionError(f"parsed {text!r}")

    monkeypatch.setattr(exprtext, "_parse", refuse)
    exprtext._canonical_parsed.cache_clear()
    for text in SIMPLE:
        assert exprtext.check("DAGNodeName", text) == text
