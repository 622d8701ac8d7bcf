"""A vacate is never lost to a periodic checkpoint that lands in the same remote call.

A checkpoint signal that arrives inside a forwarded (remote) call waits for the call to end: the
handler leaves it in the shim's one deferred-signal slot. When the vacate's SIGTSTP waits there
and the periodic SIGUSR2 comes before the call ends (a file server slow under load), the
SIGUSR2 must not take the SIGTSTP's place: the job would write a periodic image and run on, its
vacate forgotten; the starter, having vacated it, reports the run vacated when it ends, and the
job runs again from an older image (work done twice). Here the file server is stopped so the
job's remote read cannot end, both signals land in it, and the server goes on: the job writes
its image and exits with the vacate's code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from htc.runtime import checkpoint, remote_io
from htc.runtime.image import read_header
from tests.jobrt_ckpt_kit import PROGS, make_kit
from tests.system.test_jobrt_ckpt_remote import CONN_FD, PREFIX, Server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return make_kit(tmp_path_factory.mktemp("jobrt_bin"))


def _wait(predicate, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"no {what} within {limit} s"
        time.sleep(0.01)


def _in_remote_call(pid: int) -> bool:
    """The job is blocked in a system call on its file-server connection."""
    try:
        fields = open(f"/proc/{pid}/syscall").read().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] not in ("running", "-1") and int(fields[1], 16) == CONN_FD


def _pending(pid: int, sig: signal.Signals) -> bool:
    bit = 1 << (int(sig) - 1)
    status = open(f"/proc/{pid}/status").read().splitlines()
    return any(int(line.split()[1], 16) & bit for line in status if line.startswith(("SigPnd:", "ShdPnd:")))


def _stop(job, server) -> None:
    """Kill what a test left running: the job, and the file server (continued first, if stopped)."""
    if job.process.poll() is None:
        job.process.kill()
        job.process.wait()
    if server.process.poll() is None:
        os.kill(server.process.pid, signal.SIGCONT)
        server.process.kill()
        server.process.wait()


def test_a_periodic_signal_in_the_same_remote_call_does_not_replace_the_vacate(kit, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "src.bin").write_bytes(kit.input.read_bytes())
    exe = tmp_path / "remote_copy"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(PROGS / "remote_copy.c")], check=True)
    env = {**os.environ, **remote_io.job_environment(kit.tools.library, CONN_FD, PREFIX, pipeline=True)}
    server = Server(root)
    img = tmp_path / "image"
    job = checkpoint.start([str(exe), f"{PREFIX}/src.bin", f"{PREFIX}/dst.bin"], img, tools=kit.tools,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, pass_fds=[CONN_FD])
    server.handed_over()
    pid = job.process.pid
    try:
        assert job.process.stdout.readline() == b"ready\n"
        os.kill(server.process.pid, signal.SIGSTOP)  # the next remote call cannot end ...
        job.process.stdin.write(b"c\n")
        job.process.stdin.flush()
        _wait(lambda: _in_remote_call(pid), "remote read in flight")
        job.process.send_signal(checkpoint.VACATE_SIGNAL)  # ... the vacate lands in it ...
        _wait(lambda: not _pending(pid, checkpoint.VACATE_SIGNAL), "vacate signal taken")
        job.process.send_signal(checkpoint.CHECKPOINT_SIGNAL)  # ... and a periodic one after it
        _wait(lambda: not _pending(pid, checkpoint.CHECKPOINT_SIGNAL), "periodic signal taken")
        assert job.process.poll() is None
        os.kill(server.process.pid, signal.SIGCONT)
        assert job.process.stdout.readline() == b"", "the vacate was lost: the job ran on"
        assert job.wait(timeout=120) == checkpoint.VACATED_EXIT
        assert read_header(img).pid == pid
        assert server.wait() == 0
    finally:
        _stop(job, server)


def test_a_checkpoint_that_waited_for_a_remote_close_sees_no_half_closed_descriptor(kit, tmp_path):
    """A checkpoint signal that lands in a remote close waits for the close to end, and the image
    is taken once the descriptor is gone: not in between, when the file table no longer lists the
    descriptor but its placeholder is still open (the image was refused: "descriptor N is a
    special file (anon_inode:[eventpoll])", and `htc checkpoint` of a job that closes files failed)."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "src.bin").write_bytes(b"x" * 100)
    exe = tmp_path / "remote_close"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(PROGS / "remote_close.c")], check=True)
    # (no pipelining: the close waits for the server's answer)
    env = {**os.environ, **remote_io.job_environment(kit.tools.library, CONN_FD, PREFIX, pipeline=False)}
    server = Server(root)
    img = tmp_path / "image"
    job = checkpoint.start([str(exe), f"{PREFIX}/src.bin"], img, tools=kit.tools,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           pass_fds=[CONN_FD])
    server.handed_over()
    pid = job.process.pid
    try:
        assert job.process.stdout.readline() == b"ready\n"
        os.kill(server.process.pid, signal.SIGSTOP)  # the close's remote call cannot end ...
        job.process.stdin.write(b"c\n")
        job.process.stdin.flush()
        _wait(lambda: _in_remote_call(pid), "remote close in flight")
        job.process.send_signal(checkpoint.CHECKPOINT_SIGNAL)  # ... a periodic checkpoint lands in it
        _wait(lambda: not _pending(pid, checkpoint.CHECKPOINT_SIGNAL), "checkpoint signal taken")
        assert not img.exists()  # (it waits for the call)
        os.kill(server.process.pid, signal.SIGCONT)
        assert job.process.stdout.readline() == b"closed\n"
        _wait(img.exists, "the checkpoint image")
        assert read_header(img).pid == pid
        job.process.stdin.close()
        assert job.wait(timeout=120) == 0
        assert b"cannot be checkpointed" not in job.process.stderr.read()
    finally:
        _stop(job, server)
