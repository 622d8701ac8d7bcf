"""Where a root startd makes sandboxes when the default EXECUTE is out of the slot user's reach.

A root personal pool runs jobs as ``nobody``; its default EXECUTE, ``$HTC_HOME/execute``, sits
under ``/root`` (or pytest's ``/tmp/pytest-of-root``), both mode 0700. The startd then uses a
root-owned per-pool directory; an administrator's own EXECUTE is always kept.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from htc.config import load_config
from htc.daemons.execute_dir import resolve_execute_dir, shared_execute_dir, shared_execute_path, unreachable_parent
from htc.daemons.startd.service import settings_from_config

ROOT = os.geteuid() == 0
pytestmark = pytest.mark.skipif(not ROOT, reason="only a root startd switches to a slot user")


@pytest.fixture
def base() -> Path:
    """A directory every user may traverse (pytest's tmp_path is below root's 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="htc-execute-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture
def hidden(base: Path) -> Path:
    """A pool home below a directory only root may enter (like /root/.htc)."""
    private = base / "private"
    private.mkdir(mode=0o700)
    return private / "home"


def test_the_default_execute_under_a_private_home_moves_to_a_per_pool_directory(hidden, base):
    shared_root = base / "shared" / "execute"
    chosen, why = resolve_execute_dir(hidden / "execute", home=hidden, is_default=True, slot_user="nobody",
                                      root=shared_root)
    assert chosen.parent == shared_root and len(chosen.name) == 16
    assert f"{hidden.parent} is mode 0700" in why and str(chosen) in why
    for directory in (shared_root, chosen):
        st = directory.lstat()
        assert stat.S_IMODE(st.st_mode) == 0o755 and st.st_uid == 0
    assert unreachable_parent(chosen, pwd.getpwnam("nobody")) is None
    # The same home always gets the same directory; another home another one.
    assert resolve_execute_dir(hidden / "execute", home=hidden, is_default=True, slot_user="nobody",
                               root=shared_root)[0] == chosen
    assert shared_execute_dir(base / "other", shared_root) != chosen


def test_execute_is_kept_when_it_works_or_an_administrator_chose_it(hidden, base):
    open_home = base / "open"
    open_home.mkdir(mode=0o755)
    shared_root = base / "shared"
    assert resolve_execute_dir(open_home / "execute", home=open_home, is_default=True, slot_user="nobody",
                               root=shared_root) == (open_home / "execute", "")
    assert resolve_execute_dir(hidden / "execute", home=hidden, is_default=False, slot_user="nobody",
                               root=shared_root) == (hidden / "execute", "")
    assert not shared_root.exists()


def test_a_per_pool_directory_others_could_write_to_is_refused_with_advice(hidden, base):
    shared_root = base / "shared"
    shared_root.mkdir(mode=0o777)
    shared_root.chmod(0o777)
    chosen, why = resolve_execute_dir(hidden / "execute", home=hidden, is_default=True, slot_user="nobody",
                                      root=shared_root)
    assert chosen == hidden / "execute"
    assert "writable by nobody else" in why and "set EXECUTE" in why


def test_the_startd_settings_resolve_execute_from_the_configuration(hidden, tmp_path, monkeypatch):
    """The generated htc_config says EXECUTE = $(LOCAL_DIR)/execute: that counts as the default."""
    monkeypatch.setenv("HTC_HOME", str(hidden))
    monkeypatch.delenv("HTC_CONFIG", raising=False)
    for name in [n for n in os.environ if n.startswith("_HTC_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr("htc.daemons.execute_dir.SHARED_EXECUTE_ROOT", tmp_path / "unused")
    chosen = tmp_path / "shared"
    monkeypatch.setattr("htc.daemons.startd.service.resolve_execute_dir",
                        lambda configured, **kw: (chosen, f"moved {configured} ({kw['is_default']})"))
    config = load_config("STARTD")
    # As root, EXECUTE's value already is the per-pool directory where jobs will run
    # (htc.config.execute), so that htc config_val EXECUTE says so.
    configured = shared_execute_path(hidden) if os.geteuid() == 0 else hidden / "execute"
    assert config.param("EXECUTE") == str(configured)
    settings = settings_from_config(config, hidden)
    assert settings.execute_dir == chosen and settings.sensors.execute_dir == chosen
    assert settings.execute_note == f"moved {configured} (True)" and settings.execute_chosen
    monkeypatch.setenv("_HTC_EXECUTE", str(tmp_path / "mine"))
    settings = settings_from_config(load_config("STARTD"), hidden)
    assert settings.execute_note == f"moved {tmp_path / 'mine'} (False)"
