"""Two checkpoint streams of one job at once reach the schedd's store one after the other
(htc.daemons.schedd.checkpoint_files): across hosts a periodic checkpoint's 20 MB image is
still in flight over SSH when the vacate's arrives, and the two must not share ``incoming/``.
The schedd's CheckpointService with a stand-in service and in-memory connections; real images."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ckpt_images import loop_images
from htc.daemons.clock import REAL
from htc.daemons.file_stream import Outgoing, send_stream
from htc.daemons.schedd import checkpoint_files as cf
from htc.runtime import image
from htc.wire import messages as m

JOB = (1, 0)
CLAIM = "claim-1"


@pytest.fixture(scope="module")
def two_images(tmp_path_factory) -> list[bytes]:
    """Two successive real images of one small CPython loop (sequence numbers 1 and 2)."""
    return loop_images(tmp_path_factory.mktemp("img"), 2)


class Conn:
    """The schedd's end of a starter's connection: the stream comes in from ``incoming``."""

    def __init__(self, messages: list[m.Message]):
        self.incoming: asyncio.Queue = asyncio.Queue()
        for msg in messages:
            self.incoming.put_nowait(msg)
        self.replies: list = []

    async def recv(self, timeout=None):
        return await asyncio.wait_for(self.incoming.get(), timeout)

    async def send(self, msg: m.Message) -> None:
        self.replies.append(msg)

    async def send_error(self, code: str, text: str) -> None:
        self.replies.append((code, text))

    async def linger(self) -> None:
        return None


class Recorder:
    """Collects what a starter's send_stream sends (encoded and decoded, as on the wire)."""

    def __init__(self):
        self.sent: list[m.Message] = []

    async def send(self, msg: m.Message) -> None:
        self.sent.append(m.decode(m.encode(msg)))


async def _stream(path: Path) -> list[m.Message]:
    fd = os.open(path, os.O_RDONLY)
    rec = Recorder()
    entry = m.FileEntry(name=cf.IMAGE_NAME, kind="file", mode=0o600, size=os.fstat(fd).st_size)
    await send_stream(rec, iter([Outgoing(entry, fd)]))
    return rec.sent


def _service(spool: Path):
    fed = []
    core = SimpleNamespace(shadows={JOB: SimpleNamespace(claim_id=CLAIM)}, settings=SimpleNamespace(spool=str(spool)),
                           job=lambda job_id: {"JobUniverse": "1"} if job_id == JOB else None)
    service = SimpleNamespace(core=core, log=logging.getLogger("test.checkpoint_store"), clock=REAL, feed=fed.append,
                              start_task=lambda coro, name: coro.close())  # (no sweeps here)
    return service, fed


def test_a_second_stream_waits_for_the_first_and_both_are_kept_in_order(two_images, tmp_path):
    for n, data in enumerate(two_images):
        (tmp_path / f"image{n}").write_bytes(data)

    async def run():
        service, fed = _service(tmp_path / "spool")
        store = cf.CheckpointService(service)
        first, second = await _stream(tmp_path / "image0"), await _stream(tmp_path / "image1")
        # the periodic checkpoint's stream: all but its end has arrived when the vacate's comes
        slow = Conn(first[:-2])
        one = asyncio.ensure_future(store.store(slow, m.SendCheckpoint(claim_id=CLAIM, job_id="1.0", number=1)))
        while not slow.incoming.empty():
            await asyncio.sleep(0.01)
        fast = Conn(second)
        two = asyncio.ensure_future(store.store(fast, m.SendCheckpoint(claim_id=CLAIM, job_id="1.0", number=2)))
        deadline = time.monotonic() + 60
        while not (two.done() or getattr(store, "_users", {}).get(JOB) == 2):  # the vacate's is done, or waits its turn
            assert time.monotonic() < deadline, "the second store neither finished nor waited"
            await asyncio.sleep(0.01)
        for msg in first[-2:]:
            slow.incoming.put_nowait(msg)
        await asyncio.wait_for(asyncio.gather(one, two), 120)
        return slow.replies, fast.replies, fed, store

    first, second, fed, store = asyncio.run(run())
    assert [type(r) for r in first + second] == [m.Ack, m.Ack], (first, second)
    assert [event.number for event in fed] == [1, 2]
    current = cf.checkpoint_directory(tmp_path / "spool", *JOB) / "current" / "image"
    assert current.read_bytes() == two_images[1]  # the later one is the latest
    image.verify(current)
    assert not store._locks and not store._users  # nothing kept once the conversations are over
