"""DAGs run on a real personal pool: order, scripts and their macros, retries, abort.

Each test writes a DAG into the pool's work directory, submits it with ``htc dag submit`` (the
schedd runs the manager as a scheduler-universe job), waits with ``htc wait <dag>.dagman.log``
and checks what happened in the nodes log, in the files the node jobs and scripts left, and in
``dagman.out``.
"""

from __future__ import annotations

import re

import pytest

from dag_pool import DagDir, dag_pool
from htc.eventlog import events as ev

pytestmark = pytest.mark.slow


@pytest.fixture
def d(monkeypatch):
    with dag_pool() as pool:
        yield DagDir(pool, monkeypatch)


def test_a_diamond_runs_in_order_and_the_dag_job_leaves_the_queue(d):
    d.write("diamond.dag", "JOB A node.sub\nJOB B node.sub\nJOB C node.sub\nJOB D node.sub\n"
                           "PARENT A CHILD B C\nPARENT B C CHILD D\n")
    cluster = d.submit("diamond.dag")
    d.wait("diamond.dag")
    assert d.runs() == {"A": 1, "B": 1, "C": 1, "D": 1}
    events = d.node_events("diamond.dag")
    # every submit event carries the node's name as DAGMan writes it
    assert sorted(n for n, e in events if isinstance(e, ev.SubmitEvent)) == ["A", "B", "C", "D"]
    assert all(e.log_notes == f"DAG Node: {n}" for n, e in events if isinstance(e, ev.SubmitEvent))
    seq = [(n, type(e).__name__) for n, e in events]
    a_done = seq.index(("A", "JobTerminatedEvent"))
    assert a_done < seq.index(("B", "SubmitEvent")) and a_done < seq.index(("C", "SubmitEvent"))
    d_start = seq.index(("D", "SubmitEvent"))
    assert seq.index(("B", "JobTerminatedEvent")) < d_start and seq.index(("C", "JobTerminatedEvent")) < d_start
    out = d.dagman_out("diamond.dag").splitlines()
    assert re.search(r"\(condor_DAGMAN\) pid \d+ EXITING WITH STATUS 0$", out[-1])
    assert d.exit_status("diamond.dag") == 0
    assert not (d.work / "diamond.dag.lock").exists() and not (d.work / "diamond.dag.rescue001").exists()
    assert not d.pool.jobs(f"ClusterId == {cluster}")
    status, out, err = d.htc("dag", "status", "diamond.dag")
    assert status == 0 and "finished with status 0 (success)" in out.splitlines()[0], out + err
    assert out.splitlines()[1].split()[:2] == ["DONE", "4"], out


def test_pre_and_post_scripts_get_their_macros_and_post_decides(d):
    d.script("pre.sh", '#!/bin/sh\necho "$@" > pre.$1.args\npwd > pre.$1.cwd\necho "pre says hi"\n'
                       'echo "pre complains" >&2\nexit 0\n')
    d.script("post.sh", '#!/bin/sh\necho "$@" > post.$1.args\nexit 0\n')
    d.write("pp.dag", "JOB A node.sub\nVARS A code=\"3\"\n"
                      "SCRIPT DEBUG pre.log STDOUT PRE A pre.sh $JOB $RETRY $MAX_RETRIES\n"
                      "SCRIPT POST A post.sh $JOB $RETURN $PRE_SCRIPT_RETURN $JOBID\n"
                      "JOB B node.sub\nPARENT A CHILD B\n")
    d.submit("pp.dag")
    d.wait("pp.dag")
    assert (d.work / "pre.A.args").read_text().split() == ["A", "0", "0"]
    assert (d.work / "pre.A.cwd").read_text().strip() == str(d.work)
    debug = (d.work / "pre.log").read_text()   # the DEBUG file got the script's stdout only
    assert "pre says hi" in debug and "pre complains" not in debug
    words = (d.work / "post.A.args").read_text().split()
    assert words[:3] == ["A", "3", "0"] and re.fullmatch(r"\d+\.0", words[3])
    # the job failed (exit 3) but the POST script succeeded: A is done and B ran
    assert d.runs() == {"A": 1, "B": 1} and d.exit_status("pp.dag") == 0


def test_a_failing_pre_script_skips_the_job_and_fails_the_dag(d):
    d.script("no.sh", "#!/bin/sh\nexit 4\n")
    d.write("f.dag", "JOB A node.sub\nSCRIPT PRE A no.sh\nJOB B node.sub\nPARENT A CHILD B\nJOB C node.sub\n")
    d.submit("f.dag")
    d.wait("f.dag")
    assert d.runs() == {"C": 1}           # A's job never ran, B is futile, C is independent
    assert d.exit_status("f.dag") == 1
    assert (d.work / "f.dag.rescue001").exists()


def test_retry_reruns_a_failed_node_until_it_succeeds(d):
    d.script("flaky.sh", f'#!/bin/sh\ntouch "{d.work}/runs/$1.$(date +%s%N).$$"\n'
                         '[ "$2" -ge 2 ] && exit 0\nexit 1\n')
    d.write("flaky.sub", f"executable = {d.work}/flaky.sh\narguments = $(JOB) $(RETRY)\nqueue\n")
    d.write("r.dag", "JOB A flaky.sub\nRETRY A 3\nJOB B node.sub\nPARENT A CHILD B\n")
    d.submit("r.dag")
    d.wait("r.dag")
    assert d.runs() == {"A": 3, "B": 1} and d.exit_status("r.dag") == 0
    assert d.order("r.dag", ev.SubmitEvent) == ["A", "A", "A", "B"]


def test_abort_dag_on_stops_the_dag_with_its_return_value(d):
    d.write("a.dag", "JOB A node.sub\nVARS A code=\"5\"\nABORT-DAG-ON A 5 RETURN 2\n"
                     "JOB B node.sub\nPARENT A CHILD B\n")
    d.submit("a.dag")
    d.wait("a.dag")
    assert d.runs() == {"A": 1} and d.exit_status("a.dag") == 2
    assert (d.work / "a.dag.rescue001").exists()


def test_a_save_point_file_lets_a_later_run_start_from_it(d):
    d.write("s.dag", "JOB A node.sub\nJOB B node.sub\nJOB C node.sub\nPARENT A CHILD B\nPARENT B CHILD C\n"
                     "SAVE_POINT_FILE B\n")
    cluster = d.submit("s.dag")
    d.wait("s.dag", cluster)
    save = d.work / "save_files" / "B-s.dag.save"
    assert "DONE A" in save.read_text() and "DONE B" not in save.read_text()
    status, out, err = d.htc("dag", "submit", "-f", "-load_save", "B-s.dag.save", "s.dag")
    assert status == 0 and out.splitlines()[0].startswith("Running from save file"), out + err
    d.wait("s.dag", int(out.split("submitted to cluster ")[1].split(".")[0]))
    assert d.exit_status("s.dag") == 0 and d.runs() == {"A": 1, "B": 2, "C": 2}
