"""htc q's options as condor_q defines them: -format, -af and its qualifiers, -xml, the batch
view's DONE and TOTAL, RUN_TIME (-currentrun / -cumulative-time), -io, -goodput, -dag,
-userlog, -print-format and the option checks."""

from __future__ import annotations

import io

import pytest

from htc.classad import ClassAd
from htc.cli import autoformat as af
from htc.cli import formatting as fmt
from htc.cli import job_views as views
from htc.cli import print_format
from htc.cli.main import build_parser
from htc.cli.queue_tools import _check_q_options, _custom_mask, _partial
from htc.cli.userlog_jobs import build
from htc.errors import UsageError
from htc.eventlog import events as ev

ADS = [ClassAd({"ClusterId": 12, "ProcId": 0, "Owner": "alice", "RequestMemory": 2048, "QDate": 1700000000,
                "RemoteWallClockTime": 65.0, "Cmd": "/bin/sleep"}),
       ClassAd({"ClusterId": 12, "ProcId": 1, "Owner": "bob"})]


def render(*argv: str, ads=ADS) -> str:
    args = build_parser().parse_args(["q", *argv])
    return _custom_mask(args.custom).render(ads)


@pytest.mark.parametrize("qualifiers, expected", [
    ("", "alice 2048 4096\nbob undefined undefined\n"),
    (":j", "12.0 alice 2048 4096\n12.1 bob undefined undefined\n"),
    (":l", "Owner = alice RequestMemory = 2048 RequestMemory*2 = 4096\n"
           "Owner = bob RequestMemory = undefined RequestMemory*2 = undefined\n"),
    (":,", "alice, 2048, 4096\nbob, undefined, undefined\n"),
    (":t", "alice\t2048\t4096\nbob\tundefined\tundefined\n"),
    (":n", "alice\n 2048\n 4096\nbob\n undefined\n undefined\n"),
    (":lgn", "\nOwner = alice\nRequestMemory = 2048\nRequestMemory*2 = 4096\n"
             "\nOwner = bob\nRequestMemory = undefined\nRequestMemory*2 = undefined\n"),
    (":V", '"alice" 2048 4096\n"bob" undefined undefined\n'),
    (":r", '"alice" 2048 RequestMemory * 2\n"bob" undefined RequestMemory * 2\n'),
    (":h", "Owner RequestMemory RequestMemory*2\nalice 2048          4096           \n"
           "bob   undefined     undefined      \n"),
    (":jh", " ID  Owner RequestMemory RequestMemory*2\n12.0 alice 2048          4096           \n"
            "12.1 bob   undefined     undefined      \n"),
])
def test_autoformat_qualifiers(qualifiers, expected):
    assert render("-af" + qualifiers, "Owner", "RequestMemory", "RequestMemory*2") == expected
    assert render("-autoformat" + qualifiers, "Owner", "RequestMemory", "RequestMemory*2") == expected


def test_autoformat_time_and_date_qualifiers():
    assert render("-af:T", "RemoteWallClockTime", ads=ADS[:1]) == "  0+00:01:05\n"
    assert render("-af:Y", "QDate", ads=ADS[:1]) == "11/14 22:13\n"  # TZ=UTC in the tests


def test_format_is_printf_with_one_conversion_and_skips_what_does_not_fit():
    assert render("-format", "%d.", "ClusterId", "-format", "%d\\n", "ProcId") == "12.0\n12.1\n"
    # %s on a non-string attribute prints its expression; missing values print nothing at all
    assert render("-format", "%s ", "RequestMemory", "-format", "%s\\n", "Owner") == "2048 alice\nbob\n"
    assert render("-format", "[%5.1f]", "RequestMemory", "-format", "<%x>", "ClusterId",
                  "-format", "%V|", "Owner", "-format", "%v|", "Owner", "-format", "%r\\n", "RequestMemory*2",
                  ads=ADS[:1]) == '[2048.0]<c>"alice"|alice|RequestMemory * 2\n'
    assert render("-format", "%T", "RemoteWallClockTime", "-format", " %Y", "QDate",
                  "-format", " no conversion 100%%\\n", "Owner", ads=ADS[:1]) == "  0+00:01:0511/14 22:13 no conversion 100%\n"
    # (as in HTCondor, %T and %Y print the time alone: the text around them is dropped)
    assert render("-format", "%d\\n", "NoSuch") == ""
    assert render("-format", "%s", "Owner", "-af", "ProcId", ads=ADS[:1]) == "alice 0\n"


