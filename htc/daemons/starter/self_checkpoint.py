"""Self-checkpointing jobs (``checkpoint_exit_code``): checkpoint files to the submit side, the
job restarted in its sandbox, and the checkpoint brought back on the next run.

Theory of operation
-------------------
A job submitted with ``checkpoint_exit_code = N`` (``SuccessCheckpointExitCode``; submit sets
``WantFTOnCheckpoint``, without which HTCondor's starter ignores the code) writes its own
checkpoint and exits with ``N``. HTCondor's starter then, as here:

1. transfers the checkpoint to the submit side: the ``transfer_checkpoint_files`` list
   (``TransferCheckpoint``) plus the captured stdout/stderr when they are not streamed, or,
   without that list, what the output transfer would send (``transfer_output_files``, else
   every new or modified top-level entry of the sandbox, stdout/stderr included). The files go
   to the shadow as ``SendCheckpoint`` and a file stream (:mod:`htc.wire.messages.checkpoints`),
   on a connection of their own, whether the job's other files travel by the file system or
   over the connection: the schedd keeps them in its spool
   (:mod:`htc.daemons.schedd.checkpoint_files`), records ``CheckpointNumber``,
   ``JobLastCheckpointTime`` and ``CommittedTime`` and logs the transfer. Processes the run
   left behind are killed first, so the checkpoint is read from a quiet sandbox (HTCondor lets
   them live on into the next run);
2. restarts the executable in the same sandbox with the same arguments; the exit is not a
   completion. A checkpoint that could not be sent does not stop the job (HTCondor's
   FailedCheckpoint: the next one may get through); a job that cannot be restarted leaves the
   slot as evicted, to resume from its checkpoint on its next match (HTCondor requeues it);
3. on any other exit, finishes as usual.

An exit with ``N`` while the job is being vacated (its KillSig was sent) is an eviction, as in
HTCondor (whose eviction checkpoint is a FIXME): nothing is uploaded, and the job keeps the
checkpoint it last sent. A job may instead promise to die by a signal
(``SuccessCheckpointExitBySignal`` and ``SuccessCheckpointExitSignal``).

When the job runs again -- after an eviction, anywhere -- its ad carries the
``CheckpointNumber`` the schedd recorded, and the starter asks for the checkpoint
(``FetchCheckpoint``) once the input is in the sandbox, writing it over the input: the job
finds its files where it left them, ``_condor_stdout`` and ``_condor_stderr`` included (the
starter appends to those), and resumes.

:func:`decide` is the sans-IO decision; :func:`checkpoint_names` says what a checkpoint holds;
:func:`keep_checkpointing` and :func:`restore` are the I/O the :class:`~htc.daemons.starter.service.Starter`
calls.
"""

from __future__ import annotations

import contextlib
import enum
import logging
from collections.abc import Mapping
from typing import Any

from htc.daemons.file_stream import send_stream
from htc.daemons.job_files import STDERR_NAME, STDOUT_NAME, TransferError, split_list, streamed_files
from htc.daemons.starter.procs import Reaped
from htc.daemons.starter.wire_files import SandboxSink, WireTransfer, fetch_stream, sandbox_entries
from htc.errors import HTCError
from htc.wire import messages as m

__all__ = ["Decision", "appends_output", "checkpoint_names", "decide", "keep_checkpointing", "restore", "wants_checkpoints"]

log = logging.getLogger("htc.daemons.starter.self_checkpoint")


class Decision(enum.Enum):
    """What the starter does when the job's process has exited."""

    FINISH = "finish"  # the job is over (an exit, a failure or an eviction)
    CHECKPOINT = "checkpoint"  # send the checkpoint, run the executable again


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def wants_checkpoints(job_ad: Mapping[str, Any]) -> bool:
    """Whether the job self-checkpoints: ``WantFTOnCheckpoint`` and a promised checkpoint exit
    (``SuccessCheckpointExitCode``, or ``SuccessCheckpointExitBySignal`` with its signal)."""
    if not _true(job_ad.get("WantFTOnCheckpoint")):
        return False
    if _true(job_ad.get("SuccessCheckpointExitBySignal")):
        return _int(job_ad.get("SuccessCheckpointExitSignal")) is not None
    return _int(job_ad.get("SuccessCheckpointExitCode")) is not None


def appends_output(job_ad: Mapping[str, Any]) -> bool:
    """Whether the job's stdout/stderr files are appended to, never emptied, when it starts
    (HTCondor's ``VanillaProc::outputOpenFlags``): a self-checkpointing job's restarts write on
    after what its earlier runs wrote; so does a job with ``erase_output_and_error_on_restart =
    false`` (``EraseOutputAndErrorOnRestart``)."""
    return _true(job_ad.get("WantFTOnCheckpoint")) or job_ad.get("EraseOutputAndErrorOnRestart") is False


