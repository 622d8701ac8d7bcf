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


# --- client_python: HTCExecutor() of a root client mirrors its own Python (issue #16) -------------

def _open_root(request) -> Path:
    """A mirror root every user may traverse (pytest's tmp dirs are root's 0700)."""
    where = Path(tempfile.mkdtemp(prefix="htc-mirror-", dir="/tmp"))
    where.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(where, ignore_errors=True))
    return where / "python"


def _as_nobody(python: str, code: str) -> subprocess.CompletedProcess:
    import pwd

    nobody = pwd.getpwnam("nobody")
    return subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                           python, "-c", code], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                          cwd="/", timeout=120)


def test_client_python_not_root_is_this_interpreter(monkeypatch, tmp_path):
    from htc.executors.client_env import client_python

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert client_python(root=tmp_path / "py") == sys.executable
    assert not (tmp_path / "py").exists()


@ROOT_ONLY
def test_client_python_runs_as_nobody_with_this_clients_packages(request):
    from htc.executors.client_env import client_python

    root = _open_root(request)
    python = client_python(root=root)
    # msgspec and psutil: installed in the tests' venv, not in the system Python
    done = _as_nobody(python, "import msgspec, psutil, htc.executors.worker, sys; print(msgspec.__version__, "
                              "sys.prefix)")
    assert done.returncode == 0, done.stderr
    import msgspec

    version, prefix = done.stdout.split()
    assert version == msgspec.__version__ and prefix.startswith(str(root)), done.stdout
    assert client_python(root=root) == python, "an unchanged environment reuses its mirror"


@ROOT_ONLY
def test_a_private_path_entry_is_mirrored_by_link_or_readable_copy(monkeypatch, request):
    from htc.executors.client_env import client_python

    private = Path(tempfile.mkdtemp(prefix="htc-private-", dir="/tmp"))  # 0700, like /root
    request.addfinalizer(lambda: shutil.rmtree(private, ignore_errors=True))
    site = private / "site"
    site.mkdir()
    (site / "htc_probe_open.py").write_text("WHO = 'open'\n")
    (site / "htc_probe_open.py").chmod(0o644)
    (site / "htc_probe_secret.py").write_text("WHO = 'secret'\n")
    (site / "htc_probe_secret.py").chmod(0o600)
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    root = _open_root(request)
    python = client_python(root=root)
    done = _as_nobody(python, "import htc_probe_open as a, htc_probe_secret as b; print(a.WHO, b.WHO, a.__file__)")
    assert done.returncode == 0, done.stderr
    who_a, who_b, where = done.stdout.split()
    assert (who_a, who_b) == ("open", "secret")
    mirrored = Path(where)
    assert mirrored == root / python.split("/")[-4] / "tree" / str(site).lstrip("/") / "htc_probe_open.py"
    # a file every user could read is a hard link (root's inode, nobody may write it) ...
    assert mirrored.stat().st_ino == (site / "htc_probe_open.py").stat().st_ino
    # ... a private one a readable copy: the client's own file keeps its mode
    copy = mirrored.parent / "htc_probe_secret.py"
    assert copy.stat().st_ino != (site / "htc_probe_secret.py").stat().st_ino
    assert (site / "htc_probe_secret.py").stat().st_mode & 0o777 == 0o600 and copy.stat().st_mode & 0o777 == 0o644
    assert _as_nobody(python, f"open({str(mirrored)!r}, 'a')").returncode != 0, "the mirror is not the job's to write"
    # a change in the environment makes a new mirror; the old one stays for the jobs using it
    (site / "htc_probe_open.py").write_text("WHO = 'changed'\n")
    newer = client_python(root=root)
    assert newer != python and Path(python).parent.exists()
    assert _as_nobody(newer, "import htc_probe_open as a; print(a.WHO)").stdout.split() == ["changed"]


@ROOT_ONLY
@pytest.mark.parametrize("site_open", [False, True], ids=["venv-private", "venv-open"])
def test_an_editable_install_behind_a_private_dir_points_at_the_mirror(monkeypatch, request, site_open):
    """The project behind a 0700 directory; its venv there too, or where everyone may read it
    (its finder is then mirrored all the same, to point at the mirrored sources)."""
    import types

    from htc.executors.client_env import client_python

    private = Path(tempfile.mkdtemp(prefix="htc-private-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(private, ignore_errors=True))
    src = private / "project" / "htc_probe_pkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("WHO = 'editable'\n")
    site = (_open_root(request).parent if site_open else private) / "site"
    site.mkdir()
    site.chmod(0o755)
    finder_text = (f"MAPPING = {{'htc_probe_pkg': {str(src)!r}}}\n"
                   "import importlib.util, sys\n"
                   "class F:\n"
                   "    @classmethod\n"
                   "    def find_spec(cls, name, path=None, target=None):\n"
                   "        if name in MAPPING:\n"
                   "            return importlib.util.spec_from_file_location(name, MAPPING[name] + '/__init__.py')\n"
                   "def install():\n"
                   "    sys.meta_path.append(F)\n")
    finder = site / "__editable___htc_probe_0_finder.py"
    finder.write_text(finder_text)
    (site / "__editable__.htc_probe-0.pth").write_text("import __editable___htc_probe_0_finder; "
                                                       "__editable___htc_probe_0_finder.install()\n")
    module = types.ModuleType("__editable___htc_probe_0_finder")
    module.MAPPING, module.__file__ = {"htc_probe_pkg": str(src)}, str(finder)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    root = _open_root(request)
    python = client_python(root=root)
    done = _as_nobody(python, "import htc_probe_pkg as p; print(p.WHO, p.__file__)")
    assert done.returncode == 0, done.stderr
    who, where = done.stdout.split()
    assert who == "editable" and where.startswith(str(root)) and where.endswith(str(src / "__init__.py"))
    assert finder.read_text() == finder_text, "the client's finder is never written through its link"


@ROOT_ONLY
def test_a_mirror_root_others_may_write_is_refused(request):
    from htc.errors import HTCError
    from htc.executors.client_env import client_python

    where = Path(tempfile.mkdtemp(prefix="htc-mirror-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(where, ignore_errors=True))
    where.chmod(0o777)
    with pytest.raises(HTCError, match="written by others"):
        client_python(root=where / "python")
    assert not list((where / "python").glob("*/venv")), "nothing made where it could be swapped"


@ROOT_ONLY
def test_a_mirror_made_under_umask_077_is_still_open_to_the_slot_accounts(request):
    from htc.executors.client_env import client_python

    root = _open_root(request).parent / "made" / "by" / "python"
    old = os.umask(0o077)
    try:
        python = client_python(root=root)
    finally:
        os.umask(old)
    done = _as_nobody(python, "import msgspec, htc.executors.worker; print('ok')")
    assert done.returncode == 0 and done.stdout.split() == ["ok"], done.stderr
