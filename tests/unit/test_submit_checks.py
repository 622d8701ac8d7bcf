"""condor_submit's checks on the client side (issue 16, "Submit"): the executable a job will
transfer, a DAG file given to submit; GlobalJobId as the schedd's queue forms it; ``-long``'s
attribute order; the transferred executable's name in the sandbox (``condor_exec.exe``)."""

from __future__ import annotations

import os
import stat

import pytest

from htc.classad import ClassAd
from htc.cli.formatting import long_form
from htc.client import build_cluster
from htc.daemons.starter.sandbox import CONDOR_EXEC, Sandbox
from htc.errors import UsageError
from htc.jobqueue import JobQueue
from htc.submit import Submit, SubmitError


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    return tmp_path


def _build(text: str, cwd) -> object:
    return build_cluster(text, cwd=str(cwd), filename="job.sub")


# -- the executable --------------------------------------------------------------------------

def test_a_missing_executable_is_refused_with_condor_submits_message(here):
    with pytest.raises(UsageError) as err:
        _build("executable = nope.sh\nqueue\n", here)
    assert str(err.value).splitlines() == [
        "ERROR: Can't access executable file nope.sh: No such file or directory", "No jobs were queued."]


def test_an_empty_executable_a_directory_and_a_crlf_script_are_refused(here):
    (here / "empty.sh").write_bytes(b"")
    (here / "dos.sh").write_bytes(b"#!/bin/sh\r\necho hi\r\n")
    (here / "dir").mkdir()
    for name, first in (("empty.sh", "ERROR: Executable file empty.sh has zero length"),
                        ("dos.sh", "ERROR: Executable file dos.sh is a script with CRLF (DOS/Windows) line endings."),
                        ("dir", "ERROR: Can't access executable file dir: Is a directory")):
        with pytest.raises(SubmitError) as err:
            _build(f"executable = {name}\nqueue\n", here)
        assert str(err.value).splitlines()[0] == first


def test_each_procs_executable_is_checked(here):
    # (as htc submit builds them: every proc's ad before anything is sent)
    with pytest.raises(SubmitError, match="Can't access executable file missing.sh"):
        list(_build("executable = $(exe)\nqueue exe in (run.sh, run.sh, missing.sh, run.sh)\n", here).proc_ads())
    (here / "two.sh").write_text("#!/bin/sh\n")
    cluster = _build("executable = $(exe)\nqueue exe in (run.sh, two.sh, run.sh, two.sh)\n", here)
    assert [ad["Cmd"] for ad in cluster.job_ads()] == [f'"{here}/{n}.sh"' for n in ("run", "two", "run", "two")]


def test_an_executable_that_passed_is_checked_again_once_it_changes(here, monkeypatch):
    # a DAG manager checks one executable per node: a file that passed is not opened again
    # while its stat is the same, and checked afresh as soon as it is rewritten or removed
    from htc.client import submission

    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a: opened.append(path) or real_open(path, *a))
    for _ in range(3):
        submission.check_submit_file(str(here), "executable", "run.sh", True)
    assert opened == [str(here / "run.sh")]
    for content, message in ((b"", "has zero length"), (b"#!/bin/sh\r\necho hi\r\n", "CRLF"),
                             (None, "Can't access executable file run.sh: No such file")):
        if content is None:
            (here / "run.sh").unlink()
        else:
            (here / "run.sh").write_bytes(content)
        with pytest.raises(SubmitError, match=message):
            submission.check_submit_file(str(here), "executable", "run.sh", True)


def test_a_non_executable_file_is_accepted_as_condor_submit_accepts_it(here):
    # condor_submit only stats it; the transfer makes it executable in the sandbox
    (here / "run.sh").chmod(0o644)
    cluster = _build("executable = run.sh\nqueue\n", here)
    assert cluster.cluster_ad["Cmd"] == f'"{here}/run.sh"'


def test_executables_that_are_not_transferred_are_not_looked_at(here):
    for text in ("executable = /no/such/exe\ntransfer_executable = false\nqueue\n",
                 "executable = prog.$$(OpSys)\nqueue\n",
                 "universe = docker\ndocker_image = debian\nexecutable = /no/such/exe\n"
                 "transfer_executable = false\nqueue\n",
                 "universe = docker\ndocker_image = debian\nqueue\n"):
        assert _build(text, here).num_procs == 1, text
    # as condor_submit: a docker job's executable is transferred unless told otherwise
    with pytest.raises(SubmitError, match="Can't access executable file /no/such/exe"):
        _build("universe = docker\ndocker_image = debian\nexecutable = /no/such/exe\nqueue\n", here)


