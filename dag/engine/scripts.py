"""Macros: the ``$X`` words of script arguments, and what a node job's submission gets.

Script macros are replaced only as whole words (``x=$RETURN`` stays as written), ignoring
case, as HTCondor's ``Script::BackgroundRun`` does. The POST/HOLD-only macros are left as
written in a PRE script; an unknown ``$X`` is passed through (and reported).
"""

from __future__ import annotations

from dataclasses import dataclass

from htc.dag.engine.noderun import NodeRun

#: macros every script may use
ALL_SCRIPTS = ("$NODE", "$JOB", "$RETRY", "$MAX_RETRIES", "$DAG_STATUS", "$FAILED_COUNT",
               "$FUTILE_COUNT", "$DONE_COUNT", "$QUEUED_COUNT", "$NODE_COUNT", "$DAGID")
#: macros of POST and HOLD scripts only (left as written in PRE)
POST_ONLY = ("$JOBID", "$CLUSTERID", "$JOB_COUNT", "$SUCCESS", "$RETURN", "$EXIT_CODES",
             "$EXIT_CODE_COUNTS", "$EXIT_CODE_LIST", "$PRE_SCRIPT_RETURN", "$JOB_ABORT_COUNT")


@dataclass(frozen=True)
class DagCounts:
    """The DAG-wide numbers scripts and submissions see."""

    dag_status: int
    failed: int
    futile: int
    done: int
    queued: int
    nodes: int
    dag_id: int


def exit_code_macros(run: NodeRun) -> tuple[str, str, str, int]:
    """``$EXIT_CODES``, ``$EXIT_CODE_COUNTS``, ``$EXIT_CODE_LIST`` and ``$JOB_ABORT_COUNT``."""
    counts: dict[int, int] = {}
    listed: list[str] = []
    aborted = 0
    for proc in sorted(run.exit_codes):
        code = run.exit_codes[proc]
        if code is None:
            aborted += 1
            listed.append("")
        else:
            counts[code] = counts.get(code, 0) + 1
            listed.append(str(code))
    codes = ",".join(str(c) for c in sorted(counts))
    freq = ",".join(f"{c}:{counts[c]}" for c in sorted(counts))
    return codes, freq, ",".join(listed), aborted


def expand_args(words: list[str], kind: str, run: NodeRun, max_retries: int, dag: DagCounts,
                warn: list[str] | None = None) -> list[str]:
    """The script's arguments with their macros replaced (see the module docstring).

    ``warn`` collects messages about macros that were not replaced.
    """
    codes, freq, listed, aborted = exit_code_macros(run)
    cluster = run.cluster if run.cluster is not None else 0
    values = {
        "$NODE": run.name, "$JOB": run.name, "$RETRY": str(run.retries),
        "$MAX_RETRIES": str(max_retries), "$DAG_STATUS": str(dag.dag_status),
        "$FAILED_COUNT": str(dag.failed), "$FUTILE_COUNT": str(dag.futile),
        "$DONE_COUNT": str(dag.done), "$QUEUED_COUNT": str(dag.queued),
        "$NODE_COUNT": str(dag.nodes), "$DAGID": str(dag.dag_id),
        "$JOBID": f"{cluster}.{run.last_proc}", "$CLUSTERID": str(cluster),
        "$JOB_COUNT": str(max(run.procs, len(run.submitted))),
        "$SUCCESS": "True" if run.job_retval == 0 else "False",
        "$RETURN": str(run.job_retval if run.job_retval is not None else 0),
        "$EXIT_CODES": codes, "$EXIT_CODE_COUNTS": freq, "$EXIT_CODE_LIST": listed,
        "$PRE_SCRIPT_RETURN": str(run.pre_retval), "$JOB_ABORT_COUNT": str(aborted),
    }
    out = []
    for word in words:
        key = word.upper()
        if key in values and not (kind == "PRE" and key in POST_ONLY):
            out.append(values[key])
            continue
        if warn is not None and word.startswith("$"):
            if key in POST_ONLY:
                warn.append(f"Warning: {word} macro should not be used as a PRE script argument!")
            else:
                warn.append(f"Warning: unrecognized macro {word} in node {run.name} "
                            f"{kind} script arguments")
        out.append(word)
    return out
