"""htc submit / q / rm / hold / release / qedit / prio against a real schedd.

Each test gets its own pool -- a real master running a collector and a schedd in a temporary
HTC_HOME (:func:`poolutil.open_pool`) -- so cluster ids start at 1. The tools run in-process
through ``htc.cli.main``; what they did is read back from the schedd (QueryJobs). Where a test is
about the *shape* of what a tool sends (a description the schedd expands, or ads the tool
expanded), ``sent`` records the requests on their way to the real schedd.
"""

from __future__ import annotations

import getpass
import io
import json
import os

import pytest

from htc.classad import ClassAd
from htc.cli.main import main
from htc.wire import messages as m
from poolutil import Pool, open_pool

pytestmark = pytest.mark.slow

SUB = """\
executable = /bin/echo
arguments  = hello $(Process)
log        = job.log
queue 3
"""

ME = getpass.getuser()


@pytest.fixture
def schedd(monkeypatch):
    with open_pool("COLLECTOR, SCHEDD") as pool:
        monkeypatch.setenv("HTC_HOME", str(pool.home))
        yield pool


@pytest.fixture
def sent(monkeypatch):
    """The requests the job tools send (they still go to the real schedd)."""
    from htc.client import request

    requests: list[m.Message] = []
    real = request.send_command

    def recording(address, msg, **kwargs):
        requests.append(msg)
        return real(address, msg, **kwargs)

    monkeypatch.setattr(request, "send_command", recording)
    return requests


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


def jobs(pool: Pool, constraint: str = "") -> dict[str, dict]:
    """The schedd's queue: ``{"1.0": ad}``."""
    return {f"{ad['ClusterId']}.{ad['ProcId']}": ad for ad in pool.jobs(constraint)}


def test_submit_prints_what_condor_submit_prints(schedd, subfile, capsys):
    status, out, err = run(capsys, "submit", str(subfile))
    assert status == 0, err
    assert out == "Submitting job(s)...\n3 job(s) submitted to cluster 1.\n"
    queued = jobs(schedd)
    assert sorted(queued) == ["1.0", "1.1", "1.2"]
    assert {ad["Cmd"] for ad in queued.values()} == {"/bin/echo"}
    assert {ad["Iwd"] for ad in queued.values()} == {os.getcwd()}
    assert sorted(ad["Args"] for ad in queued.values()) == ["hello 0", "hello 1", "hello 2"]
    assert {ad["Owner"] for ad in queued.values()} == {ME}


