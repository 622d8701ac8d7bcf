"""The DAG manager's parts that need no pool: settings precedence, lock file, polling, the node
submission text, <dag>.condor.sub, rescue file numbering, the manager's command line."""

from __future__ import annotations

import os
import re

import pytest

from htc.client import build_cluster
from htc.dag.manager.__main__ import dag_job_id, parse_args
from htc.dag.manager.condor_sub import ManagerJob, condor_sub_text
from htc.dag.manager.lockfile import read_lock, write_lock
from htc.dag.manager.logwatch import AdaptivePoll
from htc.dag.manager.rescue_files import existing_rescues, next_rescue, rename_old, rescue_to_use
from htc.dag.manager.settings import load_settings, node_log_path
from htc.dag.manager.submitter import NodeSubmission, describe, submission_id
from htc.dag.model import Dag, Node
from htc.errors import UsageError


@pytest.fixture
def env(tmp_path):
    return {"HTC_CONFIG": "ONLY_ENV", "HTC_HOME": str(tmp_path / "home"), "PATH": os.environ.get("PATH", "")}


def test_settings_precedence_config_env_dagconfig_flags(tmp_path, env):
    assert load_settings(env=env).max_jobs_idle == 1000
    env["_HTC_DAGMAN_MAX_JOBS_IDLE"] = "7"
    env["_HTC_DAGMAN_MAX_PRE_SCRIPTS"] = "3"
    s = load_settings(env=env)
    assert (s.max_jobs_idle, s.max_pre_scripts, s.origins["DAGMAN_MAX_JOBS_IDLE"]) == (7, 3, "environment")
    conf = tmp_path / "dagman.conf"
    conf.write_text("DAGMAN_MAX_JOBS_IDLE = 9\nDAGMAN_ALWAYS_RUN_POST = True\n")
    s = load_settings(dag_config=str(conf), env=env)
    assert (s.max_jobs_idle, s.max_pre_scripts, s.always_run_post) == (9, 3, True)
    assert s.origins["DAGMAN_MAX_JOBS_IDLE"].endswith("dagman.conf:1")
    s = load_settings(dag_config=str(conf), flags={"DAGMAN_MAX_JOBS_IDLE": 11, "DAGMAN_MAX_POST_SCRIPTS": None},
                      env=env)
    assert (s.max_jobs_idle, s.max_post_scripts, s.origins["DAGMAN_MAX_JOBS_IDLE"]) == (11, 20, "flag")
    other = tmp_path / "other.conf"
    other.write_text("DAGMAN_MAX_JOBS_IDLE = 1\n")
    with pytest.raises(UsageError, match="differ"):
        load_settings(dag_config=str(conf), config_file=str(other), env=env)
    other.write_text("DAGMAN_MAX_JOBS_IDLE = lots\n")
    with pytest.raises(UsageError, match="other.conf:1.*not a valid int"):
        load_settings(config_file=str(other), env=env)


def test_engine_options_follow_the_settings(env):
    env.update({"_HTC_DAGMAN_DEFAULT_APPEND_VARS": "true", "_HTC_DAGMAN_NODE_JOB_FAILURE_TOLERANCE": "2",
                "_HTC_DAGMAN_REMOVE_JOB_LIST_ON_FAILURE": "false", "_HTC_DAGMAN_SUBMIT_DEPTH_FIRST": "true",
                "_HTC_DAGMAN_MAX_SUBMIT_ATTEMPTS": "3", "_HTC_DAGMAN_USER_LOG_SCAN_INTERVAL": "2",
                "_HTC_DAGMAN_MAX_JOB_HOLDS": "7", "_HTC_DAGMAN_MAX_RESCUE_NUM": "9"})
    s = load_settings(env=env, flags={"DAGMAN_MAX_JOBS_SUBMITTED": 4})
    opts = s.engine_options(dag_id=12, node_log="/x/d.dag.nodes.log", last_rescue_num=3)
    assert (opts.max_jobs, opts.max_idle, opts.dag_id, opts.node_log) == (4, 1000, 12, "/x/d.dag.nodes.log")
    assert (opts.default_append_vars, opts.node_job_failure_tolerance, opts.remove_job_list_on_failure,
            opts.submit_depth_first, opts.max_submit_attempts, opts.submit_interval, opts.max_job_holds,
            opts.max_rescue_num, opts.last_rescue_num) == (True, 2, False, True, 3, 2.0, 7, 9, 3)


