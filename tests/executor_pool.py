"""A real personal pool for the executor tests, and a Python its jobs can run.

When the tests run as root the startd runs jobs as ``nobody``, who cannot reach the
interpreter under ``/root`` that runs the tests. :func:`execute_python` then prepares what an
administrator prepares for execute nodes: a world-readable site directory holding the packages
a function job needs (cloudpickle, msgspec, dill, htc -- with their metadata, so the worker's
version check sees the same versions) for a system interpreter of the same Python minor
version; the executor's ``python=`` and ``environment=`` options point jobs at it.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from poolutil import Pool

HTC_SOURCE = Path(__file__).resolve().parent.parent
_PACKAGES = ("cloudpickle", "msgspec", "dill")


def _world_python() -> str | None:
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in ("/usr/bin", "/usr/local/bin", "/bin"):
        candidate = Path(folder) / minor
        if candidate.exists() and os.stat(candidate.resolve()).st_mode & 0o005 == 0o005:
            return str(candidate)
    return None


def _copy_distribution(name: str, site: Path) -> None:
    dist = metadata.distribution(name)
    module = __import__(name)
    source = Path(module.__file__).parent
    shutil.copytree(source, site / source.name, symlinks=True)
    info = Path(dist._path)  # the .dist-info directory
    shutil.copytree(info, site / info.name)


def execute_python(root: Path) -> tuple[str, dict[str, str]]:
    """The interpreter and environment function jobs should use (``python=``, ``environment=``).

    Not root: this interpreter, nothing extra. Root: a system interpreter of the same minor
    version and a site directory under ``root`` that ``nobody`` can read.
    """
    if os.geteuid() != 0:
        return sys.executable, {}
    python = _world_python()
    if python is None:
        pytest.fail(f"tests run as root, so jobs run as nobody; they need a world-executable "
                    f"python{sys.version_info.major}.{sys.version_info.minor} in /usr/bin or /usr/local/bin")
    site = root / "site"
    site.mkdir(parents=True)
    for name in _PACKAGES:
        _copy_distribution(name, site)
    htc_dir = site / "htc"
    htc_dir.mkdir()
    for entry in (HTC_SOURCE / "htc").iterdir():
        if entry.name != "__pycache__":
            (htc_dir / entry.name).symlink_to(entry)
    (htc_dir / "executors").symlink_to(HTC_SOURCE / "executors")
    (htc_dir / "dag").symlink_to(HTC_SOURCE / "dag")
    info = Path(metadata.distribution("htc")._path)
    shutil.copytree(info, site / info.name)
    # Byte-compile, as pip does when it installs: nobody cannot write __pycache__ here, and
    # without it every function job would compile htc from source.
    subprocess.run([python, "-m", "compileall", "-q", "-j", "0", str(site)], check=True, capture_output=True,
                   env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return python, {"PYTHONPATH": f"{site}:{HTC_SOURCE / 'tests'}"}


class ExecutorPool:
    """A whole personal pool (master, collector, negotiator, startd, schedd) plus job Python."""

    def __init__(self, **knobs: str):
        self.pool = Pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD", **knobs)
        self.root = Path(tempfile.mkdtemp(prefix="htc-exec-py-"))
        self.root.chmod(0o755)
        self.python, self.environment = execute_python(self.root)

    def start(self) -> ExecutorPool:
        self.pool.start()
        return self

    def executor_args(self) -> dict:
        """Keyword arguments for HTCExecutor to use this pool."""
        return {"pool": self.pool.home, "python": self.python, "environment": self.environment, "progress": False}

    def stop(self) -> None:
        try:
            self.pool.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
