"""docs/architecture.md draws the tree as it is: one line per package folder, and nothing more."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def _drawn_folders() -> set[str]:
    """The folders of the Layout section's tree, as paths (``htc/daemons/schedd``)."""
    text = DOC.read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    folders, stack = set(), []
    for line in block.splitlines():
        match = re.match(r"^( *)([\w.]+)/(?:\s|$)", line)
        if not match:
            continue
        depth = len(match.group(1)) // 2
        stack[depth:] = [match.group(2)]
        folders.add("/".join(stack))
    return folders


def _package_folders() -> set[str]:
    """Every folder of htc/ (and the top-level dag/, executors/) that holds a Python package."""
    found = set()
    for top in ("htc", "dag", "executors"):
        for init in (ROOT / top).rglob("__init__.py"):
            found.add(init.parent.relative_to(ROOT).as_posix())
    return found


def test_every_package_folder_is_drawn_and_every_drawn_folder_exists():
    drawn = _drawn_folders()
    packages = _package_folders()
    assert packages - drawn == set(), f"folders missing from docs/architecture.md: {sorted(packages - drawn)}"
    ghosts = {f for f in drawn if not (ROOT / f).is_dir()}
    assert ghosts == set(), f"docs/architecture.md draws folders that do not exist: {sorted(ghosts)}"


def test_the_daemon_folders_have_the_rooms_the_doc_promises():
    daemons = ROOT / "htc" / "daemons"
    for name in ("master", "collector", "negotiator", "schedd", "startd", "starter"):
        folder = daemons / name
        doc = (folder / "__init__.py").read_text()
        assert doc.lstrip().startswith('"""'), f"{folder}/__init__.py has no docstring"
        assert (folder / "service.py").exists(), f"{name} has no service.py"
        if name != "starter":  # the starter is a service over helpers (its docstring says why)
            assert (folder / "core.py").exists(), f"{name} has no core.py"
        for module in folder.glob("*.py"):
            if module.name.startswith("__"):
                continue
            assert module.stem in doc, f"{name}/__init__.py does not mention {module.name}"
