"""Streamed job output without a pool: the startd's tailer, the shadow's answers, the schedd's write.

(tests/system/test_pool_stream.py runs it on real daemons.)
"""

from __future__ import annotations

import asyncio

import pytest

from htc.daemons import core as c
from htc.daemons.schedd.events import WriteJobOutput
from htc.daemons.schedd.output import streamed_paths, write_job_output
from htc.daemons.job_files import streamed_files
from htc.daemons.starter.stream import OutputStreamer
from htc.wire import messages as m
from tests.unit.test_schedd_core import Harness, job, run_first_job


# --- which streams are streamed ------------------------------------------------------------------


@pytest.mark.parametrize("ad, expected", [
    ({"Out": "o", "Err": "e", "StreamOut": True}, {"stdout": "_condor_stdout"}),
    ({"Out": "o", "Err": "e", "StreamErr": True}, {"stderr": "_condor_stderr"}),
    ({"Out": "o", "Err": "e", "StreamOut": True, "StreamErr": True},
     {"stdout": "_condor_stdout", "stderr": "_condor_stderr"}),
    ({"Out": "o", "Err": "o", "StreamErr": True}, {"stdout": "_condor_stdout"}),  # one file: stdout's
    ({"Out": "o", "Err": "e"}, {}),
    ({"Out": "/dev/null", "StreamOut": True}, {}),
    ({"Out": "o", "StreamOut": True, "TransferOut": False}, {}),  # written in place: nothing to stream
    ({"Out": "o", "StreamOut": True, "ShouldTransferFiles": "NO"}, {}),
    ({"Out": "o", "StreamOut": "true"}, {"stdout": "_condor_stdout"}),
])
def test_streamed_files(ad, expected):
    assert streamed_files(ad) == expected


# --- the execute side's tailer --------------------------------------------------------------------


class Shadow:
    """A fake shadow: takes chunks into a bytearray; can fail or refuse on cue."""

    def __init__(self, fail: int = 0, refuse_after: int | None = None):
        self.files: dict[str, bytearray] = {}
        self.calls: list[tuple[str, int, int]] = []
        self.fail = fail
        self.refuse_after = refuse_after

    async def send(self, stream: str, offset: int, data: bytes) -> bool | None:
        self.calls.append((stream, offset, len(data)))
        if self.refuse_after is not None and len(self.calls) > self.refuse_after:
            return None
        if self.fail:
            self.fail -= 1
            return False
        buf = self.files.setdefault(stream, bytearray())
        buf[offset:offset + len(data)] = data
        return True


def test_streamer_sends_in_chunks_resends_after_a_failure_and_reads_after_the_file_is_gone(tmp_path):
    out, err = tmp_path / "_condor_stdout", tmp_path / "_condor_stderr"
    out.write_bytes(b"")
    err.write_bytes(b"")
    shadow = Shadow(fail=1)

    async def scenario():
        streamer = OutputStreamer({"stdout": out, "stderr": err}, shadow.send, chunk=10)
        with out.open("ab") as f:
            f.write(b"a" * 25)
        assert await streamer.pump() is False  # the first send failed: nothing acknowledged
        assert streamer.acked == {"stdout": 0, "stderr": 0}
        assert await streamer.pump() is True
        assert streamer.acked["stdout"] == 25
        with out.open("ab") as f, err.open("ab") as g:
            f.write(b"b" * 5)
            g.write(b"oops\n")
        out.unlink()  # the starter removed the sandbox; the descriptors still read
        err.unlink()
        await streamer.finish(None)
        assert streamer.fds == {}

    asyncio.run(scenario())
    assert bytes(shadow.files["stdout"]) == b"a" * 25 + b"b" * 5
    assert bytes(shadow.files["stderr"]) == b"oops\n"
    assert shadow.calls[:4] == [("stdout", 0, 10), ("stdout", 0, 10), ("stdout", 10, 10), ("stdout", 20, 5)]


