"""The schedd's half of a standard-universe vacate (tests/service/test_vacate_image_refused.py has
the starter's): a vacated run whose image the store did not keep puts the job back to Idle --
not held -- with an evicted event whose reason says so and what the job resumes from (its
previous image, or the start)."""

from __future__ import annotations

from htc.eventlog.events import EventType, JobEvictedEvent
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
