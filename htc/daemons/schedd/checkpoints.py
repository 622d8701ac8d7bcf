"""A job's stored checkpoint, as the schedd core records it (sans-IO).

Theory of operation
-------------------
Two kinds of job send checkpoints to the shadow: a job submitted with ``checkpoint_exit_code``
when it exits with that code (:mod:`htc.daemons.starter.self_checkpoint`), and a
standard-universe job (``JobUniverse`` 1) each time the runtime writes its image
(:mod:`htc.daemons.starter.standard`: periodically, on ``htc checkpoint``, on a vacate). The
schedd's service writes either into the job's spool (:mod:`htc.daemons.schedd.checkpoint_files`)
and, once every file is in place (an image: once it verifies), feeds :class:`CheckpointStored`
into the core; :func:`checkpoint_stored` records it the way HTCondor's shadow does:

* ``CheckpointNumber`` -- the checkpoint's number (the next run asks for it back);
* ``JobLastCheckpointTime`` -- when it was stored;
* ``CommittedTime`` (and ``CommittedSlotTime``, times the slot's weight) grows by the time
  since the later of the run's start and the previous checkpoint: that work can no longer be
  lost. When the run ends by itself, :mod:`htc.daemons.schedd.ends` adds only the time since
  the last checkpoint (HTCondor's ``BaseShadow`` rule), so nothing is counted twice.

For a self-checkpointing job it writes the two FILE_TRANSFER events HTCondor's shadow logs
for a checkpoint upload (040 "Started transferring output files" and "Finished transferring
output files"), from which the user reads how long each checkpoint took. For a standard-universe
job it sets HTCondor's standard-universe attributes instead -- ``NumCkpts`` (images kept),
``LastCkptTime`` and ``CkptSize`` (the image's bytes) -- and writes a ``CheckpointedEvent``
(003, "Job was checkpointed.", with the image's size as its sent bytes). The job stays
Running: a checkpoint is not a completion.

A report for a run the schedd no longer follows (its claim ended meanwhile) changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from htc.daemons import core as c
from htc.daemons.schedd import userlog as ul
from htc.daemons.schedd.ends import slot_weight, uncommitted_seconds
from htc.daemons.schedd.leverage import charge
from htc.eventlog import events as ev
from htc.jobqueue.records import JobId

__all__ = ["STANDARD_UNIVERSE", "CheckpointStored", "checkpoint_stored", "is_standard"]

#: ``JobUniverse`` of a standard-universe job: its checkpoint is one verified image
STANDARD_UNIVERSE = 1


def is_standard(job) -> bool:
    """Whether ``job`` (its ad or values) is a standard-universe job."""
    return ul.number(job, "JobUniverse", 0) == STANDARD_UNIVERSE


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
    cpu: float = 0.0  # the schedd's CPU seconds storing it (htc.daemons.schedd.leverage)


def checkpoint_stored(sd, event: CheckpointStored, now: float, out: list) -> None:
    """Record a stored checkpoint (see the module docstring)."""
    shadow = sd.shadows.get(event.job_id)
    job = sd.job(event.job_id)
    if shadow is None or shadow.claim_id != event.claim_id or job is None:
        out.append(c.Log(f"job {event.job_id[0]}.{event.job_id[1]}: checkpoint {event.number} stored for a run "
                         "that has ended; not recorded"))
        return
    gained = uncommitted_seconds(job, shadow, now)
    charge(shadow, "checkpoints", event.cpu)
    claim = sd.claims.get(event.claim_id)
    attrs = {
        "CheckpointNumber": str(event.number),
        "JobLastCheckpointTime": str(int(now)),
        "CommittedTime": str(int(ul.number(job, "CommittedTime") + gained)),
        "CommittedSlotTime": str(ul.number(job, "CommittedSlotTime") + gained * slot_weight(claim)),
    }
    if is_standard(job):
        attrs.update(NumCkpts=str(int(ul.number(job, "NumCkpts")) + 1), LastCkptTime=str(int(now)),
                     CkptSize=str(event.bytes))
        events: tuple[ev.Event, ...] = (ev.CheckpointedEvent(**ul.ids(job), timestamp=now,
                                                             sent_bytes=float(event.bytes)),)
    else:
        events = (ev.FileTransferEvent(**ul.ids(job), timestamp=event.started,
                                       transfer_type=ev.FileTransferType.OUT_STARTED),
                  ev.FileTransferEvent(**ul.ids(job), timestamp=now,
                                       transfer_type=ev.FileTransferType.OUT_FINISHED))
    with sd.queue.transaction():
        sd.queue.set_attributes(event.job_id, attrs)
    out += ul.write(job, *events)
    out.append(c.Log(f"{shadow.label}: checkpoint {event.number} stored ({event.files} entries, "
                     f"{event.bytes} bytes, {event.cpu * 1000:.1f} ms of the schedd's CPU)"))
    sd.changed()
