"""A Python another local user can start, for the tests that act as ``htctest-alice``.

The tests' interpreter may live where other users cannot reach (under ``/root``, with pyenv);
:func:`python_argv` then takes the system's interpreter of the same version and adds the
tests' packages the way ``site`` adds them (the ``.pth`` files included, so that the editable
install of htc resolves as it does for the tests).
"""

from __future__ import annotations

import os
import shutil
import site
import stat
import sys
from pathlib import Path


def _open_to_others(path: str) -> bool:
    real = Path(os.path.realpath(path))
    return all(stat.S_IMODE(p.stat().st_mode) & 0o001 for p in real.parents) and \
        bool(stat.S_IMODE(real.stat().st_mode) & 0o001)


def python_argv(script: str) -> list[str]:
    """``[python, "-c", script]`` that another user can run, with the tests' packages."""
    python = sys.executable
    if not _open_to_others(python):
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        python = shutil.which(version, path="/usr/bin:/usr/local/bin") or ""
        if not python:
            raise AssertionError(f"no {version} other users can run; the tests' own is {sys.executable}")
    packages = [p for p in site.getsitepackages() if Path(p).is_dir()]
    return [python, "-c", f"import site\nfor p in {packages!r}: site.addsitedir(p)\n" + script]
