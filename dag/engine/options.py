"""The run's settings (DAGMAN_* knobs and condor_submit_dag options), given by the manager."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Options:
    """How a DAG runs. 0 means "no limit" for the throttles."""

    #: DAGMAN_MAX_JOBS_SUBMITTED / -maxjobs: node clusters in the queue at once
    max_jobs: int = 0
    #: DAGMAN_MAX_JOBS_IDLE / -maxidle: idle procs of node jobs (0: no limit)
    max_idle: int = 1000
    #: DAGMAN_MAX_PRE_SCRIPTS / -maxpre
    max_pre: int = 20
    #: DAGMAN_MAX_POST_SCRIPTS / -maxpost
    max_post: int = 20
    #: DAGMAN_MAX_HOLD_SCRIPTS (0: no limit)
    max_hold: int = 0
    #: DAGMAN_MAX_SUBMITS_PER_INTERVAL: submissions per handle() call that submits
    max_submits_per_interval: int = 100
    #: DAGMAN_ALWAYS_RUN_POST / -AlwaysRunPost: run POST even if PRE failed
    always_run_post: bool = False
    #: DAGMAN_RETRY_SUBMIT_FIRST: a retried node goes to the front of the ready queue
    retry_submit_first: bool = True
    #: DAGMAN_RETRY_NODE_FIRST: a node being retried goes before other ready nodes
    retry_node_first: bool = False
    #: DAGMAN_SUBMIT_DEPTH_FIRST: newly ready children go to the front of the queue
    submit_depth_first: bool = False
    #: DAGMAN_MAX_JOB_HOLDS: a node job held this many times fails (0: never)
    max_job_holds: int = 100
    #: DAGMAN_RESET_RETRIES_UPON_RESCUE: rescue DAGs carry no RETRY lines when True
    reset_retries_upon_rescue: bool = True
    #: DAGMAN_DEFAULT_APPEND_VARS: VARS without PREPEND/APPEND go after the submit file
    #: (True) or before it (False, HTCondor's default)
    default_append_vars: bool = False
    #: DAGMAN_NODE_JOB_FAILURE_TOLERANCE: failed jobs a node's job list tolerates (no TOLERANCE)
    node_job_failure_tolerance: int = 0
    #: DAGMAN_REMOVE_JOB_LIST_ON_FAILURE: remove the rest of a job list that failed
    remove_job_list_on_failure: bool = True
    #: DAGMAN_MAX_SUBMIT_ATTEMPTS: SubmitFailed events before the node fails ($RETURN -1001)
    max_submit_attempts: int = 6
    #: DAGMAN_USER_LOG_SCAN_INTERVAL: the interval of max_submits_per_interval (seconds)
    submit_interval: float = 5.0
    #: DAGMAN_MAX_RESCUE_NUM: the highest rescue DAG number (0: write none)
    max_rescue_num: int = 100
    #: the highest-numbered rescue DAG of this DAG that exists (see rescue.newest_rescue);
    #: this run's rescue DAG is the next number
    last_rescue_num: int = 0
    #: the rescue DAG this run was started from (0: none), for the metrics file
    rescue_used: int = 0
    #: the DAG files of the run (node status file ``DagFiles``; default: the Dag's file)
    dag_files: tuple[str, ...] = ()
    #: the text of the DOT command's INCLUDE file (the manager reads it), if any
    dot_include_text: str | None = None
    #: the parent DAGMan's ClusterId for a SUBDAG's DAGMan ("" at the top), for metrics
    parent_dag_id: str = ""
    #: condor_dagman -Priority: added to every node's PRIORITY (a SUBDAG's DAGMan gets its
    #: node's effective priority, so priorities nest additively)
    dag_priority: int = 0
    #: the DAGMan job's ClusterId ($DAGID, DAGManJobId)
    dag_id: int = 0
    #: path of the nodes log (all node jobs write there)
    node_log: str = ""
