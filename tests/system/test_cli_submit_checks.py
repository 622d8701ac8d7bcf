"""``htc submit`` as a user's first hour meets it (issue 16, "Submit"), against real daemons: a
missing executable and a DAG file are refused with condor_submit's messages and nothing is
queued; every job ad has HTCondor's GlobalJobId; ``htc q -long`` is sorted as condor_q's; a
transferred executable runs in its sandbox as ``condor_exec.exe``."""

from __future__ import annotations

import pytest

from htc.cli.main import main
from htc.client import query_collector
from htc.wire import messages as m
from poolutil import open_pool, wait_for

pytestmark = pytest.mark.slow


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def schedd(monkeypatch):
    with open_pool("COLLECTOR, SCHEDD") as pool:
        monkeypatch.setenv("HTC_HOME", str(pool.home))
        monkeypatch.chdir(pool.work)
        yield pool


def test_a_missing_executable_and_a_dag_file_queue_nothing(schedd, capsys):
    (schedd.work / "job.sub").write_text("executable = analyze.sh\nlog = job.log\nqueue 2\n")
    status, out, err = run(capsys, "submit", "job.sub")
    assert status != 0
    assert "ERROR: Can't access executable file analyze.sh: No such file or directory" in err
    assert "No jobs were queued." in err
    (schedd.work / "diamond.dag").write_text("JOB A job.sub\nJOB B job.sub\nPARENT A CHILD B\n")
    status, out, err = run(capsys, "submit", "diamond.dag")
    assert status != 0
    assert "ERROR: A DAG file was provided. Please provide a submit file or use htc dag submit." in err
    assert "'htc dag submit diamond.dag'" in err
    assert schedd.jobs() == []
    assert not (schedd.work / "job.log").exists()  # not even a submit event


def test_global_job_id_and_a_sorted_long_listing(schedd, capsys):
    (schedd.work / "job.sub").write_text("executable = /bin/true\n+zebra = 1\n+Apple = 2\nqueue 2\n")
    assert run(capsys, "submit", "job.sub")[0] == 0
    [scheduler] = wait_for(lambda: query_collector(m.AdType.Schedd, "", transport=schedd.transport, timeout=5),
                           what="the schedd's ad")
    ads = schedd.jobs()
    status, out, _ = run(capsys, "q", "-af", "GlobalJobId", "QDate")
    rows = [line.split() for line in out.splitlines()]
    assert len(rows) == 2
    for proc, (gid, qdate) in enumerate(rows):
        schedd_name, job, when = gid.split("#")
        assert (job, when) == (f"1.{proc}", qdate)
        assert schedd_name == scheduler["Name"]  # the schedd's Name, as in HTCondor
    assert {str(ad["GlobalJobId"]) for ad in ads} == {row[0] for row in rows}
    status, out, _ = run(capsys, "q", "-long", "1.0")
    names = [line.split(" = ", 1)[0] for line in out.splitlines() if line]
    assert names == sorted(names, key=str.lower) and "GlobalJobId" in names
    assert names.index("Apple") < names.index("GlobalJobId") < names.index("zebra")


def test_the_executable_runs_as_condor_exec_exe(tmp_path):
    with open_pool("COLLECTOR, NEGOTIATOR, STARTD, SCHEDD") as pool:
        script = pool.work / "myjob.sh"
        script.write_text('#!/bin/sh\necho "$0"\nls\n')
        script.chmod(0o644)  # not executable: the transfer makes it so, as HTCondor's does
        reply = pool.submit(f"executable = {script}\noutput = {pool.work}/out.$(Process)\n"
                            f"log = {pool.work}/job.log\nqueue\n"
                            f"executable = /bin/sh\narguments = \"-c 'ls; true'\"\ntransfer_executable = false\n"
                            "queue\n")
        pool.log_events(pool.work / "job.log", until=lambda evs: sum(e.type == 5 for e in evs) == 2)
        first = (pool.work / "out.0").read_text().splitlines()
        assert first[0].endswith("/condor_exec.exe") and "condor_exec.exe" in first[1:]
        assert "myjob.sh" not in first
        assert "condor_exec.exe" not in (pool.work / "out.1").read_text().split()
        assert reply.num_procs == 2
