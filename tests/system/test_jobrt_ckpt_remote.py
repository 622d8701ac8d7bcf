"""Checkpoint a job whose files are remote (remote I/O shim + checkpoint handler in one library).

A program copies a remote file to another remote file (both served by a file server) in steps;
it is vacated, and restarted in a new process talking to a *new* file server over a new
connection inherited at the same descriptor number; the image records the shim's remote-file
table and the restored process reconnects and reopens its files at their offsets before it goes
on.  The copy on the server side is exact.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from htc.runtime import checkpoint, remote_io
from tests.jobrt_ckpt_kit import PROGS, make_kit

pytestmark = pytest.mark.slow

PREFIX = "/jobrt-remote-ns"
CONN_FD = 200  # the job's number for its file-server connection, the same in every generation


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return make_kit(tmp_path_factory.mktemp("jobrt_bin"))


class Server:
    """A file server process for one generation, and the job end of its connection at CONN_FD."""

    def __init__(self, root):
        server_end, job_end = remote_io.socket_pair()
        os.dup2(job_end.fileno(), CONN_FD, inheritable=True)
        job_end.close()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "htc.runtime.remote_io", "--fd", str(server_end.fileno()), "--root", str(root)],
            pass_fds=[server_end.fileno()],
        )
        server_end.close()

    def handed_over(self) -> None:
        """The job has inherited the connection: drop the test's copy."""
        os.close(CONN_FD)

    def wait(self) -> int:
        return self.process.wait(timeout=120)


def _start_copy(kit, tmp_path, root, img):
    """remote_copy of root's src.bin to dst.bin under the runtime, with its first file server;
    returns (server, job) once the job says "ready"."""
    exe = tmp_path / "remote_copy"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(PROGS / "remote_copy.c")], check=True)
    env = {**os.environ, **remote_io.job_environment(kit.tools.library, CONN_FD, PREFIX, pipeline=True)}
    server = Server(root)
    job = checkpoint.start([str(exe), f"{PREFIX}/src.bin", f"{PREFIX}/dst.bin"], img, tools=kit.tools,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, pass_fds=[CONN_FD])
    server.handed_over()
    assert job.process.stdout.readline() == b"ready\n"
    return server, job


def _command(job, line: bytes) -> None:
    job.process.stdin.write(line)
    job.process.stdin.flush()
    assert job.process.stdout.readline() == b"ready\n"


def test_remote_files_survive_vacate_and_restart(kit, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    data = kit.input.read_bytes()
    (root / "src.bin").write_bytes(data)
    img = tmp_path / "image"
    server, job = _start_copy(kit, tmp_path, root, img)
    copied = 0
    for generation in range(2):
        for _ in range(3 + generation):
            _command(job, b"c\n")
            copied += 64
        header = job.vacate()  # it waits on its local stdin, outside any remote call
        assert header.generation == generation
        remote = {f.path: f for f in header.files if f.remote}
        assert sorted(remote) == ["dst.bin", "src.bin"]  # server-side paths
        assert remote["src.bin"].offset == copied and remote["dst.bin"].offset == copied
        assert server.wait() == 0, "the old server ends when the vacated job closes its connection"
        assert (root / "dst.bin").read_bytes() == data[:copied]
        server = Server(root)  # a new server, a new connection at the job's old number
        job = checkpoint.restart(img, tools=kit.tools, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 pass_fds=[CONN_FD])
        server.handed_over()
    job.process.stdin.write(b"q\n")
    job.process.stdin.flush()
    assert job.process.stdout.read() == b"done\n"
    assert job.wait(timeout=120) == 0
    assert server.wait() == 0
    assert (root / "dst.bin").read_bytes() == data



def test_vacated_at_random_moments_mid_copy_the_copy_is_exact(kit, tmp_path):
    """Checkpoints land while remote reads and writes are in flight (the handler waits for the
    call and its bookkeeping to end): over four generations vacated at random moments, the
    copy made through four servers is byte-identical to the source."""
    import random
    import time

    rng = random.Random(os.getpid())
    root = tmp_path / "root"
    root.mkdir()
    data = rng.randbytes(1 << 20)
    (root / "src.bin").write_bytes(data)
    img = tmp_path / "image"
    server, job = _start_copy(kit, tmp_path, root, img)
    job.process.stdin.write(b"q\n")  # copy everything, 64 bytes a step, without stopping
    job.process.stdin.flush()
    vacated = 0
    for _ in range(4):
        time.sleep(rng.uniform(0.05, 0.4))
        if job.process.poll() is not None:
            break  # it finished first (a fast machine): the copy is checked below all the same
        header = job.vacate()
        vacated += 1
        offsets = {f.path: f.offset for f in header.files if f.remote}
        # between its read and its write the job holds one step in memory: dst may trail by it
        assert 0 <= offsets["src.bin"] - offsets["dst.bin"] <= 64
        assert server.wait() == 0
        server = Server(root)
        job = checkpoint.restart(img, tools=kit.tools, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 pass_fds=[CONN_FD])
        server.handed_over()
    assert job.process.stdout.read() == b"done\n"
    assert job.wait(timeout=120) == 0
    assert server.wait() == 0
    assert vacated >= 1, "the copy ended before the first vacate: make the file larger"
    assert (root / "dst.bin").read_bytes() == data
