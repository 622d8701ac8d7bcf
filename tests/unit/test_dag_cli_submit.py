"""htc dag submit without a pool: what it writes with -no_submit and what it refuses."""

from __future__ import annotations

import contextlib
import io

import pytest

from htc.cli.main import main

DIAMOND = "JOB A a.sub\nJOB B a.sub\nPARENT A CHILD B\n"


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HTC_CONFIG", "ONLY_ENV")
    monkeypatch.setenv("HTC_HOME", str(tmp_path / "home"))
    (tmp_path / "a.sub").write_text("executable = /bin/true\nqueue\n")
    return tmp_path


def htc(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def test_no_submit_writes_the_condor_sub_and_prints_condor_submit_dags_lines(work):
    (work / "d.dag").write_text(DIAMOND + "SET_JOB_ATTR Team = \"alpha\"\n")
    (work / "extra.sub").write_text("+Inserted = 1\n")
    status, out, err = htc("dag", "submit", "-no_submit", "-maxjobs", "2", "-append", "+Appended = 2",
                           "-insert_sub_file", "extra.sub", "-batch_name", "nightly", "d.dag")
    assert status == 0, err
    assert "File for submitting this DAG to HTCondor           : d.dag.condor.sub" in out
    assert "Log of the life of condor_dagman itself          : d.dag.dagman.log" in out
    assert "-no_submit given, not submitting DAG to HTCondor." in out
    text = (work / "d.dag.condor.sub").read_text()
    assert "universe\t= scheduler" in text and "-MaxJobs 2" in text and '+Team\t= "alpha"' in text
    assert text.index("+Inserted = 1") < text.index("universe") < text.index("+Appended = 2") < text.index("\nqueue\n")
    assert "batch_name\t= nightly" in text
    status, out, err = htc("dag", "submit", "-no_submit", "-update_submit", "-DoRecov", "-debug", "5",
                           "-include_env", "FOO,BAR", "-insert_env", "K=V;K2=V 2", "-notification", "error", "d.dag")
    assert status == 0, err
    text = (work / "d.dag.condor.sub").read_text()
    assert "-DoRecov" in text and "-Debug 5" in text and "FOO, BAR" in text and "notification\t= error" in text
    assert "environment\t= \"K=V 'K2=V 2'\"" in text
    from htc.client import build_cluster

    ad = build_cluster(text, cwd=str(work), filename=str(work / "d.dag.condor.sub"), cluster_id=5).cluster_ad
    assert "K=V" in ad["Environment"] and "K2=V' '2" in ad["Environment"]
    # a second time the files exist: refused unless -update_submit or -f
    (work / "d.dag.lib.out").write_text("")
    status, out, err = htc("submit_dag", "-no_submit", "d.dag")
    assert status != 0 and 'ERROR: "d.dag.lib.out" already exists.' in err and "-update_submit" in err
    assert htc("submit_dag", "-no_submit", "-update_submit", "d.dag")[0] == 0
    assert htc("submit_dag", "-no_submit", "-f", "d.dag")[0] == 0
    assert not (work / "d.dag.lib.out").exists()


def test_a_dag_that_does_not_parse_or_says_reject_is_refused(work):
    (work / "bad.dag").write_text("JOB A a.sub\nPARENT A CHILD Nope\n")
    status, out, err = htc("dag", "submit", "-no_submit", "bad.dag")
    assert status != 0 and "bad.dag:2" in err and not (work / "bad.dag.condor.sub").exists()
    (work / "rej.dag").write_text(DIAMOND + "REJECT\n")
    status, out, err = htc("dag", "submit", "-no_submit", "rej.dag")
    assert status != 0 and "REJECT" in err and "rej.dag:4" in err
    assert not (work / "rej.dag.condor.sub").exists()
    status, out, err = htc("dag", "submit", "-no_submit", "missing.dag")
    assert status != 0 and "missing.dag does not exist" in err


def test_rescue_dags_auto_from_and_force(work):
    (work / "d.dag").write_text(DIAMOND)
    (work / "d.dag.rescue001").write_text("DONE A\n")
    (work / "d.dag.rescue002").write_text("DONE A\n")
    (work / "d.dag.lib.out").write_text("")  # a rescue run may reuse the old files
    status, out, err = htc("dag", "submit", "-no_submit", "d.dag")
    assert status == 0, err
    assert out.splitlines()[0] == "Running rescue DAG 2"
    status, out, err = htc("dag", "submit", "-no_submit", "-DoRescueFrom", "1", "d.dag")
    assert out.splitlines()[0] == "Running rescue DAG 1" and (work / "d.dag.rescue002.old").exists()
    status, out, err = htc("dag", "submit", "-no_submit", "-DoRescueFrom", "5", "d.dag")
    assert status != 0 and "no rescue DAG" in err
    assert htc("dag", "submit", "-no_submit", "-f", "d.dag")[0] == 0
    assert (work / "d.dag.rescue001.old").exists() and not (work / "d.dag.rescue001").exists()


def test_the_dag_config_and_the_config_flag_must_agree(work):
    (work / "a.conf").write_text("DAGMAN_MAX_JOBS_IDLE = 3\n")
    (work / "b.conf").write_text("DAGMAN_MAX_JOBS_IDLE = 4\n")
    (work / "d.dag").write_text(DIAMOND + "CONFIG a.conf\n")
    status, out, err = htc("dag", "submit", "-no_submit", "-config", "b.conf", "d.dag")
    assert status != 0 and "differ" in err
    status, out, err = htc("dag", "submit", "-no_submit", "-config", "a.conf", "d.dag")
    assert status == 0, err


def test_halt_and_resume_make_and_remove_the_halt_file(work):
    (work / "d.dag").write_text(DIAMOND)
    assert htc("dag", "halt", "d.dag")[0] == 0 and (work / "d.dag.halt").exists()
    assert htc("dag", "resume", "d.dag")[0] == 0 and not (work / "d.dag.halt").exists()


def test_use_strict_2_makes_the_dag_files_warnings_errors(work, monkeypatch):
    (work / "w.dag").write_text("SUBMIT-DESCRIPTION s {\nexecutable = /bin/true\nqueue\n}\n"
                                "SUBMIT-DESCRIPTION s {\nexecutable = /bin/false\nqueue\n}\nJOB A s\n")
    status, out, err = htc("dag", "submit", "-no_submit", "w.dag")
    assert status == 0 and "WARNING:" in err and "w.dag:5" in err
    monkeypatch.setenv("_HTC_DAGMAN_USE_STRICT", "2")
    status, out, err = htc("dag", "submit", "-no_submit", "-f", "w.dag")
    assert status != 0 and "DAGMAN_USE_STRICT = 2" in err


def test_allow_any_node_name_characters_lets_plus_in(work, monkeypatch):
    (work / "p.dag").write_text("JOB a+b a.sub\n")
    status, out, err = htc("dag", "submit", "-no_submit", "p.dag")
    assert status != 0 and "p.dag:1" in err
    monkeypatch.setenv("_HTC_DAGMAN_ALLOW_ANY_NODE_NAME_CHARACTERS", "true")
    assert htc("dag", "submit", "-no_submit", "p.dag")[0] == 0


def test_a_rescue_dag_that_does_not_fit_is_refused(work):
    (work / "d.dag").write_text(DIAMOND)
    (work / "d.dag.rescue001").write_text("DONE Nope\n")
    status, out, err = htc("dag", "submit", "-no_submit", "d.dag")
    assert status != 0 and "d.dag.rescue001:1" in err and "Nope" in err


def test_dagman_on_exit_remove_goes_into_the_condor_sub(work, monkeypatch):
    (work / "d.dag").write_text(DIAMOND)
    monkeypatch.setenv("_HTC_DAGMAN_ON_EXIT_REMOVE", "ExitCode =?= 0")
    assert htc("dag", "submit", "-no_submit", "d.dag")[0] == 0
    assert "on_exit_remove\t= ExitCode =?= 0\n" in (work / "d.dag.condor.sub").read_text()


def test_load_save_starts_from_a_save_file(work):
    (work / "d.dag").write_text(DIAMOND + "SAVE_POINT_FILE B\n")
    (work / "save_files").mkdir()
    (work / "save_files" / "B-d.dag.save").write_text("# Save file written at Start Node B\nDONE A\n")
    status, out, err = htc("dag", "submit", "-no_submit", "-load_save", "B-d.dag.save", "d.dag")
    assert status == 0, err
    assert out.splitlines()[0] == f"Running from save file {work}/save_files/B-d.dag.save"
    assert "-load_save B-d.dag.save" in (work / "d.dag.condor.sub").read_text()
    status, out, err = htc("dag", "submit", "-no_submit", "-update_submit", "-load_save", "nope.save", "d.dag")
    assert status != 0 and "no save file" in err
