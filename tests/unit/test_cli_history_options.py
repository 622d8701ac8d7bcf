"""htc history: the CMD column as condor_history prints it, -since, -scanlimit, -userlog."""

from __future__ import annotations

from htc.classad import ClassAd
from htc.cli import job_views as views
from htc.submit import Submit


def _job(text: str) -> ClassAd:
    (ad,) = Submit("executable = /usr/bin/echo\n" + text + "queue\n").jobs(clusterid=7)
    return ad


def test_cmd_shows_arguments_as_the_ad_stores_them_quoted_spaces_and_all():
    # condor_history's CMD is PRINTAS JOB_DESCRIPTION: basename(Cmd) + " " + the raw Arguments (V2),
    # in which a space inside an argument is quoted as condor_submit stored it
    assert views.command_line(_job("arguments = \"'hello world' x\"\n")) == "echo hello' 'world x"
    assert views.command_line(_job("arguments = \"'it''s' y\"\n")) == "echo it''''s y"  # append_arg: open, doubled quote, close
    assert views.command_line(_job("arguments = a b c\n")) == "echo a b c"  # old syntax: Args
    assert views.command_line(_job("")) == "echo"
    assert views.command_line(ClassAd({"Args": "x"})) == ""  # no Cmd: nothing


def test_cmd_is_the_description_in_parentheses_when_the_job_has_one():
    assert views.command_line(_job("description = nightly build\narguments = a\n")) == "(nightly build)"
    ad = _job("description = d\n")
    ad["MATCH_EXP_JobDescription"] = "matched"
    assert views.command_line(ad) == "(matched)"


def test_history_run_time_falls_back_to_the_cpu_time():
    ad = _job("")
    ad["JobStatus"], ad["RemoteUserCpu"] = 4, 65.0
    del ad["RemoteWallClockTime"]
    assert views.history_rows([ad], 0)[0][3] == views.duration(65)


# -- -since, -scanlimit, -userlog ------------------------------------------------------------

import pytest  # noqa: E402

from htc.cli.main import main  # noqa: E402
from htc.client import history, history_path  # noqa: E402
from htc.client.jobs import since_expression  # noqa: E402
from htc.errors import UsageError  # noqa: E402
from htc.eventlog import EventLogWriter  # noqa: E402
from htc.eventlog import events as ev  # noqa: E402
from htc.jobqueue import JobQueue, JobStatus  # noqa: E402


@pytest.fixture
def finished():
    """Five finished jobs of one cluster, completed in proc order (newest: proc 4); procs 1 and 3
    have Kind = "b", the others Kind = "a"."""
    with JobQueue.open(history_path()) as queue:
        cid = queue.next_cluster_id()
        sub = Submit("executable = /bin/echo\narguments = $(Process)\nqueue 5", cwd="/tmp")
        queue.submit(sub.cluster(cid, qdate=1700000000, owner="alice"))
        for p in range(5):
            queue.edit((cid, p), "Kind", '"b"' if p % 2 else '"a"')
            queue.set_status((cid, p), JobStatus.RUNNING, now=1700000100 + p)
            queue.set_status((cid, p), JobStatus.COMPLETED, now=1700000200 + 10 * p)
    return cid


def procs(ads):
    return [ad["ProcId"] for ad in ads]


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_since_is_a_job_id_or_an_expression():
    assert since_expression("12") == "ClusterId == 12"
    assert since_expression("12.3") == "ClusterId == 12 && ProcId == 3"
    assert since_expression("CompletionDate <= 5") == "CompletionDate <= 5"
    with pytest.raises(UsageError, match="invalid -since constraint: \"x\""):
        since_expression('"x"')


def test_since_stops_the_scan_at_a_job_the_constraint_leaves_out(finished):
    assert procs(history()) == [4, 3, 2, 1, 0]
    assert procs(history(since=since_expression(f"{finished}.2"))) == [4, 3]
    # condor_history checks -since before the constraint: job 3 (Kind "b") stops the scan for "a"s too
    assert procs(history('Kind == "a"', since=since_expression(f"{finished}.3"))) == [4]
    assert procs(history(owner="alice", since="CompletionDate <= 1700000220")) == [4, 3]


def test_scanlimit_counts_every_job_read(finished):
    assert procs(history(scan_limit=2)) == [4, 3]
    assert procs(history('Kind == "b"', scan_limit=2)) == [3]  # read 4 and 3, one matched
    assert procs(history(scan_limit=3, forwards=True)) == [0, 1, 2]
    assert procs(history(scan_limit=0)) == []


def test_history_cli_since_scanlimit(finished, capsys):
    assert run(capsys, "history", "-since", f"{finished}.2", "-af", "ProcId")[1] == "4\n3\n"
    assert run(capsys, "history", "-since", "CompletionDate <= 1700000230", "-af", "ProcId")[1] == "4\n"
    assert run(capsys, "history", "-scanlimit", "3", "-constraint", 'Kind == "b"', "-af", "ProcId")[1] == "3\n"
    status, _, err = run(capsys, "history", "-forwards", "-since", "5")
    assert status == 2 and "Argument -forwards cannot be combined with -since." in err
    status, _, err = run(capsys, "history", "-since", '"x"')
    assert status == 2 and "invalid -since constraint" in err


def test_history_userlog_lists_the_jobs_of_the_event_log(tmp_path, capsys):
    log = tmp_path / "job.log"
    with EventLogWriter(log) as w:
        w.write(ev.SubmitEvent(cluster=7, proc=0, timestamp=1700000000, submit_host="<h>"),
                ev.SubmitEvent(cluster=7, proc=1, timestamp=1700000000, submit_host="<h>"),
                ev.SubmitEvent(cluster=7, proc=2, timestamp=1700000000, submit_host="<h>"),
                ev.ExecuteEvent(cluster=7, proc=0, timestamp=1700000010, execute_host="<slot1@h>"),
                ev.JobTerminatedEvent(cluster=7, proc=0, timestamp=1700000070, return_value=3))
    assert run(capsys, "history", "-userlog", str(log), "-af", "ProcId", "JobStatus", "ExitCode")[1] == \
        "0 4 3\n1 1 undefined\n2 1 undefined\n"
    assert run(capsys, "history", "-userlog", str(log), "-constraint", "JobStatus == 1", "-af", "ProcId")[1] == "1\n2\n"
    assert run(capsys, "history", "-userlog", str(log), "-since", "7.2", "-af", "ProcId")[1] == "0\n1\n"
    assert run(capsys, "history", "-userlog", str(log), "-scanlimit", "1", "-af", "ProcId")[1] == "0\n"
    status, out, _ = run(capsys, "history", "-userlog", str(log))
    assert status == 0 and out.splitlines()[0].split() == list(views.HISTORY_HEADERS)
    status, _, err = run(capsys, "history", "-userlog", str(tmp_path / "none.log"))
    assert status == 2 and "Can't open user log" in err
