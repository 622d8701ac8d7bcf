"""htc.runtime.build's machine cache: a build into a cache of its own (a new pool's jobrt-cache
beside EXECUTE) takes the runtime from the machine's cache, compiled once there, instead of
compiling again; a machine cache that others can write (its group too, unless it is the
process's own) is not used. The compiler is the real
one behind a wrapper that logs each run; the sources are a small stand-in library, so the
compiles are quick."""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
from pathlib import Path

import pytest

from htc.runtime import build
from runtime_sources import stand_in_sources


@pytest.fixture
def logged_cc(tmp_path, monkeypatch) -> Path:
    """CC is a wrapper of the host's compiler that appends its arguments to the returned log;
    the sources are a one-file library; the machine cache is ``tmp_path / "machine"``."""
    real = shutil.which("cc") or shutil.which("gcc")
    if real is None:
        pytest.skip("no C compiler on this host: apt-get install gcc libc6-dev, as CI does")
    log = tmp_path / "cc.log"
    wrapper = tmp_path / "cc"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    stand_in_sources(tmp_path, monkeypatch, {"jobrt_io.c": "int jobrt_stand_in(void) { return 42; }\n"})
    return log


def compiles(log: Path) -> int:
    """How many times the wrapper compiled something (not ``--version``/``-dumpmachine``)."""
    return sum(" -o " in f" {line} " for line in log.read_text().splitlines()) if log.exists() else 0


def test_a_second_pool_takes_the_runtime_from_the_machine_cache_without_compiling(logged_cc, tmp_path):
    first = build.library(cache=tmp_path / "pool1" / "jobrt-cache")
    assert compiles(logged_cc) == 1
    second = build.library(cache=tmp_path / "pool2" / "jobrt-cache")
    assert compiles(logged_cc) == 1  # the compiler did not run again
    assert second.is_relative_to(tmp_path / "pool2") and second.read_bytes() == first.read_bytes()
    assert ctypes.CDLL(str(second)).jobrt_stand_in() == 42
    machine = tmp_path / "machine"
    [cached] = machine.glob("*/libjobrt.so")
    for path in (machine, cached.parent, second.parent, second.parent.parent):
        assert stat.S_IMODE(path.stat().st_mode) == 0o755, path
    assert stat.S_IMODE(cached.stat().st_mode) == stat.S_IMODE(second.stat().st_mode) == 0o755
    assert not [p for p in (*cached.parent.iterdir(), *second.parent.iterdir()) if p.name.startswith(".")]
    assert build.library() == cached  # a build without a cache of its own uses the machine's


def test_a_machine_cache_others_can_write_is_not_used(logged_cc, tmp_path):
    machine = tmp_path / "machine"
    machine.mkdir()
    machine.chmod(0o777)
    with pytest.raises(build.RuntimeUnavailable, match=r"not safe to run programs from.*writable by others "
                                                       r"\(mode 0777, group \d+\).*HTC_RUNTIME_CACHE"):
        build.library()
    own = build.library(cache=tmp_path / "pool" / "jobrt-cache")  # compiled into its own cache alone
    assert ctypes.CDLL(str(own)).jobrt_stand_in() == 42
    assert not list(machine.rglob("libjobrt.so"))


def test_an_artifact_others_could_have_changed_is_refused(logged_cc, tmp_path):
    cached = build.library()
    cached.chmod(0o666)
    with pytest.raises(build.RuntimeUnavailable, match="others could have changed.*writable by others"):
        build.library(cache=tmp_path / "pool" / "jobrt-cache")
    assert compiles(logged_cc) == 1
    cached.chmod(0o775)  # group-writable, by this process's own group (a umask of 002): kept
    assert build.library(cache=tmp_path / "pool" / "jobrt-cache").read_bytes() == cached.read_bytes()
    if os.geteuid() == 0:  # (only root can give a file away)
        os.chown(cached, -1, 12345)  # group-writable by another group
        with pytest.raises(build.RuntimeUnavailable, match="writable by others.*group 12345"):
            build.library(cache=tmp_path / "other" / "jobrt-cache")
        cached.chmod(0o755)
        os.chown(cached, 12345, -1)
        with pytest.raises(build.RuntimeUnavailable, match="belongs to uid 12345"):
            build.library(cache=tmp_path / "other" / "jobrt-cache")