def test_node_log_path(env):
    s = load_settings(env=env)
    assert node_log_path(s, "/w/diamond.dag") == "/w/diamond.dag.nodes.log"
    s.default_node_log = "logs/@(DAG_FILE).events"
    assert node_log_path(s, "/w/diamond.dag") == "/w/logs/diamond.dag.events"


def test_lock_file_round_trip_and_damage(tmp_path):
    path = str(tmp_path / "d.dag.lock")
    assert read_lock(path) is None
    lock = write_lock(path, 42)
    assert read_lock(path) == lock and lock.cluster == 42 and lock.pid == os.getpid()
    assert not lock.alive()   # this process is not a DAG manager
    (tmp_path / "d.dag.lock").write_text("garbage\n")
    damaged = read_lock(path)
    assert damaged is not None and damaged.pid == -1 and not damaged.alive()


def test_adaptive_poll_is_quick_after_activity_and_backs_off():
    poll = AdaptivePoll(floor=0.005, ceiling=2.0)
    poll.activity(100.0)
    assert poll.interval(100.0) == 0.005
    assert poll.interval(100.4) == pytest.approx(0.04)
    assert poll.interval(160.0) == 2.0
    poll.activity(160.0)
    assert poll.interval(160.01) == 0.005


def _sub(tmp_path, text: str, **kw) -> NodeSubmission:
    (tmp_path / "a.sub").write_text(text)
    base = dict(node="A", submit_file=str(tmp_path / "a.sub"), submit_text=None, cwd=str(tmp_path),
                macros={"JOB": "A", "RETRY": "0", "color": "red"}, prepend={"early": "1"},
                attrs={"DAGManJobId": "12", "DAGNodeName": '"A"'}, notes="DAG Node: A", priority=5, retry=0,
                node_log=str(tmp_path / "d.dag.nodes.log"), dag_id=12)
    base.update(kw)
    return NodeSubmission(**base)


def test_node_description_adds_vars_macros_attrs_notes_and_priority(tmp_path):
    text, append, filename = describe(_sub(tmp_path, "executable = /bin/true\noutput = $(JOB).$(color)\nqueue\n"))
    assert text.startswith("early = 1\n") and filename == str(tmp_path / "a.sub")
    assert "JOB = A" in append and "color = red" in append and "+DAGManJobId = 12" in append
    assert "submit_event_notes = DAG Node: A" in append and f"dagman_log = {tmp_path}/d.dag.nodes.log" in append
    assert "priority = 5" in append
    cluster = build_cluster(text, cwd=str(tmp_path), filename=filename, append=append)
    [proc] = cluster.proc_ads()
    ad = {**cluster.cluster_ad, **proc}
    assert ad["Out"] == '"A.red"' and ad["DAGManJobId"] == "12" and ad["DAGNodeName"] == '"A"'
    assert ad["SubmitEventNotes"] == '"DAG Node: A"' and ad["JobPrio"] == "5"
    # the file's own priority wins; the manager's knobs add their commands
    _, append, _ = describe(_sub(tmp_path, "executable = /bin/true\npriority = 1\nqueue\n",
                                 suppress_notification=True, hold_claim_time=20))
    assert not any(a.startswith("priority") for a in append)
    assert "notification = never" in append and "+KeepClaimIdle = 20" in append
    assert submission_id(_sub(tmp_path, "queue\n", retry=2)) == "dagman-12-A-retry2"
    # splice names have '+', which a submission id may not: spelled safely, still one per node
    ids = {submission_id(_sub(tmp_path, "queue\n", node=n)) for n in ("P+top", "P_top", "Q+top")}
    assert len(ids) == 3 and all(re.fullmatch(r"[A-Za-z0-9._:-]+", i) for i in ids)
    # two managers run by hand (no job id) do not share ids
    assert submission_id(_sub(tmp_path, "queue\n", dag_id=0, run_token=".1.2")) == "dagman-0.1.2-A-retry0"


