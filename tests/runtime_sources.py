"""Stand-in sources for the tests of htc.runtime.build: a few small C files in place of the
runtime's own, so a build is quick, compiled into a machine cache of the test's own."""

from __future__ import annotations

from pathlib import Path

from htc.runtime import build


def stand_in_sources(tmp_path: Path, monkeypatch, files: dict[str, str]) -> Path:
    """Make ``tmp_path / "c"`` hold ``files`` (name -> text) and be the runtime's sources
    (``build.SOURCE_DIR``), with the machine cache at ``tmp_path / "machine"`` (never the
    machine's real one: these are not its sources); returns the sources' directory."""
    monkeypatch.setenv("HTC_RUNTIME_CACHE", str(tmp_path / "machine"))
    src = tmp_path / "c"
    src.mkdir()
    for name, text in files.items():
        (src / name).write_text(text)
    monkeypatch.setattr(build, "SOURCE_DIR", src)
    return src
