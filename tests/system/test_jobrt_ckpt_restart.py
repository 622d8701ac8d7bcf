"""Checkpoint, kill and restart real programs in new processes; outputs must be byte-identical.

Issue #20, test 2: a C counter (dynamic, through the preload library's handler) checkpointed at
random moments over several generations, both "checkpoint and vacate" and "periodic checkpoint,
then crash" (restarting from an older image); and an unmodified CPython interpreter in a loop.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time

import pytest

from htc.runtime import checkpoint, image
from tests.jobrt_ckpt_kit import PROGS, CounterRun, copy, make_kit, reference, started, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return make_kit(tmp_path_factory.mktemp("jobrt_bin"))


@pytest.fixture(scope="module")
def ref(kit, tmp_path_factory):
    return reference(kit, tmp_path_factory.mktemp("jobrt_ref"))


def _rng(request) -> random.Random:
    seed = random.randrange(1 << 30)
    print(f"{request.node.name}: random seed {seed}")
    return random.Random(seed)


@pytest.mark.parametrize("aslr", ["on", "restart without ASLR"])
def test_vacate_and_restart_over_generations(kit, ref, tmp_path, request, aslr):
    rng = _rng(request)
    launcher = ["setarch", "-R"] if aslr != "on" else []
    if launcher and subprocess.run([*launcher, "true"], capture_output=True).returncode:
        pytest.skip("setarch -R (personality ADDR_NO_RANDOMIZE) does not work on this host")
    run = CounterRun(kit, tmp_path)
    pids = []
    with open(run.stdout, "wb") as out:
        job = checkpoint.start(run.argv(), run.image, tools=kit.tools, stdout=out)
    pids.append(job.pid)
    wait_for(lambda: started(run), what="the counter to start")
    generations = 3
    for generation in range(generations):
        _sleep(rng.uniform(0.02, 0.25))
        header = job.vacate()
        assert job.process.returncode == checkpoint.VACATED_EXIT
        assert header.generation == generation and header.source == "in-process handler"
        assert run.out.stat().st_size < len(ref.out), "the counter finished before its checkpoint"
        with open(run.stdout, "ab") as out:
            job = checkpoint.restart(run.image, tools=kit.tools, stdout=out, launcher=launcher)
        pids.append(job.pid)
    assert job.wait(timeout=300) == 0
    assert len(set(pids)) == generations + 1, "every generation runs in a new process"
    got = run.outputs()
    assert got.out == ref.out
    assert got.log == ref.log
    assert got.stdout == ref.stdout


def _sleep(seconds: float) -> None:
    """Let the job run on for a random moment (what it computes does not depend on it)."""
    time.sleep(seconds)


def test_crash_rolls_back_to_an_older_image(kit, ref, tmp_path, request):
    rng = _rng(request)
    run = CounterRun(kit, tmp_path)
    with open(run.stdout, "wb") as out:
        job = checkpoint.start(run.argv(), run.image, tools=kit.tools, stdout=out)
    wait_for(lambda: started(run), what="the counter to start")
    # generation 0: a periodic checkpoint, more work, then a crash
    _sleep(rng.uniform(0.02, 0.2))
    first = job.checkpoint()
    older = copy(run.image, tmp_path / "older.img")
    _sleep(rng.uniform(0.02, 0.2))
    job.kill()
    # generation 1: restarted, checkpointed again (a newer image), crashed again
    with open(run.stdout, "ab") as out:
        job = checkpoint.restart(run.image, tools=kit.tools, stdout=out)
    _sleep(rng.uniform(0.05, 0.2))
    newer = job.checkpoint()
    assert newer.seq > first.seq and newer.generation == 1
    _sleep(rng.uniform(0.02, 0.1))
    job.kill()
    # the newer image is lost; restart from the older one: outputs roll back to its sizes
    with open(run.stdout, "ab") as out:
        job = checkpoint.restart(older, tools=kit.tools, stdout=out, image_out=run.image)
    _sleep(rng.uniform(0.02, 0.1))
    third = job.checkpoint()
    assert third.generation == 1 and third.seq > first.seq
    job.kill()
    with open(run.stdout, "ab") as out:
        job = checkpoint.restart(run.image, tools=kit.tools, stdout=out)
    assert job.wait(timeout=300) == 0
    got = run.outputs()
    assert got.out == ref.out
    assert got.log == ref.log
    assert got.stdout == ref.stdout


def test_cpython_loop_survives_checkpoint_and_restart(kit, tmp_path, request):
    rng = _rng(request)
    script = str(PROGS / "pyloop.py")
    n = 3000
    ref_out, ref_stdout = tmp_path / "ref.txt", tmp_path / "ref.stdout"
    with open(ref_stdout, "wb") as out:
        subprocess.run([sys.executable, script, str(ref_out), str(n)], stdout=out, check=True, timeout=300)
    got_out, got_stdout, img = tmp_path / "got.txt", tmp_path / "got.stdout", tmp_path / "py.img"
    with open(got_stdout, "wb") as out:
        job = checkpoint.start([sys.executable, script, str(got_out), str(n)], img, tools=kit.tools, stdout=out)
    wait_for(lambda: got_stdout.stat().st_size > 0, what="python to start its loop")
    _sleep(rng.uniform(0.02, 0.3))
    header = job.checkpoint()
    assert any("python" in r.name or "libpython" in r.name for r in header.regions) or "python" in header.exe
    _sleep(rng.uniform(0.02, 0.2))
    job.kill()
    with open(got_stdout, "ab") as out:
        job = checkpoint.restart(img, tools=kit.tools, stdout=out)
    _sleep(rng.uniform(0.02, 0.2))
    job.vacate()
    with open(got_stdout, "ab") as out:
        job = checkpoint.restart(img, tools=kit.tools, stdout=out)
    assert job.wait(timeout=300) == 0
    assert got_out.read_bytes() == ref_out.read_bytes()
    assert got_stdout.read_bytes() == ref_stdout.read_bytes()
    assert image.verify(img).generation == 1
