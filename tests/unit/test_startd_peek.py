"""htc tail across hosts, the startd's side (htc.daemons.startd.peek): which bytes, whose job,
and no link in a job's sandbox followed."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from htc.daemons.startd.peek import PeekRefused, install_peek, may_peek, read_chunk, sandbox_path
from htc.wire import messages as m
from htc.wire.transport import PeerInfo


@pytest.fixture
def box(tmp_path: Path) -> Path:
    sandbox = tmp_path / "dir_1"
    sandbox.mkdir()
    (sandbox / "_condor_stdout").write_bytes(b"0123456789")
    (sandbox / "logs").mkdir()
    (sandbox / "logs" / "progress.txt").write_text("half way\n")
    return sandbox


def test_stdout_and_stderr_are_the_starters_captures_and_other_names_stay_inside():
    assert str(sandbox_path("stdout")) == "_condor_stdout" and str(sandbox_path("stderr")) == "_condor_stderr"
    assert str(sandbox_path("logs/progress.txt")) == "logs/progress.txt"
    for bad in ("/etc/shadow", "../x", "logs/../../x"):
        with pytest.raises(PeekRefused, match="inside the job's sandbox"):
            sandbox_path(bad)


def test_the_last_bytes_or_from_an_offset(box):
    last = read_chunk(box, "stdout", -1, 4)
    assert (last.data, last.offset, last.size) == (b"6789", 6, 10)
    rest = read_chunk(box, "stdout", 3, 100)
    assert (rest.data, rest.offset) == (b"3456789", 3)
    assert read_chunk(box, "stdout", 50, 10).data == b""  # past the end: nothing new yet
    assert read_chunk(box, "logs/progress.txt", -1, 1024).data == b"half way\n"


def test_links_planted_by_the_job_are_not_followed(box, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root only")
    (box / "leak").symlink_to(secret)
    (box / "dirlink").symlink_to(tmp_path)
    with pytest.raises(PeekRefused, match="links are not followed"):
        read_chunk(box, "leak", -1, 100)
    with pytest.raises(PeekRefused, match="not a directory of the sandbox"):
        read_chunk(box, "dirlink/secret", -1, 100)
    with pytest.raises(PeekRefused, match="no nothere file"):
        read_chunk(box, "nothere", -1, 100)
    os.mkfifo(box / "fifo")
    with pytest.raises(PeekRefused, match="not a regular file"):
        read_chunk(box, "fifo", -1, 100)


JOB = {"ClusterId": 4, "ProcId": 0, "Owner": "alice", "User": "alice@pool"}


@pytest.mark.parametrize("peer,allowed", [
    (PeerInfo(host="10.0.0.5", identity="alice@pool", administrator=False), True),
    (PeerInfo(host="10.0.0.5", identity="bob@pool", administrator=False), False),
    (PeerInfo(host="10.0.0.5", identity="alice@elsewhere", administrator=False), False),  # another alice
    (PeerInfo(host="10.0.0.5", identity=None, administrator=False), False),
    (PeerInfo(host="10.0.0.5", identity="root@pool", administrator=True), True),
    (PeerInfo(uid=1001, user="alice", administrator=False), True),
    (PeerInfo(uid=1002, user="bob", administrator=False), False),
])
def test_only_the_owner_or_an_administrator_may_peek(peer, allowed):
    assert may_peek(peer, JOB) is allowed


@dataclass
class _Sandbox:
    path: Path


@dataclass
class _Starter:
    job_ad: dict
    sandbox: _Sandbox


@dataclass
class _Run:
    starter: _Starter


@dataclass
class _Service:
    starters: dict = field(default_factory=dict)
    log: logging.Logger = logging.getLogger("test-peek")
    talks: dict = field(default_factory=dict)

    def register_conversation(self, kind, handler):
        self.talks[kind] = handler


class _Conn:
    def __init__(self):
        self.sent = []

    async def send(self, msg):
        self.sent.append(msg)


def _ask(service, msg, peer):
    conn = _Conn()
    asyncio.run(service.talks[m.PeekJob](conn, msg, peer))
    return conn.sent[0]


def test_the_startd_answers_the_owner_and_refuses_others(box, caplog):
    service = _Service({"c1": _Run(_Starter(JOB, _Sandbox(box)))})
    install_peek(service)
    alice = PeerInfo(host="10.0.0.5", identity="alice@pool", administrator=False)
    reply = _ask(service, m.PeekJob(job_id="4.0", names=("stdout", "logs/progress.txt"), max_bytes=3), alice)
    assert [(c.name, c.data) for c in reply.chunks] == [("stdout", b"789"), ("logs/progress.txt", b"ay\n")]
    assert _ask(service, m.PeekJob(job_id="4"), alice).chunks[0].data == b"0123456789"  # CLUSTER = CLUSTER.0
    with caplog.at_level(logging.WARNING, logger="test-peek"):
        refused = _ask(service, m.PeekJob(job_id="4.0"), PeerInfo(host="10.0.0.6", identity="bob@pool"))
    assert refused.code == "denied" and "alice@pool" in refused.message
    assert "PERMISSION DENIED to bob@pool for PeekJob of job 4.0" in caplog.text
    gone = _ask(service, m.PeekJob(job_id="5.0"), alice)
    assert gone.code == "not_found" and "not running on this machine" in gone.message
    bad = _ask(service, m.PeekJob(job_id="4.0", names=("../../etc/shadow",)), alice)
    assert bad.code == "bad_request"


def test_the_request_is_checked_on_the_wire():
    with pytest.raises(Exception, match="offsets"):
        m.PeekJob(job_id="1.0", names=("stdout", "stderr"), offsets=(0,))
    with pytest.raises(Exception):
        m.PeekJob(job_id="1.0", max_bytes=m.MAX_PEEK_BYTES + 1)


def test_a_job_without_an_output_file_is_told_so(tmp_path):
    with pytest.raises(PeekRefused, match="names no output file"):
        read_chunk(tmp_path, "stdout", -1, 10)
    with pytest.raises(PeekRefused, match="names no error file"):
        read_chunk(tmp_path, "stderr", -1, 10)


def test_a_sandbox_gone_meanwhile_is_not_found(tmp_path):
    with pytest.raises(PeekRefused, match="sandbox is gone") as refused:
        read_chunk(tmp_path / "dir_gone", "stdout", -1, 10)
    assert refused.value.code == "not_found"
