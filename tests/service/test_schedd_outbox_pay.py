"""The schedd's service takes written outbox entries out of the queue without a commit of their
own: the next commit does it, or one PAY_WITHIN seconds later when none comes (htc.jobqueue.promises,
htc.daemons.schedd.service)."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest

from htc.client import send_command_async
from htc.daemons import core as c
from htc.daemons.clock import FakeClock
from htc.daemons.schedd.core import Schedd, ScheddSettings
from htc.daemons.schedd.requests import description_message
from htc.daemons.schedd.service import PAY_WITHIN, ScheddService
from htc.daemons.service import DaemonPaths
from htc.jobqueue import JobQueue
from htc.wire import messages as m
from htc.wire.errors import DaemonUnreachable


@pytest.fixture
def paths():
    home = Path(tempfile.mkdtemp(prefix="htcp-", dir="/tmp"))
    yield DaemonPaths(home)
    shutil.rmtree(home, ignore_errors=True)


def _in_file(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM outbox").fetchone()[0]
    finally:
        conn.close()


def test_a_written_submit_event_leaves_the_outbox_within_pay_within_when_nothing_else_commits(paths, tmp_path):
    clock = FakeClock(start=1_800_000_000.0)  # stands still: no periodic work commits meanwhile
    qfile = tmp_path / "q.db"
    queue = JobQueue.open(str(qfile))
    settings = ScheddSettings(periodic_interval=3600.0, interval=3600.0, send_reschedule=False)
    service = ScheddService(Schedd(settings, queue, own_uid=0), paths, None, clock=clock)
    service.address = "schedd"
    log = tmp_path / "job.log"
    description = f"executable = /bin/true\nlog = {log}\nqueue\n"

    async def scenario():
        task = asyncio.create_task(service.run())
        try:
            async with asyncio.timeout(20):
                while True:
                    try:
                        await send_command_async("schedd", m.Ping(), transport=service.transport)
                        break
                    except DaemonUnreachable:
                        await asyncio.sleep(0.01)
                await send_command_async("schedd", description_message(description, tmp_path),
                                         transport=service.transport)
                while "Job submitted" not in (log.read_text() if log.exists() else ""):
                    await asyncio.sleep(0.005)
                written = time.monotonic()
                left_at_write = _in_file(qfile)
                while _in_file(qfile):
                    await asyncio.sleep(0.02)
                return left_at_write, time.monotonic() - written, queue.paid_later
        finally:
            service.feed(c.StopRequested())
            await asyncio.wait_for(task, 10)

    left_at_write, took, waiting = asyncio.run(scenario())
    # (the entry may already be gone when a commit of the schedd's came first: then 0)
    assert left_at_write in (0, 1) and waiting == 0
    assert took < PAY_WITHIN + 15  # generous: a loaded machine; without the timer it stays forever
