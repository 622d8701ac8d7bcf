"""The CPU of a relay of forwarded file calls -- its file server's and its own -- is charged to
the run it serves (SubmitSideCpuJobIO), in steps that never count the same CPU twice."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from htc.daemons.job_io_relay import RelayCounts
from htc.daemons.schedd.job_io import _await_exit, _Meter, _reap
from htc.daemons.schedd.leverage import pid_cpu
from htc.wire import messages as m

BURN = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end:\n    pass\n"


def test_the_file_servers_cpu_and_the_relays_are_charged_once_to_the_run():
    shadow = SimpleNamespace(claim_id="c1", submit_cpu=0.0, submit_cpu_parts={})
    core = SimpleNamespace(shadows={(4, 0): shadow})
    server = subprocess.Popen([sys.executable, "-c", BURN])  # stands for the file server
    counts = RelayCounts()
    meter = _Meter(core, m.RelayJobIO(claim_id="c1", job_id="4.0"), server.pid, counts)
    counts.cpu = 0.25
    meter.charge()  # while it runs
    first = shadow.submit_cpu_parts["job_io"]
    assert first >= 0.25
    _await_exit(server)
    final = pid_cpu(server.pid)  # a zombie's times are its final ones
    assert final is not None and final >= 0.3
    counts.cpu = 0.5
    meter.charge()
    meter.charge()  # nothing new: nothing more
    _reap(server)
    assert pid_cpu(server.pid) is None  # reaped
    assert abs(shadow.submit_cpu_parts["job_io"] - (final + 0.5)) < 1e-9
    assert shadow.submit_cpu == shadow.submit_cpu_parts["job_io"]


def test_a_relay_whose_run_has_ended_charges_nothing():
    other = SimpleNamespace(claim_id="another claim", submit_cpu=0.0, submit_cpu_parts={})
    core = SimpleNamespace(shadows={(4, 0): other})
    counts = RelayCounts()
    counts.cpu = 1.0
    _Meter(core, m.RelayJobIO(claim_id="c1", job_id="4.0"), 1, counts).charge()
    assert other.submit_cpu == 0.0
    core.shadows.clear()
    _Meter(core, m.RelayJobIO(claim_id="c1", job_id="4.0"), 1, counts).charge()
