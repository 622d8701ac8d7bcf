"""receive_stream's taps and batched writes (htc.daemons.file_stream): a second checksum taken
in the same pass as the write, and one worker-thread hand-off per WRITE_BATCH bytes."""

from __future__ import annotations

import asyncio
import hashlib
import os
import zlib

from htc.daemons import file_stream as fs
from htc.daemons.file_stream import Outgoing, receive_stream, send_stream
from htc.daemons.starter.wire_files import SandboxSink
from htc.wire import messages as m


class Pipe:
    """Both ends of a connection in memory; every message goes through encode/decode."""

    def __init__(self):
        self.queue: asyncio.Queue = asyncio.Queue()

    async def send(self, msg: m.Message) -> None:
        await self.queue.put(m.decode(m.encode(msg)))

    async def recv(self, timeout=None):
        return await asyncio.wait_for(self.queue.get(), timeout)


def _source(files: dict[str, bytes], where):
    for name, data in files.items():
        path = where / name
        path.write_bytes(data)
        yield Outgoing(m.FileEntry(name=name, kind="file", size=len(data), mode=0o644),
                       os.open(path, os.O_RDONLY | os.O_CLOEXEC))


def _transfer(tmp_path, files, taps):
    src, box = tmp_path / "src", tmp_path / "box"
    src.mkdir(), box.mkdir()

    async def run():
        pipe = Pipe()
        await send_stream(pipe, _source(files, src))
        return await receive_stream(pipe, SandboxSink(box, None, None), peer="test", taps=taps)

    return asyncio.run(run()), box


def test_a_tap_sees_every_byte_of_its_file_in_order_and_only_its_file(tmp_path):
    big = os.urandom(2 * fs.WRITE_BATCH + 3 * m.MAX_TRANSFER_CHUNK + 11)
    other = os.urandom(1000)
    seen: dict[str, list[int]] = {}

    def taps(entry):
        if entry.name != "big":
            return None
        sums = seen.setdefault(entry.name, [0, 0])

        def update(view):
            sums[0] = zlib.crc32(view, sums[0])
            sums[1] += len(view)
        return update

    counts, box = _transfer(tmp_path, {"other": other, "big": big}, taps)
    assert (counts.files, counts.bytes) == (2, len(big) + len(other))
    assert seen == {"big": [zlib.crc32(big), len(big)]}
    assert hashlib.sha256((box / "big").read_bytes()).digest() == hashlib.sha256(big).digest()
    assert (box / "other").read_bytes() == other


def test_chunks_are_written_in_batches_not_one_hand_off_each(tmp_path, monkeypatch):
    data = os.urandom(2 * fs.WRITE_BATCH + 7)  # 9 chunks
    calls: list[int] = []
    real = fs._take

    def counting(fd, chunks, digest, tap):
        calls.append(sum(len(c) for c in chunks))
        return real(fd, chunks, digest, tap)

    monkeypatch.setattr(fs, "_take", counting)
    _, box = _transfer(tmp_path, {"f": data}, None)
    assert calls == [fs.WRITE_BATCH, fs.WRITE_BATCH, 7]
    assert (box / "f").read_bytes() == data
