"""After the vacate's signal StandardJob sends no checkpoint signal: a periodic SIGUSR2 landing
in the same forwarded call as the vacate's SIGTSTP could take its place in the runtime's one
deferred-signal slot (tests/system/test_jobrt_ckpt_signal_order.py has the runtime's half)."""

from __future__ import annotations

import asyncio
import signal
import subprocess

import pytest

from htc.daemons.starter.standard import StandardJob
from htc.runtime import checkpoint as ckpt

# catches both signals (as the runtime does) and reports each on stdout
CODE = """import signal, sys, time
for sig in (signal.SIGUSR2, signal.SIGTSTP):
    signal.signal(sig, lambda n, f: print(signal.Signals(n).name, flush=True))
print("ready", flush=True)
time.sleep(30)
"""


def test_no_checkpoint_signal_follows_the_vacate(tmp_path):
    proc = subprocess.Popen(["python3", "-c", CODE], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"  # the handlers are installed
        job = StandardJob(channel=None)  # (never reached: the checkpoint stops before the shadow)
        job.pid, job.sandbox = proc.pid, tmp_path
        proc.send_signal(job.vacate_signal())
        assert proc.stdout.readline() == "SIGTSTP\n"
        with pytest.raises(ckpt.CheckpointRefused, match="is vacating"):
            asyncio.run(job.checkpoint(timeout=0.3))
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.read() == ""  # no SIGUSR2 came before the end
    finally:
        proc.kill()
        proc.wait()
