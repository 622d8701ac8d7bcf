"""The pieces of ``universe = standard`` that touch files and processes, one at a time: the
schedd keeps a new image only once it verifies (the previous one stays), and the starter's
spawn gives the job its file-server connection at a fixed number and nothing else."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from htc.daemons.job_files import TransferError
from htc.daemons.schedd import checkpoints as cp
from htc.daemons.starter.spawn import exec_job
from htc.runtime import RuntimeUnavailable, checkpoint, image
from htc.wire import messages as m


@pytest.fixture(scope="module")
def an_image(tmp_path_factory) -> Path:
    """A real image of a small CPython loop."""
    try:
        tools = checkpoint.build_tools()
    except RuntimeUnavailable as err:
        pytest.skip(f"the runtime cannot be built on this host: {err}")
    where = tmp_path_factory.mktemp("img")
    job = checkpoint.start(["/usr/bin/python3", "-c", "import time\nwhile True: time.sleep(0.01)"],
                           where / "image", tools=tools)
    try:
        time.sleep(0.5)
        job.checkpoint()
    finally:
        job.kill()
    return where / "image"


def receive(directory: Path, data: bytes) -> None:
    """What the schedd does with one SendCheckpoint stream's file."""
    sink = cp._ImageSink(directory)
    entry = m.FileEntry(name=cp.IMAGE_NAME, kind="file", size=len(data))
    fd = sink.begin(entry)
    os.write(fd, data)
    sink.finish(entry, fd)


def test_a_verified_image_replaces_the_previous_one_and_a_bad_one_never_does(an_image, tmp_path):
    good = an_image.read_bytes()
    receive(tmp_path, good)
    assert cp._keep(tmp_path) == len(good)
    assert (tmp_path / "image").read_bytes() == good and not (tmp_path / "image.incoming").exists()
    damaged = bytearray(good)
    damaged[len(good) // 2] ^= 0xFF
    receive(tmp_path, bytes(damaged))
    with pytest.raises(TransferError, match="does not verify.*previous image is kept"):
        cp._keep(tmp_path)
    assert (tmp_path / "image").read_bytes() == good  # still the latest
    assert not (tmp_path / "image.incoming").exists()
    image.verify(tmp_path / "image")


def test_a_checkpoint_stream_carries_one_file_named_image(tmp_path):
    sink = cp._ImageSink(tmp_path)
    with pytest.raises(TransferError):
        sink.begin(m.FileEntry(name="../etc/passwd", kind="file", size=1))
    with pytest.raises(TransferError):
        sink.begin(m.FileEntry(name=cp.IMAGE_NAME, kind="link", target="/etc/passwd"))


def test_the_latest_image_is_streamed_and_none_is_an_empty_stream(tmp_path):
    assert list(cp._latest(tmp_path)) == []
    (tmp_path / "image").write_bytes(b"x" * 10)
    [out] = list(cp._latest(tmp_path))
    os.close(out.fd)
    assert (out.entry.name, out.entry.size) == ("image", 10)


def test_the_checkpoint_directory_sits_beside_the_spool_directory():
    assert cp.checkpoint_directory("/s", 12345, 3) == Path("/s/2345/3/cluster12345.proc3.ckpt")


_LIST_AND_SAY = "import os; print(*os.listdir('/proc/self/fd'), flush=True); os.write(1000, b'hello\\n')"


def test_the_job_gets_its_connection_at_its_number_and_no_other_inheritable_descriptor(tmp_path):
    ours, theirs = socket.socketpair()
    theirs.set_inheritable(False)
    stray = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(stray, True)  # would leak into the job without close_fds
    out = tmp_path / "fds"
    plan = {"argv": ["/usr/bin/python3", "-c", _LIST_AND_SAY], "env": {"PATH": "/usr/bin:/bin"},
            "cwd": "/", "stdin": os.devnull, "stdin_fd": None, "stdout": str(out), "stderr": str(out),
            "rlimit_memory": None, "core": 0, "job_fds": {1000: theirs.fileno()}}
    try:
        pid = exec_job(plan, None, None, None, (), (None, None), "1.0")
        theirs.close()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert ours.recv(100) == b"hello\n"
    finally:
        os.close(stray)
        ours.close()
    fds = {int(n) for n in out.read_text().split()}
    assert fds - {3} == {0, 1, 2, 1000}  # (3: the listing's own descriptor)