def test_ads_that_depend_on_the_cluster_id_are_expanded_by_the_schedd(schedd, sent, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "c.sub"
    path.write_text("executable = /bin/echo\noutput = out.$(Cluster).$(Process)\nqueue 2\n")
    status, out, err = run(capsys, "submit", "-append", "request_memory = 512", str(path))
    assert (status, out) == (0, "Submitting job(s)..\n2 job(s) submitted to cluster 1.\n"), err
    [submit] = [r for r in sent if isinstance(r, m.Submit)]
    shipped = ClassAd(submit.cluster_ad)
    assert "queue" in shipped["SubmitDescription"] and shipped["SubmitIwd"] == str(tmp_path)
    assert shipped["SubmitFile"] == str(path)
    queued = jobs(schedd)
    assert [queued[f"1.{p}"]["Out"] for p in (0, 1)] == ["out.1.0", "out.1.1"]
    assert queued["1.0"]["RequestMemory"] == 512, "-append travels with the description"
    # without $(Cluster) the tool sends the ads it expanded, without a ClusterId
    run(capsys, "submit", str(tmp_path / "c.sub"), "-queue", "1", "-append", "output = fixed.out")
    shipped = ClassAd([r for r in sent if isinstance(r, m.Submit)][-1].cluster_ad)
    assert "SubmitDescription" not in shipped and "ClusterId" not in shipped
    assert jobs(schedd)["2.0"]["Out"] == "fixed.out"


def test_submit_terse_and_json(schedd, subfile, capsys):
    assert run(capsys, "submit", "-terse", str(subfile))[1] == "1.0 - 1.2\n"
    status, out, _ = run(capsys, "submit", "--json", str(subfile))
    assert status == 0
    assert json.loads(out) == {"ClusterId": 2, "FirstProc": 0, "NumProcs": 3, "JobIds": ["2.0", "2.1", "2.2"]}
    assert len(jobs(schedd)) == 6


def test_submit_from_stdin_prints_only_the_summary(schedd, subfile, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("executable = /bin/true\nqueue\n"))
    status, out, _ = run(capsys, "submit")
    assert (status, out) == (0, "1 job(s) submitted to cluster 1.\n")
    assert jobs(schedd)["1.0"]["Cmd"] == "/bin/true"


def test_submit_append_queue_and_macros(schedd, subfile, capsys):
    status, out, err = run(capsys, "submit", "-append", "request_memory = 2048", "-queue", "2",
                           "-batch-name", "night", str(subfile), "greeting=hi")
    assert status == 0, err
    assert out.endswith("2 job(s) submitted to cluster 1.\n")
    queued = jobs(schedd)
    assert sorted(queued) == ["1.0", "1.1"]
    assert {(ad["RequestMemory"], ad["JobBatchName"]) for ad in queued.values()} == {(2048, "night")}


def test_submit_without_a_queue_statement_is_a_usage_error(schedd, sent, tmp_path, capsys):
    path = tmp_path / "noqueue.sub"
    path.write_text("executable = /bin/true\n")
    status, out, err = run(capsys, "submit", str(path))
    assert status == 2 and out == ""
    assert "doesn't contain any \"queue\" commands -- no jobs queued" in err
    assert not sent and not jobs(schedd)


def test_submit_dry_run_shows_the_ads_and_submits_nothing(schedd, sent, subfile, capsys):
    status, out, _ = run(capsys, "submit", "-dry-run", "-", str(subfile))
    assert status == 0
    assert out.count('Cmd = "/bin/echo"') == 3 and 'Args = "hello 2"' in out
    assert not sent and not jobs(schedd)


def test_submit_without_a_pool_says_how_to_start_one(subfile, capsys):
    status, out, err = run(capsys, "submit", str(subfile))
    assert status == 1 and out == ""
    assert "htc submit:" in err and "htc pool start" in err


def test_q_views_af_long_json_and_totals(schedd, subfile, capsys):
    run(capsys, "submit", str(subfile))
    status, out, _ = run(capsys, "q")
    assert status == 0
    lines = out.splitlines()
    assert lines[1].startswith("-- Schedd:")
    assert lines[2].split() == ["OWNER", "BATCH_NAME", "SUBMITTED", "DONE", "RUN", "IDLE", "TOTAL", "JOB_IDS"]
    row = lines[3].split()
    assert row[:3] == [ME, "ID:", "1"] and row[-3:] == ["3", "3", "1.0-2"]
    assert "Total for query: 3 jobs; 0 completed, 0 removed, 3 idle, 0 running, 0 held, 0 suspended" in out
    assert f"Total for {ME}: 3 jobs;" in out and "Total for all users: 3 jobs;" in out

    assert run(capsys, "q", "-af", "ClusterId", "ProcId", "Args")[1] == \
        "1 0 hello 0\n1 1 hello 1\n1 2 hello 2\n"
    out = run(capsys, "q", "-nobatch")[1]
    assert any(line.split()[:2] == ["1.1", ME] and line.split()[-3:] == ["echo", "hello", "1"]
               for line in out.splitlines())
    ads = json.loads(run(capsys, "q", "-json")[1])
    assert [a["ProcId"] for a in ads] == [0, 1, 2]
    long_out = run(capsys, "q", "-long", "1.1")[1]
    assert "ProcId = 1\n" in long_out and long_out.endswith("\n\n")
    assert run(capsys, "q", "-totals")[1].startswith("Total for query: 3 jobs;")


def test_q_shows_only_your_jobs_unless_allusers(schedd, subfile, capsys, monkeypatch):
    run(capsys, "submit", str(subfile))
    monkeypatch.setattr("htc.client.current_user", lambda: "bob")  # somebody else asks
    assert "Total for query: 0 jobs" in run(capsys, "q")[1]
    assert "Total for query: 3 jobs" in run(capsys, "q", "-allusers")[1]
    assert "Total for query: 3 jobs" in run(capsys, "q", ME)[1]


def test_rm_hold_release_messages_and_exit_status(schedd, subfile, capsys):
    run(capsys, "submit", str(subfile))
    assert run(capsys, "hold", "1.1") == (0, "Job 1.1 held\n", "")
    assert run(capsys, "hold", "1.1") == (1, "", "Job 1.1 already held\n")
    assert run(capsys, "release", "1.0") == (1, "", "Job 1.0 not held to be released\n")
    assert run(capsys, "release", "1.1") == (0, "Job 1.1 released\n", "")
    status, out, _ = run(capsys, "hold", "-reason", "disk full", "1")
    assert (status, out) == (0, "All jobs in cluster 1 have been held\n")
    assert jobs(schedd)["1.2"]["HoldReason"] == "disk full"
    assert run(capsys, "release", ME)[1] == f'All jobs of user "{ME}" have been released\n'
    assert {ad["JobStatus"] for ad in jobs(schedd).values()} == {1}
    assert run(capsys, "rm", "1.0") == (0, "Job 1.0 marked for removal\n", "")
    assert run(capsys, "rm", "1.0") == (1, "", "Job 1.0 not found\n")
    status, out, _ = run(capsys, "rm", "-constraint", "ProcId >= 1", "-totals")
    assert out == ("All jobs matching constraint (ProcId >= 1) have been marked for removal\n"
                   "2 Succeeded, 0 Failed, 0 Not Found, 0 Bad Status, 0 Already Done, 0 Permission Denied\n")
    assert not jobs(schedd)
    assert run(capsys, "rm", "-all")[2] == "Couldn't find/remove all jobs\n"


def test_rm_needs_a_selection(schedd, capsys):
    status, _, err = run(capsys, "rm")
    assert status == 2 and "no jobs selected" in err


def test_qedit_and_prio(schedd, subfile, capsys):
    run(capsys, "submit", str(subfile))
    status, out, _ = run(capsys, "qedit", "1", "RequestMemory", "4096", "JobBatchName", '"night"')
    assert status == 0
    assert out == ('Set attribute "RequestMemory" for 3 matching jobs.\n'
                   'Set attribute "JobBatchName" for 3 matching jobs.\n')
    assert {(ad["RequestMemory"], ad["JobBatchName"]) for ad in jobs(schedd).values()} == {(4096, "night")}
    assert run(capsys, "qedit", "-constraint", "ProcId == 2", "JobPrio", "3")[1] == \
        'Set attribute "JobPrio" for 1 matching jobs.\n'
    assert run(capsys, "qedit", "1.0", "JobPrio")[0] == 2
    assert run(capsys, "qedit", "99", "JobPrio", "1") == (1, "", "No matching jobs; nothing was changed\n")

    assert run(capsys, "prio", "-p", "10", "1.0")[0] == 0
    assert jobs(schedd)["1.0"]["JobPrio"] == 10
    assert run(capsys, "prio", "-4", "1")[0] == 0
    assert [jobs(schedd)[f"1.{p}"]["JobPrio"] for p in range(3)] == [6, -4, -1]
    assert run(capsys, "prio", "1")[0] == 2


def test_name_and_pool_pick_the_daemon(schedd, subfile, capsys):
    # Another pool, whose only schedd listens as "schedd2".
    with open_pool("COLLECTOR") as other:
        other.spawn("schedd", "schedd2")
        home = str(other.home)
        assert run(capsys, "submit", "-pool", home, "-name", "schedd2", str(subfile))[0] == 0
        assert run(capsys, "q", "-pool", home, "-name", "schedd2", "-allusers", "-af", "ProcId")[1] == "0\n1\n2\n"
        assert len(other.jobs(address="schedd2")) == 3 and not jobs(schedd)
        status, _, err = run(capsys, "q", "-pool", home)
        assert status == 1 and "no schedd daemon is listening" in err
        status, _, err = run(capsys, "q", "-name", "schedd2")
        assert status == 1 and str(schedd.home) in err
    status, _, err = run(capsys, "q", "-pool", str(other.home / "nope"))
    assert status == 2 and "-pool" in err
