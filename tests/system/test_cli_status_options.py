"""condor_status's and condor_history's options through ``htc status`` / ``htc history``:
the views and totals against a real collector holding the ads a startd with a partitionable
slot, a schedd, its submitters, a master and a negotiator would advertise; history's order,
limits and -completedsince against a real job queue file, as condor_history reads it."""

from __future__ import annotations

import re
import time

import pytest

from htc.classad import ClassAd
from htc.cli.main import main
from htc.client import history_path
from htc.jobqueue import JobQueue, JobStatus
from htc.submit import Submit
from htc.wire import messages as m
from poolutil import open_pool

NOW = int(time.time())
BASE = {"MyType": "Machine", "Machine": "h.example", "OpSys": "LINUX", "Arch": "X86_64", "OpSysAndVer": "Ubuntu22",
        "CondorLoadAvg": 0.25, "LoadAvg": 0.5, "TotalLoadAvg": 1.0, "TotalCpus": 4, "MyCurrentTime": NOW,
        "Mips": 1000, "KFlops": 2000, "Disk": 100, "KeyboardIdle": 65, "EnteredCurrentState": NOW - 100,
        "EnteredCurrentActivity": NOW - 10}


def ads() -> list[tuple[ClassAd, m.AdType]]:
    out = [(ClassAd({**BASE, "Name": "slot1@h.example", "PartitionableSlot": True, "State": "Unclaimed",
                     "Activity": "Idle", "Cpus": 2, "Memory": 1024, "TotalSlotCpus": 4, "TotalSlotMemory": 4096,
                     "NumDynamicSlots": 2}), m.AdType.Startd)]
    for i, (mem, user) in enumerate([(1024, "alice@h"), (2048, "bob@h")], 1):
        out.append((ClassAd({**BASE, "Name": f"slot1_{i}@h.example", "DynamicSlot": True, "State": "Claimed",
                             "Activity": "Busy", "Cpus": 1, "Memory": mem, "TotalSlotCpus": 1,
                             "TotalSlotMemory": mem, "RemoteUser": user, "ClientMachine": "submit.h"}),
                    m.AdType.Startd))
    out.append((ClassAd({"MyType": "Scheduler", "Name": "schedd@h", "Machine": "h", "TotalRunningJobs": 2,
                         "TotalIdleJobs": 3, "TotalHeldJobs": 1, "TotalJobAds": 6, "ShadowsRunning": 2,
                         "TotalSchedulerJobsRunning": 0, "TotalSchedulerJobsIdle": 0, "RecentJobsCompleted": 4,
                         "RecentJobsStarted": 5}), m.AdType.Schedd))
    for user, run, idle in (("alice@h", 1, 2), ("bob@h", 1, 1)):
        out.append((ClassAd({"MyType": "Submitter", "Name": user, "Machine": "h", "ScheddName": "schedd@h",
                             "RunningJobs": run, "IdleJobs": idle, "HeldJobs": 0}), m.AdType.Submitter))
    out.append((ClassAd({"MyType": "DaemonMaster", "Name": "h", "Machine": "h", "DetectedCpus": 4,
                         "DetectedMemory": 8192, "DaemonStartTime": NOW - 3600,
                         "CondorVersion": "$CondorVersion: htc 1.2.3 $"}), m.AdType.Master))
    out.append((ClassAd({"MyType": "Negotiator", "Name": "neg@h", "Machine": "h",
                         "LastNegotiationCycleDuration0": 1, "LastNegotiationCycleCandidateSlots0": 3,
                         "LastNegotiationCycleMatches0": 2}), m.AdType.Negotiator))
    return out


@pytest.fixture(scope="module")
def pool():
    with open_pool("COLLECTOR") as pool:
        for ad, ad_type in ads():
            pool.advertise(ad, ad_type)
        yield pool


@pytest.fixture
def collector(pool, monkeypatch):
    monkeypatch.setenv("HTC_HOME", str(pool.home))
    return pool


