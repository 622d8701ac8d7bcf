"""A copy of the project installed as the README installs it, in a directory only root may enter.

The README's install command run by root in ``/root/project`` makes ``/root/project/.venv``
with htc installed editable from ``/root/project``: every file of it is behind ``/root``
(mode 0700), out of reach of the slot accounts that run root's jobs. :func:`make_private_venv`
makes the same thing under a 0700 directory of ``/tmp``: the project's sources copied, a venv
made by the base interpreter, the tests' installed packages hard-linked into it (no network),
and htc's editable install -- the files ``pip install -e`` wrote for the tests' own venv (its
finder, ``.pth`` and ``.dist-info``) -- copied with the project's path changed to the copy's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent


def make_private_venv() -> tuple[Path, Path]:
    """``(private, python)``: the 0700 directory (remove it when done) and its venv's python."""
    private = Path(tempfile.mkdtemp(prefix="htc-private-root-", dir="/tmp"))
    private.chmod(0o700)
    project = private / "project"
    project.mkdir()
    for name in ("htc", "executors", "dag", "examples"):
        shutil.copytree(PROJECT / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(PROJECT / name, project / name)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(project / ".venv")], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    theirs = project / ".venv" / "lib" / minor / "site-packages"
    for item in ours.iterdir():
        target = theirs / item.name
        if item.name.startswith(("__editable__", "htc-")):  # htc's editable install: point it at the copy
            if item.is_dir():
                shutil.copytree(item, target)
            else:
                target.write_text(item.read_text().replace(str(PROJECT) + "/", str(project) + "/"))
        elif item.is_dir():
            shutil.copytree(item, target, copy_function=os.link, symlinks=True)
        else:
            os.link(item, target)
    return private, project / ".venv" / "bin" / "python"
