"""The starter's side of a vacate whose image the schedd's checkpoint store does not keep
(htc.daemons.starter.standard, htc.daemons.startd.reports): the run ends as a plain vacate --
no ``StarterError``, so the job is not held -- with ``VacateCheckpointed = false`` and the
store's reason, for the schedd to requeue the job and note it in the evicted event
(tests/unit/test_vacate_image_requeue.py has the schedd's half). A kept image says
``VacateCheckpointed = true``. The image is a real one of a CPython loop (tests/ckpt_images.py);
the shadow is played by a connection that answers as the store does."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from ckpt_images import loop_images
from htc.daemons.schedd.shadow import ad_values
from htc.daemons.starter.records import ExitRecord, Usage
from htc.daemons.starter.standard import IMAGE_NAME, StandardJob
from htc.daemons.startd.events import StarterExited
from htc.daemons.startd.reports import Contact, JobReports
from htc.runtime import checkpoint as ckpt
from htc.runtime.image import read_header
from htc.wire import messages as m

CLAIM = "slot1_1@exec#2#bb"
REFUSED = "checkpoint 3 of job 1.0 not stored: the image does not verify; the previous image is kept"


class _Shadow:
    """A connection to the shadow that takes the stream and answers ``reply``."""

    def __init__(self, reply: m.Message):
        self.reply, self.sent = reply, []

    async def send(self, msg: m.Message) -> None:
        self.sent.append(msg)

    async def recv(self, timeout: float | None = None) -> m.Message:
        return self.reply

    async def aclose(self) -> None:
        """Nothing to close."""


class _Channel:
    claim_id, job_id = CLAIM, "1.0"

    def __init__(self, reply: m.Message):
        self.reply, self.conns = reply, []

    async def connect(self) -> _Shadow:
        self.conns.append(_Shadow(self.reply))
        return self.conns[-1]

    async def open_stream(self) -> _Shadow:  # (WireTransfer's connection for file streams)
        return await self.connect()


@pytest.fixture(scope="module")
def an_image(tmp_path_factory) -> Path:
    """A real image of a small CPython loop."""
    where = tmp_path_factory.mktemp("img")
    loop_images(where)
    return where / "image"


def vacate(an_image: Path, sandbox: Path, reply: m.Message) -> tuple[StandardJob, str | None, _Channel]:
    """Finish a standard job that exited by its vacate (the runtime wrote ``an_image``)."""
    shutil.copy(an_image, sandbox / IMAGE_NAME)
    channel = _Channel(reply)
    job = StandardJob(channel)
    job.sandbox, job.pid = sandbox, read_header(an_image).pid
    return job, asyncio.run(job.finish(ckpt.VACATED_EXIT)), channel


def reported(job: StandardJob, error: str | None) -> dict:
    """The usage ad of the vacated run's JobExited, as the startd reports it."""
    reports = JobReports(settings=None)
    reports.contacts[CLAIM] = Contact(CLAIM, "schedd", "schedd", "alice", shadow_address="shadow", job_id="1.0")
    record = ExitRecord(ckpt.VACATED_EXIT, None, False, False, True, Usage(), (), None, job.vacate_checkpointed,
                        error)
    out: list = []
    reports.exited(StarterExited(CLAIM, record), "the owner came back", out)
    [call] = [a for a in out if isinstance(getattr(a, "msg", None), m.JobExited)]
    assert call.msg.vacated and call.msg.hold_code is None
    return ad_values(call.msg.usage_ad)


def test_a_refused_vacate_image_is_reported_as_a_vacate_not_an_output_error(an_image, tmp_path):
    job, error, channel = vacate(an_image, tmp_path, m.ErrorReply(code="bad_request", message=REFUSED))
    assert [type(x) for x in channel.conns[0].sent][:2] == [m.SendCheckpoint, m.FileEntry]  # it was sent
    assert error is not None and "the vacate's checkpoint was not kept" in error and "does not verify" in error
    assert job.vacate_checkpointed is False and job.sent == 0
    usage = reported(job, error)
    assert "StarterError" not in usage and "HoldReasonCode" not in usage  # not held
    assert usage["VacateCheckpointed"] is False and "does not verify" in usage["VacateCheckpointError"]
    assert usage["VacateReason"] == "the owner came back"


def test_a_kept_vacate_image_is_reported_as_checkpointed(an_image, tmp_path):
    job, error, _ = vacate(an_image, tmp_path, m.Ack(detail="checkpoint 1: 1 entries"))
    assert error is None and job.vacate_checkpointed is True and job.sent == 1
    usage = reported(job, error)
    assert usage["VacateCheckpointed"] is True and "VacateCheckpointError" not in usage


def test_an_image_that_never_came_is_reported_as_not_checkpointed(tmp_path):
    """The runtime wrote no image (the job exited 85 all the same): nothing to send; not held."""
    job = StandardJob(_Channel(m.Ack()))
    job.sandbox, job.pid = tmp_path, 1
    job._await_image = _no_image  # (the real wait is 60 s)
    error = asyncio.run(job.finish(ckpt.VACATED_EXIT))
    assert error is not None and job.vacate_checkpointed is False
    assert "StarterError" not in reported(job, error)


async def _no_image(timeout: float, after: int | None = None) -> None:
    raise ckpt.CheckpointFailed("pid 1 wrote no image within 60.0 s")
