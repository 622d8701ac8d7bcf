"""Fixtures shared by the service tests."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture()
def home():
    """A daemon's home of its own: under /tmp, so that its sockets' paths stay short (a Unix
    socket's path holds 108 bytes), and 0755, so that a slot's user (when the test runs as
    root) can reach its execute directory; removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="htsv-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
