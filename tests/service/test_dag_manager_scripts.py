"""PRE/POST/HOLD scripts as real processes: run in the node's directory with their arguments,
output to the DEBUG file, reaped without waiting, signal deaths and unstartable scripts."""

from __future__ import annotations

import time

from htc.dag.manager.scripts import Scripts


def reap_all(scripts: Scripts, want: int, timeout: float = 30.0) -> list:
    done: list = []
    deadline = time.monotonic() + timeout
    while len(done) < want and time.monotonic() < deadline:
        done += scripts.reap()
        time.sleep(0.01)
    return done


def test_scripts_run_in_the_node_dir_and_are_reaped_with_their_status(tmp_path):
    (tmp_path / "s.sh").write_text('#!/bin/sh\necho "out $@"\necho "err" >&2\npwd > where\nexit $1\n')
    (tmp_path / "s.sh").chmod(0o755)
    (tmp_path / "die.sh").write_text("#!/bin/sh\nkill -9 $$\n")
    (tmp_path / "die.sh").chmod(0o755)
    scripts = Scripts()
    assert scripts.start("A", "PRE", "s.sh", ["3", "x y"], str(tmp_path), "a.debug", "STDERR") is not None
    assert scripts.start("B", "POST", "./die.sh", [], str(tmp_path)) is not None
    assert scripts.start("C", "HOLD", "nope.sh", [], str(tmp_path)) is None
    done = {f.node: f for f in reap_all(scripts, 3)}
    assert (done["A"].kind, done["A"].status) == ("PRE", 3)
    assert done["B"].status == -9
    assert done["C"].status == -1 and "cannot run the HOLD script nope.sh of node C" in done["C"].error
    assert (tmp_path / "where").read_text().strip() == str(tmp_path)
    debug = (tmp_path / "a.debug").read_text()
    assert "PRE script of node A started" in debug and "err" in debug and "out 3" not in debug
    assert len(scripts) == 0


def test_kill_all_stops_running_scripts(tmp_path):
    scripts = Scripts()
    scripts.start("A", "PRE", "/bin/sleep", ["60"], str(tmp_path))
    started = time.monotonic()
    scripts.kill_all()
    assert time.monotonic() - started < 10 and len(scripts) == 0
