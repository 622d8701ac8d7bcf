"""The pieces of ``universe = standard`` that touch files and processes, one at a time: the
schedd's checkpoint store (htc.daemons.schedd.checkpoint_files) keeps a standard job's new image
only once it verifies (the previous one stays), and the starter's spawn gives the job its
file-server connection at a fixed number and nothing else."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from ckpt_images import loop_images
from htc.daemons.job_files import TransferError
from htc.daemons.schedd import checkpoint_files as cf
from htc.daemons.starter.spawn import exec_job
from htc.runtime import image


@pytest.fixture(scope="module")
def an_image(tmp_path_factory) -> Path:
    """A real image of a small CPython loop."""
    where = tmp_path_factory.mktemp("img")
    loop_images(where)
    return where / "image"


def receive(store: Path, files: dict[str, bytes]) -> Path:
    """What the schedd's store does with one SendCheckpoint stream: a fresh ``incoming/``."""
    incoming = cf._fresh_incoming(store, None)
    for name, data in files.items():
        (incoming / name).write_bytes(data)
    return incoming


def keep(store: Path, files: dict[str, bytes]) -> int:
    """Receive a standard-universe checkpoint and swap it in when its image verifies."""
    size = cf.standard_image(receive(store, files))
    cf._swap_in(store)
    return size


def test_a_verified_image_replaces_the_previous_one_and_a_bad_one_never_does(an_image, tmp_path):
    store = cf.checkpoint_directory(tmp_path, 1, 0)
    good = an_image.read_bytes()
    assert keep(store, {"image": good}) == len(good)
    assert (store / "current" / "image").read_bytes() == good and not (store / "incoming").exists()
    damaged = bytearray(good)
    damaged[len(good) // 2] ^= 0xFF
    with pytest.raises(TransferError, match="does not verify.*previous image is kept"):
        keep(store, {"image": bytes(damaged)})
    assert (store / "current" / "image").read_bytes() == good  # still the latest
    assert not (store / "incoming").exists()
    image.verify(store / "current" / "image")


def test_a_standard_checkpoint_is_one_regular_file_named_image(an_image, tmp_path):
    store = tmp_path / "store"
    good = an_image.read_bytes()
    for files in ({"state": good}, {"image": good, "extra": b"x"}, {}):
        with pytest.raises(TransferError, match="one file named 'image'"):
            keep(store, files)
        assert not (store / "incoming").exists() and not (store / "current").exists()
    incoming = receive(store, {})
    (incoming / "image").symlink_to(an_image)
    with pytest.raises(TransferError, match="cannot be opened as a regular file"):
        cf.standard_image(incoming)
    assert not incoming.exists()


def test_the_stored_image_is_streamed_back_and_none_is_an_empty_stream(an_image, tmp_path):
    store = cf.checkpoint_directory(tmp_path, 1, 0)
    assert list(cf._stored_entries(store / "current", None, "1.0")) == []
    keep(store, {"image": an_image.read_bytes()})
    [out] = list(cf._stored_entries(store / "current", None, "1.0"))
    os.close(out.fd)
    assert (out.entry.name, out.entry.size, out.entry.kind) == ("image", an_image.stat().st_size, "file")


def test_the_checkpoint_store_sits_beside_the_spool_directory():
    assert cf.checkpoint_directory("/s", 12345, 3) == Path("/s/2345/3/cluster12345.proc3.subproc0.checkpoint")


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
