"""``<dag>.condor.sub``: the submit description of the DAG manager job, as condor_submit_dag
writes it.

The DAG manager runs as a job of the scheduler universe: the schedd starts it on the submit
machine, keeps it in the queue while it runs, sends it ``SIGUSR1`` (``remove_kill_sig``) when
the user removes it, and starts it again if it exits abnormally (``on_exit_remove``: only exit
codes 0, 1 and 2 and a segfault leave the queue) -- then the lock file it left makes the new
process recover. ``OtherJobRemoveRequirements`` makes the schedd remove the node jobs with it.

The executable is this Python, running ``-m htc.dag.manager``; ``getenv`` passes on what
locates the pool (``HTC_HOME``, ``HTC_CONFIG``, ``_HTC_*``) and finds the code (``PATH``,
``PYTHONPATH``, ``VIRTUAL_ENV``), plus the DAG's ``ENV GET`` names; ``ENV SET`` goes to
``environment`` and every ``SET_JOB_ATTR`` becomes a ``+Attr`` line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from htc.dag.model import Dag

__all__ = ["ManagerJob", "condor_sub_path", "condor_sub_text", "dag_file_names"]

#: the environment a manager job needs to find its pool and its code (``getenv``)
BASE_GETENV = ("HTC_HOME", "HTC_CONFIG", "_HTC_*", "PATH", "PYTHONPATH", "VIRTUAL_ENV", "TZ", "HOME",
               "USER", "LANG", "LC_ALL")


@dataclass
class ManagerJob:
    """What the manager job's description says beyond the DAG file itself: the flags of
    condor_submit_dag that the manager honours, passed on as its arguments."""

    dag_file: str
    max_jobs: int | None = None
    max_idle: int | None = None
    max_pre: int | None = None
    max_post: int | None = None
    config: str | None = None
    do_rescue_from: int = 0
    auto_rescue: bool = True
    force: bool = False
    suppress_notification: bool = False
    always_run_post: bool = False
    priority: int | None = None
    batch_name: str | None = None
    on_exit_remove: str = "(ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >=0 && ExitCode <= 2))"
    #: submit commands added by -append / -insert_sub_file, after / before the generated ones
    append: list[str] = field(default_factory=list)
    insert: list[str] = field(default_factory=list)
    #: the parent DAG's manager job, for a SUBDAG EXTERNAL node's nested manager
    parent_dag_id: int | None = None
    do_recovery: bool = False
    #: -load_save FILE: start from a SAVE_POINT_FILE instead of a rescue DAG
    load_save: str | None = None
    verbosity: int | None = None
    #: -import_env (getenv = true), -include_env names, -insert_env K=V pairs
    import_env: bool = False
    include_env: list[str] = field(default_factory=list)
    insert_env: list[tuple[str, str]] = field(default_factory=list)
    notification: str | None = None
    extra_args: list[str] = field(default_factory=list)


def dag_file_names(dag_file: str) -> dict[str, str]:
    """The files condor_submit_dag names after the DAG file (absolute paths)."""
    base = os.path.abspath(dag_file)
    return {"condor_sub": base + ".condor.sub", "dagman_log": base + ".dagman.log", "out": base + ".dagman.out",
            "lib_out": base + ".lib.out", "lib_err": base + ".lib.err", "lock": base + ".lock",
            "metrics": base + ".metrics"}


def condor_sub_path(dag_file: str) -> str:
    """``<dag file>.condor.sub``."""
    return dag_file_names(dag_file)["condor_sub"]


def _quote_args(words: Sequence[str]) -> str:
    """New-syntax ``arguments = "..."``: words with spaces in single quotes, quotes doubled."""
    out = []
    for word in words:
        word = word.replace('"', '""')
        if not word or any(c in word for c in " \t'"):
            word = "'" + word.replace("'", "''") + "'"
        out.append(word)
    return '"' + " ".join(out) + '"'


def manager_arguments(job: ManagerJob) -> list[str]:
    """The manager's command line after ``python``: ``-m htc.dag.manager -Dag FILE ...``."""
    names = dag_file_names(job.dag_file)
    args = ["-m", "htc.dag.manager", "-p", "0", "-f", "-l", ".", "-Lockfile", names["lock"],
            "-AutoRescue", "1" if job.auto_rescue else "0", "-DoRescueFrom", str(job.do_rescue_from),
            "-Dag", os.path.abspath(job.dag_file)]
    for flag, value in (("-MaxJobs", job.max_jobs), ("-MaxIdle", job.max_idle), ("-MaxPre", job.max_pre),
                        ("-MaxPost", job.max_post)):
        if value is not None:
            args += [flag, str(value)]
    if job.config:
        args += ["-Config", os.path.abspath(job.config)]
    if job.suppress_notification:
        args.append("-Suppress_notification")
    if job.always_run_post:
        args.append("-AlwaysRunPost")
    if job.parent_dag_id is not None:
        args += ["-ParentDAGManJobId", str(job.parent_dag_id)]
    if job.priority:
        args += ["-Priority", str(job.priority)]
    if job.do_recovery:
        args.append("-DoRecov")
    if job.load_save:
        args += ["-load_save", job.load_save]
    if job.verbosity is not None:
        args += ["-Debug", str(job.verbosity)]
    return args + list(job.extra_args)


def condor_sub_text(dag: Dag, job: ManagerJob) -> str:
    """The text of ``<dag>.condor.sub`` for ``dag`` (already parsed)."""
    names = dag_file_names(job.dag_file)
    getenv = list(BASE_GETENV) + [name for name in [*dag.env_get, *job.include_env] if name not in BASE_GETENV]
    lines = [f"# Filename: {names['condor_sub']}",
             f"# Generated by htc dag submit {os.path.basename(job.dag_file)}",
             *job.insert,
             "universe\t= scheduler",
             f"executable\t= {sys.executable}",
             f"getenv\t\t= {'true' if job.import_env else ', '.join(getenv)}",
             f"output\t\t= {names['lib_out']}",
             f"error\t\t= {names['lib_err']}",
             f"log\t\t= {names['dagman_log']}",
             "remove_kill_sig\t= SIGUSR1",
             '+OtherJobRemoveRequirements\t= "DAGManJobId =?= $(cluster)"',
             "# Note: default on_exit_remove expression:",
             "# ( ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >=0 && ExitCode <= 2))",
             "# attempts to ensure that DAGMan is automatically",
             "# requeued by the schedd if it exits abnormally or",
             "# is killed (e.g., during a reboot).",
             f"on_exit_remove\t= {job.on_exit_remove}",
             "copy_to_spool\t= False",
             f"initialdir\t= {os.path.dirname(os.path.abspath(job.dag_file))}",
             f"arguments\t= {_quote_args(manager_arguments(job))}"]
    env_set = [*dag.env_set, *job.insert_env]
    if env_set:
        lines.append(f"environment\t= {_quote_args([f'{k}={v}' for k, v in env_set])}")
    if job.batch_name:
        lines.append(f"batch_name\t= {job.batch_name}")
    if job.priority is not None:
        lines.append(f"priority\t= {job.priority}")
    if job.parent_dag_id is not None:
        lines.append(f"+DAGManJobId\t= {job.parent_dag_id}")
    if job.notification:
        lines.append(f"notification\t= {job.notification}")
    elif job.suppress_notification:
        lines.append("notification\t= never")
    for attr, value in dag.set_job_attrs.items():
        lines.append(f"+{attr}\t= {value}")
    lines += job.append
    lines.append("queue")
    return "\n".join(lines) + "\n"