def decide(job_ad: Mapping[str, Any], exit_code: int | None, exit_signal: int | None, *,
           vacated: bool) -> Decision:
    """Checkpoint and restart, or finish, once the job's main process has ended.

    Args:
        job_ad: the job (its checkpoint attributes).
        exit_code: the process's exit status (None when a signal ended it).
        exit_signal: the signal that ended it (None when it exited).
        vacated: the starter was asked to vacate or kill the job meanwhile.
    """
    if vacated or not wants_checkpoints(job_ad):
        return Decision.FINISH
    if _true(job_ad.get("SuccessCheckpointExitBySignal")):
        hit = exit_signal is not None and exit_signal == _int(job_ad.get("SuccessCheckpointExitSignal"))
    else:
        hit = exit_signal is None and exit_code == _int(job_ad.get("SuccessCheckpointExitCode"))
    return Decision.CHECKPOINT if hit else Decision.FINISH


def checkpoint_names(job_ad: Mapping[str, Any], output_names: list[str], present: set[str]) -> list[str]:
    """The top-level sandbox entries a checkpoint holds (see the module docstring).

    Args:
        job_ad: the job.
        output_names: what the output transfer would send now (``Sandbox.output_names``).
        present: the names in the sandbox (stdout/stderr are sent only when there).
    """
    streamed = set(streamed_files(job_ad).values())
    listed = split_list(job_ad.get("TransferCheckpoint"))
    names = list(listed) if listed else list(output_names)
    for attr, name in (("Out", STDOUT_NAME), ("Err", STDERR_NAME)):
        target = job_ad.get(attr)
        captured = isinstance(target, str) and target and target != "/dev/null" \
            and job_ad.get("Transfer" + attr, True) is not False
        if captured and name not in streamed and name in present and name not in names:
            names.append(name)
    return names


async def _upload(transfer: WireTransfer, box, names: list[str], number: int, job: str) -> str | None:
    """Send checkpoint ``number`` (the sandbox entries ``names``); None, or why it failed."""
    try:
        conn = await transfer.open_stream()
    except HTCError as exc:
        return f"cannot reach the shadow: {exc}"
    try:
        await conn.send(m.SendCheckpoint(claim_id=transfer.claim_id, job_id=transfer.job_id, number=number))
        await send_stream(conn, sandbox_entries(box, names, job))
        reply = await conn.recv(timeout=120.0)
        if isinstance(reply, m.ErrorReply):
            return f"the shadow could not store it: {reply.message}"
        return None
    except TransferError as exc:
        with contextlib.suppress(HTCError):
            await conn.send(m.ErrorReply(code="bad_request", message=str(exc)))
        return str(exc)
    except HTCError as exc:
        return f"the transfer failed: {exc}"
    finally:
        await conn.aclose()


async def keep_checkpointing(starter, reaped: Reaped) -> tuple[Reaped, float, float]:
    """While the job's process exits with its checkpoint code: send the checkpoint and run the
    executable again (the starter's :meth:`relaunch`). Returns the last process's end and the
    user and system CPU seconds of the processes before it."""
    job_ad, earlier_user, earlier_sys = starter.job_ad, 0.0, 0.0
    transfer: WireTransfer | None = starter.checkpoints
    number = _int(job_ad.get("CheckpointNumber")) or 0
    label = starter.job_label()
    while transfer is not None and decide(job_ad, reaped.exit_code, reaped.signal,
                                          vacated=starter.vacated) is Decision.CHECKPOINT:
        await starter.procs.kill_all(starter.settings.kill_timeout)  # what the process left behind
        box = starter.sandbox
        present = set(box.snapshot())
        names = checkpoint_names(job_ad, starter.output_names(), present)
        number += 1
        error = await _upload(transfer, box, names, number, label)
        if error is not None:
            log.warning("job %s: checkpoint %d was not stored (%s); the job runs on", label, number, error)
        else:
            log.info("job %s: checkpoint %d stored (%d entries); restarting the job", label, number, len(names))
        earlier_user += reaped.rusage.ru_utime
        earlier_sys += reaped.rusage.ru_stime
        if starter.vacated:
            break  # vacated while the checkpoint travelled: the job leaves with it
        try:
            await starter.relaunch()
        except (HTCError, OSError) as exc:
            # HTCondor requeues a job it cannot restart after a checkpoint: it resumes from that
            # checkpoint on its next match, instead of ending with the checkpoint's exit code.
            log.warning("job %s: cannot restart it after checkpoint %d (%s); it leaves the slot", label, number, exc)
            starter.evict()
            break
        if starter.vacated:  # vacated while it restarted: it has just resumed, nothing is lost
            await starter.procs.kill_all(starter.settings.kill_timeout)
        reaped = await starter.exit_future()
    return reaped, earlier_user, earlier_sys


async def restore(transfer: WireTransfer | None, job_ad: Mapping[str, Any], sink: SandboxSink) -> int:
    """Bring the job's last checkpoint into its sandbox when the job has one (its
    ``CheckpointNumber``); returns the bytes received.

    Raises:
        TransferError: the shadow cannot be reached, refused, or sent a bad stream.
    """
    if transfer is None or not wants_checkpoints(job_ad) or (_int(job_ad.get("CheckpointNumber")) or 0) < 1:
        return 0
    request = m.FetchCheckpoint(claim_id=transfer.claim_id, job_id=transfer.job_id)
    return (await fetch_stream(transfer, request, sink, "checkpoint")).bytes