def run(capsys, *argv) -> tuple[int, list[str], str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def _seconds(text: str) -> int:
    """``d+hh:mm:ss`` (condor_status's durations) in seconds."""
    found = re.fullmatch(r"(\d+)\+(\d\d):(\d\d):(\d\d)", text)
    assert found, text
    days, hours, minutes, seconds = map(int, found.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def words(lines: list[str]) -> list[list[str]]:
    return [line.split() for line in lines if line.strip()]


@pytest.mark.slow
def test_compact_state_server_and_claimed_views(collector, capsys):
    status, out, _ = run(capsys, "status", "-compact")
    assert status == 0
    assert words(out)[:2] == [["Machine", "Platform", "Slots", "Cpus", "Gpus", "TotalGb", "FreCpu", "FreeGb",
                               "CpuLoad", "ST", "Jobs/Min", "MaxSlotGb"],
                              ["h.example", "x64/Ubuntu22", "2", "4", "0", "4.00", "2", "1.00", "0.25", "**", "_",
                               "2.00"]]
    assert out[1] == "", "a blank line under the headings, as condor_status prints"
    assert words(out)[3] == ["x64/Ubuntu22", "3", "0", "2", "1", "0", "0", "0", "0", "0"], "totals by platform"
    out = words(run(capsys, "status", "-state")[1])
    assert out[0] == ["Name", "Cpu", "Mem", "LoadAv", "KbdIdle", "State", "StateTime", "Activ", "ActvtyTime"]
    assert out[2][:6] + out[2][7:8] == ["slot1_1@h.example", "1", "1024", "0.250", "0+00:01:05", "Claimed", "Busy"]
    # the ads were made at NOW (collection time) and advertised later: the times grow by the wait,
    # which a busy machine stretches to minutes
    waited = time.time() - NOW + 5
    assert 100 <= _seconds(out[2][6]) <= 100 + waited, "StateTime: LastHeardFrom - EnteredCurrentState"
    assert 10 <= _seconds(out[2][8]) <= 10 + waited, "-state's ActvtyTime is also measured from LastHeardFrom"
    assert [row[0] for row in out[5:7]] == ["Busy", "Idle"], "-state totals by activity"
    out = words(run(capsys, "status", "-server")[1])
    assert out[1] == ["slot1@h.example", "LINUX", "X86_64", "0.250", "1024", "100", "1000", "2000"]
    assert out[4] == ["Slots", "Avail", "Memory", "Disk", "MIPS", "KFLOPS"]
    assert out[5] == ["X86_64/LINUX", "3", "3", "4096", "300", "3000", "6000"]
    for flag in ("-claimed", "-run"):
        out = words(run(capsys, "status", flag)[1])
        assert [row[0] for row in out[1:3]] == ["slot1_1@h.example", "slot1_2@h.example"]
        assert out[3] == ["Machines", "MIPS", "KFLOPS", "AvgLoadAvg"]
    out = words(run(capsys, "status", "-claimed", "bob@h")[1])
    assert out[1] == ["slot1_2@h.example", "LINUX", "X86_64", "0.250", "bob@h", "submit.h"], \
        "with -claimed, a name selects a RemoteUser"
    assert words(run(capsys, "status", "-avail")[1])[1][0] == "slot1@h.example"
    assert words(run(capsys, "status", "-compact", "-run")[1])[1] == ["h.example", "x64/Ubuntu22", "2",
                                                                        "alice@h,", "bob@h"]


@pytest.mark.slow
def test_total_wide_format_and_af(collector, capsys):
    _, out, _ = run(capsys, "status", "-total")
    assert out[0] == "" and out[1].split()[0] == "Total" and out[-1].split()[:2] == ["Total", "3"]
    assert not any("slot" in line for line in out)
    _, out, _ = run(capsys, "status", "-wide")
    assert out[0].split()[-1] == "ActivityTime"
    assert out[-1].startswith("       Total     3"), "-wide: the totals' key column fits the longest key"
    _, out, _ = run(capsys, "status", "-format", "%s ", "Name", "-format", "%d\\n", "Memory", "-avail")
    assert out == ["slot1@h.example 1024"]
    _, out, _ = run(capsys, "status", "-af", "Name", "State", "-constraint", "DynamicSlot =?= true")
    assert out == ["slot1_1@h.example Claimed", "slot1_2@h.example Claimed"]


@pytest.mark.slow
def test_daemon_views_and_totals(collector, capsys):
    out = words(run(capsys, "status", "-schedd")[1])
    assert out[:2] == [["Name", "Machine", "RunningJobs", "IdleJobs", "HeldJobs"], ["schedd@h", "h", "2", "3", "1"]]
    assert out[-1] == ["Total", "2", "3", "1"]
    out = words(run(capsys, "status", "-schedd", "-run")[1])
    assert out == [["Name", "TotalJobs", "Shadows", "ActiveDAGs", "IdleDAGs", "RcntDone", "RcntStart"],
                   ["schedd@h", "6", "2", "0", "0", "4", "5"]]
    out = words(run(capsys, "status", "-submitters")[1])
    assert out[1:3] == [["alice@h", "h", "1", "2", "0"], ["bob@h", "h", "1", "1", "0"]]
    assert out[3] == ["RunningJobs", "IdleJobs", "HeldJobs"] and out[-1] == ["Total", "2", "3", "0"]
    out = words(run(capsys, "status", "-master")[1])
    assert out[0] == ["Name", "Version", "Cpus", "Memory", "Uptime"]
    assert out[1][:5] == ["h", "1.2.3", "4", "8.0", "GB"]
    out = words(run(capsys, "status", "-negotiator")[1])
    assert out[0][:4] == ["Name", "LastCycleEnd", "(Sec)", "Slots"] and out[1][0] == "neg@h"
    out = words(run(capsys, "status", "-collector")[1])
    assert out[0] == ["Name", "Machine", "RunningJobs", "IdleJobs", "HostsTotal"]
    assert out[1][-3:] == ["2", "3", "3"], "the collector's totals count the ads it holds"
    out = words(run(capsys, "status", "-any")[1])
    assert out[0] == ["MyType", "TargetType", "Name"]
    assert ["Scheduler", "None", "schedd@h"] in out and ["Collector", "None"] == [r[0] for r in out if
                                                                               r[0] == "Collector"] + ["None"]


@pytest.mark.slow
def test_conflicting_options_are_refused(collector, capsys):
    status, _, err = run(capsys, "status", "-schedd", "-master")
    assert status == 2 and "-master contradicts -schedd" in err
    status, _, err = run(capsys, "status", "-compact", "-schedd")
    assert status == 2 and "-compact contradicts -schedd" in err


# --- history --------------------------------------------------------------------------------------


@pytest.fixture
def finished(_isolated_htc_home):
    """Four finished jobs of alice in a job queue file: 0 and 2 completed, 1 and 3 removed."""
    with JobQueue.open(history_path()) as queue:
        cid = queue.next_cluster_id()
        sub = Submit("executable = /bin/echo\narguments = $(Process)\nqueue 4", cwd="/tmp")
        queue.submit(sub.cluster(cid, qdate=1700000000, owner="alice"))
        for proc, when in ((0, 1700000100), (2, 1700000300)):
            queue.set_status((cid, proc), JobStatus.RUNNING, now=when - 50)
            queue.set_status((cid, proc), JobStatus.COMPLETED, now=when)
        queue.remove((cid, 1), "via htc rm", now=1700000200)
        queue.remove((cid, 3), "via htc rm", now=1700000400)
    return cid


def procs(capsys, *argv) -> list[str]:
    status = main(["history", *argv, "-af", "ProcId"])
    assert status == 0
    return capsys.readouterr().out.split()


def test_history_order_and_limits(finished, capsys):
    assert procs(capsys) == ["3", "2", "1", "0"]
    assert procs(capsys, "-backwards") == ["3", "2", "1", "0"]
    assert procs(capsys, "-forwards") == ["0", "1", "2", "3"]
    assert procs(capsys, "-forwards", "-limit", "2") == ["0", "1"], "-limit counts in the order asked for"
    assert procs(capsys, "-match", "1") == ["3"]
    assert procs(capsys, "-forwards", "-match", "1", "-constraint", "JobStatus == 3") == ["1"]


def test_history_completedsince_stops_at_the_first_older_completion(finished, capsys):
    assert procs(capsys, "-completedsince", "1700000300") == ["3"], \
        "the job completed at 1700000300 stops the scan (CompletionDate <= T), and all older ones"
    assert procs(capsys, "-completedsince", "1700000299") == ["3", "2"], "a removed job completes when it leaves"
    assert procs(capsys, "-completedsince", "1700000000 + 100", "-forwards") == ["1", "2", "3"]
    assert procs(capsys, "-completedsince", "0") == ["3", "2", "1", "0"]


def test_history_file_wide_and_format(finished, capsys, tmp_path):
    other = tmp_path / "elsewhere.db"
    import shutil

    shutil.copy(history_path(), other)
    assert procs(capsys, "-file", str(other), "-limit", "1") == ["3"]
    assert main(["history", "-wide"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "OWNER", "SUBMITTED", "RUN_TIME", "ST", "COMPLETED", "CMD"]
    assert len(lines) == 5
    assert main(["history", "-format", "%d.", "ClusterId", "-format", "%d\\n", "ProcId", "-limit", "2"]) == 0
    assert capsys.readouterr().out == f"{finished}.3\n{finished}.2\n"
