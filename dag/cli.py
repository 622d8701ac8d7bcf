"""``htc dag``: condor_submit_dag and the DAG tools (``htc dag submit|status|halt|resume``).

``htc dag submit FILE.dag`` (also ``htc submit_dag``) checks the DAG (it must parse, must not
say REJECT, and no other manager may be running it), picks the rescue DAG to apply, writes
``<dag>.condor.sub`` (:mod:`htc.dag.manager.condor_sub`) and submits it: the schedd runs the DAG
manager as a scheduler-universe job. It prints condor_submit_dag's lines.

``htc dag status DAG|ID`` replays the nodes log through the engine (as a recovering manager
would) and prints the nodes by state; ``htc dag halt`` / ``resume`` create and remove
``<dag>.halt``, which a running manager looks for every second.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid

from htc.cli.options import add_command, add_option, add_pool_options, transport_from
from htc.errors import UsageError

__all__ = ["register"]

_RULE = "-" * 71


def _job_from_args(args: argparse.Namespace):
    from htc.dag.manager.condor_sub import ManagerJob

    insert = []
    for path in args.insert_sub_file or []:
        try:
            with open(path, encoding="utf-8") as fh:
                insert += fh.read().splitlines()
        except OSError as exc:
            raise UsageError(f"-insert_sub_file {path}: {exc.strerror}") from None
    return ManagerJob(dag_file=os.path.abspath(args.dag), max_jobs=args.maxjobs, max_idle=args.maxidle,
                      max_pre=args.maxpre, max_post=args.maxpost,
                      config=os.path.abspath(args.config) if args.config else None,
                      do_rescue_from=args.DoRescueFrom or 0, auto_rescue=args.AutoRescue != 0,
                      force=args.force, suppress_notification=args.suppress_notification,
                      always_run_post=args.AlwaysRunPost, priority=args.priority, batch_name=args.batch_name,
                      append=list(args.append or []), insert=insert, do_recovery=args.DoRecov,
                      verbosity=args.debug, import_env=args.import_env,
                      include_env=[n for v in args.include_env or [] for n in v.replace(",", " ").split()],
                      insert_env=_env_pairs(args.insert_env or []), notification=args.notification,
                      load_save=os.path.abspath(args.load_save) if args.load_save and os.sep in args.load_save
                      else args.load_save)


def _env_pairs(values: list[str]) -> list[tuple[str, str]]:
    """``-insert_env 'K=V;K2=V2'`` (repeatable) as pairs."""
    pairs = []
    for value in values:
        for item in value.split(";"):
            if not item.strip():
                continue
            if "=" not in item:
                raise UsageError(f"-insert_env {value!r}: {item!r} is not NAME=VALUE; write -insert_env 'K=V;K2=V2'")
            name, _, val = item.partition("=")
            pairs.append((name.strip(), val))
    return pairs


def _check(args: argparse.Namespace):
    """Parse the DAG and refuse what condor_submit_dag refuses; returns (dag, rescue, settings)."""
    from htc.dag.manager.launch import load_dag, strict_refuses
    from htc.dag.manager.lockfile import lock_path, read_lock
    from htc.dag.manager.rescue_files import rename_old, rescue_to_use, save_file_path
    from htc.dag.manager.settings import load_settings

    dag_file = os.path.abspath(args.dag)
    if not os.path.isfile(dag_file):
        raise UsageError(f"ERROR: DAG file {args.dag} does not exist (or is not a file); give the path of a DAG file")
    lock = read_lock(lock_path(dag_file))
    if lock is not None and lock.alive():
        raise UsageError(f"ERROR: the DAG {args.dag} is being run by another DAG manager (job {lock.cluster}, "
                         f"pid {lock.pid}; {lock_path(dag_file)}). Wait for it to finish, or remove it with "
                         f"'htc rm {lock.cluster}' first. No jobs were queued.")
    settings = load_settings(config_file=os.path.abspath(args.config) if args.config else None)
    if args.load_save:
        rescue = save_file_path(dag_file, args.load_save)
    elif args.force:
        rename_old(dag_file)
        rescue = None
    else:
        auto = settings.auto_rescue if args.AutoRescue is None else args.AutoRescue != 0
        rescue = rescue_to_use(dag_file, auto=auto, from_number=args.DoRescueFrom or 0,
                               max_num=settings.max_rescue_num)
        if args.DoRescueFrom:
            rename_old(dag_file, above=args.DoRescueFrom)
    dag = load_dag(dag_file, rescue=rescue, settings=settings)
    if dag.reject is not None:
        raise UsageError(f"ERROR: REJECT specified in DAG file {dag.reject}: this DAG will not run "
                         "(remove the REJECT line to run it). No jobs were queued.")
    # the DAG's CONFIG and -config must agree, and the values must be of their types
    settings = load_settings(dag_config=dag.config, config_file=os.path.abspath(args.config) if args.config else None)
    for warning in getattr(dag, "warnings", []):
        print(f"WARNING: {warning}", file=sys.stderr)
    if strict_refuses(dag, settings):
        raise UsageError(f"ERROR: DAGMAN_USE_STRICT = {settings.use_strict} makes the warnings above errors; fix "
                         "them or lower DAGMAN_USE_STRICT. No jobs were queued.")
    return dag, rescue, settings


def _existing_outputs(dag_file: str) -> list[str]:
    from htc.dag.manager.condor_sub import dag_file_names

    names = dag_file_names(dag_file)
    return [names[k] for k in ("condor_sub", "lib_out", "lib_err", "dagman_log") if os.path.exists(names[k])]


def submit_dag(args: argparse.Namespace) -> int:
    """htc dag submit: write ``<dag>.condor.sub`` and submit the DAG manager job."""
    from htc import client
    from htc.dag.manager.condor_sub import condor_sub_text, dag_file_names
    from htc.dag.manager.outputs import write_whole
    from htc.dag.manager.rescue_files import existing_rescues

    dag_file = os.path.abspath(args.dag)
    dag, rescue, settings = _check(args)
    names = dag_file_names(dag_file)
    if args.force:
        for key in ("condor_sub", "lib_out", "lib_err", "dagman_log", "out", "metrics"):
            if os.path.exists(names[key]):
                os.unlink(names[key])
    elif rescue is None and not args.update_submit:
        existing = _existing_outputs(dag_file)
        if existing and not (args.no_submit and existing == [names["condor_sub"]]):
            raise UsageError("\n".join(f'ERROR: "{os.path.relpath(p)}" already exists.' for p in existing) +
                             "\nSome file(s) needed by the DAG manager already exist.  Either rename them,\n"
                             'use the "-f" option to force them to be overwritten, or use\n'
                             'the "-update_submit" option to update the submit file and continue.')
    job = _job_from_args(args)
    job.on_exit_remove = settings.on_exit_remove or job.on_exit_remove   # DAGMAN_ON_EXIT_REMOVE
    text = condor_sub_text(dag, job)
    write_whole(names["condor_sub"], text)
    if rescue is not None and args.load_save:
        print(f"Running from save file {rescue}")
    elif rescue is not None:
        number = next(n for n, p in existing_rescues(dag_file).items() if p == rescue)
        print(f"Running rescue DAG {number}")
    rel = os.path.relpath
    print(_RULE)
    print(f"File for submitting this DAG to HTCondor           : {rel(names['condor_sub'])}")
    print(f"Log of DAGMan debugging messages                 : {rel(names['out'])}")
    print(f"Log of HTCondor library output                     : {rel(names['lib_out'])}")
    print(f"Log of HTCondor library error messages             : {rel(names['lib_err'])}")
    print(f"Log of the life of condor_dagman itself          : {rel(names['dagman_log'])}")
    print()
    if args.no_submit:
        print(f"-no_submit given, not submitting DAG to HTCondor.  You can do this with:\n"
              f'"htc submit {rel(names["condor_sub"])}"')
        print(_RULE)
        return 0
    print("Submitting job(s).")
    result = client.submit(text, cwd=os.path.dirname(dag_file), filename=names["condor_sub"],
                           transport=transport_from(args, "schedd"), submission_id=f"submit_dag-{uuid.uuid4()}",
                           resend_for=30.0)
    print(result.summary())
    print(_RULE)
    return 0


def _dag_of_job(job_id: int, args: argparse.Namespace) -> str:
    from htc import client

    ads = client.query(f"ClusterId == {job_id}", ["Args", "Arguments", "Iwd"], transport=transport_from(args, "schedd"))
    for ad in ads:
        words = str(ad.get("Arguments") or ad.get("Args") or "").replace('"', " ").split()
        for i, word in enumerate(words[:-1]):
            if word.lower() == "-dag":
                return os.path.join(str(ad.get("Iwd") or ""), words[i + 1])
    raise UsageError(f"job {job_id} is not in the queue or is not a DAG manager job; give the DAG file instead "
                     "('htc dag status FILE.dag')")


def dag_status(args: argparse.Namespace) -> int:
    """htc dag status: the nodes of a DAG by state, from its nodes log."""
    import json

    from htc.dag.manager.status import dag_status_report

    target = args.dag
    dag_file = _dag_of_job(int(target), args) if target.isdigit() and not os.path.exists(target) else target
    report = dag_status_report(os.path.abspath(dag_file))
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"DAG {report['dag']}: {report['state']}")
    for state, nodes in report["nodes"].items():
        if nodes:
            print(f"  {state:<10} {len(nodes):>5}  {' '.join(nodes[:20])}{' ...' if len(nodes) > 20 else ''}")
    return 0


def dag_halt(args: argparse.Namespace) -> int:
    """htc dag halt / resume: create or remove ``<dag>.halt``."""
    path = os.path.abspath(args.dag) + ".halt"
    if args.dag_command == "halt":
        with open(path, "a", encoding="utf-8"):
            pass  # the file's existence is the request
        print(f"DAG {args.dag} halted: no new nodes start; running ones finish ('htc dag resume {args.dag}' undoes)")
    else:
        if os.path.exists(path):
            os.unlink(path)
        print(f"DAG {args.dag} resumed")
    return 0


def _submit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("dag", help="the DAG file")
    add_option(p, "force", "f", action="store_true", help="start over: overwrite the DAG's files, ignore rescue DAGs")
    for name, what in (("maxjobs", "node clusters in the queue"), ("maxidle", "idle node jobs"),
                       ("maxpre", "PRE scripts running"), ("maxpost", "POST scripts running")):
        add_option(p, name, type=int, metavar="N", help=f"most {what} at once (0: no limit)")
    add_option(p, "config", metavar="FILE", help="DAGMan configuration file (like the DAG's CONFIG)")
    add_option(p, "DoRescueFrom", "dorescuefrom", type=int, metavar="N", help="run rescue DAG number N")
    add_option(p, "AutoRescue", "autorescue", type=int, metavar="0|1", help="run the newest rescue DAG (default 1)")
    add_option(p, "no_submit", action="store_true", help="write <dag>.condor.sub but do not submit it")
    add_option(p, "update_submit", action="store_true", help="overwrite an existing <dag>.condor.sub")
    add_option(p, "append", "a", action="append", metavar="COMMAND", help="add a submit command to <dag>.condor.sub")
    add_option(p, "insert_sub_file", action="append", metavar="FILE",
               help="insert this file's submit commands into <dag>.condor.sub")
    add_option(p, "batch_name", "batch-name", metavar="NAME", help="the manager job's JobBatchName")
    add_option(p, "priority", type=int, metavar="N", help="the manager job's priority")
    add_option(p, "suppress_notification", action="store_true", help="node jobs send no mail")
    add_option(p, "AlwaysRunPost", "alwaysrunpost", action="store_true", help="run POST scripts even after a PRE script failed")
    add_option(p, "load_save", metavar="FILE", help="start from a SAVE_POINT_FILE's save file (in save_files/)")
    add_option(p, "DoRecov", "dorecov", action="store_true", help="start the manager in recovery mode (read the nodes log)")
    add_option(p, "debug", type=int, metavar="N", help="detail of <dag>.dagman.out, 0-7 (DAGMAN_VERBOSITY)")
    add_option(p, "import_env", action="store_true", help="the manager job gets this whole environment (getenv = true)")
    add_option(p, "include_env", action="append", metavar="NAMES", help="also pass these environment variables")
    add_option(p, "insert_env", action="append", metavar="K=V;...", help="set these in the manager's environment")
    add_option(p, "notification", metavar="WHEN", help="the manager job's notification (never, error, complete, always)")
    add_pool_options(p, daemon="schedd", json=False)
    p.set_defaults(func=submit_dag)


def register(sub) -> None:
    """Add ``htc dag`` (submit, status, halt, resume) and ``htc submit_dag``."""
    dag = add_command(sub, "dag", "DAGs of dependent jobs (condor_submit_dag, DAG status, halt/resume)", [
        "htc dag submit diamond.dag            # run a DAG (writes diamond.dag.condor.sub)",
        "htc dag submit -maxjobs 10 big.dag    # at most 10 node clusters queued at once",
        "htc dag status diamond.dag            # nodes by state",
        "htc dag halt diamond.dag              # start nothing new; htc dag resume undoes",
    ])
    verbs = dag.add_subparsers(dest="dag_command", metavar="COMMAND", parser_class=type(dag))
    _submit_options(add_command(verbs, "submit", "run a DAG file (condor_submit_dag)",
                                ["htc dag submit diamond.dag", "htc dag submit -f diamond.dag  # start over"]))
    st = add_command(verbs, "status", "the nodes of a DAG by state", ["htc dag status diamond.dag",
                                                                     "htc dag status 12  # the DAG of job 12"])
    st.add_argument("dag", help="the DAG file, or the ClusterId of its manager job")
    add_pool_options(st, daemon="schedd")
    st.set_defaults(func=dag_status)
    for verb, what in (("halt", "start no new nodes; let running ones finish"), ("resume", "undo halt")):
        p = add_command(verbs, verb, what, [f"htc dag {verb} diamond.dag"])
        p.add_argument("dag", help="the DAG file")
        p.set_defaults(func=dag_halt)
    __import__("htc.dag.show", fromlist=["register_show"]).register_show(verbs)  # htc dag show (dag/show.py)
    dag.set_defaults(func=lambda args: (dag.print_help(), 2)[1])
    _submit_options(add_command(sub, "submit_dag", "run a DAG file (condor_submit_dag; same as htc dag submit)",
                                ["htc submit_dag diamond.dag"]))
