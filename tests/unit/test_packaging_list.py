"""pyproject.toml names every package of the tree, so a regular (non-editable) install has them all.

An editable install finds subpackages through the package-dir mapping whether they are listed or
not, so a forgotten entry shows only when someone installs the wheel: this test catches it first.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _packages_on_disk() -> set[str]:
    """Every folder with an ``__init__.py``, named as installed (dag/ is htc.dag, executors/ htc.executors)."""
    tops = {"htc": "htc", "dag": "htc.dag", "executors": "htc.executors"}
    found = set()
    for folder, name in tops.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if "__pycache__" in rel.parts:
                continue
            found.add(".".join([name, *rel.parts]))
    return found


def test_every_package_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    assert _packages_on_disk() - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - _packages_on_disk() == set(), "these listed packages have no folder"
