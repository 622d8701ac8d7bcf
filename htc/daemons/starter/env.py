"""A job's argument vector and environment, built from its ad as HTCondor builds them.

Arguments. A job ad carries ``Arguments`` (the V2 syntax, preferred) or ``Args`` (V1). The V2
raw form is split exactly as ``split_args`` does in HTCondor's ``condor_arglist.cpp`` -- by
:mod:`htc.submit.argsenv`, the one copy of the rule, which also writes it at submit time:

* spaces, tabs, CR and LF separate arguments;
* a single-quoted section is literal, and inside it ``''`` is one single quote;
* quoted and unquoted pieces that touch form one argument (``a' 'b`` is ``a b``);
* ``''`` alone is an empty argument; an unterminated quote is an error.

(The double quotes and ``""`` escapes of the submit file are gone by the time the value is in
the ad: ``arguments = "-n 0 'quoted arg'"`` is stored as ``Arguments = "-n 0 quoted' 'arg"``.)
V1 on Unix splits on whitespace only, with no quoting.

Environment. ``Environment`` (V2) is split with the same rules, each piece being ``NAME=value``
(split at the first ``=``); ``Env`` (V1) is ``NAME=value`` entries separated by ``;`` (or the
ad's ``EnvDelim``) or newlines. An entry without ``=`` is an error, as in HTCondor's ``Env``.

What the starter adds (HTCondor's "Extra Environment Variables HTCondor sets for Jobs"):
``_CONDOR_SCRATCH_DIR``, ``_CONDOR_SLOT``, ``_CONDOR_JOB_AD``, ``_CONDOR_MACHINE_AD``,
``_CONDOR_JOB_IWD``, ``BATCH_SYSTEM=HTCondor``, ``TMPDIR``/``TMP``/``TEMP`` (the scratch dir), and
the thread-count variables (``OMP_NUM_THREADS`` ...) set to the slot's cpus. The job's own
values win over the thread counts and temp dirs; the ``_CONDOR_*`` names and ``BATCH_SYSTEM``
are always the starter's. Nothing of the startd's own environment leaks into the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from htc.classad.arglist import UnbalancedQuote, split_v2
from htc.errors import UsageError

THREAD_VARS = ("CUBACORES", "GOMAXPROCS", "JULIA_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
               "OMP_NUM_THREADS", "OMP_THREAD_LIMIT", "OPENBLAS_NUM_THREADS", "TF_LOOP_PARALLEL_ITERATIONS",
               "TF_NUM_THREADS", "ROOT_MAX_THREADS")
_WHITESPACE = " \t\r\n"


def split_args_v2(raw: str) -> list[str]:
    """Split a V2 raw argument (or environment) string into its pieces.

    The rule is :func:`htc.classad.arglist.split_v2` (one copy for the ClassAd functions, the
    submit language and the starter); only the error differs: a job ad that does not parse is the
    starter's caller's mistake, not a submit description's.

    Raises:
        UsageError: an unbalanced single quote (the message shows where it starts).
    """
    try:
        return split_v2(raw)
    except UnbalancedQuote as exc:
        raise UsageError(str(exc)) from None


def job_arguments(job_ad: Mapping[str, Any]) -> list[str]:
    """The job's arguments (``Arguments`` in V2 syntax, else ``Args`` in V1).

    Raises:
        UsageError: the arguments do not parse.
    """
    if isinstance(job_ad.get("Arguments"), str):
        return split_args_v2(job_ad["Arguments"])
    if isinstance(job_ad.get("Args"), str):
        return job_ad["Args"].split()  # V1: whitespace separates (htc.submit.argsenv.parse_args_v1raw)
    return []


def _set(env: dict[str, str], entry: str) -> None:
    name, sep, value = entry.partition("=")
    if not sep:
        raise UsageError(f"ERROR: Missing '=' after environment variable '{entry}'.")
    if not name:
        raise UsageError(f"ERROR: missing variable in '{entry}'.")
    env[name] = value


def parse_environment_v2(raw: str) -> dict[str, str]:
    """Parse a V2 raw environment (``"A=1 B='two words'"`` as stored: ``A=1 B=two' 'words``)."""
    env: dict[str, str] = {}
    for entry in split_args_v2(raw):
        _set(env, entry)
    return env


def parse_environment_v1(raw: str, delimiter: str = ";") -> dict[str, str]:
    """Parse a V1 environment: ``NAME=value`` entries separated by ``delimiter`` or newlines."""
    env: dict[str, str] = {}
    for line in raw.split("\n"):
        for entry in line.split(delimiter):
            entry = entry.lstrip(_WHITESPACE)
            if entry:
                _set(env, entry)
    return env


def job_environment(job_ad: Mapping[str, Any]) -> dict[str, str]:
    """The environment the job asked for (``Environment``, else ``Env``).

    Raises:
        UsageError: an entry without ``=`` or an unbalanced quote.
    """
    if isinstance(job_ad.get("Environment"), str):
        return parse_environment_v2(job_ad["Environment"])
    if isinstance(job_ad.get("Env"), str):
        delim = job_ad.get("EnvDelim")
        return parse_environment_v1(job_ad["Env"], delim if isinstance(delim, str) and delim else ";")
    return {}


def build_environment(job_ad: Mapping[str, Any], *, scratch_dir: Path, slot_name: str, cpus: int,
                      job_ad_file: Path, machine_ad_file: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The complete environment a job starts with (see the module docstring for what is added).

    Args:
        job_ad: the job's ad (Environment/Env, Iwd).
        scratch_dir: the sandbox.
        slot_name: the slot without ``@host`` (``slot1_1``): ``_CONDOR_SLOT``.
        cpus: the slot's cpus, for the thread-count variables.
        job_ad_file, machine_ad_file: where the ads were written for the job.
        extra: variables the starter needs (process-tracking marker); always the starter's.

    Raises:
        UsageError: the job's environment does not parse.
    """
    env = {name: str(cpus) for name in THREAD_VARS}
    env.update(TMPDIR=str(scratch_dir), TMP=str(scratch_dir), TEMP=str(scratch_dir))
    env.update(job_environment(job_ad))
    env.update({
        "_CONDOR_SCRATCH_DIR": str(scratch_dir),
        "_CONDOR_SLOT": slot_name.split("@")[0],
        "_CONDOR_JOB_AD": str(job_ad_file),
        "_CONDOR_MACHINE_AD": str(machine_ad_file),
        "BATCH_SYSTEM": "HTCondor",
    })
    if isinstance(job_ad.get("Iwd"), str):
        env["_CONDOR_JOB_IWD"] = job_ad["Iwd"]
    env.update(extra or {})
    return env
