"""htc.runtime.build: the runtime's C sources compile into a cache keyed by their hash."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from htc.errors import UsageError
from htc.runtime import build
from runtime_sources import stand_in_sources


def test_library_builds_once_and_is_cached(tmp_path):
    lib = build.library(cache=tmp_path)
    assert lib.name == "libjobrt.so" and lib.parent.parent == tmp_path
    stamp = lib.stat().st_mtime_ns
    assert build.library(cache=tmp_path) == lib
    assert lib.stat().st_mtime_ns == stamp  # not rebuilt
    # the shared declarations are exported by the library
    so = ctypes.CDLL(str(lib))
    assert so.jobrt_io_remote_files(None, 0) == 0


def test_cache_env_var_and_key_follow_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("HTC_RUNTIME_CACHE", str(tmp_path / "env"))
    lib = build.library()
    assert lib.is_relative_to(tmp_path / "env")
    # an edited source gives a new cache directory
    src = tmp_path / "c"
    src.mkdir()
    for p in build.SOURCE_DIR.iterdir():
        (src / p.name).write_bytes(p.read_bytes())
    monkeypatch.setattr(build, "SOURCE_DIR", src)
    assert build.library() == lib
    (src / "jobrt_extra.c").write_text("int jobrt_extra_symbol(void) { return 7; }\n")
    other = build.library()
    assert other != lib and other.parent != lib.parent
    assert ctypes.CDLL(str(other)).jobrt_extra_symbol() == 7


def test_programs_and_library_split_sources(tmp_path, monkeypatch):
    src = stand_in_sources(tmp_path, monkeypatch, {
        "jobrt.h": "#define JOBRT_H 1\n",
        "jobrt_io.c": '#include "jobrt.h"\nint jobrt_io_active(void) { return JOBRT_H; }\n',
        "jobrt_restart.c": "this is not C and must stay out of the library\n",
        "jobrt_tool_main.c": '#include <stdio.h>\nint main(void) { puts("tool ran"); return 0; }\n'})
    monkeypatch.setitem(build.PROGRAMS, "jobrt-tool", build.ProgramSpec(flags=("-O2",)))
    assert [p.name for p in build.library_sources()] == ["jobrt_io.c", "jobrt_tool_main.c"]
    (src / "jobrt_tool_main.c").rename(src / "jobrt_tool.c")
    build.library(cache=tmp_path / "cache")
    exe = build.program("jobrt-tool", cache=tmp_path / "cache")
    assert subprocess.run([exe], capture_output=True, text=True).stdout == "tool ran\n"
    with pytest.raises(build.RuntimeUnavailable, match="no program named 'jobrt-nope'"):
        build.program("jobrt-nope", cache=tmp_path / "cache")


def test_compile_error_quotes_the_compiler(tmp_path, monkeypatch):
    stand_in_sources(tmp_path, monkeypatch, {"jobrt_io.c": "int broken(void) { return undeclared_thing; }\n"})
    with pytest.raises(build.RuntimeUnavailable) as info:
        build.library(cache=tmp_path / "cache")
    assert isinstance(info.value, UsageError)
    assert "undeclared_thing" in str(info.value) and "libjobrt.so" in str(info.value)
    # nothing half-built is left for the next caller to pick up
    assert not list((tmp_path / "cache").rglob("libjobrt.so"))


def test_no_compiler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(build.RuntimeUnavailable, match="no C compiler found.*apt-get install gcc libc6-dev"):
        build.library(cache=tmp_path)


def test_missing_static_libc_is_named(tmp_path, monkeypatch):
    # A compiler wrapper whose linker cannot find libc.a, as on a host without libc6-dev.
    fake = tmp_path / "fakecc"
    fake.write_text("#!/bin/sh\necho \"/usr/bin/ld: cannot find -lc: No such file or directory\" >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    stand_in_sources(tmp_path, monkeypatch, {"jobrt_tool.c": "int main(void) { return 0; }\n"})
    monkeypatch.setitem(build.PROGRAMS, "jobrt-tool", build.ProgramSpec(flags=("-static",), static=True))
    with pytest.raises(build.RuntimeUnavailable, match="static C library is missing"):
        build.program("jobrt-tool", cache=tmp_path / "cache")


def test_concurrent_builds_both_succeed(tmp_path):
    code = textwrap.dedent(f"""
        from htc.runtime import build
        print(build.library(cache={str(tmp_path)!r}))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outs)) == 1 and Path(outs[0]).exists()
    assert not [p for p in Path(outs[0]).parent.iterdir() if p.name.startswith(".build-")]


def test_sources_are_package_data():
    import tomllib
    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = data["htc.runtime"]
    for path in build.SOURCE_DIR.iterdir():
        assert any(path.match(p.split("/")[-1]) for p in patterns), path
    assert os.path.exists(build.SOURCE_DIR / "jobrt.h")
