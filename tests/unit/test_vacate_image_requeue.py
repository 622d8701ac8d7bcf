"""The schedd's half of a standard-universe vacate (tests/service/test_vacate_image_refused.py has
the starter's): a vacated run whose image the store did not keep puts the job back to Idle --
not held -- with an evicted event whose reason says so and what the job resumes from (its
previous image, or the start); a kept image makes the event say ``(1) Job was checkpointed.``,
as HTCondor's JobEvictedEvent does, and htcondor2's reader sees ``checkpointed``."""

from __future__ import annotations

import htcondor2

from htc.eventlog.events import EventType, JobEvictedEvent
from htc.eventlog.writer import EventLogWriter
from htc.jobqueue import JobStatus
from htc.daemons.schedd.events import WriteUserLog
from test_schedd_core import Harness, job, run_first_job

ERROR = "the vacate's checkpoint was not kept: the image does not verify"


def vacated(usage_ad: str, checkpoint_number: int = 0) -> tuple[Harness, JobEvictedEvent]:
    """Run one job and end its run by a vacate reporting ``usage_ad``; the evicted event."""
    h = Harness()
    h.start()
    h.submit(job())
    claim_id, activate = run_first_job(h)
    h.ack(activate)
    if checkpoint_number:
        h.queue.set_attributes((1, 0), {"CheckpointNumber": str(checkpoint_number)})
    h.exited(claim_id, "1.0", vacated=True, usage_ad=usage_ad)
    [evicted] = [e for a in h.actions if isinstance(a, WriteUserLog) for e in a.events
                 if e.type is EventType.JOB_EVICTED]
    return h, evicted


def test_a_vacate_whose_image_was_not_kept_requeues_the_job_from_its_previous_image():
    h, evicted = vacated(f'[ VacateReason = "owner came back"; VacateCheckpointed = false; '
                         f'VacateCheckpointError = "{ERROR}" ]', checkpoint_number=4)
    assert h.status(1, 0) is JobStatus.IDLE and "HoldReason" not in h.queue.get_job((1, 0))
    assert not evicted.checkpointed
    assert evicted.reason == f"owner came back; {ERROR}: it resumes from its checkpoint 4"


def test_without_a_previous_image_the_job_starts_again():
    h, evicted = vacated(f'[ VacateCheckpointed = false; VacateCheckpointError = "{ERROR}" ]')
    assert h.status(1, 0) is JobStatus.IDLE
    assert evicted.reason == f"the job was vacated from its slot; {ERROR}: it has no checkpoint: it starts again"


def test_a_kept_vacate_image_is_a_checkpointed_eviction(tmp_path):
    h, evicted = vacated('[ VacateReason = "owner came back"; VacateCheckpointed = true ]')
    assert h.status(1, 0) is JobStatus.IDLE and evicted.checkpointed and evicted.reason == "owner came back"
    _, plain = vacated('[ VacateReason = "owner came back" ]')  # not a standard job
    assert not plain.checkpointed
    log = tmp_path / "job.log"
    with EventLogWriter(str(log)) as writer:
        writer.write(evicted)
        writer.write(plain)
    text = log.read_text()
    assert "\t(1) Job was checkpointed.\n" in text and "\t(0) CPU times\n" in text
    assert "\tReason: owner came back\n" in text  # HTCondor's form when not terminated and requeued
    ours, theirs = list(htcondor2.JobEventLog(str(log)).events(stop_after=0))
    assert ours.type == htcondor2.JobEventType.JOB_EVICTED and ours["Checkpointed"] is True
    assert theirs["Checkpointed"] is False
    assert ours["Reason"] == "owner came back"
