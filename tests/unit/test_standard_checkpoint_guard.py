"""StandardJob.checkpoint waits for the runtime's handler: a process that does not (yet) catch
the checkpoint signal is not sent it (SIGUSR2 would kill it), and the checkpoint is refused."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from htc.daemons.starter.standard import StandardJob
from htc.runtime import checkpoint as ckpt


def test_a_process_that_does_not_catch_the_signal_is_not_killed_by_a_checkpoint():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        job = StandardJob(channel=None)  # (never reached: the checkpoint stops before the shadow)
        job.pid = proc.pid
        with pytest.raises(ckpt.CheckpointRefused, match="does not catch SIGUSR2"):
            asyncio.run(job.checkpoint(timeout=0.3))
        assert proc.poll() is None  # still running
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_catches_it_gets_it(tmp_path):
    code = "import signal, sys, time\nsignal.signal(signal.SIGUSR2, lambda *a: sys.exit(7))\nprint(1, flush=True)\ntime.sleep(30)"
    proc = subprocess.Popen(["python3", "-c", code], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline()  # the handler is installed
        job = StandardJob(channel=None)
        job.pid, job.sandbox = proc.pid, tmp_path
        with pytest.raises(ckpt.CheckpointFailed):  # no image comes from this one; but it got the signal
            asyncio.run(job.checkpoint(timeout=0.3))
        assert proc.wait(timeout=10) == 7
    finally:
        proc.kill()
        proc.wait()
