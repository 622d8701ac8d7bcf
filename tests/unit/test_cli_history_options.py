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
