"""The starter's self-checkpointing on real processes and a real socket: a job that exits with
its ``checkpoint_exit_code`` has its checkpoint sent to a shadow and is run again in its
sandbox; a new starter brings the stored checkpoint back; a checkpoint the shadow refuses does
not stop the job.

The shadow here is a small server on a Unix socket that speaks the two conversations
(SendCheckpoint, FetchCheckpoint) with the real file streams and keeps the files in a
directory.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

from htc.daemons.file_stream import receive_stream, send_stream
from htc.daemons.schedd.transfers import OwnerSink, tree_entries
from htc.daemons.starter.service import Starter, StarterSettings
from htc.daemons.starter.wire_files import WireTransfer
from htc.wire import messages as m
from htc.wire.transport import UnixTransport

COUNT = """#!/bin/sh
i=0
[ -f state ] && i=$(cat state)
echo "run from $i"
i=$((i + 1))
if [ "$i" -lt "$STEPS" ]; then echo "$i" > state; exit 85; fi
echo "done at $i" > result.txt
"""


@pytest.fixture
def dirs():
    base = Path(tempfile.mkdtemp(prefix="htc-selfckpt-test-"))
    base.chmod(0o755)
    (base / "iwd").mkdir()
    (base / "iwd").chmod(0o777)
    (base / "store").mkdir()
    try:
        yield base
    finally:
        shutil.rmtree(base)


class Shadow:
    """Stores checkpoints in ``store/<number>`` and serves the latest; refuses the ones listed."""

    def __init__(self, store: Path, refuse: set[int] = frozenset()):
        self.store, self.refuse, self.numbers = store, refuse, []

    async def serve(self, conn) -> None:
        import os

        msg = await conn.recv(timeout=10)
        if isinstance(msg, m.SendCheckpoint):
            target = self.store / str(msg.number)
            target.mkdir()
            await receive_stream(conn, OwnerSink(target, None, msg.job_id), peer="the test's starter")
            if msg.number in self.refuse:
                shutil.rmtree(target)
                await conn.send_error("bad_request", "the spool is full")
                return
            self.numbers.append(msg.number)
            await conn.send(m.Ack())
        elif isinstance(msg, m.FetchCheckpoint):
            latest = self.store / str(max(self.numbers))
            fd = os.open(latest, os.O_RDONLY | os.O_DIRECTORY)
            try:
                await send_stream(conn, tree_entries("", fd, None, msg.job_id))
            finally:
                os.close(fd)


def _ad(iwd: Path, **attrs):
    (iwd / "count.sh").write_text(COUNT)
    (iwd / "count.sh").chmod(0o755)
    ad = {"ClusterId": 7, "ProcId": 0, "Cmd": "count.sh", "Iwd": str(iwd), "JobUniverse": 5, "Out": "out.txt",
          "Err": "err.txt", "RequestMemory": 128, "ShouldTransferFiles": "YES", "WhenToTransferOutput": "ON_EXIT",
          "WantFTOnCheckpoint": True, "SuccessCheckpointExitCode": 85, "TransferCheckpoint": "state",
          "TransferOutput": "result.txt", "Environment": "STEPS=4"}
    ad.update(attrs)
    return ad


async def _run(base: Path, shadow: Shadow, ad: dict):
    transport = UnixTransport(base / "sockets")
    async with asyncio.TaskGroup() as tg:
        server = await transport.start_server("shadow", shadow.serve, task_group=tg)
        try:
            transfer = WireTransfer(lambda: transport.open_connection("shadow"), "claim#1", "7.0")
            starter = Starter(ad, base / "execute", StarterSettings(), checkpoints=transfer)
            await starter.start()
            return await starter.wait()
        finally:
            await server.aclose()


def test_each_checkpoint_is_sent_and_the_job_runs_again_until_it_finishes(dirs):
    shadow = Shadow(dirs / "store")
    record = asyncio.run(_run(dirs, shadow, _ad(dirs / "iwd")))
    assert record.exit_code == 0 and not record.vacated and record.transfer_error is None
    assert shadow.numbers == [1, 2, 3]
    assert [(dirs / "store" / str(n) / "state").read_text() for n in (1, 2, 3)] == ["1\n", "2\n", "3\n"]
    # the captured stdout goes with the checkpoint, and the restarts append to it
    assert (dirs / "store" / "2" / "_condor_stdout").read_text() == "run from 0\nrun from 1\n"
    assert (dirs / "iwd" / "out.txt").read_text() == "run from 0\nrun from 1\nrun from 2\nrun from 3\n"
    assert (dirs / "iwd" / "result.txt").read_text() == "done at 4\n"
    assert not (dirs / "iwd" / "state").exists()


def test_a_new_starter_resumes_from_the_stored_checkpoint(dirs):
    shadow = Shadow(dirs / "store")
    shadow.numbers = [2]
    (dirs / "store" / "2").mkdir()
    (dirs / "store" / "2" / "state").write_text("2\n")
    (dirs / "store" / "2" / "_condor_stdout").write_text("run from 0\nrun from 1\n")
    record = asyncio.run(_run(dirs, shadow, _ad(dirs / "iwd", CheckpointNumber=2)))
    assert record.exit_code == 0
    assert shadow.numbers == [2, 3]  # numbered on from the job's CheckpointNumber
    assert (dirs / "iwd" / "out.txt").read_text() == "run from 0\nrun from 1\nrun from 2\nrun from 3\n"


def test_a_refused_checkpoint_does_not_stop_the_job(dirs):
    shadow = Shadow(dirs / "store", refuse={2})
    record = asyncio.run(_run(dirs, shadow, _ad(dirs / "iwd")))
    assert record.exit_code == 0 and shadow.numbers == [1, 3]
    assert (dirs / "iwd" / "result.txt").read_text() == "done at 4\n"


def test_without_a_way_to_the_shadow_the_checkpoint_code_is_a_plain_exit(dirs):
    async def go():
        starter = Starter(_ad(dirs / "iwd"), dirs / "execute", StarterSettings())
        await starter.start()
        return await starter.wait()

    record = asyncio.run(go())
    assert record.exit_code == 85
    assert (dirs / "iwd" / "out.txt").read_text() == "run from 0\n"


def test_on_a_shared_file_system_the_restarts_append_to_the_output(dirs):
    # HTCondor opens a self-checkpointing job's output for appending, never emptying it
    # (VanillaProc::outputOpenFlags): each run writes on after the last one.
    shadow = Shadow(dirs / "store")
    ad = _ad(dirs / "iwd", ShouldTransferFiles="NO", TransferCheckpoint=None, TransferOutput=None)
    (dirs / "iwd" / "out.txt").write_text("")
    (dirs / "iwd" / "out.txt").chmod(0o666)
    record = asyncio.run(_run(dirs, shadow, ad))
    assert record.exit_code == 0 and shadow.numbers == [1, 2, 3]
    assert (dirs / "iwd" / "out.txt").read_text() == "run from 0\nrun from 1\nrun from 2\nrun from 3\n"
    assert (dirs / "iwd" / "result.txt").read_text() == "done at 4\n"
