"""htc.executors.shared_python: a Python the slot user can run, for a client running as root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from htc.executors import shared_python
from htc.executors.execute_env import _readable_by

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="only a root client's calls run as another user (nobody); run the tests as root, as CI does")


def test_not_root_needs_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert shared_python(tmp_path / "py") == (sys.executable, {})
    assert not (tmp_path / "py").exists()


@ROOT_ONLY
def test_a_private_install_is_copied_where_nobody_can_run_it(monkeypatch, request):
    import pwd

    import htc.executors.execute_env as env

    nobody = pwd.getpwnam("nobody")
    monkeypatch.setattr(env, "_reachable_install", lambda user: False)  # as if installed under /root
    open_dir = Path(tempfile.mkdtemp(prefix="htc-shared-py-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(open_dir, ignore_errors=True))
    open_dir.chmod(0o755)
    python, environment = shared_python(open_dir / "py")
    site = Path(environment["PYTHONPATH"])
    assert _readable_by(site / "htc" / "__init__.py", nobody) and _readable_by(Path(python), nobody)
    assert list(site.glob("htc/executors/__pycache__/worker.*.pyc")), "byte-compiled for the slot user"
    # nobody really runs it: imports the worker and sees the same package versions
    probe = ("import importlib.metadata as m, htc.executors.worker, cloudpickle; "
             "print(m.version('cloudpickle'), cloudpickle.__file__.startswith(%r))" % str(site))
    done = subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                           python, "-c", probe], env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, cwd="/", timeout=60)
    assert done.returncode == 0, done.stderr
    import importlib.metadata as metadata

    assert done.stdout.split() == [metadata.version("cloudpickle"), "True"]
    # again: the complete copy is reused, not rebuilt
    marker = site / "htc" / "__init__.py"
    before = marker.stat().st_mtime_ns
    assert shared_python(open_dir / "py") == (python, environment)
    assert marker.stat().st_mtime_ns == before


@ROOT_ONLY
def test_a_root_the_slot_user_cannot_reach_is_refused(monkeypatch, tmp_path):
    import htc.executors.execute_env as env
    from htc.errors import HTCError

    monkeypatch.setattr(env, "_reachable_install", lambda user: False)
    closed = tmp_path / "closed"  # pytest's tmp dirs are private to root
    with pytest.raises(HTCError, match="cannot reach"):
        shared_python(closed / "py")
    assert not (closed / "py" / "site").exists(), "nothing copied where it cannot be used"


@ROOT_ONLY
def test_an_unknown_slot_user_is_named(tmp_path):
    from htc.errors import HTCError

    with pytest.raises(HTCError, match="no-such-user-htc"):
        shared_python(tmp_path, slot_user="no-such-user-htc")
