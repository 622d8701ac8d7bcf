"""What a job sends back when it ends: HTCondor's output transfer, decided and done.

Theory of operation
-------------------
When the job's main process has exited (and its leftovers are killed), the starter decides
whether anything goes back (:func:`sends_output`, a pure decision on the job ad and how the job
ended), then copies it (:func:`send_output`) from the sandbox to the job's Iwd:

* nothing for a call lane (its results went back call by call, and its Iwd is its first
  call's: it must never be clobbered), nor for a job on a shared file system
  (``ShouldTransferFiles = NO``: it wrote in place);
* ``WhenToTransferOutput``: a vacated job sends nothing back unless ``ON_EXIT_OR_EVICT``;
  ``ON_SUCCESS`` sends only when the job exited with code 0; ``ON_EXIT`` (the default) always
  when it exited;
* the captured stdout/stderr go to ``Out``/``Err`` (unless ``TransferOut``/``TransferErr`` is
  false, or the stream was streamed while the job ran -- :mod:`htc.daemons.starter.stream`);
* then ``TransferOutput``, or every new or modified top-level entry, remapped by
  ``TransferOutputRemaps`` (:mod:`htc.daemons.starter.sandbox`), written with the rights of the
  job's owner.

A failed transfer does not raise: what was written so far and the error text go into the job's
exit record, where the startd's caller sees them (HTCondor would put the job on hold).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from htc.daemons import owner_files as ofs
from htc.daemons.starter import sandbox as sb
from htc.daemons.job_files import parse_remaps, streamed_files

__all__ = ["path_attr", "send_output", "sends_output"]


def path_attr(job_ad: Mapping[str, Any], name: str) -> str | None:
    """The file the job's ``name`` attribute (``In``, ``Out``, ``Err``) names, or None when it names
    none (absent, empty, or ``/dev/null``)."""
    value = job_ad.get(name)
    return value if isinstance(value, str) and value and value != "/dev/null" else None


def sends_output(job_ad: Mapping[str, Any], *, vacated: bool, exit_code: int | None, lane: bool) -> bool:
    """Whether the job's output goes back now that it has ended (see the module docstring).

    Args:
        job_ad: the job (ShouldTransferFiles, WhenToTransferOutput).
        vacated: the job was vacated or killed rather than exiting on its own.
        exit_code: its exit code (None: a signal killed it).
        lane: the job is a call lane.
    """
    when = str(job_ad.get("WhenToTransferOutput", "ON_EXIT")).upper()
    if lane:
        return False
    if str(job_ad.get("ShouldTransferFiles", "")).upper() == "NO":
        return False
    if vacated and when != "ON_EXIT_OR_EVICT":
        return False
    return not (when == "ON_SUCCESS" and exit_code != 0)


def send_output(job_ad: Mapping[str, Any], box: sb.Sandbox, dest: Path, *, baseline: Mapping[str, tuple[float, int]],
                skip: Collection[str], owner: ofs.Identity, job: str) -> tuple[list[Path], str | None]:
    """Copy the job's output from ``box`` to ``dest`` (its Iwd), as ``owner``.

    Args:
        job_ad: the job (Out, Err, TransferOut, TransferErr, TransferOutput,
            TransferOutputRemaps, and what it streamed).
        box: its sandbox.
        dest: where relative destinations are (the Iwd).
        baseline: the sandbox's entries after input transfer (:meth:`Sandbox.snapshot`).
        skip: entries never sent back (a transferred executable).
        owner: whose rights the destinations are written with.
        job: the job's ``cluster.proc``, for messages.

    Returns:
        The paths written, and None or the text of the error that stopped the transfer.
    """
    written: list[Path] = []
    streamed = set(streamed_files(job_ad).values())  # sent while it ran (htc.daemons.starter.stream)
    try:
        for attr, name in (("Out", sb.STDOUT_NAME), ("Err", sb.STDERR_NAME)):
            target = path_attr(job_ad, attr)
            if name in streamed:
                continue
            if target and job_ad.get("Transfer" + attr, True) is not False and (box.path / name).exists():
                written += box.send_out([name], dest, {name: target}, owner=owner, job=job)
        names = box.output_names(job_ad, baseline, set(skip))
        written += box.send_out(names, dest, parse_remaps(job_ad.get("TransferOutputRemaps")), owner=owner,
                                job=job)
    except sb.TransferError as exc:
        return written, str(exc)
    return written, None
