"""htc q -better-analyze: the clause table and the run-analysis summary, from real ClassAds.

The analysis itself is pure (a job ad and slot ads in, a report out); the last test runs the
tool against a real schedd holding the job and a real collector holding the slot ads, which it
receives through UpdateAd as it would from startds.
"""

from __future__ import annotations

import json

import pytest

from htc.client import analyze_job, job_status_text
from htc.classad import ClassAd
from htc.cli.main import main
from htc.wire import messages as m
from poolutil import open_pool

JOB = """[
    ClusterId = 7; ProcId = 0; Owner = "alice"; User = "alice@x"; JobStatus = 1;
    RequestMemory = 2048; FileSystemDomain = "x";
    Requirements = (TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") &&
                   (TARGET.Memory >= RequestMemory) &&
                   ((TARGET.HasFileTransfer) || (TARGET.FileSystemDomain == MY.FileSystemDomain))
]"""


def slot(name: str, machine: str, *, arch="X86_64", memory=8192, **extra) -> ClassAd:
    ad = ClassAd({"Name": name, "Machine": machine, "Arch": arch, "OpSys": "LINUX", "Memory": memory,
                  "Cpus": 1, "HasFileTransfer": True, "Requirements": True, "State": "Unclaimed"})
    for key, value in extra.items():
        ad[key] = value
    return ad


def pool_slots() -> list[ClassAd]:
    from htc.classad import ExprTree

    return [
        slot("slot1@a", "a", memory=4096),                                  # willing
        slot("slot2@a", "a", memory=1024),                                  # too little memory
        slot("slot1@b", "b", arch="ARM"),                                   # wrong arch
        slot("slot1@c", "c", RemoteUser="bob@x", State="Claimed"),          # serving another user
        slot("slot2@c", "c", RemoteUser="alice@x", State="Claimed"),        # running alice's job
        slot("slot1@d", "d", Requirements=ExprTree('TARGET.Owner == "carol"')),  # refuses alice
        slot("slot1_1@e", "e", DynamicSlot=True),                           # dynamic: not analysed
        slot("slot1@e", "e", memory=0, PartitionableSlot=True, TotalSlotMemory=16384,
             TotalSlotCpus=4, Cpus=0, TotalSlotDisk=100),                   # full pslot: fits if drained
    ]


def test_steps_are_numbered_as_htcondor_numbers_them_and_count_slots():
    analysis = analyze_job(ClassAd(JOB), pool_slots())
    table = [(c.step, c.logic or c.text, c.matched) for c in analysis.clauses if c.shown]
    assert table == [
        (0, 'TARGET.Arch == "X86_64"', 6),
        (1, 'TARGET.OpSys == "LINUX"', 7),
        (3, "TARGET.Memory >= RequestMemory", 5),
        (5, "TARGET.HasFileTransfer", 7),
        (6, "TARGET.FileSystemDomain == MY.FileSystemDomain", 0),
        (7, "[5] || [6]", 7),
    ]
    hidden = [(c.step, c.logic) for c in analysis.clauses if not c.shown]
    assert hidden == [(2, "[0] && [1]"), (4, "[2] && [3]"), (8, "[4] && [7]")]


def test_render_has_htcondors_table_and_summary_lines():
    text = analyze_job(ClassAd(JOB), pool_slots()).render()
    assert "The Requirements expression for job 7.000 is\n\n    (TARGET.Arch == \"X86_64\") &&" in text
    assert "Job 7.000 defines the following attributes:\n\n    FileSystemDomain = \"x\"\n    RequestMemory = 2048\n" in text
    assert ("         Slots\n"
            "Step    Matched  Condition\n"
            "-----  --------  ---------\n"
            "[0]           6  TARGET.Arch == \"X86_64\"\n"
            "[1]           7  TARGET.OpSys == \"LINUX\"\n"
            "[3]           5  TARGET.Memory >= RequestMemory\n"
            "[5]           7  TARGET.HasFileTransfer\n"
            "[6]           0  TARGET.FileSystemDomain == MY.FileSystemDomain\n"
            "[7]           7  [5] || [6]\n") in text
    assert ("007.000:  Run analysis summary ignoring user priority.  Of 7 slots on 5 machines,\n"
            "      2 slots are rejected by your job's requirements\n"
            "      1 slots reject your job because of their own requirements\n"
            "      1 slots match and are already running your jobs\n"
            "      1 slots match but are serving other users\n"
            "      1 slots match and are willing to run your job\n"
            "      1 slots would match if drained\n") in text
    assert "WARNING" not in text
    # htc's own answer: which requirement rules out how many slots, and the verdict
    assert "[0] TARGET.Arch == \"X86_64\" rules out 1 of 7 slots" in text
    assert "[3] TARGET.Memory >= RequestMemory rules out 2 of 7 slots" in text
    assert "[6]" not in text.split("Why job")[1], "an alternative inside || rules nothing out alone"
    assert "1 slot(s) are willing to run it" in text


