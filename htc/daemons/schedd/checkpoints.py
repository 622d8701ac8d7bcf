"""A self-checkpointing job's stored checkpoint, as the schedd core records it (sans-IO).

Theory of operation
-------------------
When a job submitted with ``checkpoint_exit_code`` exits with that code, its starter sends the
checkpoint to the shadow (:mod:`htc.daemons.starter.self_checkpoint`). The schedd's service
writes it into the job's spool (:mod:`htc.daemons.schedd.checkpoint_files`) and, once every
file is in place, feeds :class:`CheckpointStored` into the core; :func:`checkpoint_stored`
records it the way HTCondor's shadow does:

* ``CheckpointNumber`` -- the checkpoint's number (the next run asks for it back);
* ``JobLastCheckpointTime`` -- when it was stored;
* ``CommittedTime`` (and ``CommittedSlotTime``, times the slot's weight) grows by the time
  since the later of the run's start and the previous checkpoint: that work can no longer be
  lost. When the run ends by itself, :mod:`htc.daemons.schedd.ends` adds only the time since
  the last checkpoint (HTCondor's ``BaseShadow`` rule), so nothing is counted twice.

and writes the two FILE_TRANSFER events HTCondor's shadow logs for a checkpoint upload
(040 "Started transferring output files" and "Finished transferring output files"), from which
the user reads how long each checkpoint took. The job stays Running: a checkpoint is not a
completion.

A report for a run the schedd no longer follows (its claim ended meanwhile) changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from htc.daemons import core as c
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.ends import slot_weight, uncommitted_seconds
from htc.eventlog import events as ev
from htc.jobqueue.records import JobId

__all__ = ["CheckpointStored", "checkpoint_stored"]


@dataclass(frozen=True)
class CheckpointStored(c.Event):
    """The service stored checkpoint ``number`` of ``job_id``'s run on ``claim_id``; the
    transfer began at ``started`` (the service's clock) and carried ``files`` entries."""

    job_id: JobId
    claim_id: str
    number: int
    started: float
    files: int = 0
    bytes: int = 0


def checkpoint_stored(sd, event: CheckpointStored, now: float, out: list) -> None:
    """Record a stored checkpoint (see the module docstring)."""
    shadow = sd.shadows.get(event.job_id)
    job = sd.job(event.job_id)
    if shadow is None or shadow.claim_id != event.claim_id or job is None:
        out.append(c.Log(f"job {event.job_id[0]}.{event.job_id[1]}: checkpoint {event.number} stored for a run "
                         "that has ended; not recorded"))
        return
    gained = uncommitted_seconds(job, shadow, now)
    claim = sd.claims.get(event.claim_id)
    attrs = {
        "CheckpointNumber": str(event.number),
        "JobLastCheckpointTime": str(int(now)),
        "CommittedTime": str(int(ul.number(job, "CommittedTime") + gained)),
        "CommittedSlotTime": str(ul.number(job, "CommittedSlotTime") + gained * slot_weight(claim)),
    }
    with sd.queue.transaction():
        sd.queue.set_attributes(event.job_id, attrs)
    out += ul.write(job,
                    ev.FileTransferEvent(**ul.ids(job), timestamp=event.started,
                                         transfer_type=ev.FileTransferType.OUT_STARTED),
                    ev.FileTransferEvent(**ul.ids(job), timestamp=now,
                                         transfer_type=ev.FileTransferType.OUT_FINISHED))
    out.append(c.Log(f"{shadow.label}: checkpoint {event.number} stored ({event.files} entries, "
                     f"{event.bytes} bytes)"))
    sd.changed()