def test_an_executable_named_after_the_cluster_is_left_to_the_schedd(here, monkeypatch):
    # htc submit does not know the cluster id before the schedd assigns it: it cannot check
    # run_$(Cluster).sh, and sends the description for the schedd to expand
    from htc.client import submission

    sent = []
    monkeypatch.setattr(submission, "_send_submission", lambda msg, *a: sent.append(msg) or
                        type("Reply", (), {"cluster_id": 5, "first_proc": 0, "num_procs": 1})())
    assert submission.submit("executable = run_$(Cluster).sh\nqueue\n", cwd=str(here)).cluster_id == 5
    with pytest.raises(SubmitError, match="Can't access executable file run_.sh"):
        submission.submit("executable = run_$(Undefined).sh\nqueue\n", cwd=str(here))
    assert len(sent) == 1


def test_the_submit_language_alone_does_not_look_at_files(here):
    # htcondor2.Submit (and the schedd, expanding as root) make no file checks
    cluster = Submit("executable = nope.sh\nqueue\n", cwd=str(here)).cluster(1)
    assert cluster.cluster_ad["Cmd"] == f'"{here}/nope.sh"'


# -- a DAG file --------------------------------------------------------------------------------

def test_a_dag_file_names_the_dag_command(here):
    dag = "# diamond\nJOB A a.sub\nJOB B b.sub\nPARENT A CHILD B\n"
    with pytest.raises(SubmitError) as err:
        build_cluster(dag, cwd=str(here), filename="diamond.dag")
    lines = str(err.value).splitlines()
    assert lines[0] == "ERROR: A DAG file was provided. Please provide a submit file or use htc dag submit."
    assert "line 2 of diamond.dag" in lines[1] and "'htc dag submit diamond.dag'" in lines[1]
    assert "htc submit_dag diamond.dag" in lines[1] and "exists yet" not in str(err.value)
    assert lines[-1] == "No jobs were queued."
    with pytest.raises(SubmitError, match="A DAG file was provided"):
        Submit("parent a child b\n")
    # a submit file's own syntax error stays a syntax error
    with pytest.raises(SubmitError, match="neither 'name = value' nor a queue statement"):
        Submit("executable /bin/true\nqueue\n")


# -- GlobalJobId ------------------------------------------------------------------------------

def test_global_job_id_is_formed_as_the_schedd_forms_it(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        q.schedd_name = "schedd@submit.example.org"
        cid = q.next_cluster_id()
        q.submit(Submit("executable = /bin/true\n+GlobalJobId = \"mine\"\nqueue 3", cwd=str(tmp_path))
                 .cluster(cid, owner="alice", qdate=1_700_000_000))
        ids = [j["GlobalJobId"] for j in q.query()]
        assert ids == [f'"schedd@submit.example.org#{cid}.{p}#1700000000"' for p in range(3)]
        assert q.get_job((cid, 1)).to_dict()["GlobalJobId"] == ids[1]
        assert [j.proc_id for j in q.query(f'GlobalJobId == "schedd@submit.example.org#{cid}.2#1700000000"')] == [2]
        q.remove((cid, 0))
        assert [h["GlobalJobId"] for h in q.history()] == [ids[0]]


def test_late_materialized_procs_get_a_global_job_id_too(tmp_path):
    with JobQueue.open(str(tmp_path / "q.db")) as q:
        q.schedd_name = "s"
        cid = q.next_cluster_id()
        q.submit(Submit("executable = /bin/true\nmax_materialize = 1\nqueue 2", cwd=str(tmp_path))
                 .cluster(cid, owner="alice", qdate=5))
        q.remove((cid, 0))
        assert q.materialize(cid) == 1
        assert q.get_job((cid, 1))["GlobalJobId"] == f'"s#{cid}.1#5"'


# -- -long -------------------------------------------------------------------------------------

def test_long_sorts_attributes_as_condor_q_does():
    ad = ClassAd('[ b = 1; A = 2; _x = 3; a_b = "s"; Cmd = 1 + 2 ]')
    assert long_form([ad]) == '_x = 3\nA = 2\na_b = "s"\nb = 1\nCmd = 1 + 2\n\n'
    assert long_form([ad], ["b", "Cmd", "A"]) == "A = 2\nb = 1\nCmd = 1 + 2\n\n"


# -- condor_exec.exe ---------------------------------------------------------------------------

def test_the_transferred_executable_is_condor_exec_exe(tmp_path):
    src = tmp_path / "submit"
    src.mkdir()
    (src / "myjob.sh").write_text("#!/bin/sh\n")
    (src / "myjob.sh").chmod(0o644)
    box = Sandbox.create(tmp_path / "execute")
    dest = box.bring_in("myjob.sh", src, executable=True)
    assert dest == box.path / CONDOR_EXEC == box.path / "condor_exec.exe"
    assert os.stat(dest).st_mode & stat.S_IXUSR
    assert box.bring_in("myjob.sh", src) == box.path / "myjob.sh"  # an input keeps its name
