"""Checkpoint a static binary from outside with jobrt-dump (ptrace) and restart it.

Issue #20, test 2 for programs the preload library cannot reach: a statically linked counter is
dumped while it runs, crashes, is restarted in a new process, dumped again with "checkpoint and
kill", restarted again; its output file, write() log and stdout equal an uninterrupted run's.
"""

from __future__ import annotations

import ctypes
import os
import random
import subprocess
import time

import pytest

from htc.runtime import checkpoint
from tests.jobrt_ckpt_kit import CounterRun, make_kit, reference, started, wait_for

pytestmark = pytest.mark.slow


def _ptrace_works() -> str | None:
    """None if this process may ptrace a child, else why not."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(0x4206, child.pid, None, None) != 0:  # PTRACE_SEIZE
            return f"ptrace(PTRACE_SEIZE) is not permitted here (errno {ctypes.get_errno()}); run the tests as root, as CI does"
        return None
    finally:
        child.kill()
        child.wait()


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    reason = _ptrace_works()
    if reason:
        pytest.skip(reason)
    return make_kit(tmp_path_factory.mktemp("jobrt_bin"), static=True)


@pytest.fixture(scope="module")
def ref(kit, tmp_path_factory):
    return reference(kit, tmp_path_factory.mktemp("jobrt_ref"))


def test_static_binary_dumped_and_restarted(kit, ref, tmp_path):
    seed = random.randrange(1 << 30)
    print(f"random seed {seed}")
    rng = random.Random(seed)
    run = CounterRun(kit, tmp_path)
    with open(run.stdout, "wb") as out:
        job = subprocess.Popen(run.argv("counter_static"), stdout=out, stdin=subprocess.DEVNULL)
    pids = [job.pid]
    wait_for(lambda: started(run), what="the static counter to start")
    time.sleep(rng.uniform(0.02, 0.25))
    header = checkpoint.dump(job.pid, run.image, tools=kit.tools)  # checkpoint and continue
    assert header.source == "ptrace dumper" and header.pid == job.pid
    assert header.exe == str(kit.prog("counter_static"))
    time.sleep(rng.uniform(0.02, 0.1))
    job.kill()
    job.wait()
    # generation 1: restarted, then dumped with checkpoint-and-kill
    with open(run.stdout, "ab") as out:
        restarted = checkpoint.restart(run.image, tools=kit.tools, stdout=out)
    pids.append(restarted.pid)
    time.sleep(rng.uniform(0.02, 0.2))
    checkpoint.dump(restarted.pid, run.image, tools=kit.tools, leave="kill")
    assert restarted.wait(timeout=60) == -9
    assert run.out.stat().st_size < len(ref.out), "the counter finished before its checkpoint"
    with open(run.stdout, "ab") as out:
        final = checkpoint.restart(run.image, tools=kit.tools, stdout=out)
    pids.append(final.pid)
    assert final.wait(timeout=300) == 0
    assert len(set(pids)) == 3
    got = run.outputs()
    assert got.out == ref.out
    assert got.log == ref.log
    assert got.stdout == ref.stdout


def test_dumper_refuses_a_threaded_program(kit, tmp_path):
    job = subprocess.Popen([str(kit.prog("threads"))], stdout=subprocess.PIPE)
    try:
        assert job.stdout.readline() == b"started\n"
        with pytest.raises(checkpoint.CheckpointRefused, match="runs 2 threads"):
            checkpoint.dump(job.pid, tmp_path / "t.img", tools=kit.tools)
        assert job.poll() is None, "a refused dump leaves the process running"
        assert not os.path.exists(tmp_path / "t.img")
    finally:
        job.kill()
        job.wait()