def test_options_are_checked_as_condor_q_checks_them():
    def check(*argv):
        _check_q_options(build_parser().parse_args(["q", *argv]))

    for argv, message in [(("-currentrun", "-cumulative-time"), "-currentrun"), (("-xml", "-json"), "XML"),
                          (("-submitter", "a", "-name", "b"), "submitters"), (("-run", "-hold"), "incompatible"),
                          (("-batch", "-af", "A"), "-batch conflicts")]:
        with pytest.raises(UsageError, match=message):
            check(*argv)
    with pytest.raises(UsageError, match="-autoformat"):
        render("-af", "a +")
    args = build_parser().parse_args(["q", "-wide:100", "12", "-af", "A", "-"])
    assert args.wide_columns == 100 and args.ids == ["12"]


def test_xml_form_is_htcondors():
    text = fmt.xml_form([ClassAd('[ A = 1; B = "x<y"; C = A + 1; D = { 1, "a" }; E = true; F = 0.5; G = undefined ]')])
    assert text == ('<?xml version="1.0"?>\n<!DOCTYPE classads SYSTEM "classads.dtd">\n<classads>\n<c>\n'
                    '    <a n="A"><i>1</i></a>\n    <a n="B"><s>x&lt;y</s></a>\n    <a n="C"><e>A + 1</e></a>\n'
                    '    <a n="D"><l><i>1</i><s>a</s></l></a>\n    <a n="E"><b v="t"/></a>\n'
                    '    <a n="F"><r>5.000000000000000E-01</r></a>\n    <a n="G"><u/></a>\n</c>\n</classads>\n')
    assert fmt.xml_form([]) == '<?xml version="1.0"?>\n<!DOCTYPE classads SYSTEM "classads.dtd">\n<classads>\n</classads>\n'


def job(cluster, proc, status, total=None, **extra):
    ad = {"ClusterId": cluster, "ProcId": proc, "JobStatus": status, "Owner": "alice", "QDate": 1700000000, **extra}
    if total is not None:
        ad["TotalSubmitProcs"] = total
    return ClassAd(ad)


def test_batch_done_and_total_count_procs_that_left_the_queue():
    # cluster 5 had 4 procs: 2 left the queue (done), one runs, one is suspended (counted idle)
    ads = [job(5, 1, 2, 4), job(5, 3, 7, 4), job(6, 0, 4, 1)]
    headers, rows = views.batch_rows(ads)
    assert headers == views.BATCH_HEADERS
    assert rows == [("alice", "ID: 5", "11/14 22:13", "2", "1", "1", "4", "5.1-3"),
                    ("alice", "ID: 6", "11/14 22:13", "_", "_", "_", "1", "6.0")]
    # a query that may leave procs out cannot count them done
    assert views.batch_rows(ads, partial=True)[1][0][3] == "_"
    # a cluster without TotalSubmitProcs makes the batch's totals unknown
    named = [job(1, 0, 1, 3, JobBatchName="b"), job(2, 0, 1, None, JobBatchName="b")]
    assert views.batch_rows(named)[1] == [("alice", "b", "11/14 22:13", "_", "_", "2", "_", "1.0 ... 2.0")]
    # a DAG: its nodes fold under the DAGMan job, TOTAL and DONE are the DAG's node counts
    dag = [job(10, 0, 2, 1, JobUniverse=7, DAG_NodesTotal=5, DAG_NodesDone=2),
           job(11, 0, 2, 1, DAGManJobId=10, DAGNodeName="A"), job(12, 0, 1, 1, DAGManJobId=10, DAGNodeName="B")]
    assert views.batch_rows(dag)[1] == [("alice", "DAG: 10", "11/14 22:13", "2", "1", "1", "5", "11.0 ... 12.0")]
    assert [(r[0], r[1]) for r in views.dag_rows(dag, 0)] == [("10.0", "alice"), ("11.0", " |-A"), ("12.0", " |-B")]
    assert views.batch_rows([], show_hold=True)[0][6] == "HOLD"


def test_partial_queries():
    def partial(*argv):
        return _partial(build_parser().parse_args(["q", *argv]))

    assert not partial() and not partial("12") and not partial("alice")
    assert partial("12.3") and partial("-constraint", "true") and partial("-run") and partial("-idle")


