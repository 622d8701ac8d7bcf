"""Shared fixtures: every test runs against its own HTC_HOME, never the user's ~/.htc."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

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


@pytest.fixture()
def home():
    """A daemon's home of its own: under /tmp, so that its sockets' paths stay short (a Unix
    socket's path holds 108 bytes), and 0755, so that a slot's user (when the test runs as
    root) can reach its execute directory; removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="htsv-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