def test_counts():
    c = analyze_job(ClassAd(JOB), pool_slots()).counts
    assert (c.slots, c.machines, c.rejected_by_job, c.reject_job) == (7, 5, 2, 1)
    assert (c.running_your_jobs, c.serving_other_users, c.willing, c.willing_if_drained) == (1, 1, 1, 1)
    assert analyze_job(ClassAd(JOB), pool_slots()).willing_slots == ("slot1@a",)


def test_a_job_no_slot_can_run_gets_htcondors_warning_and_the_clause_to_blame():
    job = ClassAd(JOB)
    job["RequestMemory"] = 100000
    analysis = analyze_job(job, pool_slots())
    text = analysis.render()
    assert "      7 slots are rejected by your job's requirements\n" in text
    assert "WARNING:  Be advised:\n   No machines matched the jobs's constraints" in text
    assert "no slot satisfies [3] TARGET.Memory >= RequestMemory" in analysis.reason
    assert "[3] TARGET.Memory >= RequestMemory rules out 7 of 7 slots" in text


def test_slots_refusing_the_job_are_blamed_on_their_start_policy():
    slots = [slot("slot1@d", "d", Requirements=False)]
    analysis = analyze_job(ClassAd(JOB), slots)
    assert "Job did not match any machines's constraints" in analysis.render()
    assert "refuse it by their own requirements" in analysis.reason


def test_a_clause_on_the_job_alone_matches_every_slot_or_none():
    job = ClassAd('[ ClusterId = 1; ProcId = 2; Owner = "a"; Wanted = 2;'
                  ' Requirements = MY.Wanted == 1 && TARGET.Cpus >= 1 ]')
    analysis = analyze_job(job, pool_slots())
    assert [(c.text, c.matched) for c in analysis.clauses if c.shown] == [
        ("MY.Wanted == 1", 0), ("TARGET.Cpus >= 1", 6)]
    assert analysis.job_attributes == {"Wanted": "2"}


def test_not_and_nested_logic_get_their_own_rows():
    job = ClassAd('[ ClusterId = 1; ProcId = 0; Owner = "a";'
                  ' Requirements = !(TARGET.Arch == "ARM") && (TARGET.Memory > 2000 || TARGET.Cpus > 3) ]')
    analysis = analyze_job(job, pool_slots())
    assert [(c.step, c.logic or c.text, c.matched) for c in analysis.clauses if c.shown] == [
        (0, 'TARGET.Arch == "ARM"', 1), (1, " ! [0]", 6), (2, "TARGET.Memory > 2000", 5),
        (3, "TARGET.Cpus > 3", 0), (4, "[2] || [3]", 5)]


@pytest.mark.parametrize("status, extra, expected", [
    (2, {}, "Job is running."),
    (5, {"HoldReason": "via htc hold"}, "Job is held.\n\nHold reason: via htc hold"),
    (3, {}, "Job is removed."),
    (4, {}, "Job is completed."),
    (1, {}, ""),
])
def test_status_lines(status, extra, expected):
    job = ClassAd({"ClusterId": 1, "ProcId": 0, "JobStatus": status, **extra})
    assert job_status_text(job) == expected


def test_held_job_reason_says_how_to_release():
    job = ClassAd(JOB)
    job["JobStatus"], job["HoldReason"] = 5, "input missing"
    text = analyze_job(job, pool_slots()).render()
    assert "007.000:  Job is held.\n\nHold reason: input missing" in text
    assert "htc release 7.0" in text


def test_empty_pool():
    analysis = analyze_job(ClassAd(JOB), [])
    assert analysis.counts.slots == 0
    assert "Of 0 slots on 0 machines" in analysis.render()
    assert "no slots" in analysis.reason


@pytest.mark.slow
def test_cli_better_analyze_uses_the_schedd_and_the_collector(monkeypatch, capsys):
    with open_pool("COLLECTOR, SCHEDD") as pool:
        monkeypatch.setenv("HTC_HOME", str(pool.home))
        for ad in pool_slots():
            pool.advertise(ad)
        # The job as a tool that expanded its description sends it: the schedd sets the ids and owner.
        job = ClassAd(JOB)
        cluster_ad = ClassAd({k: job.lookup(k) for k in job.keys()
                              if k not in ("ClusterId", "ProcId", "Owner", "User", "JobStatus")})
        cluster_ad["JobStatus"] = 1
        reply = pool.send(m.Submit(cluster_ad=str(cluster_ad), proc_ads=("[ ProcId = 0 ]",)))
        job_id = f"{reply.cluster_id}.0"

        assert main(["q", "-better-analyze", job_id]) == 0
        out = capsys.readouterr().out
        assert "Of 7 slots on 5 machines" in out and "[3]           5  TARGET.Memory >= RequestMemory" in out
        assert main(["q", "-better-analyze", "-machine", 'Machine == "a"', "-json", str(reply.cluster_id)]) == 0
        [record] = json.loads(capsys.readouterr().out)
        assert (record["job"], record["slots"], record["willing"], record["rejected_by_job"]) == (job_id, 2, 1, 1)
