"""What the checkpointing runtime refuses, and how (issue #20, test 4).

The restarter refuses, with a message and a documented exit code and without touching anything,
an image it cannot restore safely: a damaged or tampered one, one from another kernel or CPU, a
file that is not an image, one whose input files changed.  Programs the runtime cannot handle are
detected: threads, fork and sockets at the moment they happen, or, when the user allowed them,
when a checkpoint is asked for (it is refused and the job runs on).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib

import pytest

from htc.runtime import checkpoint, image
from tests.jobrt_ckpt_kit import CounterRun, copy, make_kit, started, wait_for

pytestmark = pytest.mark.slow

KERNEL_OFFSET = 40  # struct jr_header.kernel
XCR0_OFFSET = 112  # struct jr_header.xcr0


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return make_kit(tmp_path_factory.mktemp("jobrt_bin"))


@pytest.fixture(scope="module")
def vacated(kit, tmp_path_factory):
    """A counter vacated early: its run directory (the image is intact; tests copy it)."""
    run = CounterRun(kit, tmp_path_factory.mktemp("jobrt_vacated"))
    with open(run.stdout, "wb") as out:
        job = checkpoint.start(run.argv(), run.image, tools=kit.tools, stdout=out)
    wait_for(lambda: started(run), what="the counter to start")
    job.vacate()
    return run


def _rewrite(path, offset: int, data: bytes, *, fix_checksum: bool) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset:offset + len(data)] = data
    if fix_checksum:
        raw[16:20] = b"\0\0\0\0"
        raw[16:20] = struct.pack("<I", zlib.crc32(raw))
    path.write_bytes(bytes(raw))


def _restart_raw(kit, img) -> subprocess.CompletedProcess:
    """Run the restarter itself (not --check): it must exit cleanly, not crash."""
    return subprocess.run([str(kit.tools.restarter), str(img)], capture_output=True, text=True, timeout=60)


def test_tampered_image_is_refused(kit, vacated, tmp_path):
    img = copy(vacated.image, tmp_path / "tampered.img")
    header = image.read_header(img)
    _rewrite(img, header.total_size - 5000, b"\xff\x00\xee", fix_checksum=False)
    with pytest.raises(checkpoint.RestartRefused) as refused:
        checkpoint.check(img, tools=kit.tools)
    assert refused.value.code == 65 and refused.value.reason == "corrupt"
    assert "checksum mismatch" in str(refused.value)
    with pytest.raises(image.ImageError, match="checksum mismatch"):
        image.verify(img)
    done = _restart_raw(kit, img)
    assert done.returncode == 65 and "checksum mismatch" in done.stderr


def test_image_from_another_kernel_is_refused(kit, vacated, tmp_path):
    img = copy(vacated.image, tmp_path / "foreign.img")
    _rewrite(img, KERNEL_OFFSET, b"5.10.0-foreign\0", fix_checksum=True)
    assert image.verify(img).kernel == "5.10.0-foreign"  # intact, just foreign
    with pytest.raises(checkpoint.RestartRefused, match="kernel 5.10.0-foreign") as refused:
        checkpoint.check(img, tools=kit.tools)
    assert refused.value.reason == "foreign"
    done = _restart_raw(kit, img)
    assert done.returncode == 66 and "5.10.0-foreign" in done.stderr


def test_image_from_another_cpu_is_refused(kit, vacated, tmp_path):
    img = copy(vacated.image, tmp_path / "cpu.img")
    xcr0 = image.read_header(img).xcr0
    _rewrite(img, XCR0_OFFSET, struct.pack("<Q", xcr0 ^ 0xE0), fix_checksum=True)
    done = _restart_raw(kit, img)
    assert done.returncode == 66 and "XCR0" in done.stderr


def test_a_file_that_is_not_an_image_is_refused(kit, tmp_path):
    junk = tmp_path / "junk.img"
    junk.write_bytes(b"#!/bin/sh\necho not an image\n" * 300)
    done = _restart_raw(kit, junk)
    assert done.returncode == 65 and "not a checkpoint image" in done.stderr
    with pytest.raises(image.ImageError, match="not a checkpoint image"):
        image.read_header(junk)


def test_changed_input_file_is_refused(kit, tmp_path):
    run = CounterRun(kit, tmp_path)
    data = tmp_path / "input.bin"
    data.write_bytes(kit.input.read_bytes())
    argv = run.argv()
    argv[1] = str(data)
    with open(run.stdout, "wb") as out:
        job = checkpoint.start(argv, run.image, tools=kit.tools, stdout=out)
    wait_for(lambda: started(run), what="the counter to start")
    job.vacate()
    data.write_bytes(data.read_bytes() + b"more input")
    with pytest.raises(checkpoint.RestartRefused, match="input file .*input.bin changed") as refused:
        checkpoint.check(run.image, tools=kit.tools)
    assert refused.value.reason == "files"


def test_thread_is_detected_when_it_starts(kit, tmp_path):
    done = subprocess.run([str(kit.prog("threads"))], capture_output=True, text=True, timeout=60,
                          env=checkpoint._env(kit.tools, tmp_path / "t.img", None, False, True))
    assert done.returncode == checkpoint.UNSUPPORTED_EXIT
    assert f"{kit.prog('threads')} starts a thread" in done.stderr


def test_fork_is_detected_when_it_happens(kit, tmp_path):
    done = subprocess.run([str(kit.prog("forks"))], capture_output=True, text=True, timeout=60,
                          env=checkpoint._env(kit.tools, tmp_path / "f.img", None, False, True))
    assert done.returncode == checkpoint.UNSUPPORTED_EXIT
    assert "forks a child process" in done.stderr


def test_allowed_threads_run_without_checkpoints(kit, tmp_path):
    img = tmp_path / "t.img"
    job = checkpoint.start([str(kit.prog("threads"))], img, tools=kit.tools, stdout=subprocess.PIPE,
                           allow_unsupported=True)
    try:
        assert job.process.stdout.readline() == b"started\n"
        with pytest.raises(checkpoint.CheckpointRefused, match="runs 2 threads"):
            job.checkpoint()
        assert not img.exists()
        assert job.process.poll() is None, "a refused checkpoint leaves the job running"
    finally:
        job.kill()


def test_socket_is_detected_when_opened(kit, tmp_path):
    script = "import socket\ns = socket.socket()\nprint('not reached')\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env=checkpoint._env(kit.tools, tmp_path / "s.img", None, False, True))
    assert done.returncode == checkpoint.UNSUPPORTED_EXIT and "opens a socket" in done.stderr
    assert "not reached" not in done.stdout


def test_allowed_socket_is_refused_at_checkpoint(kit, tmp_path):
    script = "import socket, sys, time\ns = socket.socket()\nprint('ready', flush=True)\ntime.sleep(60)\n"
    job = checkpoint.start([sys.executable, "-c", script], tmp_path / "s.img", tools=kit.tools,
                           stdout=subprocess.PIPE, allow_unsupported=True)
    try:
        assert job.process.stdout.readline() == b"ready\n"
        with pytest.raises(checkpoint.CheckpointRefused, match="is a socket"):
            job.checkpoint()
    finally:
        job.kill()
