"""A standard-universe image stored over a real socket (htc.daemons.schedd.checkpoint_files
receive_checkpoint): its checksum is taken as it is received, in the same pass as the write, and
an image that does not verify still never replaces the previous one."""

from __future__ import annotations

import asyncio
import os
import socket
import zlib
from pathlib import Path

import pytest

from ckpt_images import loop_images
from htc.daemons.file_stream import Outgoing, send_stream
from htc.daemons.job_files import TransferError
from htc.daemons.schedd import checkpoint_files as cf
from htc.runtime import image
from htc.wire import messages as m
from htc.wire.transport import Connection


@pytest.fixture(scope="module")
def an_image(tmp_path_factory) -> Path:
    """A real image of a small CPython loop."""
    where = tmp_path_factory.mktemp("img")
    loop_images(where)
    return where / "image"


def _store(store: Path, data: bytes, tmp_path: Path) -> None:
    """Stream ``data`` as a job's image over a real socket pair into ``store``."""
    sent = tmp_path / "sent"
    sent.write_bytes(data)

    async def run():
        a, b = socket.socketpair()
        conns = []
        for sock in (a, b):
            reader, writer = await asyncio.open_connection(sock=sock, limit=2 ** 20)
            conns.append(Connection(reader, writer, max_frame=4 << 20))
        entry = m.FileEntry(name=cf.IMAGE_NAME, kind="file", size=len(data), mode=0o600)
        source = iter([Outgoing(entry, os.open(sent, os.O_RDONLY | os.O_CLOEXEC))])
        try:
            await asyncio.gather(send_stream(conns[0], source),
                                 cf.receive_checkpoint(conns[1], store, None, "1.0", standard=True))
        finally:
            for conn in conns:
                await conn.aclose()

    asyncio.run(run())


def test_a_streamed_image_is_stored_and_a_tampered_one_is_refused(an_image, tmp_path):
    store = tmp_path / "store"
    good = an_image.read_bytes()
    _store(store, good, tmp_path)
    assert (store / "current" / "image").read_bytes() == good
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF  # (the stream's own SHA-256 is of these bytes: it passes)
    with pytest.raises(TransferError, match="does not verify.*previous image is kept"):
        _store(store, bytes(damaged), tmp_path)
    assert (store / "current" / "image").read_bytes() == good and not (store / "incoming").exists()


def test_the_checksum_taken_while_receiving_is_the_one_checked(an_image, tmp_path):
    data = an_image.read_bytes()
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (incoming / "image").write_bytes(data)
    stored = image.read_header(an_image).checksum
    with pytest.raises(TransferError, match="does not verify"):  # a good file, a wrong sum: refused
        cf.standard_image(incoming, checksum=stored ^ 1)
    (incoming.mkdir(), (incoming / "image").write_bytes(data))
    assert cf.standard_image(incoming, checksum=stored) == len(data)


@pytest.mark.parametrize("step", [1, 7, 16, 17, 4096, 1 << 20])
def test_the_stream_checksum_is_verifys_for_any_chunking(an_image, step):
    data = memoryview(an_image.read_bytes())
    head = bytearray(data[:image.HEADER_SIZE])
    head[16:20] = bytes(4)
    expected = zlib.crc32(data[image.HEADER_SIZE:], zlib.crc32(head))
    ours = image.StreamChecksum()
    end = len(data) if step >= 4096 else 2 * image.HEADER_SIZE  # (small steps through the header only)
    for i in range(0, end, step):
        ours.update(data[i:min(i + step, end)])
    ours.update(data[end:])
    assert ours.value == expected == image.read_header(an_image).checksum
    image.verify(an_image, checksum=ours.value)
