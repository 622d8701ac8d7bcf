"""Shared fixtures: every test runs against its own HTC_HOME, never the user's ~/.htc."""

from __future__ import annotations

import os
import time

import pytest

# Time-formatting builtins are specified (and the oracle corpora generated) in UTC.
os.environ["TZ"] = "UTC"
if hasattr(time, "tzset"):
    time.tzset()


@pytest.fixture(autouse=True)
def _isolated_htc_home(tmp_path_factory, monkeypatch):
    """Point HTC_HOME at a fresh directory and clear config overrides for each test."""
    home = tmp_path_factory.mktemp("htc_home")
    monkeypatch.setenv("HTC_HOME", str(home))
    monkeypatch.delenv("HTC_CONFIG", raising=False)
    for name in list(os.environ):
        if name.upper().startswith("_HTC_"):
            monkeypatch.delenv(name, raising=False)
    yield home