def test_run_time_current_run_and_cumulative():
    running = ClassAd({"JobStatus": 2, "RemoteWallClockTime": 100.0, "ShadowBday": 1000})
    held = ClassAd({"JobStatus": 5, "RemoteWallClockTime": 100.0, "LastRemoteWallClockTime": 30.0})
    assert views.run_time(running, 1010, current_run=True) == 10
    assert views.run_time(running, 1010) == 110
    assert views.run_time(held, 1010, current_run=True) == 30
    assert views.run_time(held, 1010) == 100
    # a schedd that did not record the last run: all runs rather than nothing
    assert views.run_time(ClassAd({"JobStatus": 1, "RemoteWallClockTime": 7.0}), 0, current_run=True) == 7


def test_io_and_goodput_rows():
    moving = job(3, 0, 2, BytesRecvd=3 * 1024 * 1024, BytesSent=100, NumJobStarts=1, TransferringInput=True)
    assert views.io_rows([moving, job(4, 0, 2)]) == [
        ("3.0", "alice", 1, "R", "3.0 MB", "100.0 B ", "3.0 MB", " transfer=in")]
    assert views.readable_bytes(None) == "        "
    ckpt = job(5, 0, 4, RemoteWallClockTime=200.0, JobCommittedTime=50, RemoteUserCpu=25.0,
               BytesSent=1024 * 1024, BytesRecvd=0)
    assert views.goodput_rows([ckpt], 0, current_run=False) == [("5.0", "alice", "11/14 22:13", "0+00:03:20", "  25.0%", "  50.0%",
                                              "  0.04")]
    assert views.goodput_rows([job(6, 0, 1)], 0)[0][4:] == (" [?????]", "[??????]", "[????]")


def test_userlog_jobs_follow_the_events():
    events = [ev.SubmitEvent(cluster=7, proc=0, timestamp=1700000000, submit_host="<h>"),
              ev.SubmitEvent(cluster=7, proc=1, timestamp=1700000000),
              ev.ExecuteEvent(cluster=7, proc=0, timestamp=1700000010, execute_host="<slot1@h>"),
              ev.JobTerminatedEvent(cluster=7, proc=0, timestamp=1700000070, return_value=3),
              ev.JobHeldEvent(cluster=7, proc=1, timestamp=1700000080, reason="via htc hold", code=1),
              ev.ExecuteEvent(cluster=9, proc=0, timestamp=1700000090)]
    done, held = build(events, "job.log", 1700000100)
    assert (done["JobStatus"], done["ExitCode"], done["RemoteWallClockTime"], done["LastRemoteHost"]) == \
        (4, 3, 60.0, "<slot1@h>")
    assert (held["JobStatus"], held["HoldReason"], held["Cmd"], held["QDate"]) == (5, "via htc hold", "???", 1700000000)


PF = """# my jobs
SELECT
   ClusterId  AS ' ID'  NOSUFFIX WIDTH 5 PRINTF '%4d.'
   ProcId     AS ' '    NOPREFIX WIDTH 3 PRINTF '%-3d'
   Owner      AS OWNER  WIDTH -8
   RequestMemory/1024 AS GB PRINTF %.1f OR ??
   JobStatus  AS ST PRINTAS JOB_STATUS
WHERE JobStatus != 3
GROUP BY
   Owner DESCENDING
SUMMARY STANDARD
"""


def test_print_format_files():
    layout = print_format.parse(PF)
    assert layout.where == "(JobStatus != 3)" and layout.summary
    ads = [job(1, 0, 1, RequestMemory=2048), job(1, 1, 2, Owner="zed")]
    assert layout.render(ads, 0) == (" ID      OWNER    GB  ST\n   1.1   zed      [?] R \n   1.0   alice    2.0 I \n")
    assert print_format.parse("SELECT BARE LABEL\n Owner\n ProcId AS P\n").render(ads[:1], 0) == "Owner = alice P = 0\n"
    for bad in ("SELECT FROM AUTOCLUSTER\n", "Owner\n", "SELECT\n Owner PRINTAS NOPE\n", "SELECT\n a + \n"):
        with pytest.raises(UsageError):
            print_format.parse(bad)


def test_wide_columns_cut_lines_plainly():
    buf = io.StringIO()
    fmt.print_table(["ID", "CMD"], [["1.0", "a long command line"]], out=fmt.console(buf), width=10)
    assert buf.getvalue() == "ID  CMD\n1.0 a long\n"


def test_split_af_option():
    assert af.split_af_option("-af:jh") == ("af", "jh") and af.split_af_option("-autoformat") == ("af", "")
    assert af.split_af_option("-afx") is None
