"""htc q -jobads, -autocluster, -group-by, -hold-codes, -factory, -stream-results and the
Q_DEFAULT_*_PRINT_FORMAT_FILE knobs, on job ads read from a file (condor_q -jobads: no schedd)."""

from __future__ import annotations

import getpass
import json

import pytest

from htc.classad import ClassAd
from htc.cli import formatting as fmt
from htc.cli import q_modes
from htc.cli.main import main
from htc.submit import Submit


def jobs() -> list[ClassAd]:
    """Cluster 5: procs 0-2 idle (1 GB), 3-4 held with code 13 and 21/2; cluster 6: 2 GB, one
    late-materialization job held with code 13."""
    out = []
    for cluster, text, n in ((5, "request_memory = 1024\n", 5), (6, "request_memory = 2048\nmax_materialize = 4\n", 1)):
        sub = Submit("executable = /bin/sleep\narguments = 60\n" + text + f"queue {n}\n")
        for ad in sub.jobs(clusterid=cluster):
            ad["Owner"], ad["QDate"], ad["EnteredCurrentStatus"] = getpass.getuser(), 1700000000, 1700000000
            out.append(ad)
    for ad, code, sub in ((out[3], 13, 0), (out[4], 21, 2), (out[5], 13, 0)):
        ad["JobStatus"], ad["HoldReasonCode"], ad["HoldReasonSubCode"] = 5, code, sub
        ad["HoldReason"] = f"code {code}"
        ad["EnteredCurrentStatus"] = 1700000000 + ad["ProcId"]
    return out


@pytest.fixture
def jobads(tmp_path):
    path = tmp_path / "jobs.ads"
    path.write_text("-- Schedd: a title line, as htc q -long prints none but condor_q's files may have\n"
                    + fmt.long_form(jobs()))
    return str(path)


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_jobads_reads_long_and_json_files(jobads, tmp_path, capsys):
    assert run(capsys, "q", "-jobads", jobads, "-af", "ClusterId", "ProcId", "JobStatus")[1] == \
        "5 0 1\n5 1 1\n5 2 1\n5 3 5\n5 4 5\n6 0 5\n"
    status, out, _ = run(capsys, "q", "-jobads", jobads, "-nobatch")
    assert status == 0 and f"-- Jobads: {jobads} @ " in out
    assert "Total for query: 6 jobs; 0 completed, 0 removed, 3 idle, 0 running, 3 held, 0 suspended" in out
    js = tmp_path / "jobs.json"
    js.write_text(fmt.json_form(jobs()))
    assert run(capsys, "q", "-jobads", str(js), "-constraint", "ProcId == 4", "-af", "HoldReasonCode")[1] == "21\n"
    status, _, err = run(capsys, "q", "-jobads", str(tmp_path / "none"))
    assert status == 2 and "Can't open file of ClassAds:" in err


def test_hold_codes_one_line_per_code_and_subcode(jobads, capsys):
    out = run(capsys, "q", "-jobads", jobads, "-hold-codes")[1].splitlines()
    table = [line.split() for line in out if line.strip() and not line.startswith("--")]
    assert table[0] == ["OWNER", "CODE/SUB", "COUNT", "OLDEST_JOB_ID", "HELD_SINCE", "HOLD_REASON"]
    assert [row[1:4] for row in table[1:]] == [["13/0", "2", "5.3"], ["21/2", "1", "5.4"]]
    assert not any(line.startswith("Total for") for line in out)  # SUMMARY NONE
    out = run(capsys, "q", "-jobads", jobads, "-hold-codes:21/2", "-af", "ProcId")[1]
    assert out == "4\n"
    assert q_modes.hold_code_constraint("13,21/2,x") == "HoldReasonCode==13 || (HoldReasonCode==21 && HoldReasonSubCode==2)"
    status, _, err = run(capsys, "q", "-jobads", jobads, "-hold-codes", "-run")
    assert status == 2 and "-hold-codes incompatible with -idle or -run" in err


def test_hold_shows_code_and_subcode(jobads, capsys):
    out = run(capsys, "q", "-jobads", jobads, "-hold")[1]
    assert "CODE/SUB" in out.splitlines()[2] and "  13/0   " in out


