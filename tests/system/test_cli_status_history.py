"""htc status (against a real collector, holding slot and schedd ads it received through
UpdateAd as it would from startds and schedds) and htc history (from a real job queue file, as
condor_history reads the history file without any daemon)."""

from __future__ import annotations

import json

import pytest

from htc.classad import ClassAd
from htc.cli.main import main
from htc.jobqueue import JobQueue, JobStatus
from htc.client import history, history_path
from htc.submit import Submit
from htc.wire import messages as m
from poolutil import open_pool


def slots() -> list[ClassAd]:
    out = []
    for i, (state, activity, user) in enumerate([("Unclaimed", "Idle", None), ("Claimed", "Busy", "bob@h"),
                                                  ("Owner", "Idle", None)], start=1):
        ad = ClassAd({"MyType": "Machine", "Name": f"slot{i}@h", "Machine": "h", "OpSys": "LINUX",
                      "Arch": "X86_64", "State": state, "Activity": activity, "LoadAvg": 0.0, "CondorLoadAvg": 0.0,
                      "Memory": 1024 * i,
                      "Cpus": i, "EnteredCurrentActivity": 0})
        if user:
            ad["RemoteUser"], ad["ClientMachine"] = user, "submit.h"
        out.append(ad)
    out.append(ClassAd({"MyType": "Scheduler", "Name": "schedd@h", "Machine": "h", "TotalRunningJobs": 1,
                        "TotalIdleJobs": 4, "TotalHeldJobs": 0}))
    return out


@pytest.fixture
def collector(monkeypatch):
    with open_pool("COLLECTOR") as pool:
        monkeypatch.setenv("HTC_HOME", str(pool.home))
        for ad in slots():
            pool.advertise(ad, m.AdType(ad["MyType"]))
        yield pool


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.slow
def test_status_table_and_totals(collector, capsys):
    status, out, _ = run(capsys, "status")
    assert status == 0
    lines = [line for line in out.splitlines() if line]  # condor_status puts blank lines between parts
    assert lines[0].split() == ["Name", "OpSys", "Arch", "State", "Activity", "LoadAv", "Mem", "ActvtyTime"]
    assert lines[1].split()[:5] == ["slot1@h", "LINUX", "X86_64", "Unclaimed", "Idle"]
    assert len([line for line in lines if line.startswith("slot")]) == 3
    assert lines[4].split() == ["Total", "Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Drain",
                                "Backfill", "BkIdle"]
    assert lines[5].split() == ["X86_64/LINUX", "3", "1", "1", "1", "0", "0", "0", "0", "0"]
    assert lines[6].split() == ["Total", "3", "1", "1", "1", "0", "0", "0", "0", "0"]


@pytest.mark.slow
def test_status_selections_and_machine_readable_forms(collector, capsys):
    assert run(capsys, "status", "-avail", "-af", "Name")[1] == "slot1@h\n"
    assert run(capsys, "status", "-af", "Name", "Cpus * 2", "-constraint", "Memory > 1024")[1] == \
        "slot2@h 4\nslot3@h 6\n"
    out = [line for line in run(capsys, "status", "-run")[1].splitlines() if line]
    assert out[0].split() == ["Name", "OpSys", "Arch", "LoadAv", "RemoteUser", "ClientMachine"]
    assert out[1].split() == ["slot2@h", "LINUX", "X86_64", "0.000", "bob@h", "submit.h"]
    assert run(capsys, "status", "-total")[1].splitlines()[1].split()[0] == "Total"
    assert [a["Name"] for a in json.loads(run(capsys, "status", "-json")[1])] == ["slot1@h", "slot2@h", "slot3@h"]
    assert "Name = \"slot3@h\"\n" in run(capsys, "status", "-l", "slot3@h")[1]
    out = [line for line in run(capsys, "status", "-schedd")[1].splitlines() if line.strip()]
    assert out[1].split() == ["schedd@h", "h", "1", "4", "0"]
    assert not any(line.startswith("slot") for line in out), "-schedd lists Scheduler ads only"


@pytest.fixture
def finished_jobs(_isolated_htc_home):
    """A job queue file where a schedd would keep it: one completed and two removed jobs."""
    path = history_path()
    with JobQueue.open(path) as queue:
        cid = queue.next_cluster_id()
        sub = Submit("executable = /bin/echo\narguments = $(Process)\nqueue 3", cwd="/tmp")
        queue.submit(sub.cluster(cid, qdate=1700000000, owner="alice"))
        queue.set_status((cid, 0), JobStatus.RUNNING, now=1700000100)
        queue.set_status((cid, 0), JobStatus.COMPLETED, now=1700000200)
        queue.remove((cid, 1), "via htc rm", now=1700000300)
        queue.remove((cid, 2), "via htc rm", now=1700000400)
    return cid


def test_history_reads_the_queue_file_newest_first(finished_jobs, capsys):
    ads = history()
    assert [(a["ProcId"], a["JobStatus"]) for a in ads] == [(2, 3), (1, 3), (0, 4)]
    assert [a["ProcId"] for a in history("JobStatus == 3", limit=1)] == [2]
    status, out, _ = run(capsys, "history")
    assert status == 0
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "OWNER", "SUBMITTED", "RUN_TIME", "ST", "COMPLETED", "CMD"]
    assert lines[3].split() == [f"{finished_jobs}.0", "alice", "11/14", "22:13", "0+00:00:00", "C", "11/14", "22:16",
                                "echo", "0"]
    assert run(capsys, "history", "-af", "ProcId", "RemoveReason", "-constraint", "JobStatus == 3")[1] == \
        "2 via htc rm\n1 via htc rm\n"
    assert run(capsys, "history", "-limit", "1", "-af", "ProcId")[1] == "2\n"
    assert [a["ProcId"] for a in json.loads(run(capsys, "history", "-json", f"{finished_jobs}.1")[1])] == [1]
    assert run(capsys, "history", "bob", "-af", "ProcId")[1] == ""
    assert run(capsys, "history", "alice", "-limit", "2", "-af", "ProcId")[1] == "2\n1\n"


def test_history_without_a_queue_file_says_so(capsys):
    status, _, err = run(capsys, "history")
    assert status == 2 and "no job history at" in err
