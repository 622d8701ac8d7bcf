"""htc submit / q / rm / hold / release / qedit / prio against a schedd speaking the real wire.

The schedd here is the stand-in of ``tests/cli_fake_daemons.py`` (real sockets, real
messages); the tools, the client library, framing and message checks are the real ones.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from htc.classad import ClassAd
from htc.cli.main import main
from htc.wire import messages as m
from cli_fake_daemons import FakeDaemons

SUB = """\
executable = /bin/echo
arguments  = hello $(Process)
log        = job.log
queue 3
"""


@pytest.fixture
def schedd(_isolated_htc_home):
    with FakeDaemons(_isolated_htc_home) as fake:
        yield fake


@pytest.fixture
def subfile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "job.sub"
    path.write_text(SUB)
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_submit_prints_what_condor_submit_prints(schedd, subfile, capsys):
    status, out, err = run(capsys, "submit", str(subfile))
    assert status == 0, err
    assert out == "Submitting job(s)...\n3 job(s) submitted to cluster 7.\n"
    submit = [r for r in schedd.requests if isinstance(r, m.Submit)][0]
    assert len(submit.proc_ads) == 3
    assert ClassAd(submit.cluster_ad)["Cmd"] == "/bin/echo"
    assert ClassAd(submit.cluster_ad)["Iwd"] == os.getcwd()
    assert sorted(ClassAd(p)["Args"] for p in submit.proc_ads) == ["hello 0", "hello 1", "hello 2"]


def test_ads_that_depend_on_the_cluster_id_are_expanded_by_the_schedd(schedd, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "c.sub"
    path.write_text("executable = /bin/echo\noutput = out.$(Cluster).$(Process)\nqueue 2\n")
    status, out, err = run(capsys, "submit", "-append", "request_memory = 512", str(path))
    assert (status, out) == (0, "Submitting job(s)..\n2 job(s) submitted to cluster 7.\n"), err
    [submit] = [r for r in schedd.requests if isinstance(r, m.Submit)]
    sent = ClassAd(submit.cluster_ad)
    assert "queue" in sent["SubmitDescription"] and sent["SubmitIwd"] == str(tmp_path)
    assert sent["SubmitFile"] == str(path)
    assert [schedd.jobs[f"7.{p}"]["Out"] for p in (0, 1)] == ["out.7.0", "out.7.1"]
    assert schedd.jobs["7.0"]["RequestMemory"] == 512, "-append travels with the description"
    # without $(Cluster) the tool sends the ads it expanded, without a ClusterId
    run(capsys, "submit", str(tmp_path / "c.sub"), "-queue", "1", "-append", "output = fixed.out")
    submit = [r for r in schedd.requests if isinstance(r, m.Submit)][-1]
    assert "SubmitDescription" not in ClassAd(submit.cluster_ad) and "ClusterId" not in ClassAd(submit.cluster_ad)
    assert schedd.jobs["8.0"]["Out"] == "fixed.out"


def test_submit_terse_and_json(schedd, subfile, capsys):
    assert run(capsys, "submit", "-terse", str(subfile))[1] == "7.0 - 7.2\n"
    status, out, _ = run(capsys, "submit", "--json", str(subfile))
    assert status == 0
    assert json.loads(out) == {"ClusterId": 8, "FirstProc": 0, "NumProcs": 3, "JobIds": ["8.0", "8.1", "8.2"]}


def test_submit_from_stdin_prints_only_the_summary(schedd, subfile, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("executable = /bin/true\nqueue\n"))
    status, out, _ = run(capsys, "submit")
    assert (status, out) == (0, "1 job(s) submitted to cluster 7.\n")


def test_submit_append_queue_and_macros(schedd, subfile, capsys):
    status, out, err = run(capsys, "submit", "-append", "request_memory = 2048", "-queue", "2",
                           "-batch-name", "night", str(subfile), "greeting=hi")
    assert status == 0, err
    assert out.endswith("2 job(s) submitted to cluster 7.\n")
    submit = [r for r in schedd.requests if isinstance(r, m.Submit)][0]
    ad = ClassAd(submit.cluster_ad)
    assert ad["RequestMemory"] == 2048 and ad["JobBatchName"] == "night"
    assert len(submit.proc_ads) == 2


def test_submit_without_a_queue_statement_is_a_usage_error(schedd, tmp_path, capsys):
    path = tmp_path / "noqueue.sub"
    path.write_text("executable = /bin/true\n")
    status, out, err = run(capsys, "submit", str(path))
    assert status == 2 and out == ""
    assert "doesn't contain any \"queue\" commands -- no jobs queued" in err
    assert not schedd.requests


def test_submit_dry_run_shows_the_ads_and_submits_nothing(schedd, subfile, capsys):
    status, out, _ = run(capsys, "submit", "-dry-run", "-", str(subfile))
    assert status == 0
    assert out.count('Cmd = "/bin/echo"') == 3 and 'Args = "hello 2"' in out
    assert not schedd.requests


def test_submit_without_a_pool_says_how_to_start_one(subfile, capsys):
    status, out, err = run(capsys, "submit", str(subfile))
    assert status == 1 and out == ""
    assert "htc submit:" in err and "htc pool start" in err


def test_q_views_af_long_json_and_totals(schedd, subfile, capsys, monkeypatch):
    monkeypatch.setattr("htc.schedd_client.current_user", lambda: "alice")
    run(capsys, "submit", str(subfile))
    status, out, _ = run(capsys, "q")
    assert status == 0
    lines = out.splitlines()
    assert lines[1].startswith("-- Schedd:")
    assert lines[2].split() == ["OWNER", "BATCH_NAME", "SUBMITTED", "DONE", "RUN", "IDLE", "TOTAL", "JOB_IDS"]
    row = lines[3].split()
    assert row[:3] == ["alice", "ID:", "7"] and row[-3:] == ["3", "3", "7.0-2"]
    assert "Total for query: 3 jobs; 0 completed, 0 removed, 3 idle, 0 running, 0 held, 0 suspended" in out
    assert "Total for alice: 3 jobs;" in out and "Total for all users: 3 jobs;" in out

    assert run(capsys, "q", "-af", "ClusterId", "ProcId", "Args")[1] == \
        "7 0 hello 0\n7 1 hello 1\n7 2 hello 2\n"
    out = run(capsys, "q", "-nobatch")[1]
    assert any(line.split()[:2] == ["7.1", "alice"] and line.split()[-3:] == ["echo", "hello", "1"]
               for line in out.splitlines())
    ads = json.loads(run(capsys, "q", "-json")[1])
    assert [a["ProcId"] for a in ads] == [0, 1, 2]
    long_out = run(capsys, "q", "-long", "7.1")[1]
    assert "ProcId = 1\n" in long_out and long_out.endswith("\n\n")
    assert run(capsys, "q", "-totals")[1].startswith("Total for query: 3 jobs;")


def test_q_shows_only_your_jobs_unless_allusers(schedd, subfile, capsys, monkeypatch):
    monkeypatch.setattr("htc.schedd_client.current_user", lambda: "bob")
    run(capsys, "submit", str(subfile))
    assert "Total for query: 0 jobs" in run(capsys, "q")[1]
    assert "Total for query: 3 jobs" in run(capsys, "q", "-allusers")[1]
    assert "Total for query: 3 jobs" in run(capsys, "q", "alice")[1]


def test_rm_hold_release_messages_and_exit_status(schedd, subfile, capsys):
    run(capsys, "submit", str(subfile))
    assert run(capsys, "hold", "7.1") == (0, "Job 7.1 held\n", "")
    assert run(capsys, "hold", "7.1") == (1, "", "Job 7.1 already held\n")
    assert run(capsys, "release", "7.0") == (1, "", "Job 7.0 not held to be released\n")
    assert run(capsys, "release", "7.1") == (0, "Job 7.1 released\n", "")
    status, out, _ = run(capsys, "hold", "-reason", "disk full", "7")
    assert (status, out) == (0, "All jobs in cluster 7 have been held\n")
    assert schedd.jobs["7.2"]["HoldReason"] == "disk full"
    assert run(capsys, "release", "alice")[1] == 'All jobs of user "alice" have been released\n'
    assert run(capsys, "rm", "7.0") == (0, "Job 7.0 marked for removal\n", "")
    assert run(capsys, "rm", "7.0") == (1, "", "Job 7.0 not found\n")
    status, out, _ = run(capsys, "rm", "-constraint", "ProcId >= 1", "-totals")
    assert out == ("All jobs matching constraint (ProcId >= 1) have been marked for removal\n"
                   "2 Succeeded, 0 Failed, 0 Not Found, 0 Bad Status, 0 Already Done, 0 Permission Denied\n")
    assert not schedd.jobs
    assert run(capsys, "rm", "-all")[2] == "Couldn't find/remove all jobs\n"


def test_rm_needs_a_selection(schedd, capsys):
    status, _, err = run(capsys, "rm")
    assert status == 2 and "no jobs selected" in err


def test_qedit_and_prio(schedd, subfile, capsys):
    run(capsys, "submit", str(subfile))
    status, out, _ = run(capsys, "qedit", "7", "RequestMemory", "4096", "JobBatchName", '"night"')
    assert status == 0
    assert out == ('Set attribute "RequestMemory" for 3 matching jobs.\n'
                   'Set attribute "JobBatchName" for 3 matching jobs.\n')
    assert schedd.jobs["7.0"]["JobBatchName"] == "night"
    assert run(capsys, "qedit", "-constraint", "ProcId == 2", "JobPrio", "3")[1] == \
        'Set attribute "JobPrio" for 1 matching jobs.\n'
    assert run(capsys, "qedit", "7.0", "JobPrio")[0] == 2
    assert run(capsys, "qedit", "99", "JobPrio", "1") == (1, "", "No matching jobs; nothing was changed\n")

    assert run(capsys, "prio", "-p", "10", "7.0")[0] == 0
    assert schedd.jobs["7.0"]["JobPrio"] == 10
    assert run(capsys, "prio", "-4", "7")[0] == 0
    assert [schedd.jobs[f"7.{p}"]["JobPrio"] for p in range(3)] == [6, -4, -1]
    assert run(capsys, "prio", "7")[0] == 2


def test_name_and_pool_pick_the_daemon(_isolated_htc_home, tmp_path, subfile, capsys):
    other = Path(tempfile.mkdtemp(prefix="htco-", dir="/tmp"))
    try:
        with FakeDaemons(other, schedd_name="schedd2"):
            assert run(capsys, "submit", "-pool", str(other), "-name", "schedd2", str(subfile))[0] == 0
            assert run(capsys, "q", "-pool", str(other), "-name", "schedd2", "-allusers", "-af", "ProcId")[1] == \
                "0\n1\n2\n"
            status, _, err = run(capsys, "q", "-pool", str(other))
            assert status == 1 and "no schedd daemon is listening" in err
            status, _, err = run(capsys, "q", "-name", "schedd2")
            assert status == 1 and str(_isolated_htc_home) in err
        status, _, err = run(capsys, "q", "-pool", str(other / "nope"))
        assert status == 2 and "-pool" in err
    finally:
        shutil.rmtree(other, ignore_errors=True)