def test_streamer_runs_until_finished_and_stops_for_good_when_refused(tmp_path):
    out = tmp_path / "_condor_stdout"
    out.write_bytes(b"")

    async def scenario(shadow):
        streamer = OutputStreamer({"stdout": out}, shadow.send, chunk=4)
        task = asyncio.create_task(streamer.run(interval=0.01))
        with out.open("ab") as f:
            f.write(b"12345678")
        await asyncio.sleep(0.1)
        with out.open("ab") as f:
            f.write(b"9")
        await streamer.finish(task)
        return streamer

    shadow = Shadow()
    asyncio.run(scenario(shadow))
    assert bytes(shadow.files["stdout"]) == b"123456789"
    refusing = Shadow(refuse_after=1)
    streamer = asyncio.run(scenario(refusing))
    assert streamer.refused and len(refusing.calls) == 2  # one taken, one refused, then silence


# --- the submit side ------------------------------------------------------------------------------


def test_write_job_output_writes_at_offsets_and_truncates(tmp_path):
    path = tmp_path / "sub" / "out"
    write_job_output(WriteJobOutput(str(path), 0, b"hello "))
    write_job_output(WriteJobOutput(str(path), 6, b"world\n"))
    write_job_output(WriteJobOutput(str(path), 6, b"world\n"))  # a resend changes nothing
    assert path.read_bytes() == b"hello world\n"
    write_job_output(WriteJobOutput(str(path), 0, b"", truncate=True))
    assert path.read_bytes() == b""


def test_streamed_paths_resolve_against_iwd():
    stored = {"Out": '"out.txt"', "Err": '"/abs/err.txt"', "StreamOut": "true", "StreamErr": "true",
              "Iwd": '"/home/alice/run"'}
    assert streamed_paths(stored) == {"stdout": "/home/alice/run/out.txt", "stderr": "/abs/err.txt"}
    assert streamed_paths({**stored, "StreamOut": "false", "StreamErr": "false"}) == {}


def test_the_shadow_writes_streamed_output_of_its_job_only():
    h = Harness()
    h.start()
    h.submit(job("output = out.txt\nerror = err.txt\nstream_output = true"))
    claim_id, activate = run_first_job(h)
    # The run starts by truncating the streamed file (a new run writes from the start); stderr
    # is not streamed and is left alone.
    writes = [a for a in h.actions if isinstance(a, WriteJobOutput)]
    assert [(a.path, a.offset, a.data, a.truncate) for a in writes] == [("/work/out.txt", 0, b"", True)]
    assert writes[0].job_id == "1.0" and writes[0].owner  # written with the job's owner's rights
    h.ack(activate)
    before = len(h.actions)
    reply = h.request(m.JobOutput(claim_id=claim_id, job_id="1.0", stream="stdout", offset=0, data=b"line 1\n"))
    assert reply == m.Ack()
    assert [(a.path, a.offset, a.data, a.truncate) for a in h.actions[before:] if isinstance(a, WriteJobOutput)] \
        == [("/work/out.txt", 0, b"line 1\n", False)]
    # The write comes before the acknowledgement: an Ack means the bytes are in the file.
    kinds = [type(a) for a in h.actions[before:] if isinstance(a, (WriteJobOutput, c.Reply))]
    assert kinds == [WriteJobOutput, c.Reply]
    refused = h.request(m.JobOutput(claim_id=claim_id, job_id="1.0", stream="stderr", offset=0, data=b"x"))
    assert isinstance(refused, m.ErrorReply) and refused.code == "bad_request"
    stranger = h.request(m.JobOutput(claim_id="other#1#x", job_id="1.0", stream="stdout", offset=0, data=b"x"))
    assert isinstance(stranger, m.ErrorReply) and stranger.code == "not_found"
    h.exited(claim_id, "1.0", exit_code=0)
    late = h.request(m.JobOutput(claim_id=claim_id, job_id="1.0", stream="stdout", offset=7, data=b"x"))
    assert isinstance(late, m.ErrorReply) and late.code == "not_found"
