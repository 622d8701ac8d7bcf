"""htc.config.execute: EXECUTE's value is where a root startd's jobs really run."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from htc.config.execute import execute_default, shared_execute_path
from htc.daemons.execute_dir import resolve_execute_dir

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="only a root startd moves EXECUTE; run the tests as root, as CI does")


@pytest.fixture
def base():
    path = Path(tempfile.mkdtemp(prefix="htc-exec-cfg-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


@root_only
def test_a_private_default_becomes_the_per_pool_directory_and_the_startd_makes_it(base):
    private = base / "private"
    private.mkdir(mode=0o700)
    home, root = private / "home", base / "shared" / "execute"
    value = execute_default(str(home / "execute"), home, root)
    assert value == str(shared_execute_path(home, root)) and Path(value).parent == root
    made, why = resolve_execute_dir(Path(value), home=home, is_default=True, root=root)
    assert made == Path(value) and made.is_dir() and (made.stat().st_mode & 0o777) == 0o755
    assert f"jobs run in {made} instead" in why


@root_only
def test_a_reachable_default_stands(base):
    assert execute_default(str(base / "home" / "execute"), base / "home", base / "shared") is None


def test_not_root_the_default_stands(base, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    private = base / "private"
    private.mkdir(mode=0o700)
    assert execute_default(str(private / "execute"), private, base / "shared") is None
