"""Each turn of the schedd service's loop reads the queue inside ``one_look`` (htc.jobqueue.reads):
its reads ask sqlite whether another process changed the file once, not once each."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from htc.daemons import core as c
from htc.daemons.clock import FakeClock
from htc.daemons.schedd.core import Schedd, ScheddSettings
from htc.daemons.schedd.service import ScheddService
from htc.daemons.service import DaemonPaths
from htc.jobqueue import JobQueue


@pytest.fixture
def paths():
    home = Path(tempfile.mkdtemp(prefix="htcp-", dir="/tmp"))
    yield DaemonPaths(home)
    shutil.rmtree(home, ignore_errors=True)


def test_a_turn_of_the_service_asks_data_version_once_for_all_its_reads(paths, tmp_path):
    queue = JobQueue.open(str(tmp_path / "q.db"))
    settings = ScheddSettings(periodic_interval=3600.0, interval=3600.0, send_reschedule=False)
    core = Schedd(settings, queue, own_uid=0)
    service = ScheddService(core, paths, None, clock=FakeClock(start=1_800_000_000.0))
    turns: list[int] = []

    def handle(event, now):
        asked: list[str] = []
        queue._conn.set_trace_callback(lambda sql: asked.append(sql) if sql == "PRAGMA data_version" else None)
        for _ in range(5):
            queue.exists("JobStatus == 1")
        queue._conn.set_trace_callback(None)
        turns.append(len(asked))
        return []

    core.handle = handle
    service.feed(c.Tick())
    service.feed(c.Tick())
    assert turns == [1, 1]
    queue.close()
