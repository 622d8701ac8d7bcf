"""The schedd's service takes its time from its clock: with a FakeClock, a job submitted over a
real socket gets its QDate from the fake clock, and the periodic policy runs only when that
clock is advanced past PERIODIC_EXPR_INTERVAL."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

from htc.classad import ClassAd
from htc.client import send_command_async
from htc.daemons import core as c
from htc.daemons.clock import FakeClock
from htc.daemons.schedd.core import Schedd, ScheddSettings
from htc.daemons.schedd.requests import description_message
from htc.daemons.schedd.service import ScheddService
from htc.daemons.service import DaemonPaths
from htc.jobqueue import JobQueue, JobStatus
from htc.wire import messages as m
from htc.wire.errors import DaemonUnreachable

START = 1_800_000_000.0


@pytest.fixture
def paths():
    home = Path(tempfile.mkdtemp(prefix="htcs-", dir="/tmp"))
    yield DaemonPaths(home)
    shutil.rmtree(home, ignore_errors=True)


async def _ping(service) -> None:
    async with asyncio.timeout(10):
        while True:
            try:
                await send_command_async(service.address, m.Ping(), transport=service.transport)
                return
            except DaemonUnreachable:
                await asyncio.sleep(0.01)


def test_the_schedd_service_reads_the_time_from_its_fake_clock(paths, tmp_path):
    clock = FakeClock(start=START)
    queue = JobQueue.open(":memory:")
    settings = ScheddSettings(periodic_interval=60.0, interval=300.0, send_reschedule=False)
    service = ScheddService(Schedd(settings, queue, own_uid=0), paths, None, clock=clock)
    service.address = "schedd"
    t = service.transport
    description = "executable = /bin/true\nperiodic_hold = true\nqueue\n"

    async def scenario():
        task = asyncio.create_task(service.run())
        try:
            await _ping(service)
            reply = await send_command_async("schedd", description_message(description, tmp_path), transport=t)
            ads = await send_command_async("schedd", m.QueryJobs(projection=("QDate", "JobStatus")), transport=t)
            [ad] = [ClassAd(text) for text in ads.ads]
            status_at_0 = queue.get_job((reply.cluster_id, 0)).status
            clock.advance(59)  # not yet PERIODIC_EXPR_INTERVAL after the start
            await clock.settle(20)
            status_at_59 = queue.get_job((reply.cluster_id, 0)).status
            clock.advance(2)
            await clock.settle(20)
            await _ping(service)  # one more turn of the service's loop
            status_at_61 = queue.get_job((reply.cluster_id, 0)).status
            return ad, status_at_0, status_at_59, status_at_61
        finally:
            service.feed(c.StopRequested())
            await asyncio.wait_for(task, 10)

    ad, early, at_59, at_61 = asyncio.run(scenario())
    assert ad["QDate"] == int(START)
    assert (early, at_59, at_61) == (JobStatus.IDLE, JobStatus.IDLE, JobStatus.HELD)
