"""The layer contract of pyproject.toml's [tool.importlinter], checked by import-linter.

dag/ and executors/ install as htc.dag and htc.executors (package-dir in pyproject.toml), but an
editable install leaves them outside the htc/ folder, where import-linter cannot see them. So each
test lays out the installed tree in a temporary folder (htc/ with executors/ and dag/ inside) and
runs ``lint-imports`` on that copy with the project's own configuration.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def _installed_layout(where: Path) -> Path:
    """Copy htc/, executors/ and dag/ into ``where`` as they install; return the copy's htc/."""
    htc = where / "htc"
    shutil.copytree(ROOT / "htc", htc, ignore=_IGNORE)
    shutil.copytree(ROOT / "executors", htc / "executors", ignore=_IGNORE)
    shutil.copytree(ROOT / "dag", htc / "dag", ignore=_IGNORE)
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")
    return htc


def _lint_imports(where: Path) -> subprocess.CompletedProcess:
    # A child process, so that `htc` is found in the copy rather than in this process's sys.modules.
    return subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
         "--no-cache"],
        cwd=where, env={**os.environ, "PYTHONPATH": str(where)},
        capture_output=True, text=True, timeout=120)


def test_the_layer_contract_is_kept(tmp_path):
    htc = _installed_layout(tmp_path)
    assert (htc / "executors" / "__init__.py").exists() and (htc / "dag" / "__init__.py").exists()
    result = _lint_imports(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout, result.stdout
    # the copy was analysed with the executor in it, not only htc/
    files = int(result.stdout.split("Analyzed ")[1].split()[0])
    assert files > len(list((ROOT / "htc").rglob("*.py"))), result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    htc = _installed_layout(tmp_path)
    (htc / "classad" / "upward_probe.py").write_text(
        '"""A ClassAd module that imports the job queue: forbidden."""\n\nimport htc.jobqueue.queue\n')
    (htc / "wire" / "executor_probe.py").write_text(
        '"""A wire module that imports the executor: forbidden."""\n\nfrom htc.executors import HTCExecutor\n')
    result = _lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "3 kept, 1 broken" in result.stdout, result.stdout
    assert "htc.classad is not allowed to import htc.jobqueue" in result.stdout, result.stdout
    assert "htc.classad.upward_probe -> htc.jobqueue.queue" in result.stdout, result.stdout
    assert "htc.wire is not allowed to import htc.executors" in result.stdout, result.stdout


def test_a_daemon_importing_another_daemons_folder_breaks_the_rooms(tmp_path):
    htc = _installed_layout(tmp_path)
    (htc / "daemons" / "schedd" / "sideways_probe.py").write_text(
        '"""A schedd module that reaches into the startd and the starter: forbidden."""\n\n'
        'import htc.daemons.startd.states\nimport htc.daemons.starter.sandbox\n')
    shared = htc / "daemons" / "timefmt.py"  # a shared module that imports a daemon: forbidden
    shared.write_text(shared.read_text() + "\nimport htc.daemons.master.core  # noqa: E402\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "1 kept, 3 broken" in result.stdout, result.stdout
    assert "htc.daemons.schedd.sideways_probe -> htc.daemons.startd.states" in result.stdout, result.stdout
    assert "htc.daemons.schedd.sideways_probe -> htc.daemons.starter.sandbox" in result.stdout, result.stdout
    assert "htc.daemons.timefmt -> htc.daemons.master.core" in result.stdout, result.stdout
