"""-af, -long and -json output, and the table views of htc q / htc status / htc history."""

from __future__ import annotations

import io
import json

import pytest

from htc.classad import ClassAd, ExprTree
from htc.cli import formatting as fmt
from htc.cli import job_views as views
from htc.errors import UsageError

AD = ClassAd('[ ClusterId = 12; ProcId = 3; Owner = "alice"; Cmd = "/bin/sleep"; Args = "60";'
             ' RequestMemory = 2048; LoadAvg = 0.5; Ok = true; List = { 1, "a" };'
             ' Twice = RequestMemory * 2; JobStatus = 2; QDate = 1700000000; ShadowBday = 1700000100;'
             ' RemoteWallClockTime = 30.0; ImageSize = 2048; JobPrio = 5; RemoteHost = "slot1@h" ]')


def test_autoformat_values_are_bare_and_space_separated():
    text = fmt.autoformat([AD, AD], ["ClusterId", "Owner", "LoadAvg", "Ok", "Missing", "Twice", "List",
                                     "RequestMemory / 1024"])
    assert text == '12 alice 0.5 true undefined 4096 { 1, "a" } 2\n' * 2
    assert fmt.autoformat([], ["ClusterId"]) == ""
    with pytest.raises(UsageError, match="-af"):
        fmt.autoformat([AD], ["a +"])


def test_long_form_is_old_syntax_that_htcondor_reads_back():
    classad2 = pytest.importorskip("classad2")
    text = fmt.long_form([AD, ClassAd('[ A = 1 ]')])
    assert text.startswith('Args = "60"\nClusterId = 12\n') and "Twice = RequestMemory * 2\n" in text  # sorted
    assert text.endswith("\n\n") and text.count("\n\n") == 2
    back = list(classad2.parseAds(text, classad2.ParserType.Old))
    assert len(back) == 2
    assert back[0]["Owner"] == "alice" and back[0].eval("Twice") == 4096 and back[1]["A"] == 1
    assert fmt.long_form([AD], ["Owner", "ProcId"]) == 'Owner = "alice"\nProcId = 3\n\n'


def test_json_form_parses_and_keeps_expressions():
    data = json.loads(fmt.json_form([AD, AD]))
    assert len(data) == 2 and data[0]["ClusterId"] == 12 and data[0]["Owner"] == "alice"
    assert data[0]["Twice"] == "/Expr(RequestMemory * 2)/"
    assert json.loads(fmt.json_form([])) == []
    assert json.loads(fmt.json_form([AD], ["ProcId"])) == [{"ProcId": 3}]


def test_duration_and_dates():
    assert fmt.duration(0) == "0+00:00:00"
    assert fmt.duration(93784) == "1+02:03:04"
    assert fmt.duration(-5) == "0+00:00:00"
    assert fmt.short_date(1700000000) == "11/14 22:13"  # TZ=UTC in the tests
    assert fmt.short_date(None) == "???"


def test_tables_have_no_trailing_spaces_in_a_pipe():
    buf = io.StringIO()
    fmt.print_table(["ID", "NAME", "N"], [["1.0", "a[b]", 5], ["12.3", "c", 10]], right=[2], out=fmt.console(buf))
    assert buf.getvalue() == "ID   NAME  N\n1.0  a[b]  5\n12.3 c    10\n"


def test_job_rows_and_run_time():
    now = 1700000160
    assert views.run_time(AD, now) == 90.0
    assert views.job_rows([AD], now) == [("12.3", "alice", "11/14 22:13", "0+00:01:30", "R", 5, "2.0", "sleep 60")]
    assert views.run_rows([AD], now) == [("12.3", "alice", "11/14 22:13", "0+00:01:30", "slot1@h")]


def test_batch_rows_group_by_owner_and_batch_name():
    def job(cluster, proc, status, owner="alice", batch=None):
        ad = ClassAd({"ClusterId": cluster, "ProcId": proc, "JobStatus": status, "Owner": owner,
                      "QDate": 1700000000 + cluster})
        if batch:
            ad["JobBatchName"] = batch
        return ad

    ads = [job(1, 0, 1), job(1, 1, 2), job(1, 2, 5), job(2, 0, 1, batch="night"), job(3, 0, 1, batch="night"),
           job(4, 0, 1, owner="bob")]
    headers, rows = views.batch_rows(ads)
    assert headers == ("OWNER", "BATCH_NAME", "SUBMITTED", "DONE", "RUN", "IDLE", "HOLD", "TOTAL", "JOB_IDS")
    assert rows == [
        ("alice", "ID: 1", "11/14 22:13", "_", "1", "1", "1", "_", "1.0-2"),
        ("alice", "night", "11/14 22:13", "_", "_", "2", "_", "_", "2.0 ... 3.0"),
        ("bob", "ID: 4", "11/14 22:13", "_", "_", "1", "_", "_", "4.0"),
    ]
    assert views.totals_line("query", views.status_counts(ads)) == \
        "Total for query: 6 jobs; 0 completed, 0 removed, 4 idle, 1 running, 1 held, 0 suspended"
    assert views.batch_rows([job(1, 0, 1)])[0] == views.BATCH_HEADERS


def test_done_counts_procs_that_left_the_queue():
    ad = ClassAd({"ClusterId": 9, "ProcId": 4, "JobStatus": 1, "Owner": "a", "TotalSubmitProcs": 5, "QDate": 1})
    [row] = views.batch_rows([ad])[1]
    assert row[3:] == ("4", "_", "1", "5", "9.4")


def test_hold_and_history_rows():
    held = ClassAd({"ClusterId": 1, "ProcId": 0, "Owner": "a", "JobStatus": 5, "EnteredCurrentStatus": 1700000000,
                    "HoldReason": "via htc hold"})
    assert views.hold_rows([held]) == [("1.0", "a", "11/14 22:13", "   ? ", "via htc hold")]
    held["HoldReasonCode"], held["HoldReasonSubCode"] = 1, 0  # condor_q's CODE/SUB: %4d then /%-3d
    assert views.hold_rows([held])[0][3] == "   1/0  "
    done = ClassAd({"ClusterId": 2, "ProcId": 1, "Owner": "a", "JobStatus": 4, "QDate": 1700000000,
                    "CompletionDate": 1700003600, "RemoteWallClockTime": 61.0, "Cmd": "/bin/true"})
    assert views.history_rows([done], 0) == [("2.1", "a", "11/14 22:13", "0+00:01:01", "C", "11/14 23:13", "true")]


def test_value_text():
    assert fmt.value_text(ExprTree("1.0").eval()) == "1.0"
    assert fmt.value_text(ExprTree("error").eval()) == "error"
    assert fmt.value_text(ExprTree("[a = 1]").eval()) == "[ a = 1 ]"