def test_inline_description_and_a_missing_file(tmp_path):
    text, _, filename = describe(_sub(tmp_path, "", submit_text="executable = /bin/true\nqueue\n"))
    assert text.endswith("executable = /bin/true\nqueue\n") and filename is None
    with pytest.raises(UsageError, match="cannot read the submit file .*nope.sub of node A"):
        describe(_sub(tmp_path, "", submit_file=str(tmp_path / "nope.sub")))


def test_condor_sub_is_a_scheduler_job_running_the_manager(tmp_path):
    dag = Dag(file=str(tmp_path / "d.dag"))
    dag.add_node(Node(name="A", submit_file=str(tmp_path / "a.sub"), dir=str(tmp_path)))
    dag.env_get = ["MYVAR"]
    dag.env_set = [("K", "V")]
    dag.set_job_attrs = {"Team": '"alpha"'}
    text = condor_sub_text(dag, ManagerJob(dag_file=str(tmp_path / "d.dag"), max_jobs=3, priority=10))
    assert "remove_kill_sig\t= SIGUSR1" in text and "universe\t= scheduler" in text
    assert '+OtherJobRemoveRequirements\t= "DAGManJobId =?= $(cluster)"' in text
    assert "MYVAR" in text.split("getenv")[1].splitlines()[0]
    cluster = build_cluster(text, cwd=str(tmp_path), filename=str(tmp_path / "d.dag.condor.sub"), cluster_id=77)
    ad = {**cluster.cluster_ad, **next(iter(cluster.proc_ads()))}
    assert ad["JobUniverse"] == "7" and ad["RemoveKillSig"] == '"SIGUSR1"' and ad["Team"] == '"alpha"'
    assert ad["OtherJobRemoveRequirements"] == '"DAGManJobId =?= 77"'
    assert "ExitCode <= 2" in ad["OnExitRemove"]
    assert ad["UserLog"] == f'"{tmp_path}/d.dag.dagman.log"'
    args = ad.get("Arguments", ad.get("Args"))
    assert "-m htc.dag.manager" in args and "-MaxJobs 3" in args and f"-Dag {tmp_path}/d.dag" in args
    assert "-Priority 10" in args and ad["JobPrio"] == "10"   # the manager job's, and added to its nodes'
    assert "K=V" in ad["Environment"]


def test_rescue_numbering(tmp_path):
    dag = str(tmp_path / "d.dag")
    assert rescue_to_use(dag, auto=True) is None and next_rescue(dag) == dag + ".rescue001"
    for n in (1, 2):
        (tmp_path / f"d.dag.rescue{n:03d}").write_text("DONE A\n")
    assert rescue_to_use(dag, auto=True) == dag + ".rescue002"
    assert rescue_to_use(dag, auto=False) is None
    assert rescue_to_use(dag, auto=True, from_number=1) == dag + ".rescue001"
    with pytest.raises(UsageError, match="no rescue DAG .*rescue007"):
        rescue_to_use(dag, auto=True, from_number=7)
    assert next_rescue(dag) == dag + ".rescue003" and next_rescue(dag, max_num=2) == dag + ".rescue002"
    assert rename_old(dag, above=1) == [dag + ".rescue002.old"]
    assert sorted(existing_rescues(dag)) == [1]


def test_manager_command_line():
    ns = parse_args(["-p", "0", "-f", "-l", ".", "-Lockfile", "d.dag.lock", "-AutoRescue", "1", "-DoRescueFrom",
                     "0", "-Dag", "d.dag", "-MAXJOBS", "4", "-DAGManJobId", "12", "-AlwaysRunPost", "-Priority", "7"])
    assert (ns.dag, ns.maxjobs, ns.alwaysrunpost, dag_job_id(ns), ns.priority) == ("d.dag", "4", True, 12, "7")
    assert parse_args(["x.dag"]).dag == "x.dag"
    with pytest.raises(SystemExit, match="unknown flag -bogus"):
        parse_args(["x.dag", "-bogus"])
