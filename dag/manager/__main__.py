"""``python -m htc.dag.manager DAGFILE [options]``: the DAG manager process (condor_dagman).

Usually started by the schedd as the scheduler-universe job that ``htc dag submit`` queues
(``<dag>.condor.sub``), with condor_dagman's flags: ``-Dag FILE``, ``-Lockfile F``,
``-AutoRescue 0|1``, ``-DoRescueFrom N``, ``-MaxJobs N``, ``-MaxIdle N``, ``-MaxPre N``,
``-MaxPost N``, ``-Config F``, ``-AlwaysRunPost``, ``-Suppress_notification``, ``-DoRecov``,
``-ParentDAGManJobId N`` (a SUBDAG's manager: its parent DAG's job), ``-Debug N``
(``DAGMAN_VERBOSITY``), ``-Priority N`` (added to every node's priority),
``-load_save FILE`` (start from a save point file)
(flag names are case-insensitive; ``-p 0 -f -l .`` are accepted and mean nothing here). Its
own job id comes from ``-DAGManJobId N`` (the description passes ``$(Cluster)``), else from
``$CONDOR_ID``; run by hand without either, it is 0 and the node jobs belong to no DAG job.

Exit status: 0 the DAG succeeded, 1 it failed, 2 it was aborted or removed, another
ABORT-DAG-ON value, or 3 when stopped by SIGTERM (the schedd starts it again; it recovers).
"""

from __future__ import annotations

import argparse
import os
import sys

from htc.errors import HTCError

#: condor_dagman's flags, lower-cased -> (dest, takes a value)
_FLAGS = {"-dag": ("dag", True), "-lockfile": ("lockfile", True), "-autorescue": ("autorescue", True),
          "-dorescuefrom": ("dorescuefrom", True), "-maxjobs": ("maxjobs", True), "-maxidle": ("maxidle", True),
          "-maxpre": ("maxpre", True), "-maxpost": ("maxpost", True), "-config": ("config", True),
          "-dagmanjobid": ("dagmanjobid", True), "-alwaysrunpost": ("alwaysrunpost", False),
          "-suppress_notification": ("suppress_notification", False), "-dorecov": ("dorecov", False),
          "-p": ("p", True), "-f": ("f", False), "-l": ("l", True), "-csdversion": ("csdversion", True),
          "-dagman": ("dagman", True), "-debug": ("debug", True),
          "-parentdagmanjobid": ("parentdagmanjobid", True), "-priority": ("priority", True),
          "-load_save": ("load_save", True)}


def parse_args(argv: list[str]) -> argparse.Namespace:
    """condor_dagman's command line (flags in any case, one or two dashes)."""
    ns = argparse.Namespace(dag=None, lockfile=None, autorescue=None, dorescuefrom="0", maxjobs=None, maxidle=None,
                            maxpre=None, maxpost=None, config=None, dagmanjobid=None, alwaysrunpost=False,
                            suppress_notification=False, dorecov=False, debug=None,
                            parentdagmanjobid=None, priority=None, load_save=None)
    it = iter(argv)
    for word in it:
        key = "-" + word.lstrip("-").lower() if word.startswith("-") else None
        if key is None:
            if ns.dag is not None:
                raise SystemExit(f"htc.dag.manager: one DAG file at a time (got {ns.dag} and {word})")
            ns.dag = word
            continue
        if key not in _FLAGS:
            raise SystemExit(f"htc.dag.manager: unknown flag {word}; see 'python -m htc.dag.manager --help'")
        dest, takes = _FLAGS[key]
        if takes:
            try:
                setattr(ns, dest, next(it))
            except StopIteration:
                raise SystemExit(f"htc.dag.manager: {word} needs a value") from None
        else:
            setattr(ns, dest, True)
    if ns.dag is None:
        raise SystemExit("usage: python -m htc.dag.manager DAGFILE [-MaxJobs N] [-MaxIdle N] [-MaxPre N] "
                         "[-MaxPost N] [-Config F] [-DoRescueFrom N] [-AutoRescue 0|1] [-DoRecov]")
    return ns


def _int(ns, name: str) -> int | None:
    value = getattr(ns, name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"htc.dag.manager: -{name} {value}: give a whole number") from None


def dag_job_id(ns: argparse.Namespace) -> int:
    """The manager job's ClusterId: ``-DAGManJobId``, else ``$CONDOR_ID`` (``cluster.proc``), else 0."""
    for text in (ns.dagmanjobid, os.environ.get("CONDOR_ID")):
        if text:
            try:
                return int(str(text).split(".")[0])
            except ValueError:
                continue
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the DAG manager; returns its exit status."""
    from htc.dag.manager.launch import run_manager

    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] in ("-h", "--help", "-help"):
        print(__doc__)
        return 0
    ns = parse_args(argv)
    flags = {"DAGMAN_MAX_JOBS_SUBMITTED": _int(ns, "maxjobs"), "DAGMAN_MAX_JOBS_IDLE": _int(ns, "maxidle"),
             "DAGMAN_MAX_PRE_SCRIPTS": _int(ns, "maxpre"), "DAGMAN_MAX_POST_SCRIPTS": _int(ns, "maxpost"),
             "DAGMAN_ALWAYS_RUN_POST": True if ns.alwaysrunpost else None,
             "DAGMAN_SUPPRESS_NOTIFICATION": True if ns.suppress_notification else None,
             "DAGMAN_AUTO_RESCUE": None if ns.autorescue is None else ns.autorescue.strip() not in ("0", "false"),
             "DAGMAN_VERBOSITY": _int(ns, "debug")}
    try:
        return run_manager(os.path.abspath(ns.dag), dag_id=dag_job_id(ns), flags=flags, config=ns.config,
                           lockfile=ns.lockfile, rescue_from=_int(ns, "dorescuefrom") or 0,
                           force_recovery=bool(ns.dorecov), argv=[sys.argv[0], *argv],
                           parent_dag_id=_int(ns, "parentdagmanjobid"), dag_priority=_int(ns, "priority") or 0,
                           load_save=ns.load_save)
    except HTCError as exc:
        print(f"htc.dag.manager: {exc}", file=sys.stderr)
        return 1


def _exit(code: int) -> None:
    """Exit with ``code``, sparing the interpreter's last garbage collections over every module
    (networkx's graphs and htc's own: a quarter second at exit, which the schedd, and a DAG of
    SUBDAGs at each level, waits for). Every file is closed and every finalizer runs as usual."""
    import gc

    gc.freeze()  # the objects still alive are not scanned again; the process ends anyway
    sys.exit(code)


if __name__ == "__main__":
    import gc

    # The manager's modules (networkx, the engine, the client) are imported with the collector
    # off, then frozen: tens of thousands of objects that live as long as the process, which
    # no collection needs to scan again (a tenth of a second less to the first submission).
    gc.disable()
    from htc.dag.manager import launch  # noqa: F401 -- imported here, with the collector off

    gc.freeze()
    gc.enable()
    _exit(main())
