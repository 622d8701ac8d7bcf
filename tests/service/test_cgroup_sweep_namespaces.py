"""The startd's sweep of stale job cgroups (htc.daemons.starter.limits.sweep_stale_cgroups)
judges only cgroups made in its own PID namespace: a simulated host's or a container's job
cgroups share the host's cgroup tree, and their pids mean nothing here."""

from __future__ import annotations

import contextlib
import os

import psutil
import pytest

from htc.daemons.starter import limits


def _layout() -> limits.CgroupLayout:
    if os.geteuid() != 0:
        pytest.skip("makes cgroups in the host's cgroup tree: run the tests as root, as CI does")
    layout = limits.detect_cgroups()
    if layout.version not in (1, 2) or (layout.version == 2 and layout.base is None):
        pytest.skip(f"no writable cgroup tree here ({layout.describe()}): run the tests as root, as CI does")
    return layout


def _parents(layout: limits.CgroupLayout):
    return [layout.base] if layout.version == 2 else [p for _, p in layout.v1]


def _dead_pid() -> int:
    pid = 4_000_000 + os.getpid() % 100_000
    while psutil.pid_exists(pid):
        pid += 1
    return pid


def test_only_this_namespaces_cgroups_of_gone_starters_are_swept():
    layout = _layout()
    dead = _dead_pid()
    mine = limits.pid_namespace()
    names = {"ours": f"htc_dir_{dead}_1_ns{mine}",
             "other namespace": f"htc_dir_{dead}_1_ns{mine + 1}",
             "live": f"htc_dir_{os.getpid()}_7_ns{mine}"}
    made = []
    try:
        for parent in _parents(layout):
            for name in names.values():
                (parent / name).mkdir()
                made.append(parent / name)
        removed = limits.sweep_stale_cgroups(layout)
        for parent in _parents(layout):
            assert parent / names["ours"] in removed
            assert not (parent / names["ours"]).exists()
            assert (parent / names["other namespace"]).is_dir(), "another PID namespace's cgroup was removed"
            assert (parent / names["live"]).is_dir()
    finally:
        for path in made:
            with contextlib.suppress(OSError):
                path.rmdir()


def test_a_job_cgroup_is_named_with_its_pid_namespace():
    layout = _layout()
    group = limits.JobCgroup.create(f"dir_{os.getpid()}_99", None, None, layout)
    assert group is not None
    try:
        for path in group.dirs.values():
            assert path.name == f"htc_dir_{os.getpid()}_99_ns{limits.pid_namespace()}"
    finally:
        for path in group.dirs.values():
            with contextlib.suppress(OSError):
                path.rmdir()
