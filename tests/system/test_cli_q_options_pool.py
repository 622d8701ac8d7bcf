"""htc q's condor_q options against a real pool (collector and schedd: jobs stay idle): the
batch view's DONE and TOTAL once a proc left the queue, -af with qualifiers, -format, -submitter,
-global, -userlog, -xml and -print-format."""

from __future__ import annotations

import getpass
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from htc.cli.main import main
from poolutil import stop_pool_and_reap, wait_for

pytestmark = pytest.mark.slow

FAST = {"MASTER_BACKOFF_CONSTANT": "0", "MASTER_UPDATE_INTERVAL": "5", "CONDOR_ADMIN": "",
        "SCHEDD_MIN_INTERVAL": "0", "SCHEDD_INTERVAL": "1", "UPDATE_INTERVAL": "2",
        "DAEMON_LIST": "MASTER, COLLECTOR, SCHEDD"}


@pytest.fixture
def pool(monkeypatch):
    root = Path(tempfile.mkdtemp(prefix="htcq-", dir="/tmp"))
    root.chmod(0o755)
    monkeypatch.setenv("HTC_HOME", str(root))
    for knob, value in FAST.items():
        monkeypatch.setenv(f"_HTC_{knob}", value)
    monkeypatch.chdir(root)
    try:
        yield root
    finally:
        stop_pool_and_reap(root, set())


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_q_options_on_a_real_queue(pool, capsys):
    assert run(capsys, "pool", "start")[0] == 0
    (pool / "job.sub").write_text("executable = /bin/sleep\narguments = 60\nlog = job.log\nqueue 3\n")
    assert run(capsys, "submit", "job.sub")[0] == 0
    assert run(capsys, "rm", "1.1")[0] == 0
    wait_for(lambda: run(capsys, "q", "-af", "ProcId")[1] == "0\n2\n", what="1.1 left the queue")

    # condor_q's batch view: the removed proc counts as done, TOTAL is the cluster's procs
    status, out, _ = run(capsys, "q")
    line = [row for row in out.splitlines() if row.startswith(getpass.getuser())][0]
    assert line.split()[-5:] == ["1", "_", "2", "3", "1.0-2"], out

    assert run(capsys, "q", "-nobatch", "-cputime")[1].splitlines()[2].split() == \
        ["ID", "OWNER", "SUBMITTED", "CPU_TIME", "ST", "PRI", "SIZE", "CMD"]
    assert run(capsys, "q", "-af:jh", "ProcId", "JobStatus")[1] == \
        " ID ProcId JobStatus\n1.0 0      1        \n1.2 2      1        \n"
    assert run(capsys, "q", "-af:,", "ClusterId", "Owner")[1] == f"1, {getpass.getuser()}\n" * 2
    assert run(capsys, "q", "-format", "%d.", "ClusterId", "-format", "%d\\n", "ProcId")[1] == "1.0\n1.2\n"
    assert run(capsys, "q", "-format", "%d\\n", "NoSuchAttribute")[1] == ""

    # -submitter and -global find the schedd through the collector's ads
    wait_for(lambda: run(capsys, "q", "-submitter", getpass.getuser(), "-af", "ProcId")[1] == "0\n2\n",
             what="the submitter ad", timeout=30)
    assert run(capsys, "q", "-global", "-af", "ProcId")[1] == "0\n2\n"
    status, out, _ = run(capsys, "q", "-global")
    assert "-- Schedd: " in out and "HOLD" in out, out

    # -userlog: the jobs as the event log tells them, removed one included, no schedd asked
    assert run(capsys, "q", "-userlog", "job.log", "-af", "ClusterId", "ProcId", "JobStatus")[1] == \
        "1 0 1\n1 1 3\n1 2 1\n"
    status, out, _ = run(capsys, "q", "-userlog", "job.log", "-nobatch")
    assert "-- Userlog: job.log" in out and "Total for query: 3 jobs; 0 completed, 1 removed, 2 idle" in out

    root = ET.fromstring(run(capsys, "q", "-xml", "-attributes", "ProcId,Owner")[1])
    assert [[a.get("n") for a in c] for c in root] == [["ProcId", "Owner"]] * 2
    assert [c.find("a[@n='ProcId']/i").text for c in root] == ["0", "2"]

    (pool / "q.pf").write_text("SELECT NOTITLE\n  ProcId AS P WIDTH 3\n  Owner AS WHO\nWHERE ProcId > 0\n")
    user = getpass.getuser()
    assert run(capsys, "q", "-print-format", "q.pf")[1] == f"P   {'WHO'.ljust(len(user))}\n  2 {user}\n"