def test_autocluster_groups_jobs_alike(jobads, capsys):
    acs = q_modes.autocluster_ads(jobs())
    assert [(a["JobCount"], a["RequestMemory"], a["JobIds"]) for a in acs] == [(5, 1024, "5.0 ... 5.4"), (1, 2048, "6.0")]
    assert [a["AutoClusterId"] for a in acs] == [1, 2]
    out = run(capsys, "q", "-jobads", jobads, "-autocluster")[1].splitlines()
    assert out[2].split()[:6] == ["ID", "COUNT", "UNIVERSE", "CPUS", "MEMORY", "DISK"]
    assert out[3].split()[:5] == ["1", "5", "vanilla", "1", "1024"]
    assert json.loads(run(capsys, "q", "-jobads", jobads, "-autocluster", "-json")[1])[1]["JobCount"] == 1
    # the schedd's AutoClusterId, when the jobs carry one, is the id
    ads = jobs()
    for ad in ads:
        ad["AutoClusterId"] = 7 if ad["ClusterId"] == 5 else 3
    assert [a["AutoClusterId"] for a in q_modes.autocluster_ads(ads)] == [3, 7]


def test_group_by_counts_jobs_per_value(jobads, capsys):
    assert run(capsys, "q", "-jobads", jobads, "-group-by", "-af", "JobStatus", "JobCount", "JobIds")[1] == \
        "1 3 5.0 ... 5.2\n5 3 5.3 ... 6.0\n"
    assert [a["Id"] for a in q_modes.group_by_ads(jobs(), ["ClusterId"])] == [1, 2]
    table = [line.split() for line in run(capsys, "q", "-jobads", jobads, "-group-by", "-attributes",
                                          "JobStatus")[1].splitlines() if line.strip()]
    assert table[1:] == [["ID", "COUNT", "JobStatus", "JOB_IDS"], ["1", "3", "1", "5.0", "...", "5.2"],
                         ["2", "3", "5", "5.3", "...", "6.0"]]
    status, _, err = run(capsys, "q", "-jobads", jobads, "-group-by")
    assert status == 2 and "-group-by groups by the attributes of -af or -attributes" in err
    status, _, err = run(capsys, "q", "-jobads", jobads, "-group-by", "-batch", "-attributes", "Owner")
    assert status == 2 and "-batch conflicts with -group-by" in err


def test_factory_lists_late_materialization_clusters(jobads, capsys):
    out = [line.split() for line in run(capsys, "q", "-jobads", jobads, "-factory")[1].splitlines() if line.strip()]
    assert out[1] == ["ID", "OWNER", "SUBMITTED", "LIMIT", "PRESNT", "RUN", "IDLE", "HOLD", "NEXTID", "MODE", "DIGEST"]
    assert out[2][0] == "6." and out[2][4:] == ["4", "1", "0", "0", "1", "1", "_", "-"]
    assert len(out) == 3


def test_stream_results_is_one_line_per_job(jobads, capsys):
    out = run(capsys, "q", "-jobads", jobads, "-stream-results")[1]
    assert "RUN_TIME" in out and "5.4" in out
    status, _, err = run(capsys, "q", "-jobads", jobads, "-stream-results", "-dag")
    assert status == 2 and "-stream-results and -dag or -batch are incompatible" in err


def test_default_print_format_knobs(jobads, tmp_path, capsys, _isolated_htc_home):
    pf = tmp_path / "hold.pf"
    pf.write_text("SELECT NOTITLE\n  ProcId AS P WIDTH 2\n  HoldReasonCode AS C\n")
    (_isolated_htc_home / "config.d").mkdir(exist_ok=True)
    (_isolated_htc_home / "config.d" / "50-q.conf").write_text(
        f"Q_DEFAULT_HOLD_PRINT_FORMAT_FILE = {pf}\nQ_DEFAULT_IDLE_PRINT_FORMAT_FILE = {tmp_path / 'missing.pf'}\n")
    assert run(capsys, "q", "-jobads", jobads, "-hold")[1] == "P  C \n 3 13\n 4 21\n 0 13\n"
    assert "HOLD_REASON" in run(capsys, "q", "-jobads", jobads, "-hold", "-print-format", "!")[1]
    assert "RUN_TIME" in run(capsys, "q", "-jobads", jobads, "-idle")[1]  # the file does not exist: ignored
    assert q_modes.view_tag(main.__globals__["build_parser"]().parse_args(["q", "-run"])) == "RUN"
