"""An executable without execute permission, on a real pool: condor_submit accepts it (it only
checks that the file can be read), and so does htc submit; a transferred one is made executable
in the sandbox and runs; one run in place (transfer_executable = false) is held with a reason
that names it and says it is not executable, with HTCondor's code 6 and the errno as subcode."""

from __future__ import annotations

import pytest

from htc.cli.main import main
from poolutil import open_pool, wait_for

pytestmark = pytest.mark.slow


def test_a_non_executable_executable_is_accepted_and_held_with_a_clear_reason(monkeypatch, capsys):
    with open_pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD") as pool:
        monkeypatch.setenv("HTC_HOME", str(pool.home))
        monkeypatch.chdir(pool.work)
        script = pool.work / "analyze.sh"
        script.write_text("#!/bin/sh\necho ran\n")
        script.chmod(0o644)
        (pool.work / "job.sub").write_text(
            "executable = analyze.sh\nlog = job.log\noutput = out.$(Process)\nqueue\n"
            f"transfer_executable = false\nexecutable = {script}\nqueue\n")
        assert main(["submit", "job.sub"]) == 0  # accepted, as condor_submit accepts it
        assert "2 job(s) submitted to cluster 1." in capsys.readouterr().out
        pool.log_events(pool.work / "job.log", until=lambda evs: {e.type for e in evs} >= {5, 12})
        assert (pool.work / "out.0").read_text() == "ran\n"  # transferred: made executable
        [held] = wait_for(lambda: pool.jobs("JobStatus == 5"), what="the held job")
        reason = held["HoldReason"]
        assert f"Failed to execute '{script}': (errno=13: 'Permission denied')" in reason
        assert f"{script} is not executable (its mode is 0644)" in reason
        assert "transfer_input_files" not in reason
        assert (held["HoldReasonCode"], held["HoldReasonSubCode"]) == (6, 13)
        assert main(["q", "-hold", "-af", "HoldReasonCode", "HoldReasonSubCode"]) == 0
        assert capsys.readouterr().out == "6 13\n"
