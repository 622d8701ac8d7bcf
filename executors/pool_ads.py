"""The job ads the pool backend submits, and whether any slot could ever run them.

Calls with the same options share one *template*: the job ad condor_submit would build for
``universe = python`` running ``python -m htc.executors.worker``, made once per option set by
:class:`htc.submit.Submit` (so defaults, ``Requirements``, ``max_retries`` and every other rule
are condor_submit's own) -- :func:`job_template`. Each call adds a small proc ad
(:func:`proc_ad`): its ``TransferInput`` (the call file, its parents' results, the caller's
``transfer_input_files``), ``HTCCallId``/``HTCFunction``, and where its files go. Most calls
share the session's ``calls/`` (the cluster's ``Iwd``) with files named after the call:
``Out``/``Err`` ``<id>.out``/``<id>.err`` and ``TransferOutputRemaps`` naming the result
``<id>.result``; a call with ``transfer_output_files`` or ``checkpoint=True`` has an ``Iwd`` of
its own (:mod:`htc.executors.spool`). A call with ``checkpoint="transparent"`` is a
``universe = standard`` job instead: the same interpreter and runner under the checkpointing
runtime (:mod:`htc.daemons.starter.standard`), which forwards its files in that ``Iwd``.

Nothing here talks to a daemon: these are functions of the options, the spool and the ads.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from htc.classad import ClassAd, quote
from htc.executors.backend import CallSpec
from htc.executors.errors import OptionError
from htc.executors.options import CallOptions, transparent
from htc.executors.spool import Spool
from htc.executors.worker import EXIT_ERROR
from htc.wire import callfile as cf

__all__ = ["ad_text", "impossible_request", "job_python", "job_template", "proc_ad", "submission_id"]


def ad_text(attrs: Mapping[str, str]) -> str:
    """``{name: expression text}`` as new-syntax ClassAd text."""
    return "[ " + "; ".join(f"{k} = {v}" for k, v in attrs.items()) + " ]"


def job_python(options: CallOptions, client: Callable[[], str] | None = None) -> str | None:
    """The interpreter of the calls' jobs when the executor picks it: None when the caller named
    one (``python=``, or a ``PYTHONPATH`` of their own), else this client's, which for a root client
    is the slot accounts' way to it (:func:`htc.executors.client_env.client_python`, or ``client``,
    which the pool backend memoizes so that the client's path is looked over once per session).

    Raises:
        OptionError: a root client's environment cannot be made runnable by the slot accounts.
    """
    if options.python not in (None, sys.executable) or options.environment.get("PYTHONPATH"):
        return None
    if os.geteuid() != 0:
        return sys.executable
    from htc.errors import HTCError
    from htc.executors.client_env import client_python

    try:
        return (client or client_python)()
    except HTCError as exc:
        raise OptionError(f"a root client's calls run as the pool's slot accounts (jobs never run as root), "
                          f"and they cannot run this Python: {exc}") from None


def slot_user_cannot_run(python: str, environment: dict[str, str]) -> str | None:
    """Why the slot user could not run function jobs with ``python``, which the caller named
    (None: it can).

    A root client's jobs run as a slot account of the pool (``htc-slot<N>``: any other user, as far
    as file permissions go; ``nobody`` stands in for it here): every call would fail if that
    user cannot read the interpreter or, with no PYTHONPATH of the caller's, htc itself.
    """
    if os.geteuid() != 0:
        return None
    import pwd

    from htc.executors.execute_env import _reachable_install, _readable_by

    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        return None
    fix = ("leave python= unset (the executor then mirrors this client's Python where they can read it), or "
           "prepare one with htc.executors.shared_python(DIR) and pass its python= and environment= to "
           "HTCExecutor (see docs/executor.md, 'Running as root')")
    if python == sys.executable and not environment.get("PYTHONPATH"):
        if _reachable_install(user):
            return None
        return (f"this Python ({sys.executable}) or its packages are out of reach of the pool's slot accounts "
                f"(htc-slot<N>), who run a root client's calls (jobs never run as root); {fix}")
    if not _readable_by(Path(python), user):
        return (f"python={python!r} is out of reach of the pool's slot accounts (htc-slot<N>), who run a root "
                f"client's calls; {fix}")
    return None



def job_template(options: CallOptions, spool: Spool, log: Path, python: str | None = None) -> dict[str, str]:
    """The job ad (attribute -> expression text) every call with ``options`` shares.

    Args:
        options: the calls' options.
        spool: the session (its ``calls/`` is the jobs' ``Iwd``, its name their ``HTCSession``).
        log: the session's event log.
        python: the interpreter :func:`job_python` picked (None: the caller's ``python=``, checked here).

    Raises:
        OptionError: the options do not make a valid job, or the slot accounts could not run it.
    """
    from htc.submit import Submit, SubmitError

    if transparent(options) and (options.transfer_input_files or options.transfer_output_files):
        raise OptionError("checkpoint='transparent' calls use their files in place, through the runtime's forwarded "
                          "calls, not by transfer: a relative path is in the call's own directory on the submit "
                          "side (future.classad()['Iwd']), where its outputs stay; pass the data as arguments, or "
                          "drop transfer_input_files/transfer_output_files")
    from htc.submit.argsenv import environment_command

    if python is None:
        python = options.python or sys.executable
        problem = slot_user_cannot_run(python, options.environment)
        if problem:
            raise OptionError(problem)
    mirrored = python != (options.python or sys.executable)  # the client's path is in the interpreter's venv
    lines = {
        "universe": "standard" if transparent(options) else "python", "executable": python,
        "transfer_executable": "false",
        "arguments": "-m htc.executors.worker", "initialdir": str(spool.calls),
        "should_transfer_files": "YES",
        # (a transparent call's checkpoint is its image; its htc.checkpoint file is written in
        # place, in the Iwd, through the runtime's forwarded calls)
        "when_to_transfer_output": "ON_EXIT_OR_EVICT" if options.checkpoint is True else "ON_EXIT",
        "output": "stdout", "error": "stderr", "log": str(log),
        "request_cpus": str(options.request_cpus), "request_memory": str(options.request_memory),
        "request_disk": str(options.request_disk), "priority": str(options.priority),
    }
    if options.request_gpus:
        lines["request_gpus"] = str(options.request_gpus)
    if options.requirements:
        lines["requirements"] = options.requirements
    if options.rank:
        lines["rank"] = options.rank
    if options.max_retries:
        lines["max_retries"] = str(options.max_retries)
        lines["retry_until"] = str(EXIT_ERROR)  # the call could not run: running it again cannot help
    if options.timeout:
        lines["allowed_execute_duration"] = str(math.ceil(options.timeout) + 5)  # the worker stops it first
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") and not mirrored else {}
    env.update(options.environment)
    if env:
        lines["environment"] = environment_command(env)
    if options.stream_output:
        lines["stream_output"] = lines["stream_error"] = "true"
    if options.transfer_output_files:
        wanted = [*options.transfer_output_files, cf.RESULT_FILE]
        if options.checkpoint:
            wanted.append(cf.CHECKPOINT_FILE)
        lines["transfer_output_files"] = ",".join(wanted)
    if not (options.checkpoint or options.timeout or options.stream_output or options.transfer_output_files
            or options.submit):
        # Nothing a call lane lacks: the schedd may run it on a worker that stays up
        # (htc.daemons.schedd.lanes); it is a job all the same.
        lines["+HTCLane"] = "true"
    lines.update(options.submit)
    lines["+HTCSession"] = quote(spool.name)
    text = "\n".join(f"{k} = {v}" for k, v in lines.items()) + "\nqueue\n"
    try:
        cwd = os.getcwd()
    except FileNotFoundError:  # the caller's directory was removed: relative paths mean nothing now
        cwd = str(spool.path)
    try:
        cluster = Submit(text, cwd=cwd).cluster(1)
        ad = {**cluster.cluster_ad, **next(iter(cluster.proc_ads()))}
    except SubmitError as exc:
        raise OptionError(f"these options do not make a valid job: {exc}") from None
    for name in ("ClusterId", "ProcId", "Owner", "QDate", "EnteredCurrentStatus"):
        ad.pop(name, None)
    return ad


def proc_ad(spec: CallSpec, spool: Spool) -> str:
    """The proc ad of one call (its files are written to the spool here)."""
    where, name = os.path.split(spool.prepare(spec.call_id, spec.data, spec.parents, spec.options))
    inputs = [name, *(cf.parent_file(p) for p in spec.parents)]
    cid = spec.call_id
    attrs = {"HTCCallId": quote(cid), "HTCFunction": quote(spec.label)}
    if name == cf.CALL_FILE:  # a directory of its own
        if spec.options.checkpoint:
            Path(where, cf.CHECKPOINT_FILE).touch()  # empty until the call checkpoints; comes back on eviction
            inputs.append(cf.CHECKPOINT_FILE)
        attrs["Iwd"] = quote(where)
    else:  # its files in the cluster's Iwd, calls/, named after it (as the spool names them)
        result = os.path.basename(spool.result_file(cid))
        attrs.update(Out=quote(os.path.basename(spool.output_file(cid, "stdout"))),
                     Err=quote(os.path.basename(spool.output_file(cid, "stderr"))),
                     TransferOutputRemaps=quote(f"{cf.RESULT_FILE}={result}"))
    inputs += [os.path.abspath(f) for f in spec.options.transfer_input_files]
    attrs["TransferInput"] = quote(",".join(inputs))
    return ad_text(attrs)


def submission_id(session: str, specs: Sequence[CallSpec]) -> str:
    """The batch's name for the schedd: the same calls of the same session, the same id."""
    h = hashlib.blake2b(session.encode(), digest_size=20)
    for spec in specs:
        h.update(b"\0" + spec.call_id.encode())
    return f"htcx-{h.hexdigest()}"


def impossible_request(options: CallOptions, template: Mapping[str, str], slots: Sequence[ClassAd]) -> str | None:
    """Why no slot of ``slots`` could ever run a job of ``template`` (None: one could, or no
    slot has reported yet), naming what is too big or never true, and the largest slot."""
    from htc.classad.match import requirements_hold

    if not slots:
        return None  # no startd has reported yet: nothing to judge by
    job = ClassAd(ad_text(template))
    for slot in slots:
        if requirements_hold(job, _at_most(slot)):
            return None
    biggest = max(slots, key=lambda s: (_number(s, "TotalSlotCpus", "TotalCpus", "Cpus"),
                                        _number(s, "TotalSlotMemory", "TotalMemory", "Memory")))
    big = _at_most(biggest)
    what = (f"request_cpus={options.request_cpus}, request_memory={options.request_memory} MiB, "
            f"request_disk={options.request_disk} KiB"
            + (f", requirements {options.requirements!r}" if options.requirements else ""))
    return (f"no slot of the pool can ever run this call ({what}): of {len(slots)} slot(s), the biggest "
            f"({big.get('Name')}) offers Cpus = {big.get('Cpus')}, Memory = {big.get('Memory')} MiB, "
            f"Disk = {big.get('Disk')} KiB, OpSys = {big.get('OpSys')}, Arch = {big.get('Arch')}; ask for less")


def _number(ad: ClassAd, *names: str) -> float:
    for name in names:
        value = ad.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return 0.0


def _at_most(slot: ClassAd) -> ClassAd:
    """A slot ad grown to everything its machine could give one job (a partitionable slot's whole)."""
    ad = ClassAd(str(slot))
    for attr, totals in (("Cpus", ("TotalSlotCpus", "TotalCpus")), ("Memory", ("TotalSlotMemory", "TotalMemory")),
                         ("Disk", ("TotalSlotDisk", "TotalDisk")), ("Gpus", ("TotalSlotGpus", "TotalGpus"))):
        best = max(_number(slot, *totals), _number(slot, attr))
        if best:
            ad[attr] = int(best)
    return ad
