"""The file stream of transfers over the connection (htc.daemons.file_stream), its sinks, and
the rule that picks it (htc.daemons.job_files.over_wire): no daemons, an in-memory connection."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest

from htc.daemons.file_stream import Outgoing, receive_stream, send_stream
from htc.daemons.job_files import TransferError, over_wire
from htc.daemons.schedd.transfers import OwnerSink, input_source
from htc.daemons.starter.wire_files import SandboxSink
from htc.wire import messages as m
from htc.wire.errors import ConnectionClosed, WireError


class Pipe:
    """Both ends of a connection in memory; every message goes through encode/decode."""

    def __init__(self, script: list | None = None):
        self.queue: asyncio.Queue = asyncio.Queue()
        self.sent: list[m.Message] = []
        for item in script or []:
            self.queue.put_nowait(item)

    async def send(self, msg: m.Message) -> None:
        self.sent.append(msg)
        await self.queue.put(m.decode(m.encode(msg)))

    async def recv(self, timeout=None):
        item = await asyncio.wait_for(self.queue.get(), timeout)
        if isinstance(item, Exception):
            raise item
        return item


def _tree(root):
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "sub" / "a.txt").write_text("a\n")
    os.symlink("sub/a.txt", root / "d" / "link")
    big = os.urandom(2 * m.MAX_TRANSFER_CHUNK + 7)
    (root / "big.bin").write_bytes(big)
    (root / "in.txt").write_text("stdin\n")
    (root / "prog").write_text("#!/bin/sh\n")
    (root / "prog").chmod(0o644)
    return big


def test_input_crosses_in_bounded_chunks_and_lands_in_the_sandbox(tmp_path):
    src, box = tmp_path / "iwd", tmp_path / "box"
    src.mkdir(), box.mkdir()
    big = _tree(src)
    ad = {"Iwd": str(src), "Cmd": str(src / "prog"), "TransferInput": "big.bin, d", "In": "in.txt"}

    async def run():
        pipe = Pipe()
        sent = await send_stream(pipe, input_source(ad, None, "1.0"))
        got = await receive_stream(pipe, SandboxSink(box, None, None), peer="test")
        return pipe, sent, got

    pipe, sent, got = asyncio.run(run())
    assert (sent.files, sent.bytes) == (got.files, got.bytes)
    assert (box / "big.bin").read_bytes() == big
    assert (box / "condor_exec.exe").stat().st_mode & 0o111  # the executable, made executable
    assert (box / "in.txt").read_text() == "stdin\n"
    assert (box / "d" / "sub" / "a.txt").read_text() == "a\n"
    assert os.readlink(box / "d" / "link") == "sub/a.txt"
    chunks = [x for x in pipe.sent if isinstance(x, m.FileData)]
    assert max(len(c.data) for c in chunks) <= m.MAX_TRANSFER_CHUNK and len(chunks) >= 3


def test_a_directory_with_a_trailing_slash_sends_its_contents(tmp_path):
    src, box = tmp_path / "iwd", tmp_path / "box"
    src.mkdir(), box.mkdir()
    _tree(src)

    async def run():
        pipe = Pipe()
        await send_stream(pipe, input_source({"Iwd": str(src), "TransferInput": "d/"}, None, "1.0"))
        await receive_stream(pipe, SandboxSink(box, None, None), peer="test")

    asyncio.run(run())
    assert sorted(p.name for p in box.iterdir()) == ["link", "sub"]


def test_a_missing_input_fails_the_source_with_its_name(tmp_path):
    with pytest.raises(TransferError, match="missing.txt.*does not exist"):
        list(input_source({"Iwd": str(tmp_path), "TransferInput": "missing.txt"}, None, "1.0"))


def _entry(name="f", size=3, **kw):
    return m.FileEntry(name=name, kind="file", size=size, **kw)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("script, words", [
    ([m.FileData(data=b"x")], "outside a file"),
    ([_entry(), m.FileData(data=b"abcd")], "more than the 3 bytes"),
    ([_entry(), m.FileData(data=b"abc"), m.FileDone(sha256=_sha(b"abd"))], "damaged"),
    ([_entry(), m.FileData(data=b"ab"), m.FileDone(sha256=_sha(b"ab"))], "sent 2 of the 3 bytes"),
    ([_entry(), m.FileData(data=b"ab"), m.TransferEnd(files=1, bytes=2)], "in the middle of f"),
    ([_entry(), _entry("g")], "began g before finishing f"),
    ([m.TransferEnd(files=1, bytes=0)], "said it sent 1 files"),
    ([m.ErrorReply(code="bad_request", message="no such input")], "no such input"),
    ([m.Ack()], "sent Ack in the middle"),
    ([_entry(), WireError("invalid message: FileData: Expected `bytes` of length <= 1048576")], "length <= 1048576"),
    ([_entry(), ConnectionClosed("the shadow closed the connection")], "closed the connection"),
])
def test_a_malformed_or_truncated_stream_fails_the_transfer(tmp_path, script, words):
    async def run():
        await receive_stream(Pipe(script), SandboxSink(tmp_path, None, None), peer="the shadow")

    with pytest.raises(TransferError, match=words):
        asyncio.run(run())


def test_an_oversized_chunk_is_refused_when_decoded():
    import msgspec

    body = msgspec.msgpack.encode({"type": "FileData", "data": b"x" * (m.MAX_TRANSFER_CHUNK + 1)})
    with pytest.raises(WireError, match="1048576"):
        m.decode(body)


@pytest.mark.parametrize("name", ["../escape", "/etc/passwd", "a/../../b", "a//b"])
def test_the_sandbox_sink_keeps_every_name_beneath_the_sandbox(tmp_path, name):
    with pytest.raises(TransferError, match="relative path"):
        SandboxSink(tmp_path, None, None).begin(_entry(name))


def test_the_sandbox_sink_never_writes_through_a_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    box = tmp_path / "box"
    box.mkdir()
    sink = SandboxSink(box, None, None)
    sink.begin(m.FileEntry(name="d", kind="link", target=str(outside)))
    with pytest.raises(OSError):
        sink.begin(_entry("d/x"))
    assert not (outside / "x").exists()


def test_the_owner_sink_refuses_output_beneath_a_link_the_job_sent(tmp_path):
    iwd = tmp_path / "iwd"
    iwd.mkdir()
    sink = OwnerSink(iwd, None, "1.0")
    sink.begin(m.FileEntry(name="out", kind="link", target="/tmp"))
    with pytest.raises(TransferError, match="beneath a link"):
        sink.begin(_entry("out/x"))


def test_output_streams_into_the_iwd_with_mode_and_times(tmp_path):
    iwd = tmp_path / "iwd"
    iwd.mkdir()
    data = b"result\n"
    script = [m.FileEntry(name="res", kind="dir", mode=0o755), _entry("res/r.txt", len(data), mode=0o640,
                                                                        mtime_ns=10**18),
              m.FileData(data=data), m.FileDone(sha256=_sha(data)), m.TransferEnd(files=2, bytes=len(data))]

    async def run():
        return await receive_stream(Pipe(script), OwnerSink(iwd, None, "1.0"), peer="the starter")

    counts = asyncio.run(run())
    assert (counts.files, counts.bytes) == (2, len(data))
    out = iwd / "res" / "r.txt"
    assert out.read_bytes() == data and out.stat().st_mode & 0o777 == 0o640 and out.stat().st_mtime_ns == 10**18


def test_a_stream_cut_by_the_peer_closes_its_source():
    closed = []

    class Gone(Pipe):
        async def send(self, msg):
            raise ConnectionClosed("the shadow closed the connection")

    def source():
        try:
            yield Outgoing(m.FileEntry(name="d", kind="dir"))
            yield Outgoing(m.FileEntry(name="e", kind="dir"))
        finally:
            closed.append(True)  # (a real source closes the descriptors it holds here)

    with pytest.raises(ConnectionClosed):
        asyncio.run(send_stream(Gone(), source()))
    assert closed


def test_a_descriptor_yielded_to_a_stream_whose_peer_is_gone_is_closed(tmp_path):
    (tmp_path / "image").write_bytes(b"x" * 10)
    fd = os.open(tmp_path / "image", os.O_RDONLY)

    class Gone(Pipe):
        async def send(self, msg):
            raise ConnectionClosed("the shadow closed the connection")

    source = iter([Outgoing(m.FileEntry(name="image", kind="file", mode=0o600, size=10), fd)])
    with pytest.raises(ConnectionClosed):
        asyncio.run(send_stream(Gone(), source))
    with pytest.raises(OSError):
        os.fstat(fd)  # closed by the stream, not leaked


@pytest.mark.parametrize("job, machine, wire", [
    ({"ShouldTransferFiles": "YES", "FileSystemDomain": "submit.example"}, "exec.example", True),
    ({"ShouldTransferFiles": "IF_NEEDED", "FileSystemDomain": "submit.example"}, "exec.example", True),
    ({"ShouldTransferFiles": "YES", "FileSystemDomain": "Same.Example"}, "same.example", False),
    ({"ShouldTransferFiles": "NO", "FileSystemDomain": "submit.example"}, "exec.example", False),
    ({"ShouldTransferFiles": "YES"}, "exec.example", False),
    ({"ShouldTransferFiles": "YES", "FileSystemDomain": "submit.example"}, None, False),
])
def test_files_go_over_the_wire_only_between_file_system_domains(job, machine, wire):
    assert over_wire(job, machine) is wire


def test_a_chunk_built_too_big_is_refused_where_it_is_built():
    from htc.wire.errors import MessageInvalid

    with pytest.raises(MessageInvalid, match="at most 1048576 bytes"):
        m.FileData(data=b"x" * (m.MAX_TRANSFER_CHUNK + 1))
