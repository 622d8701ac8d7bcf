"""Starting one DAG manager: the DAG read (with its rescue DAG), the lock taken, the loop run.

:func:`run_manager` is the manager's whole life after its command line: it opens
``<dag>.dagman.out``, parses the DAG (a parse error or REJECT ends the run with status 1 before
anything is submitted), reads the settings, decides between a fresh start and recovery (a lock
file left by an earlier manager of this DAG), starts the engine and the loop, and on the way out
removes the lock and writes the ``EXITING WITH STATUS`` line.
"""

from __future__ import annotations

import os

from htc.dag.manager.condor_sub import dag_file_names
from htc.dag.manager.lockfile import read_lock, remove_lock, write_lock
from htc.dag.manager.outputs import DagmanOut
from htc.dag.manager.rescue_files import rescue_to_use, save_file_path
from htc.dag.manager.runner import EXIT_RESTART, Runner
from htc.dag.manager.settings import load_settings, node_log_path
from htc.errors import HTCError

__all__ = ["load_dag", "run_manager"]

EXIT_OKAY, EXIT_ERROR, EXIT_ABORT = 0, 1, 2


def load_dag(dag_file: str, *, rescue: str | None = None, settings=None):
    """The DAG of ``dag_file`` with the rescue DAG ``rescue`` applied (DONE nodes, retries).

    Raises:
        DagError: the file does not parse; the message names file and line.
        UsageError: the rescue DAG cannot be read or does not fit the DAG.
    """
    from htc.dag.engine.rescue import apply_rescue
    from htc.dag.parser import parse_dag
    from htc.errors import UsageError

    kwargs = {}
    if settings is not None:
        kwargs = {"allow_any_node_name_characters": settings.allow_any_node_name_characters,
                  "munge_node_names": settings.munge_node_names}
    dag = parse_dag(dag_file, **kwargs)
    if rescue:
        try:
            with open(rescue, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError as exc:
            raise UsageError(f"cannot read the rescue DAG {rescue}: {exc.strerror}") from None
        apply_rescue(dag, text, rescue)
    return dag


def strict_refuses(dag, settings) -> bool:
    """True if ``DAGMAN_USE_STRICT`` turns the DAG's warnings into errors (2 and above: every
    warning the parser gave; 1, the default, and 0 only report them)."""
    return settings.use_strict >= 2 and bool(getattr(dag, "warnings", []))


def _options(settings, dag, *, dag_id: int, node_log: str, dag_file: str, rescue: str | None,
             parent_dag_id: int | None, dag_priority: int = 0):
    """The engine's Options: the settings, plus what only the manager can know (the rescue DAGs
    on disk, this run's DAG files, the DOT header file's text, the parent DAG's job)."""
    from htc.dag.manager.rescue_files import existing_rescues

    found = existing_rescues(dag_file)
    include = None
    if dag.dot is not None and dag.dot.include:
        try:
            with open(dag.dot.include, encoding="utf-8", errors="replace") as fh:
                include = fh.read()
        except OSError:
            include = None  # DAGMan too writes the DOT file without the header it cannot read
    return settings.engine_options(dag_id=dag_id, node_log=node_log, last_rescue_num=max(found, default=0),
                                   rescue_used=next((n for n, p in found.items() if p == rescue), 0),
                                   dag_files=(dag_file,), dot_include_text=include,
                                   parent_dag_id=str(parent_dag_id) if parent_dag_id else "",
                                   dag_priority=dag_priority)


def run_manager(dag_file: str, *, dag_id: int = 0, flags: dict | None = None, config: str | None = None,
                lockfile: str | None = None, rescue_from: int = 0, force_recovery: bool = False,
                argv: list[str] | None = None, transport=None, parent_dag_id: int | None = None,
                dag_priority: int = 0, load_save: str | None = None) -> int:
    """Run the DAG of ``dag_file`` to its end; returns the manager's exit status."""
    from htc.dag.engine import DagRun

    names = dag_file_names(dag_file)
    job_name = f"condor_scheduniv_exec.{dag_id}.0"
    out = DagmanOut(names["out"])
    out.banner(job_name, argv or [])
    lock = lockfile or names["lock"]
    code = EXIT_ERROR
    keep_lock = True
    try:
        settings = load_settings(flags=flags, config_file=config)
        previous = read_lock(lock)
        if previous is not None and previous.pid != os.getpid() and previous.alive() and settings.abort_duplicates:
            out.line(f"ERROR: another DAG manager (pid {previous.pid}, job {previous.cluster}) is running "
                     f"{dag_file} ({lock}); this one exits. Remove that job first ('htc rm {previous.cluster}').")
            code = EXIT_RESTART if previous.cluster == dag_id and dag_id > 0 else EXIT_ERROR
            return code
        recovering = previous is not None or force_recovery
        if load_save:
            rescue = save_file_path(dag_file, load_save)
        else:
            rescue = rescue_to_use(dag_file, auto=settings.auto_rescue, from_number=rescue_from,
                                   max_num=settings.max_rescue_num)
        if rescue:
            out.line(f"Using {'save file' if load_save else 'rescue DAG'} {rescue}")
        try:
            dag = load_dag(dag_file, rescue=rescue, settings=settings)
        except HTCError as exc:
            out.line(f"ERROR: {exc}")
            out.line("Aborting DAG: it does not parse; nothing was submitted.")
            keep_lock = previous is not None
            return EXIT_ERROR
        if dag.reject is not None:
            out.line(f"ERROR: REJECT specified in DAG file {dag.reject}: the DAG will not run")
            keep_lock = previous is not None
            return EXIT_ERROR
        settings = load_settings(dag_config=dag.config, config_file=config, flags=flags)
        out.verbosity = settings.verbosity
        for note in settings.notes:
            out.line(note)
        for warning in getattr(dag, "warnings", []):
            out.line(f"WARNING: {warning}")
        if strict_refuses(dag, settings):
            out.line(f"ERROR: DAGMAN_USE_STRICT = {settings.use_strict} makes the warnings above errors; "
                     "fix them or lower DAGMAN_USE_STRICT")
            keep_lock = previous is not None
            return EXIT_ERROR
        write_lock(lock, dag_id)
        keep_lock = False
        node_log = node_log_path(settings, dag_file)
        if not recovering:
            try:
                os.unlink(node_log)   # a fresh run: events of an earlier run would mislead recovery
            except FileNotFoundError:
                pass  # nothing to clear: the first run of this DAG
        else:
            out.line(f"Lock file {lock} detected: running in recovery mode")
        run = DagRun(dag, _options(settings, dag, dag_id=dag_id, node_log=node_log, dag_file=dag_file, rescue=rescue,
                                    parent_dag_id=parent_dag_id, dag_priority=dag_priority))
        runner = Runner(dag, run, settings, dag_id=dag_id, node_log=node_log, out=out,
                        halt_file=dag_file + ".halt", transport=transport)
        runner.start(recovering)
        code = runner.loop()
        keep_lock = code == EXIT_RESTART
        return code
    except HTCError as exc:
        out.line(f"ERROR: {exc}")
        code = EXIT_ERROR
        return code
    except Exception:  # noqa: BLE001 -- a bug: say where, and leave the lock so a new run recovers
        import traceback

        out.line("ERROR: the DAG manager failed (a bug in htc; please report it):\n" + traceback.format_exc())
        out.line("The lock file stays: submitting the DAG again recovers it from its nodes log.")
        keep_lock = True
        code = EXIT_ERROR
        return code
    finally:
        if not keep_lock:
            remove_lock(lock)
        out.exiting(job_name, code)
        out.close()
